"""Whole-model tuning: every task of a model tuned together, for the model's end-to-end latency.

The model's fused groups become deduplicated tasks (``extract_tasks``: one per structural workload key,
weighted by how often the model runs it). One :class:`~autosched.tune.Tuner` measures them all, and
MetaSchedule's round gradient scheduler (:class:`~autosched.search.task_scheduler.RoundGradientScheduler`)
gives each batch to the task where it should cut ``sum(weight * best latency)`` most. ``--trials`` is
the model's total. Each task's first candidate is its default schedule, as
for an operator (:class:`~autosched.search.default_first.DefaultFirst`).

Records are the operators' records (workload key + target), so a task already in the log, from an
earlier run or from another model that shares it (a ResNet stem), is not measured again: its records
seed the search and, with ``resume``, count toward the trials.

Example::

    mt = ModelTuner("resnet18.onnx", "llvm-cpu", "tuning_logs/resnet18.jsonl", TuneOptions(trials=500))
    notes = mt.load_previous()
    states = mt.run()
    mt.latency()                   # (estimated seconds of the tasks with a result, tasks without one)
    compare_with_onnxruntime("resnet18.onnx", graph=mt.graph, log=mt.tuner.log_path)
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AutoschedError
from ..tune import TaskState, TuneOptions, Tuner
from .compiled import as_graph
from .ir import Graph
from .tasks import TaskGraph, extract_tasks

MATCH_RTOL = 1e-3  # of the output's largest magnitude: tuned schedules sum in another order


@dataclass(frozen=True)
class Reuse:
    """Records already in the log for this model's tasks: not measured again."""

    records: int
    tasks: int

    def describe(self, total_tasks: int) -> str:
        if not self.records:
            return f"no records of this model's {total_tasks} tasks in the log yet"
        return (
            f"reused {self.records} record(s) of {self.tasks} of the {total_tasks} tasks already in the log "
            "(from earlier runs or other models sharing the task): they are not measured again"
        )


class ModelTuner:
    """The tasks of one model (a Graph, an ``.onnx`` path or a ModelProto), tuned together."""

    def __init__(
        self,
        model: Any,
        target: str = "llvm-cpu",
        log_path: str | Path = "tuning_logs/model.jsonl",
        options: TuneOptions | None = None,
        *,
        measurer: Any = None,
        reporter: Any = None,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        scheduler: Any = None,
        tuner_factory: Any = None,
    ):
        """``tuner_factory``: makes the Tuner, as Tuner's own arguments do (a farm's tuner, issue 15)."""
        from ..search.task_scheduler import RoundGradientScheduler

        # Weights arrive cold in the model; each task's output is the next task's input, so it is not
        # stored past the caches (issue 17's streaming stores) where the reader would fetch it back.
        self.options = replace(options or TuneOptions(flush_cache=True), stream_outputs=False)
        self.graph: Graph = as_graph(model, input_shapes)
        self.task_graph: TaskGraph = extract_tasks(self.graph)
        self.weights = [float(t.weight) for t in self.task_graph.tasks]
        instances = [t.instance for t in self.task_graph.tasks]
        make = tuner_factory or Tuner
        self.tuner: Tuner = make(instances, target, log_path, self.options, measurer, reporter)
        self.scheduler = scheduler or RoundGradientScheduler(seed=self.options.seed)
        self.reuse = Reuse(0, 0)

    @property
    def states(self) -> list[TaskState]:
        return self.tuner.tasks

    def load_previous(self) -> list[str]:
        """Fold in this chip's records of the model's tasks; returns notes (reuse first, then problems).

        A task with records starts with a flat history of as many rounds as its records fill batches,
        so the round-robin pass skips it and the scheduler weighs it by its best so far (a task whose
        records all failed counts those rounds toward being given up).
        """
        notes: list[str] = []
        for task in self.states:
            for note in self.tuner.load_previous(task):
                if note not in notes:  # the same bad line of the log is reported once, not per task
                    notes.append(note)
            if task.previous:
                task.rounds = [task.best_cost] * math.ceil(task.previous / self.options.batch_size)
        reused = [t for t in self.states if t.previous]
        self.reuse = Reuse(sum(t.previous for t in reused), len(reused))
        return [self.reuse.describe(len(self.states)), *notes]

    def budget(self) -> int:
        """Trials to measure in this run: ``--trials``, less the logged records with ``resume``."""
        logged = sum(t.previous for t in self.states) if self.options.resume else 0
        return max(0, self.options.trials - logged)

    def run(self) -> list[TaskState]:
        """Spend the budget over the tasks; every batch is in the log before the next starts."""
        return self.tuner.run_scheduled(self.scheduler, self.budget(), self.weights)

    def latency(self) -> tuple[float, int]:
        """(sum of weight x best latency over the tasks with a valid result, how many tasks have none)."""
        total, missing = 0.0, 0
        for task, weight in zip(self.states, self.weights, strict=True):
            if math.isfinite(task.best_cost):
                total += weight * task.best_cost
            else:
                missing += 1
        return total, missing

    def shares(self) -> list[tuple[str, float]]:
        """(task, share of the estimated latency) for the tasks with a result, largest first."""
        total, _missing = self.latency()
        parts = [
            (t.inst.name, w * t.best_cost / total)
            for t, w in zip(self.states, self.weights, strict=True)
            if math.isfinite(t.best_cost) and total > 0
        ]
        return sorted(parts, key=lambda part: -part[1])

    def failed(self) -> list[str]:
        """Tasks measured that no candidate ran correctly: they keep their default schedule."""
        return [t.inst.name for t in self.states if t.best_trace is None and t.trials + t.previous > 0]

    def untried(self) -> list[str]:
        """Tasks the budget ran out before (fewer trials than tasks): they keep their default schedule."""
        return [t.inst.name for t in self.states if t.trials + t.previous == 0]


