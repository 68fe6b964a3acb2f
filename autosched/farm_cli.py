"""``autosched tune ... --cluster`` and ``autosched worker``: tuning on a measurement farm (issue 15).

``tune_on_farm`` tunes the same workloads for every target asked for (``--target llvm-cpu,opencl``, or
``all``: every target the farm's workers own) in one run: one Tuner per target, each with its own cost
model, all appending to one log, each measuring on its own chip's workers at the same time as the others,
and each learning from the others' batches as they come, and on ``--resume`` from their logged records
(transfer, as with ``--transfer-from``, between targets of one style). ``tune_model_on_farm`` does the
same for a model: one ModelTuner per target (``autosched tune model.onnx --cluster ...``).
``autosched worker`` starts a Dask worker (under a nanny, which restarts it if it dies) that owns the
given targets: its resources name their chips, and its plugin reports their facts to the tuner.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import AutoschedError

if TYPE_CHECKING:  # the tuner is imported when a run starts: `autosched --help` stays quick
    from .graph.tune_model import ModelTuner
    from .tune import TaskState, TuneOptions, Tuner

_LOG_LOCK = threading.Lock()  # the targets' tuners share one log: one batch written at a time
INTERRUPTED = "\ninterrupted: every finished batch is in {log}; continue with --resume"
_T = TypeVar("_T")
SHARE_TOP = 2  # of each batch another chip measured, the best schedules measured here too (transfer)


def _farm_tuner(*args: Any, **kwargs: Any) -> Tuner:
    """A Tuner for one target of several tuned at once in threads: its batches go to the shared log
    under a lock, and to its peers (the other targets' tuners), whose searches learn from them as from
    ``--transfer-from`` logs (model training, the best schedules measured anew), in their own thread."""
    from .records.record import make_record
    from .tune import Tuner

    class FarmTuner(Tuner):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.peers: list[FarmTuner] = []
            self._inbox: list[Any] = []
            self._inbox_lock = threading.Lock()
            self.stop = threading.Event()  # set when the run ends early (another target failed, Ctrl-C)

        def _record(self, task: TaskState, candidates: Any, results: Any) -> None:
            with _LOG_LOCK:
                super()._record(task, candidates, results)
            recs = [make_record(task.inst, self.target, self.chip, c.trace, r.costs, r.error, r.error_msg,
                                decisions=c.decisions) for c, r in zip(candidates, results)]  # fmt: skip
            for peer in self.peers:
                with peer._inbox_lock:
                    peer._inbox.extend(recs)

        def _step(self, task: TaskState, limit: int) -> bool:
            if self.stop.is_set():
                return False
            with self._inbox_lock:
                mine = [r for r in self._inbox if r.workload_key == task.inst.key]
                self._inbox = [r for r in self._inbox if r.workload_key != task.inst.key]
            seed_foreign = getattr(task.strategy, "seed_foreign", None)
            if mine and seed_foreign is not None:
                seed_foreign(mine, SHARE_TOP)
                task.foreign += len(mine)
            return bool(super()._step(task, limit))

    return FarmTuner(*args, **kwargs)


def requested_targets(text: str) -> list[str] | None:
    """``--target`` as a list (``a,b``); None for ``all`` (what the farm offers). A comma starts a new
    target only before a target kind: ``llvm-cpu -mattr=+avx2,+fma,opencl`` is two targets."""
    from .hai.registry import resolve_kind

    if text.strip() == "all":
        return None
    targets: list[str] = []
    for piece in text.split(","):
        words = piece.split()
        if targets and (not words or resolve_kind(words[0]) is None):
            targets[-1] += "," + piece  # an option's list (-mattr=+a,+b), not a new target
        else:
            targets.append(piece.strip())
    return [t.strip() for t in targets if t.strip()]


def local_targets() -> list[str]:
    """The targets this machine runs kernels on (``--cluster local:N --target all``)."""
    from .hai.registry import get_adapter, kinds

    found = []
    for kind in kinds():
        try:
            adapter = get_adapter(kind)
            adapter.info()
        except Exception:  # a missing driver or package: not offered
            continue
        if adapter.spec.can_run and not adapter.spec.simulated:
            found.append(kind)
    return found


def tune_on_farm(
    farm: Any,
    instances: Sequence[Any],
    targets: Sequence[str],
    log: str | Path,
    options: TuneOptions,
    *,
    backend: Any = None,
    reporter: Any = None,
    scheduled: bool = True,
    on_tuner: Any = None,
) -> dict[str, tuple[Tuner, list[TaskState]]]:
    """Tune ``instances`` for each target on ``farm``, all at once; returns target -> (tuner, tasks).

    ``on_tuner(tuner)`` is called for each tuner before it runs (headers, notes of resumed logs).
    A FarmLostError from any target stops the run (the finished batches of all are in the log).
    """
    backend = backend or _backend(options)
    tuners = [_farm_tuner(instances, target, log, options, measurer=farm.measurer(target, backend),
                          reporter=reporter) for target in targets]  # fmt: skip
    _link_peers(tuners)
    for tuner in tuners:
        if on_tuner is not None:
            on_tuner(tuner)
        else:
            for task in tuner.tasks:
                tuner.load_previous(task)
    _learn_from_logged_peers(tuners, log)

    def run(tuner: Tuner) -> list[TaskState]:
        return tuner.run_scheduled() if scheduled and len(tuner.tasks) > 1 else tuner.run()

    results = _run_together(tuners, [functools.partial(run, t) for t in tuners])
    return {str(t.target): (t, r) for t, r in zip(tuners, results)}


def tune_model_on_farm(
    farm: Any,
    model: Any,
    targets: Sequence[str],
    log: str | Path,
    options: TuneOptions,
    *,
    backend: Any = None,
    reporter: Any = None,
    input_shapes: Any = None,
    on_model: Any = None,
) -> dict[str, ModelTuner]:
    """Tune a model (a Graph, an ``.onnx`` path or a ModelProto) for each target on ``farm``, all at once,
    as :func:`tune_on_farm` tunes operators: one ModelTuner per target, each spending ``--trials`` over
    the model's tasks on its own chip's workers, learning from the other chips' batches, one log.

    ``on_model(model_tuner)`` is called for each before any runs; it must call ``load_previous`` (the
    default does). Returns target -> ModelTuner, run.
    """
    from .graph.compiled import as_graph
    from .graph.tune_model import ModelTuner

    backend = backend or _backend(options)
    graph = as_graph(model, input_shapes)  # parsed once: every target tunes the same tasks
    mts = [ModelTuner(graph, target, log, options, measurer=farm.measurer(target, backend), reporter=reporter,
                      tuner_factory=_farm_tuner) for target in targets]  # fmt: skip
    _link_peers([mt.tuner for mt in mts])
    for mt in mts:
        if on_model is not None:
            on_model(mt)
        else:
            mt.load_previous()
    _learn_from_logged_peers([mt.tuner for mt in mts], log)
    _run_together([mt.tuner for mt in mts], [mt.run for mt in mts])
    return {str(mt.tuner.target): mt for mt in mts}


def _backend(options: TuneOptions) -> Any:
    from .measure.farm_worker import LocalBackend

    o = options
    return LocalBackend(o.timeout_s, o.repeat, o.num_threads, o.flush_cache)


def _link_peers(tuners: Sequence[Tuner]) -> None:
    """Each tuner's peers: the others of its style (a GPU's thread bindings mean nothing on a CPU), and
    measured with measured, modeled with modeled (a simulated chip never teaches a real one)."""
    from .hai.registry import style_of
    from .target import is_simulated

    def kind(t: Tuner) -> tuple[str, bool]:
        return style_of(t.target), is_simulated(t.target)

    for tuner in tuners:
        peers = [t for t in tuners if t is not tuner and kind(t) == kind(tuner)]
        tuner.peers = peers  # type: ignore[attr-defined]


def _learn_from_logged_peers(tuners: Sequence[Tuner], log: str | Path) -> None:
    """A resumed run of several targets: the peers' logged records teach each one too."""
    if len(tuners) < 2 or not Path(log).exists():
        return
    from .records.log import load_records

    logged = load_records(log).records
    for tuner in tuners:
        fingerprints = {p.fingerprint for p in tuner.peers}  # type: ignore[attr-defined]
        tuner._inbox.extend(r for r in logged if r.fingerprint in fingerprints)  # type: ignore[attr-defined]


