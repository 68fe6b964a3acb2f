"""Where a model loses to onnxruntime, task by task: onnxruntime's profiler mapped onto autosched's tasks.

onnxruntime's profiler (``SessionOptions.enable_profiling``) writes one ``<node>_kernel_time`` event per
node of its *optimized* graph and run. That graph is not the ONNX file's: at the default level it
rewrites convs into NCHWc (``com.microsoft.nchwc.Conv``, with the residual Add and the Relu fused in),
inserts ``ReorderInput`` / ``ReorderOutput`` layout nodes and renames what it fused. Each of its nodes
is attributed to one autosched fused group (a call of a task) by name, in this order:

1. its name is an ONNX node's name (``/fc/Gemm``): that node's group;
2. its name is an ONNX value's name plus ``_nchwc`` (onnxruntime names an NCHWc node after the output
   of the node it replaced: ``/layer1/layer1.0/conv2/Conv_output_0_nchwc`` is conv2 with its Add and
   Relu): the group that computes that value;
3. one of its outputs is an ONNX value: the group computing it;
4. a layout node: ``ReorderInput`` goes to the group of the kernel that reads its output (the layout
   that kernel wants), ``ReorderOutput`` to the group of the kernel whose output it converts back.
   Weight reorders are constant-folded at session start and never timed;
5. otherwise it is reported as unattributed (its time still counts in onnxruntime's total).

Example::

    rows, rest = per_task_comparison("resnet18.onnx", {task.key: seconds, ...}, threads=1)
    print_per_task(rows, rest)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .ir import Graph
from .tasks import TaskGraph, extract_tasks

NCHWC_SUFFIX = "_nchwc"
KERNEL_SUFFIX = "_kernel_time"


@dataclass(frozen=True)
class OrtNode:
    """A node of onnxruntime's optimized graph, its median kernel time and the call it is attributed to."""

    name: str
    op_type: str
    seconds: float
    call: int | None  # index into TaskGraph.calls; None: unattributed


@dataclass(frozen=True)
class TaskRow:
    """One task: autosched's weighted best against onnxruntime's time for the same nodes (all calls)."""

    task: int
    name: str
    weight: int
    flop: float
    ours_s: float  # weight x best latency; nan without a valid result
    ort_s: float  # summed over the onnxruntime nodes attributed to the task's calls
    ort_nodes: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """onnxruntime's time / ours (> 1: autosched is faster), as the end-to-end "vs ort"."""
        return self.ort_s / self.ours_s if self.ours_s > 0 and math.isfinite(self.ours_s) else math.nan


def profile_onnxruntime(
    onnx_path: str | Path,
    inputs: Mapping[str, np.ndarray],
    *,
    threads: int = 1,
    runs: int = 20,
    warmup: int = 3,
) -> tuple[dict[str, float], dict[str, tuple[str, list[str], list[str]]]]:
    """(median seconds per node over ``runs`` runs, the optimized graph: name -> (op, inputs, outputs)).

    onnxruntime at its default optimization level, ``threads`` intra-op threads, the CPU provider.
    """
    import onnx

    from .tune_model import ort_session

    with tempfile.TemporaryDirectory(prefix="autosched-ort-") as tmp:
        optimized_path = os.path.join(tmp, "optimized.onnx")
        session = ort_session(
            onnx_path,
            threads,
            log_severity_level=3,  # the NCHWc serialization warning is expected here
            optimized_model_filepath=optimized_path,
            enable_profiling=True,
            profile_file_prefix=os.path.join(tmp, "profile"),
        )
        feed = dict(inputs)
        for _ in range(warmup):
            session.run(None, feed)
        for _ in range(runs):
            session.run(None, feed)
        events = _kernel_events(session.end_profiling())
        optimized = onnx.load(optimized_path)
    durations: dict[str, list[float]] = {}
    for e in events:  # in run order: the last ``runs`` of each node are the timed runs
        durations.setdefault(e["name"][: -len(KERNEL_SUFFIX)], []).append(float(e["dur"]) * 1e-6)
    times = {name: statistics.median(d[-runs:]) for name, d in durations.items()}
    graph = {n.name: (n.op_type, list(n.input), list(n.output)) for n in optimized.graph.node}
    return times, graph


