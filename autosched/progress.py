"""Live progress and the final summary of a tuning run (rich on a terminal, plain lines otherwise)."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from .tune import TaskState


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
    """Trials done of N, best latency and GFLOP/s, failures by kind, ETA, per workload."""

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

    def __enter__(self) -> TuneProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def stop(self) -> None:
        self.progress.stop()

    def header(self, tuner: Any) -> None:
        chip = tuner.chip
        self.console.print(
            f"target [bold]{tuner.target}[/] ({chip.name}, {chip.cores} cores, "
            f"{chip.vector_bits}-bit vectors), log {tuner.log_path}, strategy {tuner.options.strategy}"
        )

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {text}")

    def report(self, event: str, task: TaskState) -> None:
        if event == "reference":  # a large workload's reference takes seconds: say why nothing moves
            self.note(f"{task.inst.name}: computing the reference...")
            return
        key = id(task)
        if event == "start":
            self.ids[key] = self.progress.add_task(
                task.inst.name, total=max(task.budget, 1), best=self._best(task), failures=_failures(task)
            )
            if task.previous:
                self.note(
                    f"{task.inst.name}: {task.previous} record(s) already in the log will not be re-measured"
                )
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
    for t in tasks:
        if t.best_trace is None:
            console.print(f"[red]{t.inst.name}: no candidate ran correctly[/]")
            continue
        console.print(f"\n[bold]best schedule of {t.inst.name}[/] ({_fmt_s(t.best_cost)}):")
        console.print("s = autosched.create_schedule(outputs)", highlight=False)
        for step in t.best_trace:
            console.print(step.to_code(), highlight=False, markup=False)