def _run_together(tuners: Sequence[Tuner], runs: Sequence[Callable[[], Any]]) -> list[Any]:
    """``runs[i]()`` drives ``tuners[i]``; all at once in threads, results in order. The first failure
    (FarmLostError, Ctrl-C) stops the others after their batch in flight, and is raised."""
    if len(runs) == 1:
        return [runs[0]()]
    with ThreadPoolExecutor(len(runs), thread_name_prefix="autosched-farm") as pool:
        futures = [pool.submit(run) for run in runs]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)  # one target's failure ends the run for all
            for f in futures:
                if f.done() and f.exception() is not None:
                    raise f.exception()  # type: ignore[misc]
            return [f.result() for f in futures]
        except BaseException:  # Ctrl-C, or the farm lost under one target: the others stop after their batch
            for t in tuners:
                t.stop.set()  # type: ignore[attr-defined]
            raise


def cmd_tune_farm(ns: argparse.Namespace, instances: list[Any], log: str, options: TuneOptions) -> int:
    """``autosched tune OP --cluster ...``: the farm's summary per target; exit 2 when the farm is lost."""
    from .measure.farm import Farm
    from .progress import TuneProgress, print_summary

    wanted = requested_targets(ns.target)
    if not ns.cluster.startswith("local:"):  # numpy would be timed here, the kernels on other machines
        options = dataclasses.replace(options, baseline=False)
    with TuneProgress(options.trials) as progress:
        owned = (wanted or local_targets()) if ns.cluster.startswith("local:") else []  # local:N workers own
        with Farm.connect(ns.cluster, owned, on_note=progress.note) as farm:
            targets = wanted or farm.targets()
            progress.note(f"tuning on {len(targets)} target(s) of the farm: {', '.join(targets)}")
            if not options.baseline and not ns.cluster.startswith("local:"):
                progress.note("the kernels run on the farm's machines: no race against numpy here")

            def begin(tuner: Tuner) -> None:
                progress.header(tuner)
                for task in tuner.tasks:
                    for note in tuner.load_previous(task):
                        progress.note(note)

            scheduled = ns.task_scheduler == "gradient"
            done = _stopped_cleanly(progress, log, lambda: tune_on_farm(
                farm, instances, targets, log, options, reporter=progress.report, scheduled=scheduled,
                on_tuner=begin))  # fmt: skip
            if done is None:
                return 130
    for tuner, tasks in done.values():
        print_summary(tasks, tuner)
    return 0