# End-to-end check and race -------------------------------------------------------------------------


class ModelMismatchError(AutoschedError):
    """The compiled model's outputs disagree with onnxruntime's on the same inputs."""


@dataclass(frozen=True)
class ModelRace:
    """The compiled model against onnxruntime, timed in turns in this process (seconds per run)."""

    autosched_s: float
    onnxruntime_s: float | None  # None without onnxruntime (or without an ONNX file to give it)
    max_rel_err: float | None  # of autosched's outputs vs onnxruntime's, over each output's largest value
    tuned_tasks: int
    total_tasks: int
    others: Mapping[str, float] = field(default_factory=dict)  # seconds of the extra contenders, by name

    @property
    def speedup(self) -> float | None:
        """onnxruntime's time / autosched's (> 1: autosched is faster)."""
        return None if self.onnxruntime_s is None else self.onnxruntime_s / self.autosched_s


def random_model_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Fresh non-zero random inputs: floats standard normal, integers and bools 0 or 1.

    Integers stay in [0, 2): valid token ids, indices and attention masks for any model.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for inp in graph.inputs:
        shape = inp.shape if inp.shape is not None else tuple(inp.tensor.shape)
        dtype = np.dtype(inp.dtype)
        if np.issubdtype(dtype, np.floating):
            out[inp.name] = rng.standard_normal(shape).astype(dtype)
        else:
            out[inp.name] = rng.integers(0, 2, shape).astype(dtype)
    return out


