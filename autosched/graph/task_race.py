"""Each task's best kernel raced against onnxruntime on the same nodes: the ONNX subgraph of the task's
first call, cut out of the model (``onnx.utils.extract_model``) and run alone, in turns with ours.

The profile of :mod:`.ort_profile` and the tuning log time kernels by the wall clock, which counts
every time slice another process took; on a shared core a 2 ms kernel read 2 or 10 ms by turns. At
one thread, both contenders are timed here by this process's CPU time instead, which counts only
their own work (at more threads, by the wall clock: CPU time would sum the threads).

onnxruntime optimizes the subgraph as it does the model (an NCHWc conv with its Add and Relu, its
reorders at the subgraph's edges: counted to it, as a whole model counts them once per layout change).

Example: ``rows = race_tasks("resnet18.onnx", {task.key: task.best_trace ...}, threads=1)``.

:func:`in_model` times a compiled model's steps where they run: each once in the model's order (its
weights cold, its input just written) against the same call repeated (warm, as the tuner timed it):
what the tuner's figures leave out of the end-to-end time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .ir import Graph
from .ort_profile import moved_keys
from .tasks import extract_tasks


@dataclass(frozen=True)
class TaskRace:
    task: int
    name: str
    weight: int
    flop: float
    ours_s: float  # one call of our best kernel; nan without a trace
    ort_s: float  # one run of onnxruntime on the task's first call's nodes

    @property
    def ratio(self) -> float:
        """onnxruntime's time / ours (> 1: autosched is faster)."""
        return self.ort_s / self.ours_s if self.ours_s > 0 else float("nan")


def race_tasks(
    onnx_path: str | Path,
    traces: Mapping[str, Any],
    *,
    threads: int = 1,
    rounds: int = 10,
    block: int = 3,
    transform: Callable[[Graph], Graph] | None = None,
    only: Sequence[int] | None = None,
) -> list[TaskRace]:
    """A row per task (``only``: these indices): our best (``traces`` by task key) against onnxruntime.

    ``transform``: the graph pass the tuned model went through (its tasks in the same order; a conv
    it computes by Winograd runs as its three kernels in turn, :func:`.ort_profile.moved_keys`).
    """
    import onnx.utils

    from ..build import build
    from ..frontend.onnx.importer import Importer, load_model
    from ..search_space.schedule import replay
    from .tune_model import ort_session

    proto = load_model(Path(onnx_path))
    importer = Importer(proto, None)
    tg = extract_tasks(importer.run())
    tuned = extract_tasks(transform(tg.graph)) if transform is not None else tg
    call_keys = moved_keys(tg, tuned)
    instances = {t.key: t.instance for t in tuned.tasks}
    names: dict[Any, str] = {}
    for name, value in importer.values.items():  # an op's name: the last ONNX value it is (after Identity)
        if value.tensor is not None and value.const is None:
            names[value.tensor.op] = name
    clock = time.process_time if threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory(prefix="autosched-race-") as tmp:
        for i, task in enumerate(tg.tasks):
            if only is not None and i not in only:
                continue
            call = next(c for c in tg.calls if c.task == i)
            inputs = [names[op] for op in call.inputs if op in names and op not in tg.graph.weights]
            sub = str(Path(tmp) / f"task{i}.onnx")
            onnx.utils.extract_model(str(onnx_path), sub, inputs, [names[call.output]])
            session = ort_session(sub, threads, log_severity_level=3)
            feed = {
                x.name: rng.standard_normal([int(d) for d in x.shape]).astype("float32")
                for x in session.get_inputs()
            }
            contenders: list[Callable[[], Any]] = [partial(session.run, None, feed)]
            keys = call_keys[tg.calls.index(call)]
            found = all(k in traces for k in keys)
            if found:
                kernels = []
                for key in keys:
                    inst, tensors = instances[key], list(instances[key].tensors)
                    kernel = build(replay(list(inst.outputs), traces[key]), tensors, "llvm-cpu")
                    args = [rng.standard_normal(tuple(t.shape)).astype(t.dtype) for t in tensors]
                    kernels.append(partial(kernel, *args))
                contenders.append(partial(_each, kernels))
            times = _in_turns(contenders, rounds, block, clock)
            ours = times[1] if found else float("nan")
            rows.append(
                TaskRace(i, task.name, task.weight, float(task.instance.flop_count()), ours, times[0])
            )
    return rows