def _stopped_cleanly(progress: Any, log: Any, run: Callable[[], _T]) -> _T | None:
    """``run()`` with the progress display stopped first when it ends early: a lost farm is raised again
    naming the log; Ctrl-C prints how to resume and returns None (the command exits 130)."""
    from .measure.farm import FarmLostError

    try:
        return run()
    except FarmLostError as e:
        progress.stop()
        raise FarmLostError(f"{e} (log {log})") from e
    except KeyboardInterrupt:
        progress.stop()
        print(INTERRUPTED.format(log=log), file=sys.stderr)
        return None


def cmd_tune_model_farm(ns: argparse.Namespace, options: TuneOptions) -> int:
    """``autosched tune model.onnx --cluster ...``: each target's model summary; on ``local:N`` also the
    compiled model checked against (and raced with) onnxruntime here, where its kernels ran."""
    from .graph.export import parse_input_shapes
    from .graph.tune_model import report_model
    from .measure.farm import Farm
    from .progress import ModelProgress, print_model_summary

    log = ns.log or f"tuning_logs/{Path(ns.op_file).stem}.jsonl"
    shapes = parse_input_shapes(getattr(ns, "input_shape", None))
    wanted = requested_targets(ns.target)
    local = ns.cluster.startswith("local:")
    if not local:  # numpy would be timed here, the kernels on other machines
        options = dataclasses.replace(options, baseline=False)
    owned = (wanted or local_targets()) if local else []  # what local:N workers own
    with ModelProgress() as progress:
        with Farm.connect(ns.cluster, owned, on_note=progress.note) as farm:
            targets = wanted or farm.targets()
            progress.note(f"tuning the model on {len(targets)} target(s) of the farm: {', '.join(targets)}")

            def begin(mt: ModelTuner) -> None:
                progress.attach(mt)
                for note in mt.load_previous():
                    progress.note(note)
                progress.begin(mt.budget(), mt, label=str(mt.tuner.target) if len(targets) > 1 else "trials")

            done = _stopped_cleanly(progress, log, lambda: tune_model_on_farm(
                farm, ns.op_file, targets, log, options, reporter=progress.report, input_shapes=shapes,
                on_model=begin))  # fmt: skip
            if done is None:
                return 130
    for target, mt in done.items():
        if local:  # the workers were processes of this machine: its kernels run here as they ran there
            report_model(mt, ns.op_file, log)
            continue
        print_model_summary(mt, None)
        print(
            f"{target}: the kernels ran on the farm's machines ({ns.cluster}), so the end-to-end check and "
            f"race against onnxruntime are skipped here; on a machine with that chip, `autosched build "
            f"{ns.op_file} --log {log} --target '{target}' -o DIR` builds the tuned model"
        )
    return 0


