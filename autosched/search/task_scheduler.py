"""Spreading trials over tasks where they cut total latency most: Ansor's and MetaSchedule's schedulers.

:class:`GradientTaskScheduler` (Ansor's, per trial, for the workloads of an op file) is described
first; :class:`RoundGradientScheduler` (MetaSchedule's, per round, for the tasks of a model) below it.

The objective is ``sum(weight_i * best_cost_i)``. After a warm-up batch per task, each batch goes
to the task with the most negative estimated gradient of that sum per trial:

    grad_i = weight_i * (alpha * backward_i + (1 - alpha) * forward_i)
    backward_i = (g_i(t) - g_i(t - window)) / window           # how fast it improved lately
    forward_i = min(-g_i(t) / t,                               # optimistic: halve it with t more
                    beta * flops_i / max_similar_speed - g_i(t))  # reach what similar tasks reach

``g_i(t)`` is the task's best cost after ``t`` trials; "similar" tasks share a group (the workload
name: conv2d layers of different shapes). With probability ``eps`` the batch goes to a random task.

Example::

    sched = GradientTaskScheduler(seed=0)
    i = sched.next_task([TaskProgress(best_cost=2e-3, trials=64, history=[...]), ...])
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class TaskProgress:
    """What the scheduler knows of a task: ``history`` is the best cost after each trial."""

    best_cost: float
    trials: int
    history: Sequence[float] = field(default_factory=list)
    flops: float = 0.0
    group: str = ""
    weight: float = 1.0
    done: bool = False  # budget spent, space exhausted or converged: never chosen
    rounds: Sequence[float] = field(default_factory=list)  # best cost after each of its batches


class GradientTaskScheduler:
    def __init__(
        self,
        alpha: float = 0.2,
        beta: float = 2.0,
        window: int = 32,
        eps: float = 0.05,
        seed: int = 0,
        failing_trials: int = 64,
    ):
        self.alpha = alpha
        self.beta = beta
        self.window = window
        self.eps = eps
        self.failing_trials = failing_trials  # a task with no valid result after this many waits
        self.rng = random.Random(seed)

    def gradient(self, i: int, tasks: Sequence[TaskProgress]) -> float:
        """Estimated change of the weighted total latency per extra trial of task ``i`` (<= 0)."""
        t = tasks[i]
        g = t.best_cost
        if not math.isfinite(g):
            return -math.inf if t.trials < self.failing_trials else 0.0
        trials = max(1, t.trials)
        h = [x for x in t.history if math.isfinite(x)]
        if len(h) > self.window:
            backward = (h[-1] - h[-1 - self.window]) / self.window
        elif len(h) > 1:
            backward = (h[-1] - h[0]) / (len(h) - 1)
        else:
            backward = -g / trials
        forward = -g / trials
        if t.flops > 0:
            speeds = [
                o.flops / o.best_cost
                for o in tasks
                if o.group == t.group and o.flops > 0 and math.isfinite(o.best_cost) and o.best_cost > 0
            ]
            if speeds:
                forward = min(forward, self.beta * t.flops / max(speeds) - g)
        return t.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def next_task(self, tasks: Sequence[TaskProgress]) -> int | None:
        """The index of the task to give the next batch to; None when every task is done."""
        active = [i for i, t in enumerate(tasks) if not t.done]
        if not active:
            return None
        for i in active:  # warm-up: one batch each, in order
            if tasks[i].trials == 0:
                return i
        if self.rng.random() < self.eps:
            return self.rng.choice(active)
        grads = [(self.gradient(i, tasks), i) for i in active]
        return min(grads)[1]


class RoundGradientScheduler:
    """MetaSchedule's gradient task scheduler (``task_scheduler/gradient_based.cc``), one batch a round.

    After one round-robin pass (each task's first batch, in order), the batch goes to the live task
    with the largest expected cut of the weighted total latency (costs in seconds, ``h`` the task's
    best cost after each of its ``n`` rounds)::

        g = (alpha * (h[n-1-window] - h[n-1]) / window + (1 - alpha) * h[n-1] / n) * weight

    the backward term 0 until the task has ``window + 1`` rounds; ties go to a random live task.
    Two departures, both for tasks without a valid result (MetaSchedule's 1e100 cost): such a task is
    given up after ``failing_rounds`` rounds (it keeps its default schedule; otherwise it would take
    every batch), and a backward window that starts before the first valid result counts as 0.

    Example::

        sched = RoundGradientScheduler(seed=0)
        i = sched.next_task([TaskProgress(2e-3, 64, weight=4, rounds=[3e-3, 2e-3]), ...])
    """

    def __init__(self, alpha: float = 0.2, window: int = 3, seed: int = 0, failing_rounds: int = 3):
        self.alpha = alpha
        self.window = window
        self.failing_rounds = failing_rounds
        self.rng = random.Random(seed)

    def failed(self, t: TaskProgress) -> bool:
        """No valid result after ``failing_rounds`` rounds: never chosen again."""
        return not math.isfinite(t.best_cost) and len(t.rounds) >= self.failing_rounds

    def gradient(self, t: TaskProgress) -> float:
        """Expected cut of the weighted total latency from one more round of ``t`` (inf: no result yet)."""
        h, w = t.rounds, self.window
        n = len(h)
        best = h[-1] if h else t.best_cost
        if not math.isfinite(best):
            return math.inf  # nothing valid yet, and not given up: try it again
        start = h[n - 1 - w] if n >= 1 + w else best
        backward = (start - best) / w if math.isfinite(start) else 0.0
        forward = best / max(1, n)
        return (self.alpha * backward + (1 - self.alpha) * forward) * t.weight

    def next_task(self, tasks: Sequence[TaskProgress]) -> int | None:
        """The index of the task to give the next batch to; None when every task is done or given up."""
        live = [i for i, t in enumerate(tasks) if not t.done and not self.failed(t)]
        if not live:
            return None
        for i in live:  # the round-robin pass
            if not tasks[i].rounds:
                return i
        grads = [self.gradient(tasks[i]) for i in live]
        best = max(grads)
        if best == min(grads):
            return self.rng.choice(live)
        return live[grads.index(best)]
