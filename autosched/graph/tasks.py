"""Fused groups as tasks: one te workload each, deduplicated by structural key.

A group's computes are rebuilt so that every read of a tensor outside the group reads a fresh
placeholder instead (the task's inputs, ``p0, p1, ...`` in the order the group first reads them), and
its stages get canonical names (``s0_contract``, ``s1_ewise``, ...). Identical subgraphs (twelve
encoder layers, the repeated blocks of a ResNet stage) then have identical workload keys, and become
one task whose ``weight`` is how many times the model runs it.

Example::

    tg = extract_tasks(graph)
    [(t.name, t.weight) for t in tg.tasks]        # [("fused_conv2d_batch_norm_relu", 4), ...]
    tg.calls[0].inputs                            # the graph operations feeding the first kernel
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from ..te.visit import rewrite
from ..te.workload import WorkloadInstance
from .attention import canonical_attention
from .fuse import FusedGroup, fuse
from .ir import Graph
from .pattern import OpPattern

STAGE_KIND = {
    OpPattern.ELEMWISE: "ewise",
    OpPattern.BROADCAST: "bcast",
    OpPattern.INJECTIVE: "inject",
    OpPattern.COMM_REDUCE: "reduce",
    OpPattern.OUT_ELEMWISE_FUSABLE: "contract",
    OpPattern.OPAQUE: "opaque",
}
MAX_NAME_PARTS = 4  # a task's name lists at most this many of its operations


@dataclass(frozen=True, eq=False)
class Task:
    """A distinct kernel of the model: its workload and how many fused groups run it."""

    instance: WorkloadInstance
    weight: int
    pattern: OpPattern

    @property
    def key(self) -> str:
        return self.instance.key

    @property
    def name(self) -> str:
        return self.instance.name


@dataclass(frozen=True, eq=False)
class TaskCall:
    """One fused group of the graph as a call of a task: ``inputs`` feed the task's placeholders."""

    task: int  # index into TaskGraph.tasks
    inputs: tuple[Operation, ...]
    output: ComputeOp
    group: FusedGroup


@dataclass(frozen=True, eq=False)
class TaskGraph:
    graph: Graph
    tasks: tuple[Task, ...]  # in order of first use
    calls: tuple[TaskCall, ...]  # in execution order

    @property
    def groups(self) -> tuple[FusedGroup, ...]:
        return tuple(c.group for c in self.calls)


def extract_tasks(graph: Graph) -> TaskGraph:
    """Fuse ``graph`` and turn each group into a call of a deduplicated task."""
    groups = fuse(graph.ops(), [o.tensor for o in graph.outputs])
    by_key: dict[str, int] = {}
    instances: list[WorkloadInstance] = []
    weights: list[int] = []
    patterns: list[OpPattern] = []
    calls = []
    for group in groups:
        inst, sources = group_workload(group)
        index = by_key.get(inst.key)
        if index is None:
            index = by_key[inst.key] = len(instances)
            instances.append(inst)
            weights.append(0)
            patterns.append(group.pattern)
        weights[index] += 1
        calls.append(TaskCall(index, tuple(sources), group.output, group))
    tasks = tuple(Task(i, w, p) for i, w, p in zip(instances, weights, patterns, strict=True))
    return TaskGraph(graph, tasks, tuple(calls))


def group_workload(group: FusedGroup) -> tuple[WorkloadInstance, list[Operation]]:
    """The group as a workload (placeholders, then its output) and the operations its inputs come from."""
    members = set(group.ops)
    sources: list[Operation] = []
    placeholders: dict[Operation, Tensor] = {}
    rebuilt: dict[Operation, Tensor] = {}

    def swap(e: object) -> TensorRead | None:
        if not isinstance(e, TensorRead):
            return None
        src = e.tensor.op
        if src in members:
            new = rebuilt[src]
        elif src in placeholders:
            new = placeholders[src]
        else:
            new = Tensor(PlaceholderOp(f"p{len(sources)}", tuple(src.shape), src.dtype))
            placeholders[src] = new
            sources.append(src)
        return TensorRead(new, tuple(rewrite(i, swap) for i in e.indices), e.dtype)

    for n, (op, kind) in enumerate(zip(group.ops, group.patterns, strict=True)):
        body = rewrite(op.body, swap)
        stage = f"s{n}_{STAGE_KIND[kind]}"
        rebuilt[op] = Tensor(ComputeOp(stage, op.axis, body, op.dtype, op.tag))
    out = rebuilt[group.output]
    if group.pattern == OpPattern.OUT_ELEMWISE_FUSABLE and len(group.ops) >= 5:
        out = canonical_attention(out) or out  # an attention: the seven stages flash attention takes
    tensors = (*(placeholders[s] for s in sources), out)
    return WorkloadInstance(task_name(group.ops), {}, tensors), sources


def task_name(ops: Sequence[Operation]) -> str:
    """``fused_`` + the distinct short names of the operations (``/layer1/conv1/Conv_3`` -> ``conv``)."""
    parts: list[str] = []
    for op in ops:
        short = re.split(r"[/.]", op.name)[-1] or op.name
        short = re.sub(r"\W+", "_", re.sub(r"[_\d]+$", "", short)).strip("_").lower() or "op"
        if short not in parts:
            parts.append(short)
    return "fused_" + "_".join(parts[:MAX_NAME_PARTS])