# autosched worker ---------------------------------------------------------------------------------


def add_worker_parser(sub: Any) -> None:
    w = sub.add_parser("worker", help="join a measurement farm: a Dask worker that owns the given targets")
    w.add_argument("--scheduler", required=True, metavar="tcp://HOST:8786", help="the Dask scheduler")
    w.add_argument("--target", action="append", required=True,
                   help="a target this worker times, e.g. llvm-cpu or 'llvm-cpu -mcpu=haswell' (repeatable; "
                        "all: every target this machine runs)")  # fmt: skip
    w.add_argument("--name", help="the worker's name in the farm (default: Dask's)")
    w.add_argument("--once", action="store_true", help="exit when the scheduler goes away (default: rejoin)")
    w.add_argument("--wait", action="store_true", help="wait for a scheduler that is not up yet")
    w.set_defaults(func=cmd_worker)


def cmd_worker(ns: argparse.Namespace) -> int:
    """Start a nanny and its worker; runs until the nanny closes (Ctrl-C, or the scheduler says so)."""
    import asyncio

    from .measure.farm import _import_distributed

    distributed = _import_distributed()
    import dask

    from .measure.farm_worker import WORKER_CONFIG, ChipFactsPlugin, chip_facts, chip_resource
    from .target import parse_target

    names = [t for word in ns.target for t in (local_targets() if word == "all" else [word])]
    targets = [str(parse_target(t)) for t in names]
    facts = {t: chip_facts(t) for t in targets}
    resources = {chip_resource(fp): 1 for fp, _ in facts.values()}
    for t, (fp, chip) in facts.items():
        print(f"autosched worker: {t}: {chip.name} ({fp}), resource {chip_resource(fp)}", file=sys.stderr)

    async def serve() -> None:
        async with distributed.Nanny(ns.scheduler, nthreads=1, resources=resources, name=ns.name,
                                     plugins=(ChipFactsPlugin(targets),)) as nanny:  # fmt: skip
            print(f"autosched worker: joined {ns.scheduler}", file=sys.stderr)
            await nanny.finished()

    # A farm outlives its scheduler: when it goes away, wait for it (or a new one) at the same address.
    joined_once = False
    with dask.config.set(WORKER_CONFIG):  # children allowed, no thread caps
        while True:
            try:
                asyncio.run(serve())
                joined_once = True
            except (OSError, TimeoutError, RuntimeError) as e:  # RuntimeError: "Nanny failed to start"
                if not joined_once and not ns.wait:
                    raise AutoschedError(f"--scheduler {ns.scheduler}: cannot join the farm ({e})") from e
            if ns.once:
                return 0
            print(f"autosched worker: no scheduler at {ns.scheduler}; trying again in 2 s (Ctrl-C stops)",
                  file=sys.stderr)  # fmt: skip
            time.sleep(2)
