"""Graph-level fusion by operator pattern, in the manner of TVM's FuseOps (a rule table, not special cases).

Each compute tries to join the group of its immediate post-dominator (the first operation that every
path from it to the graph's outputs passes through), when every operation on the way fits the rule for
its group's pattern. A group therefore has one escaping tensor, its root; graph outputs are never fused
into a later operation (they are roots themselves).

Rules (phase 0, producers first, then phase 1 for injective groups, so conv epilogues finish first):

===================  ================================================  ====================================
group pattern        operations on the way (not the post-dominator)    the post-dominator
===================  ================================================  ====================================
OUT_ELEMWISE_FUSABLE  elementwise/broadcast                            elementwise/broadcast (epilogue)
<= BROADCAST         <= injective                                      anything but opaque (prologue)
COMM_REDUCE          <= broadcast or a reduction                       <= broadcast (softmax, layer norm)
INJECTIVE (phase 1)  <= injective, or already in the post-dominator's  anything but opaque (pad -> conv)
===================  ================================================  ====================================

An attention (QK, its scale and mask, softmax, the product with V: :mod:`.attention`) is one group
before the rules run; its head-split prologue joins it by the rules, and it joins nothing after it.

Example: ``groups = fuse(graph.ops(), outputs)``; conv2d -> batch_norm -> relu is one group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..te.graph import consumers
from ..te.tensor import ComputeOp, Operation, Tensor
from .attention import attention_groups
from .pattern import OpPattern, classify

MAX_GROUP_OPS = 64  # a group this large is already a big kernel; more only slows scheduling down

P = OpPattern


@dataclass(eq=False)
class _Group:
    pattern: OpPattern
    parent: _Group | None = None
    size: int = 1
    sealed: bool = False  # a whole attention: it takes in its prologue but joins nothing after it

    def root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        return g


@dataclass(frozen=True, eq=False)
class FusedGroup:
    """Operations fused into one kernel: ``ops`` producers first, ``ops[-1]`` the one that escapes."""

    ops: tuple[ComputeOp, ...]
    pattern: OpPattern
    patterns: tuple[OpPattern, ...] = field(default=())

    @property
    def output(self) -> ComputeOp:
        return self.ops[-1]


def post_dominators(
    ops: Sequence[Operation], readers: dict[Operation, list[Operation]], roots: set[Operation]
) -> dict[Operation, Operation | None]:
    """The immediate post-dominator of each operation; None for roots and what only the exit dominates."""
    parent: dict[Operation, Operation | None] = {}
    depth: dict[Operation, int] = {}

    def lca(a: Operation | None, b: Operation | None) -> Operation | None:
        while a is not b:
            if a is None or b is None:
                return None
            if depth[a] >= depth[b]:
                a = parent[a]
            else:
                b = parent[b]
        return a

    for op in reversed(ops):
        users = readers[op]
        dom: Operation | None = None
        if op not in roots and users:
            dom = users[0]
            for u in users[1:]:
                dom = lca(dom, u)
        parent[op] = dom
        depth[op] = 0 if dom is None else depth[dom] + 1
    return parent


def fuse(ops: Sequence[Operation], outputs: Sequence[Tensor]) -> list[FusedGroup]:
    """Partition the computes of ``ops`` (producers first) into fused groups, in execution order."""
    ops = list(ops)
    readers = consumers(ops)
    roots = {t.op for t in outputs}
    ipdom = post_dominators(ops, readers, roots)
    pattern = {op: classify(op) for op in ops}
    group: dict[Operation, _Group] = {op: _Group(pattern[op]) for op in ops if isinstance(op, ComputeOp)}
    for members in attention_groups(ops, readers, roots):  # one kernel each (flash attention on CPUs)
        whole = _Group(P.OUT_ELEMWISE_FUSABLE, size=0, sealed=True)
        for op in members:
            group[op].parent = whole
            whole.size += 1

    def path_fits(
        src: Operation, sink: Operation, fits: Callable[[OpPattern, bool], bool], phase: int
    ) -> bool:
        target = group[sink].root()
        seen: set[Operation] = set()
        stack = list(readers[src])
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            mine = group[node].root()
            # An injective op may also join a group through the members it feeds (a reshape read by
            # softmax's max and exp stages): it is read inside that group only.
            inside = phase == 1 and mine is target and node is not sink
            if not inside and not fits(mine.pattern, node is sink):
                return False
            if node is not sink:
                stack.extend(readers[node])
        return True

    def commit(src: Operation, sink: Operation) -> None:
        target = group[sink].root()
        members = {src}
        stack = list(readers[src])
        while stack:  # every operation between src and sink joins sink's group
            node = stack.pop()
            if node in members or node is sink:
                continue
            members.add(node)
            stack.extend(readers[node])
        for node in members:
            g = group[node].root()
            if g is not target:
                g.parent = target
                target.pattern = max(target.pattern, g.pattern)
                target.size += g.size

    def group_size(src: Operation, sink: Operation) -> int:
        return group[src].root().size + group[sink].root().size

    for phase in (0, 1):
        for op in ops:
            if op not in group or ipdom[op] is None:
                continue
            sink = ipdom[op]
            assert sink is not None  # checked just above; post-dominators of computes are computes
            mine = group[op].root()
            if mine.sealed or mine is group[sink].root() or group_size(op, sink) > MAX_GROUP_OPS:
                continue
            rule = _rule(mine.pattern, phase)
            if rule is not None and path_fits(op, sink, rule, phase):
                commit(op, sink)
    return _collect(ops, group, pattern)


def _rule(pattern: OpPattern, phase: int) -> Callable[[OpPattern, bool], bool] | None:
    """What the operations between a group and its post-dominator may be; None: the group stays."""
    if phase == 0 and pattern == P.OUT_ELEMWISE_FUSABLE:
        return lambda kind, is_sink: kind <= P.BROADCAST
    if phase == 0 and pattern <= P.BROADCAST:
        return lambda kind, is_sink: kind < P.OPAQUE if is_sink else kind <= P.INJECTIVE
    if phase == 0 and pattern == P.COMM_REDUCE:
        return lambda kind, is_sink: kind <= P.BROADCAST or (not is_sink and kind == P.COMM_REDUCE)
    if phase == 1 and pattern == P.INJECTIVE:
        return lambda kind, is_sink: kind < P.OPAQUE if is_sink else kind <= P.INJECTIVE
    return None


def _collect(
    ops: list[Operation], group: dict[Operation, _Group], pattern: dict[Operation, OpPattern]
) -> list[FusedGroup]:
    members: dict[_Group, list[ComputeOp]] = {}
    for op in ops:  # producers first, so each group's list ends with its root
        if isinstance(op, ComputeOp):
            members.setdefault(group[op].root(), []).append(op)
    out = [FusedGroup(tuple(m), g.pattern, tuple(pattern[o] for o in m)) for g, m in members.items()]
    order = {op: n for n, op in enumerate(ops)}
    return sorted(out, key=lambda fg: order[fg.output])