def ort_session(path: str | Path, threads: int | None = None, **options: Any) -> Any:
    """An onnxruntime session on its CPU provider, ``threads`` intra-op threads (default: every core);
    ``options`` are further ``SessionOptions`` attributes (``enable_profiling=True``, ...)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or os.cpu_count() or 1
    for name, value in options.items():
        setattr(opts, name, value)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _compile_logged(graph: Graph, target: str, log: str | Path | None) -> Any:
    import warnings

    from .compiled import compile_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks are counted in the summary instead
        return compile_model(graph, target, log if log is not None and Path(log).is_file() else None)


def _session_or_none(onnx_path: str | Path | None, threads: int | None = None) -> Any:
    if onnx_path is None:
        return None
    try:
        return ort_session(Path(onnx_path), threads)
    except ImportError:
        return None


def _max_rel_err(graph: Graph, model: Any, session: Any, inputs: Mapping[str, Any], log: Any) -> float:
    """The compiled model's worst output error against onnxruntime's, over each output's largest value;
    :class:`ModelMismatchError` over ``MATCH_RTOL``."""
    expected = session.run(None, inputs)
    got = model.run(inputs)
    err = 0.0
    for out, want in zip(model.output_names, expected, strict=True):
        diff = np.abs(got[out].astype(np.float64) - want)
        scale = float(np.abs(want).max()) or 1.0
        e = float(diff.max()) / scale if diff.size else 0.0
        if not e <= MATCH_RTOL:  # NaN fails too
            raise ModelMismatchError(
                f"tuned model {graph.name!r}: output {out!r} is off onnxruntime's by {e:.2e} of its "
                f"largest value (allowed {MATCH_RTOL}); a tuned record in {log} is wrong: rerun with "
                "--debug and report it"
            )
        err = max(err, e)
    return err


def check_with_onnxruntime(
    onnx_path: str | Path | None, *, graph: Graph, log: str | Path | None, target: str, seed: int = 5
) -> float | None:
    """Compile ``graph`` for ``target`` with the log's best records and check one run against onnxruntime
    on this CPU (the reference for every target): the max relative error, or None without onnxruntime
    (or an ONNX file). Raises :class:`ModelMismatchError` as :func:`compare_with_onnxruntime` does."""
    session = _session_or_none(onnx_path)
    if session is None:
        return None
    model = _compile_logged(graph, target, log)
    return _max_rel_err(graph, model, session, random_model_inputs(graph, seed), log)


def compare_with_onnxruntime(
    onnx_path: str | Path | None,
    *,
    graph: Graph,
    log: str | Path | None,
    target: str = "llvm-cpu",
    repeat: int = 20,
    seed: int = 5,
    others: Mapping[str, Any] | None = None,
    threads: int | None = None,
) -> ModelRace:
    """Compile ``graph`` with the log's best records, check it against onnxruntime, then time both in turns.

    Raises :class:`ModelMismatchError` when an output is off by more than ``MATCH_RTOL`` of its largest
    value. Without onnxruntime (or an ONNX file) only autosched is timed. ``others``: more contenders
    timed in the same turns, ``name -> make(inputs) -> run()`` (torch in the benchmarks). ``threads``:
    onnxruntime's intra-op threads (default: every core).
    """
    from ..measure.compare import interleaved_medians

    model = _compile_logged(graph, target, log)
    tuned = sum(1 for s in model.sources if s == "log")
    inputs = random_model_inputs(graph, seed)
    contenders = [lambda: model.run(inputs)]
    session, err = _session_or_none(onnx_path, threads), None
    if session is not None:
        err = _max_rel_err(graph, model, session, inputs, log)
        contenders.append(lambda: session.run(None, inputs))
    names = list(others or {})
    contenders += [others[n](inputs) for n in names]  # type: ignore[index]
    # blocks of 5 at most: a larger repeat buys more rounds, which a slow stretch of the machine sways less
    times = interleaved_medians(contenders, repeat=repeat, block=max(1, min(5, repeat // 4)))
    ort_s = times[1] if session is not None else None
    extra = dict(zip(names, times[len(times) - len(names) :], strict=True))
    return ModelRace(times[0], ort_s, err, tuned, len(model.sources), extra)


# Command line ----------------------------------------------------------------------------------------


def cmd_tune_model(ns: Any, options: TuneOptions) -> int:
    """``autosched tune model.onnx --trials N``: tune, then race the compiled model against onnxruntime."""
    import sys

    from ..progress import ModelProgress
    from .export import parse_input_shapes

    log = ns.log or f"tuning_logs/{Path(ns.op_file).stem}.jsonl"
    shapes = parse_input_shapes(getattr(ns, "input_shape", None))
    with ModelProgress() as progress:
        mt = ModelTuner(ns.op_file, ns.target, log, options, reporter=progress.report, input_shapes=shapes)
        progress.attach(mt)
        for note in mt.load_previous():
            progress.note(note)
        progress.begin(mt.budget())
        try:
            mt.run()
        except KeyboardInterrupt:
            progress.stop()
            print(f"\ninterrupted: every finished batch is in {log}; continue with --resume", file=sys.stderr)
            return 130
    report_model(mt, ns.op_file, log)
    return 0


def report_model(mt: ModelTuner, onnx_path: str | Path | None, log: str | Path) -> None:
    """The end of ``autosched tune model.onnx``: the summary, and the compiled model checked against
    onnxruntime on this CPU (and raced with it on a CPU target). The kernels run in this process."""
    from ..progress import print_model_summary

    race, err = None, None
    target = str(mt.tuner.target)
    try:
        if mt.tuner.adapter.spec.style == "cpu":
            race = compare_with_onnxruntime(onnx_path, graph=mt.graph, log=log, target=target)
        else:  # outputs checked on every target; onnxruntime runs on this CPU: racing a GPU means nothing
            err = check_with_onnxruntime(onnx_path, graph=mt.graph, log=log, target=target)
    except ModelMismatchError:
        print_model_summary(mt, None)  # what was tuned is in the log; then the one-line error
        raise
    print_model_summary(mt, race)
    if err is not None:
        print(
            f"outputs match onnxruntime's on this CPU (max error {err:.1e} of the largest value); "
            f"no timing race on {target}"
        )
