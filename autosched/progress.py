"""Live progress and the final summary of a tuning run (rich on a terminal, plain lines otherwise)."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from .tune import TaskState, alignment_line


def _fmt_s(s: float | None) -> str:
    if s is None or s == float("inf"):
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def _failures(task: TaskState) -> str:
    if not task.errors:
        return "no failures"
    return ", ".join(f"{n} {kind}" for kind, n in task.errors.most_common())


class TuneProgress:
    """Trials done of N, best latency and GFLOP/s, failures by kind, ETA, per workload.

    With several targets in one run (a farm, issue 15), each bar and note names its target too.
    """

    def __init__(self, trials: int, console: Console | None = None):
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.trials = trials
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("best {task.fields[best]}"),
            TextColumn("{task.fields[failures]}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.ids: dict[int, Any] = {}
        self.targets: list[str] = []  # of the tuners given to header(), in order
        self._tasks: dict[int, TaskState] = {}  # id(task) -> the task of each bar

    def __enter__(self) -> TuneProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def stop(self) -> None:
        self.progress.stop()

    def header(self, tuner: Any) -> None:
        if str(tuner.target) not in self.targets:
            self.targets.append(str(tuner.target))
            for key, task in self._tasks.items():  # a bar made while there was one target: name it too
                self.progress.update(self.ids[key], description=self.label(task))
        chip = tuner.chip
        self.console.print(
            f"target [bold]{tuner.target}[/] ({chip.name}, {chip.cores} cores, "
            f"{chip.vector_bits}-bit vectors), log {tuner.log_path}, strategy {tuner.options.strategy}"
        )

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {text}")

    def label(self, task: TaskState) -> str:
        """The workload's name, and its target when the run tunes several (``matmul (opencl)``)."""
        if len(self.targets) > 1 and task.measure_task is not None:
            return f"{task.inst.name} ({task.measure_task.target})"
        return task.inst.name

    def report(self, event: str, task: TaskState) -> None:
        name = self.label(task)
        if event == "reference":  # a large workload's reference takes seconds: say why nothing moves
            self.note(f"{name}: computing the reference...")
            return
        if event == "finalists" and task.finalists is not None:  # issue 17: what re-timing the best did
            self.note(task.finalists.describe(name))
            return
        key = id(task)
        if event == "start":
            self.ids[key] = self.progress.add_task(
                name, total=max(task.budget, 1), best=self._best(task), failures=_failures(task)
            )
            self._tasks[key] = task
            if task.previous:
                self.note(f"{name}: {task.previous} record(s) already in the log will not be re-measured")
        tid = self.ids[key]
        self.progress.update(tid, completed=task.trials, best=self._best(task), failures=_failures(task))
        if event == "done":
            self.progress.update(tid, total=max(task.trials, 1))

    @staticmethod
    def _best(task: TaskState) -> str:
        if task.best_cost == float("inf"):
            return "-"
        return f"{_fmt_s(task.best_cost)} ({task.best_gflops:.1f} GFLOP/s)"


