"""Schedule -> loop IR: inline, infer bounds, and emit each stage's loop nest where it is attached.

For each stage the steps are:

1. its body, with inlined producers substituted;
2. the region of each root axis it must compute: the whole domain at the root, or at a
   ``compute_at`` point the part its consumers read inside that loop (``arith.interval``);
3. its loops: one per leaf axis, root axes recovered through the split/fuse relations, guards
   where a split does not divide or a region may leave the domain;
4. for a reduction, an init nest (its spatial loops) placed just above the first reduction loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..search_space.schedule import Schedule
from ..search_space.stage import Fuse, Split, Stage, split_extents
from ..te.expr import Expr, IterVar, Var, binary, compare, const, logical
from ..te.tensor import ComputeOp, PlaceholderOp, Reduce, Tensor, TensorRead, walk
from ..te.visit import rewrite, substitute
from .arith import Affine, Interval, const_bounds, interval, sub_simplified, union
from .ir import Allocate, Buffer, For, IfThenElse, Load, PrimFunc, Stmt, Store, seq

Loop = tuple[Var, int]  # a loop variable and its extent


@dataclass
class StageInfo:
    stage: Stage
    body: Expr | None = None  # after inlining; None for placeholders
    buffer: Buffer | None = None
    region: list[Interval] = field(default_factory=list)  # per spatial root axis
    outer_loops: list[Loop] = field(default_factory=list)  # loops enclosing this stage's nest
    leaf_extents: dict[str, int] = field(default_factory=dict)
    root_rel: dict[str, Expr] = field(default_factory=dict)  # root axis -> value from leaf vars
    guards: list[Expr] = field(default_factory=list)
    attached: dict[str, list[Stage]] = field(default_factory=dict)  # leaf name -> stages at it


class Lowerer:
    def __init__(self, sch: Schedule, args: list[Tensor], name: str):
        self.sch = sch
        self.name = name
        self.info: dict[str, StageInfo] = {}
        self.order = [st for st in sch.stages if st.attach[0] != "inline"]
        self.params = self._params(args)

    # 0. Arguments --------------------------------------------------------------------------------
    def _params(self, args: list[Tensor]) -> list[Buffer]:
        params: list[Buffer] = []
        self.arg_stages: dict[str, Buffer] = {}
        for t in args:
            if not isinstance(t, Tensor):
                raise ScheduleError(f"lower: arguments must be tensors, got {t!r}")
            st = self.sch[t]
            if st.name in self.arg_stages:
                raise ScheduleError(f"lower: tensor {t.name!r} is passed twice")
            if st.attach[0] == "inline":
                raise ScheduleError(f"lower: argument {t.name!r} is inlined and has no storage")
            if st.attach[0] == "at":
                raise ScheduleError(f"lower: argument {t.name!r} must be computed at the root")
            buf = Buffer(st.name, t.shape, t.dtype, "global")
            params.append(buf)
            self.arg_stages[st.name] = buf
        return params

    # 1. Inlining ---------------------------------------------------------------------------------
    def inline_bodies(self) -> None:
        inlined: dict[str, ComputeOp] = {}
        for st in self.sch.stages:
            op = st.op
            if isinstance(op, PlaceholderOp):
                if st.name not in self.arg_stages and self._is_read(st):
                    raise ScheduleError(f"lower: input {st.name!r} is read but not among the arguments")
                self.info[st.name] = StageInfo(st)
                continue
            assert isinstance(op, ComputeOp)

            def expand(e: Expr) -> Expr | None:
                if isinstance(e, TensorRead):
                    src = self.sch.stage_of(e.tensor.op)
                    if src.name in inlined:
                        iop = inlined[src.name]
                        idx = [rewrite(i, expand) for i in e.indices]
                        return substitute(iop.body, dict(zip(iop.axis, idx)))
                return None

            body = rewrite(op.body, expand)
            if st.attach[0] == "inline":
                inlined[st.name] = ComputeOp(op.name, op.axis, body, op.dtype)
            else:
                self.info[st.name] = StageInfo(st, body)

    def _is_read(self, producer: Stage) -> bool:
        return any(producer in self.sch.reads(st) for st in self.sch.stages)

    def readers(self, st: Stage) -> list[Stage]:
        out = []
        for q in self.order:
            body = self.info[q.name].body
            if body is not None and any(
                isinstance(n, TensorRead) and self.sch.stage_of(n.tensor.op) is st for n in walk(body)
            ):
                out.append(q)
        return out

    # 2. Loop structure and bounds ------------------------------------------------------------------
    def attach_point(self, st: Stage) -> tuple[Stage, int] | None:
        """The parent stage and the index of the loop ``st`` is computed in (None at the root).

        An attach axis split or fused afterwards moves to the loop that now holds its body: the
        inner part of a split, the result of a fuse (both compute the same values, just more often).
        """
        if st.attach[0] != "at":
            return None
        parent = self.sch[st.attach[1]]
        if parent.attach[0] == "inline":
            raise ScheduleError(
                f"compute_at: stage {st.name!r} is attached to {parent.name!r}, which is inlined"
            )
        axis = parent.axes.get(st.attach[2])
        while axis is not None and parent.position(axis) is None:
            nxt = None
            for rel in parent.relations:
                if isinstance(rel, Split) and rel.parent is axis:
                    nxt = rel.inner
                elif isinstance(rel, Fuse) and axis in (rel.outer, rel.inner):
                    nxt = rel.fused
            axis = nxt
        if axis is None:
            raise ScheduleError(
                f"compute_at: stage {st.name!r} is attached at axis {st.attach[2]!r} of {parent.name!r}, "
                f"which is not one of its loops ({', '.join(a.name for a in parent.leaves)})"
            )
        pos = parent.position(axis)
        assert pos is not None
        return parent, pos

    def infer_bounds(self) -> None:
        for st in reversed(self.order):
            if not st.is_compute:
                continue
            info = self.info[st.name]
            op = st.op
            assert isinstance(op, ComputeOp)
            at = self.attach_point(st)
            if at is None:
                info.region = [Interval(Affine(), n) for n in op.shape]
                info.outer_loops = []
            else:
                parent, pos = at
                pinfo = self.info[parent.name]
                if not pinfo.leaf_extents:
                    raise ScheduleError(
                        f"compute_at: stage {st.name!r} is attached to {parent.name!r} out of order"
                    )
                info.outer_loops = pinfo.outer_loops + [
                    (a, pinfo.leaf_extents[a.name]) for a in parent.leaves[: pos + 1]
                ]
                pinfo.attached.setdefault(parent.leaves[pos].name, []).append(st)
                info.region = self._region(st, parent, pos)
            self._leaf_structure(info)
        rank = {st.name: i for i, st in enumerate(self.order)}
        for done in self.info.values():
            for stages in done.attached.values():
                stages.sort(key=lambda s: rank[s.name])

    def _in_scope(self, q: Stage, parent: Stage, pos: int) -> bool:
        node: Stage | None = q
        while node is not None:
            if node is parent:
                return True
            at = self.attach_point(node)
            if at is None:
                return False
            if at[0] is parent:
                return at[1] >= pos
            node = at[0]
        return False

    def _region(self, st: Stage, parent: Stage, pos: int) -> list[Interval]:
        op = st.op
        assert isinstance(op, ComputeOp)
        fixed = {id(v) for v, _ in self.info[st.name].outer_loops}
        if st.name.endswith(".shared"):  # the threads of a block fill shared memory together: cover them all
            fixed -= {id(q.axes[a]) for q in self.sch.stages for a, t in q.thread_tags.items() if t[0] == "t"}
        region: list[Interval | None] = [None] * len(op.shape)
        seen = False
        for q in self.readers(st):
            if not self._in_scope(q, parent, pos):
                raise ScheduleError(
                    f"compute_at: stage {st.name!r} is computed inside loop {parent.leaves[pos].name!r} of "
                    f"{parent.name!r}, but stage {q.name!r} reads it outside that loop"
                )
            qinfo = self.info[q.name]
            ranges = {id(v): n for v, n in qinfo.outer_loops if id(v) not in fixed}
            ranges.update({id(a): qinfo.leaf_extents[a.name] for a in q.leaves if id(a) not in fixed})
            roots = self._root_values(q)
            assert qinfo.body is not None
            for n in walk(qinfo.body):
                if isinstance(n, TensorRead) and self.sch.stage_of(n.tensor.op) is st:
                    for d, idx in enumerate(n.indices):
                        iv = interval(substitute(idx, roots), ranges)
                        region[d] = iv if not seen else union(region[d], iv)
                    seen = True
        out = []
        for d, n in enumerate(op.shape):
            r = region[d]
            out.append(Interval(Affine(), n) if r is None or r.extent >= n else r)
        return out

    def _root_values(self, st: Stage) -> dict[Var, Expr]:
        """Each root axis of ``st`` as an expression of its loop variables (region min included)."""
        info = self.info[st.name]
        op = st.op
        assert isinstance(op, ComputeOp)
        vals: dict[Var, Expr] = {}
        for d, a in enumerate(op.axis):
            rmin = info.region[d].min
            rel = info.root_rel[a.name]
            vals[a] = rel if rmin.is_const and rmin.const == 0 else binary("+", rmin.to_expr(), rel)
        for a in op.reduce_axis:
            vals[a] = info.root_rel[a.name]
        return vals

    def _leaf_structure(self, info: StageInfo) -> None:
        st = info.stage
        op = st.op
        assert isinstance(op, ComputeOp)
        ext = {a.name: info.region[d].extent for d, a in enumerate(op.axis)}
        ext.update({a.name: a.extent for a in op.reduce_axis})
        splits: dict[str, tuple[int, int]] = {}
        for rel in st.relations:
            if isinstance(rel, Split):
                outer, inner = split_extents(ext[rel.parent.name], rel.factor, rel.nparts)
                ext[rel.outer.name], ext[rel.inner.name] = outer, inner
                splits[rel.parent.name] = (outer, inner)
            else:
                ext[rel.fused.name] = ext[rel.outer.name] * ext[rel.inner.name]
        info.leaf_extents = ext
        val: dict[str, Expr] = {a.name: a for a in st.leaves}
        guards: list[Expr] = []
        for rel in reversed(st.relations):
            if isinstance(rel, Split):
                outer_v, inner_v = val[rel.outer.name], val[rel.inner.name]
                inner_ext = splits[rel.parent.name][1]
                v = (
                    outer_v
                    if inner_ext == 1
                    else binary("+", binary("*", outer_v, const(inner_ext)), inner_v)
                )
                if ext[rel.outer.name] == 1:
                    v = inner_v
                val[rel.parent.name] = v
                if ext[rel.outer.name] * inner_ext != ext[rel.parent.name]:
                    guards.append(compare("<", v, ext[rel.parent.name]))
            elif isinstance(rel, Fuse):
                n = ext[rel.inner.name]
                f = val[rel.fused.name]
                val[rel.outer.name] = binary("//", f, const(n))
                val[rel.inner.name] = binary("%", f, const(n))
        info.root_rel = {a.name: val[a.name] for a in (*op.axis, *op.reduce_axis)}
        # A region computed at an attach point may stick out of the domain: guard where not provable.
        extents = {id(v): n for v, n in info.outer_loops}
        for d, a in enumerate(op.axis):
            r = info.region[d]
            if r.min.is_const and r.min.const == 0 and r.extent == op.shape[d]:
                continue
            b = const_bounds(r.min, extents)
            value = binary("+", r.min.to_expr(), info.root_rel[a.name])
            if b is None or b[0] < 0:
                guards.append(compare(">=", value, 0))
            if b is None or b[1] + r.extent > op.shape[d]:
                guards.append(compare("<", value, op.shape[d]))
        info.guards = guards

    # 3. Buffers ----------------------------------------------------------------------------------
    def make_buffers(self) -> None:
        for st in self.order:
            info = self.info[st.name]
            if st.name in self.arg_stages:
                info.buffer = self.arg_stages[st.name]
            elif st.is_compute:
                scope = "global"
                if st.attach[0] == "at":
                    scope = "shared" if st.name.endswith(".shared") else "local"
                shape = tuple(r.extent for r in info.region)
                info.buffer = Buffer(st.name, shape, st.op.dtype, scope)

    # 4. Emission ---------------------------------------------------------------------------------
    def load(self, e: Expr) -> Expr | None:
        if not isinstance(e, TensorRead):
            return None
        src = self.info[self.sch.stage_of(e.tensor.op).name]
        assert src.buffer is not None
        idx = [rewrite(i, self.load) for i in e.indices]
        if src.region:
            idx = [sub_simplified(i, r.min) for i, r in zip(idx, src.region)]
        return Load(src.buffer, tuple(idx), e.dtype)

    def emit_stage(self, st: Stage) -> Stmt:
        info = self.info[st.name]
        op = st.op
        assert isinstance(op, ComputeOp) and info.body is not None and info.buffer is not None
        roots = self._root_values(st)
        store_idx = tuple(info.root_rel[a.name] for a in op.axis)
        body = rewrite(substitute(info.body, roots), self.load)
        spatial_guards = [g for g in info.guards if not _uses_reduce(g, st)]
        init: Stmt | None = None
        if isinstance(body, Reduce):
            red = body.reducer
            acc = Load(info.buffer, store_idx, op.dtype)
            update: Stmt = Store(
                info.buffer, store_idx, substitute(red.combined, {red.lhs: acc, red.rhs: body.source})
            )
            if body.condition is not None:
                update = IfThenElse(body.condition, update)
            main = _guard(info.guards, update)
            init = _guard(spatial_guards, Store(info.buffer, store_idx, red.identity_const()))
        else:
            main = _guard(info.guards, Store(info.buffer, store_idx, body))
        first_reduce = next((i for i, a in enumerate(st.leaves) if a.kind == "reduce"), None)
        stmt = main
        for level in range(len(st.leaves) - 1, -1, -1):
            leaf = st.leaves[level]
            stmt = self._loop(st, info, leaf, self._with_attached(info, leaf.name, stmt))
            if level == first_reduce and init is not None:
                init_nest = init
                for a in reversed(st.leaves[level:]):
                    if a.kind != "reduce":
                        init_nest = self._loop(st, info, a, init_nest)
                stmt = seq(init_nest, stmt)
        return stmt

    def _with_attached(self, info: StageInfo, leaf: str, rest: Stmt) -> Stmt:
        """The stages attached at loop ``leaf`` run first in its body; their storage spans it."""
        children = info.attached.get(leaf, [])
        stmt = seq(*(self.emit_stage(c) for c in children), rest)
        for child in reversed(children):
            if child.name not in self.arg_stages:
                buf = self.info[child.name].buffer
                assert buf is not None
                stmt = Allocate(buf, stmt)
        return stmt

    def _loop(self, st: Stage, info: StageInfo, leaf: IterVar, body: Stmt) -> Stmt:
        kind = st.annotations.get(leaf.name, "serial")
        tag = st.thread_tags.get(leaf.name, "")
        ann = st.pragmas.get(leaf.name, ())
        return For(leaf, info.leaf_extents[leaf.name], kind, body, tag, ann)

    def run(self) -> PrimFunc:
        self.inline_bodies()
        self.infer_bounds()
        self.make_buffers()
        stmts = [self.emit_stage(st) for st in self.order if st.is_compute and st.attach[0] == "root"]
        body = seq(*stmts)
        for st in reversed(self.order):
            info = self.info[st.name]
            if st.is_compute and st.name not in self.arg_stages and st.attach[0] == "root":
                assert info.buffer is not None
                body = Allocate(info.buffer, body)
        return PrimFunc(self.name, tuple(self.params), body)


def _uses_reduce(e: Expr, st: Stage) -> bool:
    red = {id(a) for a in st.leaves if a.kind == "reduce"}
    return any(isinstance(n, Var) and id(n) in red for n in walk(e))


def _guard(conds: list[Expr], stmt: Stmt) -> Stmt:
    if not conds:
        return stmt
    cond = conds[0]
    for c in conds[1:]:
        cond = logical("and", cond, c)
    return IfThenElse(cond, stmt)


def schedule_to_loops(sch: Schedule, args: list[Tensor], name: str) -> PrimFunc:
    """Lower a schedule to a :class:`PrimFunc` taking ``args`` (inputs then outputs) as buffers."""
    return Lowerer(sch, args, name).run()
