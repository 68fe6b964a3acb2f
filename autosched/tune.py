"""The tuning loop: propose candidates, measure them safely, log every result, keep the best.

Every measured batch is appended to the log (and flushed) before the next one starts, so an
interrupted run loses at most the batch in flight, and ``resume`` continues from the log without
measuring any schedule twice.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import AutoschedError
from .hai.chip_facts import measured_info
from .hai.registry import get_adapter
from .hai.timing import TimingPolicy, time_calls
from .measure.result import FAILED_COST, MeasureResult
from .measure.task import MeasureTask
from .records.log import append_records, ensure_appendable, load_records, standing, trace_key
from .records.record import TuningRecord, fingerprint_of, make_record
from .search.finalists import Entry
from .search.strategy import Candidate, SearchStrategy
from .search_space.sketch import SketchPolicy
from .target import Target, parse_target
from .te.workload import WorkloadInstance
from .tune_state import OptionError as OptionError  # the options and a task's state, named here too
from .tune_state import TaskState as TaskState
from .tune_state import TuneOptions as TuneOptions

Reporter = Callable[[str, TaskState], None]  # event ("start" | "batch" | "done"), task


def make_strategy(
    name: str, policy: SketchPolicy, seed: int, target: Target, model: Any = None
) -> SearchStrategy:
    """``model``: a cost model shared by the evolutionary searches of several tasks (one is made if None)."""
    if name == "random":
        from .search.random_search import RandomSearch

        return RandomSearch(policy, seed)
    if name == "evolutionary":
        from .search.evolutionary import EvolutionarySearch

        return EvolutionarySearch(policy, seed=seed, target=target, model=model)
    raise ValueError(f"unknown search strategy {name!r}; expected 'evolutionary' or 'random'")


def time_baseline(inst: WorkloadInstance, task: MeasureTask, repeat: int = 5) -> tuple[float | None, str]:
    """Median seconds of the workload's numpy implementation, or None when it has none."""
    fn = getattr(_workload_of(inst), "baseline", None)
    if fn is None:
        return None, ""
    times = time_calls(lambda: fn(*task.inputs), TimingPolicy(repeat, warmup=1, min_repeat_s=0.0))
    return statistics.median(times), "numpy"


def alignment_line(task: TaskState, host: bool) -> str | None:
    """The summary's line on the best kernel's buffers: the alignment it was timed on and, where the
    runner checked it, its time misaligned (issue 17). None without a best, or off the host (``host``:
    the target's kernels run in this machine's memory, where numpy's placement matters)."""
    if task.best_trace is None or not host:
        return None
    from .records.alignment import alignment_of

    return f"{task.inst.name}: best {alignment_of(task.best_timing).describe(task.best_cost)}"


def _workload_of(inst: WorkloadInstance) -> Any:
    from .te.workload import REGISTRY

    return REGISTRY.get(inst.name)


