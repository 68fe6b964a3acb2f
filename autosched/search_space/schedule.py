"""A schedule: the stages of a te program and the steps that transformed them.

``create_schedule(C)`` gives one stage per computation, each computed at the root in plain loop
order. The primitives that rewrite the dataflow (``cache_read``, ``cache_write``, ``rfactor``) live
here; the per-stage ones live on :class:`Stage`. Every step is recorded in ``trace``, which replays
to the same schedule on a fresh copy of the workload.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ScheduleError
from ..te.expr import Expr, IterVar, const
from ..te.graph import topo_order, unique_names
from ..te.tensor import ComputeOp, Operation, Reduce, Tensor, TensorRead
from ..te.visit import rewrite, substitute
from .stage import Split, Stage
from .trace import Step, Trace, trace_from_json

SCOPES = ("global", "local", "shared")


class Schedule:
    def __init__(self, outputs: Sequence[Tensor]):
        if isinstance(outputs, Tensor):
            outputs = [outputs]
        outputs = list(outputs)
        for t in outputs:
            if not isinstance(t, Tensor):
                raise ScheduleError(f"create_schedule: expected output tensors, got {t!r}")
        self.outputs = outputs
        ops = topo_order(outputs)
        names = unique_names(ops)
        out_ops = {t.op for t in outputs}
        self.stages: list[Stage] = [Stage(self, names[op], op, op in out_ops) for op in ops]
        self._by_op: dict[Operation, Stage] = {st.op: st for st in self.stages}
        self._by_name: dict[str, Stage] = {st.name: st for st in self.stages}
        self._trace: list[Step] = []
        self._quiet_depth = 0
        self.flash: dict[str, Any] = {}  # output stage -> FlashConfig (sketch_attention)

    # Lookup -------------------------------------------------------------------------------------
    def __getitem__(self, key: Tensor | Operation | str | Stage) -> Stage:
        if isinstance(key, Stage):
            return key
        if isinstance(key, Tensor):
            key = key.op
        if isinstance(key, str):
            stage = self._by_name.get(key)
        else:
            stage = self._by_op.get(key)
        if stage is None:
            label = key if isinstance(key, str) else getattr(key, "name", key)
            raise ScheduleError(
                f"schedule has no stage {label!r}; stages: {', '.join(s.name for s in self.stages)}"
            )
        return stage

    def stage_of(self, op: Operation) -> Stage:
        return self._by_op[op]

    @property
    def trace(self) -> Trace:
        return tuple(self._trace)

    def reads(self, stage: Stage) -> list[Stage]:
        """The stages whose values ``stage`` reads, in first-read order."""
        found: list[Stage] = []
        for t in stage.op.input_tensors:
            st = self._by_op[t.op]
            if st not in found:
                found.append(st)
        return found

    def consumer_names(self, stage: Stage) -> list[str]:
        return [st.name for st in self.stages if stage in self.reads(st)]

    def depends_on(self, stage: Stage, other: Stage) -> bool:
        """Does ``stage`` read ``other``, directly or through other stages?"""
        todo, seen = [stage], set()
        while todo:
            st = todo.pop()
            for producer in self.reads(st):
                if producer is other:
                    return True
                if producer.name not in seen:
                    seen.add(producer.name)
                    todo.append(producer)
        return False

    # Trace --------------------------------------------------------------------------------------
    def _record(self, step: Step) -> None:
        if self._quiet_depth == 0:
            self._trace.append(step)

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Steps made inside are parts of a composite step and are not recorded."""
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    def _add_stage(self, op: ComputeOp, index: int) -> Stage:
        """A new stage for ``op`` at position ``index`` of the stage list."""
        base, name, n = op.name, op.name, 0
        while name in self._by_name:
            n += 1
            name = f"{base}_{n}"
        stage = Stage(self, name, op, is_output=False)
        self.stages.insert(index, stage)
        self._by_op[op] = stage
        self._by_name[name] = stage
        return stage

    @staticmethod
    def _check_fresh(primitive: str, stage: Stage) -> None:
        if stage.relations or stage.annotations or stage.pragmas or stage.attach != ("root",):
            raise ScheduleError(
                f"{primitive}: stage {stage.name!r} has already been scheduled; apply {primitive} before "
                "any other step on it"
            )

    # Dataflow rewrites --------------------------------------------------------------------------
    def cache_read(
        self, tensor: Tensor | str, scope: str, readers: Sequence[Any], layout: Sequence[int] | None = None
    ) -> Tensor:
        """Copy ``tensor`` into a new stage ``<name>.<scope>`` that ``readers`` read instead.

        ``layout`` orders the copy's dimensions (a permutation of the source's): ``(1, 0)`` stores
        a transposed copy, so that a dense weight ``W[j, k]`` read along ``j`` is contiguous in it.

        Example: ``AA = s.cache_read(A, "shared", [C])``; then ``s[AA].compute_at(s[C], ko)``.

        rewrite (``layout=(1, 0)``)::

            C[i, j] += X[i, k] * W[j, k]   ->   W.local[k, j] = W[j, k]
                                                 C[i, j] += X[i, k] * W.local[k, j]
        """
        src = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"cache_read: unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")
        if isinstance(readers, (Tensor, str, Stage)):
            readers = [readers]
        reader_stages = [self[r] for r in readers]
        if not reader_stages:
            raise ScheduleError("cache_read: readers is empty")
        for r in reader_stages:
            if src not in self.reads(r):
                raise ScheduleError(f"cache_read: stage {r.name!r} does not read {src.name!r}")
        shape = src.op.shape
        identity = tuple(range(len(shape)))
        perm = identity if layout is None else tuple(layout)
        if not all(isinstance(d, int) for d in perm) or sorted(perm) != list(identity):
            raise ScheduleError(
                f"cache_read: layout {tuple(layout or ())} is not a permutation of {identity} "
                f"(the dimensions of {src.name!r})"
            )
        axes = tuple(IterVar(f"ax{d}", "int32", shape[p], "spatial") for d, p in enumerate(perm))
        src_index = tuple(axes[perm.index(d)] for d in identity)
        cached = ComputeOp(f"{src.name}.{scope}", axes, Tensor(src.op)[src_index], src.op.dtype)
        self._add_stage(cached, self.stages.index(src) + 1)
        cached_tensor = Tensor(cached)
        for r in reader_stages:
            old = r.op
            assert isinstance(old, ComputeOp)

            def swap(e: Expr) -> Expr | None:
                if isinstance(e, TensorRead) and self._by_op.get(e.tensor.op) is src:
                    return cached_tensor[tuple(swap_indices(e.indices[p]) for p in perm)]
                return None

            def swap_indices(e: Expr) -> Expr:
                return rewrite(e, swap)

            body = rewrite(old.body, swap)
            new_op = ComputeOp(old.name, old.axis, body, old.dtype, old.tag)
            r.op = new_op  # same axes, so the stage's loops and annotations stay valid
            self._by_op[new_op] = r
        args: tuple[Any, ...] = (scope, tuple(r.name for r in reader_stages))
        self._record(Step("cache_read", src.name, args if perm == identity else (*args, perm)))
        return cached_tensor

    def cache_write(self, tensor: Tensor | str, scope: str, layout: Sequence[int] | None = None) -> Tensor:
        """Compute ``tensor`` into a new stage ``<name>.<scope>``; the original becomes a copy of it.

        ``layout`` orders the new stage's axes (a permutation of the original's): ``(0, 2, 3, 1)``
        computes a conv's ``N, K, H, W`` accumulator as ``N, H, W, K``, so K can be its vector axis.

        Typical use: keep a matmul's accumulator tile in registers and write it out once::

            CC = s.cache_write(C, "local")
            s[CC].compute_at(s[C], j_outer)
        """
        stage = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"cache_write: unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")
        op = stage.op
        if not isinstance(op, ComputeOp):
            raise ScheduleError(f"cache_write: stage {stage.name!r} is an input placeholder")
        self._check_fresh("cache_write", stage)
        identity = tuple(range(len(op.axis)))
        perm = identity if layout is None else tuple(layout)
        if not all(isinstance(d, int) for d in perm) or sorted(perm) != list(identity):
            raise ScheduleError(
                f"cache_write: layout {tuple(layout or ())} is not a permutation of {identity} "
                f"(the axes of {stage.name!r})"
            )
        fresh = tuple(IterVar(op.axis[p].name, "int32", op.axis[p].extent, "spatial") for p in perm)
        body = substitute(op.body, {op.axis[p]: fresh[d] for d, p in enumerate(perm)})
        local_op = ComputeOp(f"{stage.name}.{scope}", fresh, body, op.dtype, op.tag)
        # The new stage goes before the original, which now copies it with the original axes.
        self._add_stage(local_op, self.stages.index(stage))
        local_index = tuple(op.axis[p] for p in perm)
        copy = ComputeOp(op.name, op.axis, Tensor(local_op)[local_index], op.dtype, op.tag)
        stage.set_op(copy)
        self._by_op[copy] = stage
        self._record(Step("cache_write", stage.name, (scope,) if perm == identity else (scope, perm)))
        return Tensor(local_op)

    def rfactor(self, tensor: Tensor | str, axis: IterVar | str, factor_axis: int = 0) -> Tensor:
        """Factor a reduction: a new stage ``<name>.rf`` keeps ``axis`` as a spatial dimension.

        ``C[i] = sum(A[i, k])`` with ``k`` split into ``ko, ki`` and ``rfactor(C, ki)`` becomes
        ``C.rf[ki, i] = sum over ko of A[i, ko*f + ki]`` and ``C[i] = sum over ki of C.rf[ki, i]``,
        which exposes ``ki`` (or ``ko``) to parallel or vector loops.
        """
        stage = self[tensor]
        op = stage.op
        if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
            raise ScheduleError(f"rfactor: stage {stage.name!r} is not a reduction")
        iv = stage._leaf("rfactor", axis)
        if iv.kind != "reduce":
            raise ScheduleError(f"rfactor: axis {iv.name!r} of stage {stage.name!r} is not a reduction axis")
        splits = [r for r in stage.relations if isinstance(r, Split)]
        if stage.annotations or stage.pragmas or len(splits) != len(stage.relations) or len(splits) > 1:
            raise ScheduleError(
                f"rfactor: stage {stage.name!r} may have at most one split (of the factored reduction "
                "axis) before rfactor, and no annotations"
            )
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
            raise ScheduleError(f"rfactor: factor_axis must be an int, got {factor_axis!r}")
        if not 0 <= factor_axis <= len(op.axis):
            raise ScheduleError(f"rfactor: factor_axis must be in [0, {len(op.axis)}], got {factor_axis}")
        red: Reduce = op.body
        rf_var = IterVar(iv.name, "int32", iv.extent, "spatial")
        mapping: dict[Any, Expr] = {}
        kept: list[IterVar] = []
        cond: Expr | None = red.condition
        if splits and iv in (splits[0].outer, splits[0].inner):
            sp = splits[0]
            factor = sp.inner.extent
            other = sp.inner if iv is sp.outer else sp.outer
            other_new = IterVar(other.name, "int32", other.extent, "reduce")
            outer_e, inner_e = (rf_var, other_new) if iv is sp.outer else (other_new, rf_var)
            mapping[sp.parent] = outer_e * factor + inner_e
            kept = [other_new if a is sp.parent else a for a in red.axes]
            if sp.parent.extent % factor:
                guard = mapping[sp.parent] < sp.parent.extent
                cond = guard if cond is None else _and(guard, cond)
        elif not splits:
            mapping[iv] = rf_var
            kept = [a for a in red.axes if a is not iv]
        else:
            raise ScheduleError(f"rfactor: axis {iv.name!r} must be a reduction axis or a part of its split")
        source = substitute(red.source, mapping)
        cond = None if cond is None else substitute(cond, mapping)
        rf_axes = (*op.axis[:factor_axis], rf_var, *op.axis[factor_axis:])
        if kept:
            rf_body: Expr = Reduce(red.reducer, source, tuple(kept), cond, red.dtype)
        elif cond is not None:
            from ..te.expr import select

            rf_body = select(cond, source, const(red.reducer.identity, red.dtype))
        else:
            rf_body = source
        spatial = tuple(IterVar(a.name, "int32", a.extent, "spatial") for a in rf_axes)
        rf_body = substitute(rf_body, dict(zip(rf_axes, spatial)))
        rf_op = ComputeOp(f"{stage.name}.rf", spatial, rf_body, op.dtype, op.tag)
        self._add_stage(rf_op, self.stages.index(stage))
        k_final = IterVar(iv.name, "int32", iv.extent, "reduce")
        read_idx = (*op.axis[:factor_axis], k_final, *op.axis[factor_axis:])
        final = Reduce(red.reducer, Tensor(rf_op)[read_idx], (k_final,), None, red.dtype)
        stage.set_op(ComputeOp(op.name, op.axis, final, op.dtype, op.tag))
        self._by_op[stage.op] = stage
        self._record(Step("rfactor", stage.name, (iv.name, factor_axis)))
        return Tensor(rf_op)

    # Replay -------------------------------------------------------------------------------------
    def apply(self, step: Step) -> None:
        """Apply one recorded step (by names), as when replaying a trace."""
        p, a = step.primitive, step.args
        if p == "cache_read":
            self.cache_read(step.stage, a[0], list(a[1]), a[2] if len(a) > 2 else None)
            return
        if p == "cache_write":
            self.cache_write(step.stage, a[0], a[1] if len(a) > 1 else None)
            return
        if p == "rfactor":
            self.rfactor(step.stage, a[0], a[1])
            return
        if p == "flash_attention":
            from .sketch_attention import flash_attention

            flash_attention(self, step.stage, *a)
            return
        st = self[step.stage]
        if p == "split":
            st.split(a[0], factor=a[1], nparts=a[2])
        elif p in ("fuse", "reorder"):
            getattr(st, p)(*a[0])
        elif p == "compute_at":
            st.compute_at(self[a[0]], a[1])
        elif p in ("compute_inline", "compute_root"):
            getattr(st, p)()
        else:
            getattr(st, p)(*a)


def _and(a: Expr, b: Expr) -> Expr:
    from ..te.expr import logical

    return logical("and", a, b)


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A schedule with one stage per computation, each at the root in its natural loop order.

    Example::

        s = autosched.create_schedule(C)
        io, ii = s[C].split(s[C].op.axis[0], factor=8)
    """
    return Schedule(outputs if isinstance(outputs, Sequence) else [outputs])


def replay(outputs: Sequence[Tensor], trace: Trace | list[Any]) -> Schedule:
    """A fresh schedule of ``outputs`` with ``trace`` applied; a bad step raises ScheduleError."""
    steps = trace if isinstance(trace, tuple) and all(isinstance(s, Step) for s in trace) else None
    if steps is None:
        steps = trace_from_json(trace)
    s = create_schedule(outputs)
    for i, step in enumerate(steps):
        try:
            s.apply(step)
        except ScheduleError as err:
            raise ScheduleError(f"trace step {i} ({step.to_code()}): {err}") from None
    return s
