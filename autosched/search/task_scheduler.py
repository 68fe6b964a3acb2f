"""Spreading trials over the tasks of an op file where they cut total latency most (Ansor's scheduler).

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