class Tuner:
    def __init__(
        self,
        instances: Sequence[WorkloadInstance],
        target: str | Target = "llvm-cpu",
        log_path: str | Path = "tuning_logs/autosched.jsonl",
        options: TuneOptions | None = None,
        measurer: Any = None,
        reporter: Reporter | None = None,
    ):
        self.options = options or TuneOptions()
        self.log_path = Path(log_path)
        ensure_appendable(self.log_path)  # an unwritable log is found now, not after the first batch
        self.target = parse_target(target)
        self.adapter = get_adapter(self.target)
        # Farms (issue 15): records carry the chip of the workers that time this target, which this
        # machine need not have; without a farm, this machine's measured peak and bandwidth (cached).
        farm_chip = getattr(measurer, "chip_facts", None)
        self.chip = farm_chip(self.target) if farm_chip is not None else measured_info(self.adapter)
        self.fingerprint = fingerprint_of(self.target, self.chip)
        self.reporter = reporter or (lambda event, task: None)
        self._own_measurer = measurer is None
        self.measurer = measurer or self._local_measurer()
        cores = self.options.num_threads or self.chip.cores
        lanes = max(4, self.chip.vector_bits // 32)
        self.model = self._shared_model()
        self._pretrained: Any = None  # --cost-model, loaded once (False: none shipped)
        self._refused = ""  # why the shipped model was not used (another feature set)
        self.tasks = [self._task(inst, cores, lanes) for inst in instances]

    def _local_measurer(self) -> Any:
        if not self.adapter.spec.can_run:  # its launch does nothing: every candidate would be "wrong"
            raise OptionError(
                f"target {self.target} compiles only ({self.adapter.spec.description}); tune on a target "
                "that runs kernels, or check it with python -m autosched.hai.conformance"
            )
        # Every target the same way: builders lower (and link, or render) candidates in worker processes;
        # the runner's worker loads or compiles each with the adapter, checks it and times it.
        from .measure.builder import LocalBuilder
        from .measure.measure import LocalMeasurer
        from .measure.runner import LocalRunner

        o = self.options
        builder = LocalBuilder(n_workers=max(1, os.cpu_count() or 1))
        runner = LocalRunner(
            timeout_s=o.timeout_s, repeat=o.repeat, num_threads=o.num_threads, flush_cache=o.flush_cache
        )
        return LocalMeasurer(builder, runner)

    def _task(self, inst: WorkloadInstance, cores: int, lanes: int) -> TaskState:
        stream = self.options.stream_outputs
        gpu_style = self.adapter.spec.style == "gpu"  # with a CPU device (PoCL): CPU rules, no flash nests
        policy: Any = SketchPolicy(list(inst.outputs), cores=cores, lanes=lanes, stream_outputs=stream,
                                   flash=not gpu_style)  # fmt: skip
        # --- GPU-style targets (issue 6): blocks, threads and shared memory instead of cores and lanes ---
        # (an OpenCL CPU device, PoCL, gets the CPU rules: codegen runs their parallel loop as work-groups,
        # and a matmul tuned for the CPU ran 3x faster there than the best of 64 GPU-style trials)
        if gpu_style and self.chip.kind != "cpu":
            from .search_space.gpu_sketch import GPUSketchPolicy

            shared = self.chip.shared_mem_bytes or 48 * 1024
            policy = GPUSketchPolicy(list(inst.outputs), self.chip.max_threads_per_block, shared)
        # --- end GPU-style targets ---
        strategy = make_strategy(self.options.strategy, policy, self.options.seed, self.target, self.model)
        if self.options.default_first:
            strategy = self._default_first(inst, strategy)
        task = TaskState(inst, None, strategy)  # type: ignore[arg-type]  # its MeasureTask comes next
        # A large workload's reference takes seconds: the reporter says so before it starts (issue 19).
        task.measure_task = MeasureTask.create(
            inst.name, inst.tensors, str(self.target), flops=inst.flop_count(),
            numpy_fn=getattr(_workload_of(inst), "baseline", None),
            on_reference=lambda _text: self.reporter("reference", task),
        )  # fmt: skip
        return task

    def _default_first(self, inst: WorkloadInstance, strategy: Any) -> Any:
        """``strategy`` proposing first the default schedule, as the op library, ``autosched build``
        and a compiled model run it untuned, for all the chip's cores (so a tuned log is never slower
        than no log)."""
        from .search.default_first import DefaultFirst
        from .search_space.default import default_candidate

        try:
            trace, decisions = default_candidate(list(inst.outputs), self.adapter, self.chip.cores)
        except AutoschedError:  # the untuned build fails on it too; the search may still find one
            return strategy
        return DefaultFirst(strategy, trace, decisions)

    # Log ------------------------------------------------------------------------------------------
    def load_previous(self, task: TaskState) -> list[str]:
        """Fold in the records of this workload and chip already in the log; returns problems."""
        if not self.log_path.exists():
            notes = self.load_transfer(task) if self.options.transfer_from else []  # issue 6
            return notes + self.load_cost_model(task)  # issue 20
        res = load_records(self.log_path, target_fingerprint=self.fingerprint, workload=task.inst)
        traces, costs = [], []
        for rec in res.records:
            task.measured.add(trace_key(rec.trace))
            task.standings.note_record(rec)
            if rec.retimed is None:  # the search learns from search timings only
                traces.append(rec.trace)
                costs.append(rec.mean_cost if rec.ok else FAILED_COST)
        self._take_best(task)
        task.previous = len(task.measured)  # schedules, not records: a finalists round's are no trials
        task.strategy.seed(traces, costs)
        notes = [str(p) for p in res.problems]
        transfer_paths = {Path(p).resolve() for p in self.options.transfer_from}
        if res.foreign and self.log_path.resolve() not in transfer_paths:
            notes.append(f"{res.foreign} record(s) of {task.inst.name} for other chips were not used")
        if self.options.transfer_from:
            notes += self.load_transfer(task)
        return notes + self.load_cost_model(task)  # issue 20

    # --- logs across chips (issue 6): --transfer-from ------------------------------------------------
    def load_transfer(self, task: TaskState) -> list[str]:
        """Fold in ``options.transfer_from``: this chip's records like a resumed log, other chips'
        records through the strategy's ``seed_foreign`` (model training, schedules re-measured first).
        The first note says how many records from which chips were used; called by load_previous.
        """
        from .search.transfer import load_transfer

        o = self.options
        ts = load_transfer(o.transfer_from, workload_key=task.inst.key, fingerprint=self.fingerprint,
                           workload=task.inst)  # fmt: skip
        notes = [str(p) for p in ts.problems]
        traces, costs = [], []
        for rec in standing(ts.same_chip):
            if trace_key(rec.trace) in task.measured:
                continue  # already read from the log
            task.measured.add(trace_key(rec.trace))
            task.standings.note_record(rec)
            traces.append(rec.trace)
            costs.append(rec.mean_cost if rec.ok else FAILED_COST)
        self._take_best(task)
        task.previous += len(traces)
        if traces:
            task.strategy.seed(traces, costs)
        queued = 0
        seed_foreign = getattr(task.strategy, "seed_foreign", None)
        if ts.foreign and seed_foreign is None:
            notes.append(f"transfer: the {o.strategy} strategy cannot learn from other chips; "
                         f"{len(ts.foreign)} record(s) not used")  # fmt: skip
        elif ts.foreign and callable(seed_foreign):
            # issue 20: a prior weighted by chip similarity, overridden by this chip's results; a few
            # foreign best schedules first, more only while they rank well here (then dismissed)
            from .search.transfer import attach_foreign

            # with no record of this chip, the pretrained model guides the search the source's prior
            # overrides: it proposes while the probes wait, and stays if the source is dismissed
            pretrained, model_notes = (None, []) if task.previous else self._pretrained_model(task)
            guide, queued = attach_foreign(task.strategy, ts.foreign, self.chip, o.transfer_top,
                                           pretrained=pretrained, fingerprint=self.fingerprint)  # fmt: skip
            task.foreign = len(ts.foreign)
            notes.append(f"transfer: {guide.describe()}; up to {o.transfer_top} foreign best schedule(s) "
                         f"measured: the best {queued} after this chip's default, to judge the source by "
                         "how they rank here, then a few a batch while they rank well; a batch that "
                         "ranks badly dismisses the source")  # fmt: skip
            notes += model_notes
        return [ts.describe(task.inst.name, self.fingerprint, queued), *notes]

    # --- a pretrained cost model (issue 20): --cost-model ---------------------------------------------
    def load_cost_model(self, task: TaskState) -> list[str]:
        """Guide a task with no record on this chip (none in the log, none transferred) by
        ``options.cost_model``; the note says which model, or why none is used."""
        if task.previous or task.foreign:
            return []  # this chip's records rule; with foreign ones, load_transfer attached the model
        pretrained, notes = self._pretrained_model(task)
        if pretrained is not None:
            from .search.transfer import attach_pretrained

            attach_pretrained(task.strategy, pretrained, self.fingerprint)
        return notes

    def _pretrained_model(self, task: TaskState) -> tuple[Any, list[str]]:
        """``options.cost_model`` loaded (once) for ``task``, or None, and the note that says which."""
        spec = self.options.cost_model
        if spec is None or spec == "none":
            return None, []
        if not hasattr(task.strategy, "model"):  # the default needs no word; a model the user named does
            if spec == "auto":
                return None, []
            why = f"the {self.options.strategy} strategy uses no cost model"
            return None, [f"cost model: {why}; {spec} not used"]
        from .cost_model.pretrained import CostModelError, load_cost_model

        if self._pretrained is None:
            try:
                self._pretrained = load_cost_model(spec) or False
            except CostModelError as e:
                if spec != "auto":
                    raise  # the user's own model: refused loudly
                self._refused, self._pretrained = str(e), False
        cold = f"{task.inst.name} starts cold"
        if self._refused:
            return None, [f"cost model: shipped model not used ({self._refused}); {cold}"]
        if self._pretrained is False:
            return None, [f"cost model: no shipped pretrained model in this install; {cold}"]
        return self._pretrained, [f"cost model: {task.inst.name} has no log on {self.fingerprint}: guided by "
                                  f"pretrained {self._pretrained.describe()}"]  # fmt: skip

    # Loop -----------------------------------------------------------------------------------------
    def run(self) -> list[TaskState]:
        try:
            for task in self.tasks:
                self.tune_task(task)
        finally:
            if self._own_measurer:
                self.measurer.close()
        return self.tasks

    def tune_task(self, task: TaskState) -> None:
        self._begin(task)
        while task.trials < task.budget and self._step(task, task.budget - task.trials):
            pass
        self._finalists(task)
        self.reporter("done", task)

    def _begin(self, task: TaskState) -> None:
        o = self.options
        if o.baseline:
            task.baseline_s, task.baseline_label = time_baseline(task.inst, task.measure_task)
        task.budget = max(0, o.trials - (task.previous if o.resume else 0))
        self.reporter("start", task)

    def _step(self, task: TaskState, limit: int) -> bool:
        """Measure one batch of at most ``limit``; False when the task can make no more progress."""
        if self.options.early_stopping and getattr(task.strategy, "converged", False):
            return False
        candidates = task.strategy.propose(min(self.options.batch_size, limit), task.measured)
        if not candidates:
            return False  # the space is exhausted
        results = self.measurer.measure(task.measure_task, [c.trace for c in candidates])
        self._record(task, candidates, results)
        task.rounds.append(task.best_cost)
        self.reporter("batch", task)
        return True

    # Task scheduler (issue 4) ---------------------------------------------------------------------
    def _shared_model(self) -> Any:
        """One cost model for every task of this run, so what one workload teaches helps the others."""
        if self.options.strategy != "evolutionary":
            return None
        from .cost_model.xgb import XGBModel

        return XGBModel(seed=self.options.seed)

    def run_scheduled(
        self, scheduler: Any = None, budget: int | None = None, weights: Sequence[float] | None = None
    ) -> list[TaskState]:
        """Tune all tasks together: each batch goes to the task where it should cut the summed latency
        most (:class:`~autosched.search.task_scheduler.GradientTaskScheduler` unless ``scheduler``).
        The total budget is ``budget``, or the sum of the per-task budgets; a task may get more or fewer
        trials than its share. ``weights``: how often each task runs (a model's tasks, issue 12).
        """
        from .search.task_scheduler import GradientTaskScheduler, TaskProgress

        sched = scheduler or GradientTaskScheduler(seed=self.options.seed)
        weights = list(weights) if weights is not None else [1.0] * len(self.tasks)
        try:
            for task in self.tasks:
                self._begin(task)
            left = sum(t.budget for t in self.tasks) if budget is None else budget
            done = [t.budget == 0 for t in self.tasks]
            while left > 0:
                views = [
                    TaskProgress(t.best_cost, t.trials, t.history, float(t.inst.flop_count()), t.inst.name,
                                 weight=w, done=d, rounds=t.rounds)
                    for t, d, w in zip(self.tasks, done, weights, strict=True)
                ]  # fmt: skip
                i = sched.next_task(views)
                if i is None:
                    break
                task = self.tasks[i]
                before = task.trials
                limit = left
                unseen = sum(1 for t, d in zip(self.tasks, done, strict=True) if not d and not t.rounds)
                if not task.rounds and unseen:
                    # The first pass leaves each task still unseen an equal batch: with fewer trials than
                    # tasks x batch size, every task still has its default schedule and a few candidates
                    # measured, rather than the last ones nothing (ResNet-18 at 200 trials: 5 of 18 tasks).
                    limit = min(left, max(1, left // unseen))
                if not self._step(task, limit):
                    done[i] = True
                left -= task.trials - before
            for task in self.tasks:
                self._finalists(task)
                self.reporter("done", task)
        finally:
            if self._own_measurer:
                self.measurer.close()
        return self.tasks

    def _record(self, task: TaskState, candidates: list[Candidate], results: list[MeasureResult]) -> None:
        records: list[TuningRecord] = []
        costs: list[float] = []
        for cand, res in zip(candidates, results):
            task.measured.add(trace_key(cand.trace))
            # with decisions (issue 6): other chips' searches can seed populations from this log
            rec = make_record(task.inst, self.target, self.chip, cand.trace, res.costs, res.error,
                              res.error_msg, decisions=cand.decisions, check=res.check,
                              timing=res.timing)  # fmt: skip
            records.append(rec)
            if res.ok:
                cost = float(np.median(res.costs))
                if cost < task.best_cost:
                    task.best_cost, task.best_trace, task.best_timing = cost, cand.trace, res.timing
            else:
                cost = FAILED_COST
                task.errors[res.error] += 1
            costs.append(cost)
            task.standings.note(cand.trace, cost, cand.decisions, res.timing)
            task.trials += 1
            task.history.append(task.best_cost)
        append_records(self.log_path, records)  # one flush per batch: a kill loses at most this batch
        task.strategy.update(candidates, costs)

    @staticmethod
    def _take_best(task: TaskState) -> None:
        """The best so far from the standings: a re-timed schedule if any, as ``build`` picks."""
        best = task.standings.best()
        if best is not None and (best.retimed is not None or best.cost < task.best_cost):
            task.best_cost, task.best_trace, task.best_timing = best.cost, best.trace, best.timing

    # --- the finalists round (issue 17): search/finalists.py, measure/retime.py -----------------------
    def _finalists(self, task: TaskState) -> None:
        """Time the task's ``options.finalists`` best schedules again in turns, over fresh processes,
        log those times as ``retimed`` records, and take the best from them (:mod:`.search.finalists`)."""
        from .measure.retime import FINALIST_PASSES, FINALIST_ROUNDS, retime
        from .search.finalists import keep_misaligned, run_finalists

        def time_again(entries: list[Entry]) -> list[MeasureResult]:
            traces = [e.trace for e in entries]
            again = retime(self.measurer, task.measure_task, traces, FINALIST_ROUNDS, FINALIST_PASSES)
            results = [keep_misaligned(r, e.timing) for e, r in zip(entries, again, strict=True)]
            mark = {"rounds": FINALIST_ROUNDS, "finalists": len(entries), "passes": FINALIST_PASSES}
            append_records(self.log_path, [
                make_record(task.inst, self.target, self.chip, e.trace, r.costs, r.error, r.error_msg,
                            decisions=e.decisions, check=r.check, timing=r.timing, retimed=mark)
                for e, r in zip(entries, results, strict=True)
            ])  # fmt: skip
            return results

        if self.adapter.spec.simulated:
            return  # a modeled time is the same every time: nothing to re-time
        untuned = getattr(task.strategy, "untuned", None)  # DefaultFirst's: the default schedule
        also = [untuned] if isinstance(untuned, tuple) and untuned else []
        outcome = run_finalists(task.standings, self.options.finalists, time_again, fresh=task.trials > 0,
                                also=also)  # fmt: skip
        if outcome is None:
            return
        task.finalists = outcome
        best = outcome.after
        if best is None:
            task.best_cost, task.best_trace, task.best_timing = float("inf"), None, None
        else:
            task.best_cost, task.best_trace, task.best_timing = best.cost, best.trace, best.timing
        self.reporter("finalists", task)
