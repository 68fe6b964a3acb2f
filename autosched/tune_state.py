"""What the tuner works with: its options (each refused with the CLI option's name when out of range)
and the state of one workload being tuned. :mod:`autosched.tune` re-exports all three.

Example::

    opts = TuneOptions(trials=64, finalists=4)
    [task] = Tuner([inst], "llvm-cpu", "t.jsonl", opts).run()   # a TaskState each
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .errors import AutoschedError
from .measure.task import MeasureTask
from .search.finalists import Outcome, Standings
from .search.strategy import SearchStrategy
from .te.workload import WorkloadInstance


@dataclass
class TaskState:
    """One workload being tuned: what was measured and the best so far."""

    inst: WorkloadInstance
    measure_task: MeasureTask
    strategy: SearchStrategy
    measured: set[str] = field(default_factory=set)
    trials: int = 0  # measured in this run
    previous: int = 0  # found in the log at the start
    budget: int = 0  # trials to measure in this run
    best_cost: float = float("inf")
    best_trace: Any = None
    best_timing: dict[str, Any] | None = None  # how the best was timed: alignment, the misaligned case
    errors: Counter = field(default_factory=Counter)
    baseline_s: float | None = None
    final_s: float | None = None  # the best kernel re-timed in turns with the baseline, at the end
    baseline_label: str = ""
    history: list[float] = field(default_factory=list)  # best cost after each trial of this run
    rounds: list[float] = field(default_factory=list)  # best cost after each batch (the round scheduler's)
    foreign: int = 0  # records of other chips learnt from (--transfer-from), never counted as results
    standings: Standings = field(default_factory=Standings)  # every distinct schedule, for the finalists
    finalists: Outcome | None = None  # the finalists round at the end of this run, if one was held

    @property
    def best_gflops(self) -> float:
        return self.inst.flop_count() / self.best_cost / 1e9 if self.best_cost < float("inf") else 0.0


class OptionError(AutoschedError):
    """A tuning option out of its range; the message names the option and what it takes."""


@dataclass
class TuneOptions:
    trials: int = 200  # per workload; with resume, records already in the log count
    batch_size: int = 16
    strategy: str = "evolutionary"
    resume: bool = False
    seed: int = 0
    num_threads: int | None = None
    timeout_s: float = 10.0
    repeat: int = 5
    flush_cache: bool = False  # evict the caches before each timed repeat (recorded in each record)
    baseline: bool = True
    early_stopping: bool = False  # stop a task when its strategy says it has converged
    default_first: bool = True  # measure the default schedule (what runs untuned) before the search's
    # --- logs across chips (issue 6) ---
    transfer_from: tuple[str, ...] = ()  # logs whose other-chip records train the model and seed the search
    transfer_top: int = 16  # the best foreign schedules, re-measured on this target first
    # --- a pretrained cost model (issue 20): a path, "auto" (the shipped one), or None ---
    cost_model: str | None = None  # guides a workload that has no record on this chip yet
    # --- the finalists round (issue 17): the best few timed again over fresh processes; 0: none ---
    finalists: int = 4
    # --- streaming stores (issue 17): an output not read again soon may be stored past the caches ---
    stream_outputs: bool = True  # ModelTuner turns it off: each task's output is the next one's input

    def __post_init__(self) -> None:
        """Refuse values that would make a run do nothing or loop forever, naming the CLI option."""
        lowest = {"--trials": 1, "--batch-size": 1, "repeat": 1, "--threads": 1, "--transfer-top": 0,
                  "--finalists": 0}  # fmt: skip
        values = (self.trials, self.batch_size, self.repeat, self.num_threads, self.transfer_top,
                  self.finalists)  # fmt: skip
        for (option, low), value in zip(lowest.items(), values):
            if value is None and option == "--threads":
                continue  # all cores
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise OptionError(f"{option} must be a whole number >= {low}, got {value!r}")
        if not (isinstance(self.timeout_s, (int, float)) and 0 < self.timeout_s < float("inf")):
            raise OptionError(f"--timeout must be a number of seconds > 0, got {self.timeout_s!r}")