def print_summary(tasks: list[TaskState], tuner: Any, console: Console | None = None) -> None:
    console = console or Console(width=None if sys.stdout.isatty() else 120)
    table = Table(title=f"autosched tune: {tuner.target} ({tuner.chip.name})")
    for col in ("workload", "trials", "failures", "best latency", "GFLOP/s", "numpy", "vs numpy"):
        table.add_column(col, justify="left" if col in ("workload", "failures") else "right")
    for t in tasks:
        ratio = "-"
        ours = t.final_s if t.final_s is not None else t.best_cost
        if t.baseline_s and ours < float("inf"):
            ratio = f"{t.baseline_s / ours:.2f}x"
        trials = f"{t.trials}" + (f" (+{t.previous} logged)" if t.previous else "")
        gflops = t.inst.flop_count() / ours / 1e9 if ours < float("inf") else 0.0
        table.add_row(
            t.inst.name, trials, _failures(t), _fmt_s(ours), f"{gflops:.1f}", _fmt_s(t.baseline_s), ratio,
        )  # fmt: skip
    console.print(table)
    console.print(
        "vs numpy = numpy's time / autosched's time: the best kernel (its compiled entry point, called "
        "as the runner calls it) and numpy re-timed in turns at the end of this run (> 1: autosched is "
        "faster)"
    )
    if any(t.baseline_s for t in tasks):  # which BLAS raced, and whether the environment slowed it down
        from .measure import blas

        console.print(blas.describe(), highlight=False)
        warning = blas.forced_warning()
        if warning:
            console.print(f"[yellow]warning: {warning}[/]")
    for t in tasks:  # issue 17: what the runner's best time was measured on, and the misaligned case
        line = alignment_line(t, host=tuner.adapter.spec.can_export)
        if line:
            console.print(line, highlight=False, markup=False)
    for t in tasks:
        if t.best_trace is None:
            console.print(f"[red]{t.inst.name}: no candidate ran correctly[/]")
            continue
        console.print(f"\n[bold]best schedule of {t.inst.name}[/] ({_fmt_s(t.best_cost)}):")
        console.print("s = autosched.create_schedule(outputs)", highlight=False)
        for step in t.best_trace:
            console.print(step.to_code(), highlight=False, markup=False)


# Models (issue 12) ----------------------------------------------------------------------------------


class _ProgressWithTable(Progress):
    """A progress bar with a table above it, both redrawn live (one rich Live may run at a time)."""

    def __init__(self, *columns: Any, table: Any = None, **kwargs: Any):
        self.table_fn = table  # set first: Progress.__init__ renders once
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Any:
        table = self.table_fn() if self.table_fn is not None else None
        if table is not None:
            yield table
        yield from super().get_renderables()


def model_task_table(mt: Any, title: str | None = None) -> Table:
    """MetaSchedule's tuning statistics: task, FLOP, weight, GFLOP/s, latency, weighted latency, trials."""
    table = Table(title=title)
    for col in ("ID", "task", "FLOP", "weight", "GFLOP/s", "latency", "weighted latency", "trials", "done"):
        table.add_column(col, justify="left" if col in ("task", "done") else "right")
    failed = mt.scheduler.failed
    for i, (t, w) in enumerate(zip(mt.states, mt.weights, strict=True)):
        flop = t.inst.flop_count()
        found = t.best_cost < float("inf")
        trials = f"{t.trials}" + (f" (+{t.previous})" if t.previous else "")
        view = _view(t, w)
        done = "failed" if failed(view) else ""
        table.add_row(
            str(i), t.inst.name, f"{flop:.3g}", f"{w:g}", f"{t.best_gflops:.1f}" if found else "-",
            _fmt_s(t.best_cost), _fmt_s(w * t.best_cost) if found else "-", trials, done,
        )  # fmt: skip
    total, missing = mt.latency()
    table.caption = (
        f"trials {sum(t.trials for t in mt.states)} this run (+{mt.reuse.records} logged); estimated "
        f"model latency {_fmt_s(total)}" + (f", {missing} task(s) without a result yet" if missing else "")
    )
    return table


def _view(task: TaskState, weight: float) -> Any:
    from .search.task_scheduler import TaskProgress

    return TaskProgress(task.best_cost, task.trials, weight=weight, rounds=task.rounds)


