"""MobileNetV2's conv kinds one task at a time against onnxruntime's node (issue 12).

Each chosen task of MobileNetV2 (batch 1, 224x224) is an ordinary workload (the conv with its fused
bias, ReLU6 or residual add): tuned alone for ``--trials``, its best compared with onnxruntime's
profiled kernel time for the same node (``autosched.graph.ort_profile``: onnxruntime runs the whole
model in NCHWc, so its node times carry no layout changes between convs), per call. The kinds:
depthwise 3x3 stride 1 / stride 2, pointwise 1x1 (expansion with ReLU6, projection, projection with the
residual add), the stem and the classifier. ``lanes`` says where the best kernel keeps its vector
lanes: ``chan`` (channels, the sketch's ``vector_axis``), ``w`` (the output's last axis) or ``rows``
(the classifier reduced row by row). The tasks are the ones the model is tuned and compiled with
(``as_graph``: conv weights stored K-last, GEMM weights in column panels), not the bare import's, and
each task's default schedule is its first candidate, as in model tuning (at 200 trials over 32 tasks
the model runs mostly defaults).

    taskset -c 1 python benchmarks/mobilenet_tasks.py --threads 1 --trials 64        # every kind
    taskset -c 1 python benchmarks/mobilenet_tasks.py --threads 1 --trials 16 --kinds depthwise_s2

Run it alone for figures; on a shared machine use ``--threads 1`` pinned to one core and compare
ratios only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
from export import export_model  # benchmarks/models/export.py

from autosched.graph.compiled import as_graph
from autosched.graph.ort_profile import per_task_comparison
from autosched.graph.tasks import Task, extract_tasks
from autosched.te.tensor import ComputeOp
from autosched.te.workload import topo_order
from autosched.tune import TuneOptions, Tuner

KINDS = ("stem", "depthwise_s1", "depthwise_s2", "expand", "project", "project_add", "classifier")


def kind_of(task: Task) -> str:
    """The conv kind of a MobileNetV2 task, from its structure (shapes of the contraction)."""
    if len(task.instance.inputs) == 1:
        return "pool"  # the global average pool: no weight
    ops = [op for op in topo_order(task.instance.outputs) if isinstance(op, ComputeOp) and op.reduce_axis]
    conv = ops[0]
    if len(conv.axis) == 2:
        return "classifier"
    h, data = conv.shape[2], task.instance.inputs[0].shape
    taps = 1
    for r in conv.reduce_axis[1:]:
        taps *= r.extent
    if taps == 1:
        if "clip" in task.name:
            return "expand"
        return "project_add" if task.name.endswith("_add_add") else "project"
    if conv.reduce_axis[0].extent == 1:  # one input channel per output channel
        return "depthwise_s1" if data[2] == h else "depthwise_s2"
    return "stem"


def lanes_of(trace: Any) -> str:
    """Where the best kernel vectorizes: channels (an accumulator laid out channels-last), the last axis,
    or, for a reduction row by row, the rows' reduction."""
    steps = list(trace or ())
    if any(s.primitive == "rfactor" for s in steps):
        return "rows"
    if any(s.primitive == "cache_write" and len(s.args) > 1 for s in steps):
        return "chan"
    return "w"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200, help="trials per task")
    p.add_argument("--threads", type=int, default=None, help="tune and profile on this many threads")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, some of {', '.join(KINDS)}")
    p.add_argument("--all", action="store_true", help="every task of each kind (default: the largest)")
    p.add_argument("--log", help="tuning log (default: a temporary one)")
    ns = p.parse_args(argv)
    kinds = ns.kinds.split(",")
    if any(k not in KINDS for k in kinds):
        p.error(f"--kinds: some of {', '.join(KINDS)}")
    work = Path(tempfile.mkdtemp(prefix="autosched-mobilenet-"))
    path = export_model("mobilenet_v2", work, small=False)
    # The tasks the model is tuned and compiled with: conv weights K-last, GEMM weights in panels.
    tg = extract_tasks(as_graph(path))
    chosen: list[int] = []
    for kind in kinds:
        mine = [i for i, t in enumerate(tg.tasks) if kind_of(t) == kind]
        by_time = sorted(mine, key=lambda i: -tg.tasks[i].weight * tg.tasks[i].instance.flop_count())
        chosen += by_time if ns.all else by_time[:1]
    log = Path(ns.log) if ns.log else work / "tasks.jsonl"
    opts = TuneOptions(trials=ns.trials, batch_size=ns.batch_size, num_threads=ns.threads, resume=True)
    tuner = Tuner([tg.tasks[i].instance for i in chosen], "llvm-cpu", log, opts)
    for task in tuner.tasks:  # the Tuner measures each default schedule (what runs untuned) first
        tuner.load_previous(task)
    t0 = time.perf_counter()
    states = tuner.run()
    wall = time.perf_counter() - t0
    best = {s.inst.key: s.best_cost for s in states}
    rows, _ = per_task_comparison(path, best, threads=ns.threads or 1, runs=30, transform=as_graph)
    print(f"MobileNetV2 tasks, {ns.trials} trials each, threads {ns.threads or 'all'}; per call; ")
    print("ort/ours > 1: autosched is faster; ort = onnxruntime's profiled node (NCHWc, fused epilogue)")
    print(f"  {'#':>2} {'kind':<13} {'input -> output':<30} {'w':>2} {'ours us':>8} {'ort us':>8} "
          f"{'ort/ours':>8} {'lanes':>5}")  # fmt: skip
    for i, s in zip(chosen, states, strict=True):
        t, row = tg.tasks[i], rows[i]
        shape = f"{tuple(t.instance.inputs[0].shape[1:])}->{tuple(t.instance.outputs[0].shape[1:])}"
        ort_us = row.ort_s / t.weight * 1e6
        print(
            f"  {i:>2} {kind_of(t):<13} {shape:<30} {t.weight:>2} {s.best_cost * 1e6:>8.1f} {ort_us:>8.1f} "
            f"{ort_us / (s.best_cost * 1e6):>7.2f}x {lanes_of(s.best_trace):>5}"
        )
    print(f"tuning {wall:.0f} s; log {log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