def _kernel_events(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        events = json.load(f)
    os.unlink(path)
    return [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)]


def onnx_task_graph(
    onnx_path: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> tuple[TaskGraph, dict[str, int], dict[str, int]]:
    """The model's tasks, and which call computes each ONNX value and node (by name)."""
    from ..frontend.onnx.importer import Importer, load_model

    proto = load_model(Path(onnx_path))
    importer = Importer(proto, input_shapes)
    tg = extract_tasks(importer.run())
    call_of_op = {op: n for n, call in enumerate(tg.calls) for op in call.group.ops}
    value_call = {
        name: call_of_op[v.tensor.op]
        for name, v in importer.values.items()
        if v.tensor is not None and v.tensor.op in call_of_op
    }
    node_call = {}
    for node in proto.graph.node:
        found = [value_call[o] for o in node.output if o in value_call]
        if found and node.name:
            node_call[node.name] = found[0]
    return tg, value_call, node_call


def attribute(
    graph: Mapping[str, tuple[str, list[str], list[str]]],
    value_call: Mapping[str, int],
    node_call: Mapping[str, int],
) -> dict[str, int | None]:
    """Each optimized node's call (the rules of the module docstring), None where none applies."""
    producer = {out: name for name, (_, _, outs) in graph.items() for out in outs}
    readers: dict[str, list[str]] = {}
    for name, (_, ins, _) in graph.items():
        for i in ins:
            readers.setdefault(i, []).append(name)

    def direct(name: str) -> int | None:
        op_type, _, outs = graph[name]
        if name in node_call:
            return node_call[name]
        if name.endswith(NCHWC_SUFFIX) and name[: -len(NCHWC_SUFFIX)] in value_call:
            return value_call[name[: -len(NCHWC_SUFFIX)]]
        return next((value_call[o] for o in outs if o in value_call), None)

    def follow(name: str, seen: frozenset[str]) -> int | None:
        found = direct(name)
        if found is not None or name in seen:
            return found
        op_type, ins, outs = graph[name]
        seen = seen | {name}
        if op_type == "ReorderOutput":
            nexts = [producer[i] for i in ins if i in producer]
        else:  # ReorderInput, and anything else unnamed: the kernel that reads what it made
            nexts = [r for o in outs for r in readers.get(o, [])]
        for other in nexts:
            found = follow(other, seen)
            if found is not None:
                return found
        return None

    return {name: follow(name, frozenset()) for name in graph}


def per_task_comparison(
    onnx_path: str | Path,
    best: Mapping[str, float],
    *,
    threads: int = 1,
    runs: int = 20,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 5,
    transform: Callable[[Graph], Graph] | None = None,
) -> tuple[list[TaskRow], list[OrtNode]]:
    """(a row per task, in task order; the onnxruntime nodes no task was found for).

    ``best``: seconds of one call by task key (a tuner's ``best_cost``); tasks missing from it get nan.
    ``transform``: the graph pass the tuned model went through (:func:`.compiled.as_graph`): its tasks
    are the imported graph's, in the same order, under other keys, except that a Winograd conv's row
    also counts the calls before its output's (:func:`moved_keys`).
    """
    from .tune_model import random_model_inputs

    tg, value_call, node_call = onnx_task_graph(onnx_path, input_shapes)
    keys = [[tg.tasks[c.task].key] for c in tg.calls]
    if transform is not None:
        keys = moved_keys(tg, extract_tasks(transform(tg.graph)))
    times, graph = profile_onnxruntime(
        onnx_path, random_model_inputs(tg.graph, seed), threads=threads, runs=runs
    )
    calls = attribute(graph, value_call, node_call)
    nodes = [OrtNode(n, graph[n][0], s, calls.get(n)) for n, s in times.items() if n in graph]
    per_task: dict[int, list[OrtNode]] = {}
    for node in nodes:
        if node.call is not None:
            per_task.setdefault(tg.calls[node.call].task, []).append(node)
    rows = []
    spent = [0.0] * len(tg.tasks)  # each task's calls, each call the tasks that run it
    for call, call_keys in zip(tg.calls, keys, strict=True):
        spent[call.task] += sum(best.get(k, math.nan) for k in call_keys)
    for i, task in enumerate(tg.tasks):
        mine = per_task.get(i, [])
        rows.append(
            TaskRow(
                i,
                task.name,
                task.weight,
                float(task.instance.flop_count()),
                spent[i],
                sum(n.seconds for n in mine),
                tuple(n.name for n in mine),
            )
        )
    return rows, [n for n in nodes if n.call is None]


def moved_keys(tg: TaskGraph, moved: TaskGraph) -> list[list[str]]:
    """Per call of ``tg``, the task keys of the ``moved`` calls that compute it: the same call where the
    transform only re-keyed it; for a conv computed by Winograd's F(2x2, 3x3), its output's call and
    the input-transform and GEMM calls that feed it (:mod:`.winograd`)."""
    from .winograd import HELPERS

    helper = {c.output: c for c in moved.calls if c.output.name.endswith(HELPERS)}
    leads = [c for c in moved.calls if c.output not in helper]
    if len(leads) != len(tg.calls):
        raise ValueError("moved_keys: the transform changed the model's tasks, not only their keys")
    out = []
    for call in leads:
        found, todo = [call], list(call.inputs)
        while todo:
            before = helper.get(todo.pop())  # type: ignore[call-overload]
            if before is not None and before not in found:
                found.append(before)
                todo.extend(before.inputs)
        out.append([moved.tasks[c.task].key for c in found])
    return out


def print_per_task(rows: Sequence[TaskRow], unattributed: Sequence[OrtNode] = (), file: Any = None) -> None:
    """The table: task, weight, MFLOP, ours and onnxruntime's ms (weighted), ratio, share of the gap.

    The gap share is the task's (ours - ort) over the whole (ours - ort): which tasks the end-to-end
    loss is made of (negative: a task where autosched is ahead).
    """
    valid = [r for r in rows if math.isfinite(r.ours_s)]
    ours = sum(r.ours_s for r in valid)
    ort = sum(r.ort_s for r in valid)
    gap = ours - ort
    print(
        f"  {'#':>2} {'task':<34} {'w':>2} {'MFLOP':>8} {'ours ms':>8} {'ort ms':>8} {'ort/ours':>8} "
        f"{'gap share':>9}  ort nodes",
        file=file,
    )
    for r in rows:
        share = (r.ours_s - r.ort_s) / gap if gap and math.isfinite(r.ours_s) else math.nan
        names = ", ".join(_short(n) for n in r.ort_nodes) or "-"
        print(
            f"  {r.task:>2} {r.name[:34]:<34} {r.weight:>2} {r.flop / 1e6:>8.1f} {r.ours_s * 1e3:>8.3f} "
            f"{r.ort_s * 1e3:>8.3f} {r.ratio:>7.2f}x {share:>9.0%}  {names[:60]}",
            file=file,
        )
    rest = sum(n.seconds for n in unattributed)
    ratio = ort / ours if ours else math.nan
    print(
        f"  total (tasks with a result): ours {ours * 1e3:.3f} ms, onnxruntime {ort * 1e3:.3f} ms "
        f"({ratio:.2f}x); unattributed onnxruntime nodes {rest * 1e3:.3f} ms"
        + (f" ({', '.join(n.name for n in unattributed)[:80]})" if unattributed else ""),
        file=file,
    )


def _short(name: str) -> str:
    """``/layer1/layer1.0/conv2/Conv_output_0_nchwc`` -> ``layer1.0/conv2``."""
    parts = [p for p in name.split("/") if p]
    if len(parts) >= 2:
        return "/".join(parts[-3:-1]) if len(parts) >= 3 else parts[0]
    return name