class ModelProgress:
    """Live progress of a model's tuning: trials of the budget, the estimated model latency, the task table.

    On a terminal the table is redrawn after every batch; otherwise each batch prints one line. A farm
    tunes the model for several targets at once (issue 15): one bar and one table per target, each
    labelled with it.
    """

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.mts: list[Any] = []
        self._bars: dict[int, Any] = {}  # id(model tuner) -> its bar
        self._owner: dict[int, Any] = {}  # id(task state) -> its model tuner
        self.progress = _ProgressWithTable(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("model {task.fields[latency]}"), TimeRemainingColumn(),
            console=self.console, transient=False,
            table=self._tables if self.console.is_terminal else None,
        )  # fmt: skip

    @property
    def mt(self) -> Any:
        """The model tuner (the first, with several targets)."""
        return self.mts[0] if self.mts else None

    def __enter__(self) -> ModelProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.progress.stop()

    def _tables(self) -> Any:
        if not self.mts:
            return None
        if len(self.mts) == 1:
            return model_task_table(self.mts[0])
        from rich.console import Group

        return Group(*(model_task_table(mt, str(mt.tuner.target)) for mt in self.mts))

    def attach(self, mt: Any) -> None:
        self.mts.append(mt)
        self._owner.update((id(task), mt) for task in mt.states)
        chip, tuner, tg = mt.tuner.chip, mt.tuner, mt.task_graph
        self.console.print(
            f"model [bold]{tg.graph.name}[/]: {len(tg.tasks)} tasks from {len(tg.calls)} fused groups; "
            f"target [bold]{tuner.target}[/] ({chip.name}, {chip.cores} cores), log {tuner.log_path}, "
            f"strategy {tuner.options.strategy}"
        )

    def begin(self, budget: int, mt: Any = None, label: str = "trials") -> None:
        """A bar for ``mt`` (the last attached); ``label``: its name (the target, with several)."""
        mt = mt or self.mts[-1]
        self._bars[id(mt)] = self.progress.add_task(label, total=max(budget, 1), latency=self._latency(mt))
        self.progress.start()

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {text}")

    @staticmethod
    def _latency(mt: Any) -> str:
        total, missing = mt.latency()
        return f"{_fmt_s(total)}" + (f" (+{missing} untimed)" if missing else "")

    def report(self, event: str, task: TaskState) -> None:
        mt = self._owner.get(id(task))
        where = f"{mt.tuner.target}: " if mt is not None and len(self.mts) > 1 else ""
        if event == "reference":
            self.note(f"{where}{task.inst.name}: computing the reference...")
            return
        if event == "finalists" and task.finalists is not None and task.finalists.changed:
            self.note(where + task.finalists.describe(task.inst.name))  # a new best: say so
            return
        if event != "batch" or mt is None or id(mt) not in self._bars:
            return
        done = sum(t.trials for t in mt.states)
        self.progress.update(self._bars[id(mt)], completed=done, latency=self._latency(mt))
        if not self.console.is_terminal:
            self.console.print(
                f"{where}trials {done}: {task.inst.name} best {_fmt_s(task.best_cost)}; "
                f"model {self._latency(mt)}",
                highlight=False,
            )


def print_model_summary(mt: Any, race: Any, console: Console | None = None) -> None:
    """The final task table, what was reused and what failed, and the end-to-end race if one was run."""
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    console.print(model_task_table(mt, f"autosched tune: {mt.graph.name} on {mt.tuner.target}"))
    console.print(mt.reuse.describe(len(mt.states)))
    for name in mt.failed():
        console.print(f"[red]{name}: no candidate ran correctly; it keeps its default schedule[/]")
    if untried := mt.untried():
        console.print(f"not tried (too few trials), on the default schedule: {', '.join(untried)}")
    if shares := mt.shares():
        top = ", ".join(f"{name} {share:.0%}" for name, share in shares[:3])
        console.print(f"largest shares of the estimated latency: {top}")
    if race is None:
        return
    line = f"end to end, {race.tuned_tasks} of {race.total_tasks} tasks tuned: "
    line += f"autosched {_fmt_s(race.autosched_s)}"
    if race.onnxruntime_s is not None:
        line += (
            f", onnxruntime {_fmt_s(race.onnxruntime_s)}: {race.speedup:.2f}x (> 1: autosched is faster); "
            f"outputs match onnxruntime's (max error {race.max_rel_err:.1e} of the largest value)"
        )
    else:
        line += " (onnxruntime not installed: not compared)"
    console.print(line)
    console.print(
        "the model compiled with the log's best records and onnxruntime, re-timed in turns in this process "
        "on fresh random inputs (median of each one's runs)"
    )