def _each(kernels: Sequence[Callable[[], Any]]) -> None:
    for kernel in kernels:
        kernel()


def _in_turns(
    fns: Sequence[Callable[[], Any]], rounds: int, block: int, clock: Callable[[], float]
) -> list[float]:
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, samples, strict=True):
            fn()  # warm: caches and the other's pages
            t0 = clock()
            for _ in range(block):
                fn()
            out.append((clock() - t0) / block)
    return [statistics.median(s) for s in samples]


def print_races(rows: Sequence[TaskRace], file: Any = None) -> None:
    """Task, weight, MFLOP, ours and onnxruntime's ms per call, ratio, and weighted totals."""
    print(
        f"  {'#':>2} {'task':<34} {'w':>2} {'MFLOP':>8} {'ours ms':>8} {'ort ms':>8} {'ort/ours':>8}",
        file=file,
    )
    for r in rows:
        print(
            f"  {r.task:>2} {r.name[:34]:<34} {r.weight:>2} {r.flop / 1e6:>8.1f} {r.ours_s * 1e3:>8.3f} "
            f"{r.ort_s * 1e3:>8.3f} {r.ratio:>7.2f}x",
            file=file,
        )
    done = [r for r in rows if r.ours_s == r.ours_s]
    ours = sum(r.weight * r.ours_s for r in done)
    ort = sum(r.weight * r.ort_s for r in done)
    if done and ours > 0:
        print(
            f"  weighted sum: ours {ours * 1e3:.3f} ms, onnxruntime {ort * 1e3:.3f} ms ({ort / ours:.2f}x)",
            file=file,
        )


@dataclass(frozen=True)
class InModel:
    """One task's calls timed in the model: in sequence (the caches as the steps before leave them:
    cold weights, inputs written by the step before) and repeated (warm, as the tuner times them)."""

    task: int
    name: str
    calls: int
    in_model_s: float  # summed over its calls, medians of rounds
    warm_s: float


def in_model(model: Any, inputs: Mapping[str, Any], *, rounds: int = 10, threads: int = 1) -> list[InModel]:
    """A row per task of a :class:`.compiled.CompiledModel`: where its time in the model goes.

    Example: ``rows = in_model(compile_model("resnet18.onnx", log=log), {"input": x})``.
    """
    clock = time.process_time if threads == 1 else time.perf_counter
    steps = model.bound_steps(inputs)
    seq: list[list[float]] = [[] for _ in steps]
    warm: list[list[float]] = [[] for _ in steps]
    for _ in range(rounds):
        for (_, call), out in zip(steps, seq, strict=True):  # the model's order, once each
            t0 = clock()
            call()
            out.append(clock() - t0)
        for (_, call), out in zip(steps, warm, strict=True):
            call()
            t0 = clock()
            for _ in range(3):
                call()
            out.append((clock() - t0) / 3)
    rows: dict[int, list[float]] = {}
    for (task, _), s, w in zip(steps, seq, warm, strict=True):
        row = rows.setdefault(task, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += statistics.median(s)
        row[2] += statistics.median(w)
    tasks = model.plan["tasks"]
    return [InModel(t, tasks[t]["name"], int(c), s, w) for t, (c, s, w) in sorted(rows.items())]


def print_in_model(rows: Sequence[InModel], file: Any = None) -> None:
    """Task, calls, ms in the model and warm, the difference, and totals."""
    print(f"  {'#':>2} {'task':<40} {'calls':>5} {'in model':>9} {'warm':>8} {'extra':>7}", file=file)
    for r in rows:
        extra = r.in_model_s - r.warm_s
        print(
            f"  {r.task:>2} {r.name[:40]:<40} {r.calls:>5} {r.in_model_s * 1e3:>9.3f} {r.warm_s * 1e3:>8.3f} "
            f"{extra * 1e3:>+7.3f}",
            file=file,
        )
    seq, warm = sum(r.in_model_s for r in rows), sum(r.warm_s for r in rows)
    print(f"  sum: in the model {seq * 1e3:.3f} ms, warm {warm * 1e3:.3f} ms", file=file)
