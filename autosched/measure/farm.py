"""Measurement farms on Dask distributed: many machines and chips behind the local measurer's interface.

A :class:`Farm` is a connection to a Dask scheduler (``tcp://HOST:8786``) or a ``distributed.LocalCluster``
of N worker processes (``local:N``). A :class:`FarmMeasurer` measures the candidates of one target on it:
each candidate's build is a Dask task on any worker, its timing a task pinned with
``resources={chip:<fingerprint>: 1}`` to the workers that own that chip (one timing per worker at a time;
a host lock keeps two workers of one machine off one device). The measurer's chip facts are those the
farm's workers report, so every record names the chip that timed it.

Faults: a candidate in flight on a worker that dies is submitted once more, then recorded as a "crash";
the run goes on with the workers left and says so; when the scheduler goes away (or no worker owns the
chip any more) :class:`FarmLostError` stops the run after the last finished batch, which is in the log,
so ``--resume`` continues. Dask is imported only in this module and :mod:`.farm_worker`'s callers.

Example::

    with Farm.connect("local:2", ["llvm-cpu"]) as farm:
        tuner = Tuner([inst], "llvm-cpu", log, options, measurer=farm.measurer("llvm-cpu"))
        tuner.run()
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import AutoschedError
from ..target import parse_target
from .farm_worker import (
    WORKER_CONFIG,
    ChipFactsPlugin,
    FarmNanny,
    LocalBackend,
    build_task,
    chip_facts,
    chip_resource,
    report_chips,
    run_task,
)
from .farm_worker import measure_task as _measure_task
from .result import MeasureResult
from .task import MeasureTask

POLL_S = 0.5  # how often a waiting batch looks at the farm's workers
NO_WORKER_S = 60.0  # a chip without any worker this long stops the run (its batch is not logged)
MAX_RESENT = 3  # a batch sends its task's arrays again at most this often (each loss is a dead worker)
CHIPS_WAIT_S = 30.0  # how long a new measurer waits for restarted workers to report their chips
START_S = 120.0  # a local farm's workers have this long to start and measure their chips
HELD_TASKS = 4  # tasks whose arrays stay on the workers between batches (the most recently measured)
Note = Callable[[str], None]


class FarmError(AutoschedError):
    """The farm cannot be used: no scheduler at the address, no worker owning a target, Dask missing."""


class FarmLostError(FarmError):
    """The farm went away mid-run: every finished batch is in the log; continue with --resume."""


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError as e:
        raise FarmError(
            f"--cluster needs Dask distributed ({e}); install it with pip install 'autosched[dask]'"
        ) from e
    return distributed


def _stderr_note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


def _fail_at_first_death(dask_scheduler: Any = None) -> None:
    """On the scheduler: a task whose worker dies fails at once (the measurer decides on a second try)."""
    dask_scheduler.allowed_failures = 0


def _hold(task: MeasureTask) -> MeasureTask:
    """A task's data as a Dask result: recomputed from the graph if the worker holding it dies."""
    return task


def _wait_for_chips(client: Any, timeout_s: float) -> None:
    """Until every worker's plugin has measured its chips: a worker that joined as the plugin was
    registered runs its setup after it answers, and a measurer made then would find no chip on it."""
    deadline = time.monotonic() + timeout_s
    while not (reports := client.run(report_chips)) or not all(reports.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers still report no chip facts after {timeout_s:g} s")
        time.sleep(0.1)


class Farm:
    """A Dask client, and the cluster when this process started it (``local:N``)."""

    def __init__(self, client: Any, cluster: Any = None, address: str = "", on_note: Note = _stderr_note):
        self.client, self.cluster, self.address, self.on_note = client, cluster, address, on_note
        self._measurers: list[FarmMeasurer] = []  # closed with the farm: their data leaves the workers

    @staticmethod
    def connect(spec: str, targets: Sequence[str] = ("llvm-cpu",), on_note: Note = _stderr_note) -> Farm:
        """``spec``: ``tcp://HOST:PORT`` (a running scheduler) or ``local:N`` (N local worker processes,
        one thread each, every one owning ``targets``; a worker that dies is restarted by its nanny)."""
        distributed = _import_distributed()
        if spec.startswith("local:"):
            try:
                n = int(spec.split(":", 1)[1])
            except ValueError:
                n = 0
            if n < 1:
                raise FarmError(f"--cluster {spec!r}: expected local:N with N >= 1 worker processes")
            return Farm._local(distributed, n, [str(parse_target(t)) for t in targets], on_note)
        if "://" not in spec:
            raise FarmError(f"--cluster {spec!r}: expected tcp://HOST:PORT (a Dask scheduler) or local:N")
        try:
            client = distributed.Client(spec, timeout=10, set_as_default=False)
        except OSError as e:
            raise FarmError(
                f"--cluster {spec}: no Dask scheduler answers there ({e}); start one with "
                "`dask scheduler` and workers with `autosched worker --scheduler ADDRESS --target T`"
            ) from e
        try:  # as in local:N: a worker's death fails its tasks at once, the measurer re-submits them once
            client.run_on_scheduler(_fail_at_first_death)
        except Exception as e:  # a scheduler that runs no client code: Dask retries them itself first
            on_note(f"farm {spec}: could not set allowed-failures to 0 on the scheduler ({e})")
        return Farm(client, None, spec, on_note)

    @staticmethod
    def _local(distributed: Any, n: int, targets: list[str], on_note: Note) -> Farm:
        import dask

        resources = {chip_resource(chip_facts(t)[0]): 1 for t in targets}
        # A worker that dies fails its tasks at once (allowed-failures 0): the measurer retries them.
        config = {**WORKER_CONFIG, "distributed.scheduler.allowed-failures": 0}
        cluster = client = None
        try:
            with dask.config.set(config):
                cluster = distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, resources=resources,
                    dashboard_address=None, silence_logs=40, worker_class=FarmNanny,
                )  # fmt: skip
                client = distributed.Client(cluster, set_as_default=False)
            client.register_plugin(ChipFactsPlugin(targets))
            client.wait_for_workers(n, timeout=START_S)
            _wait_for_chips(client, START_S)
        except Exception as e:  # the cluster is ours: stop its worker processes before saying why
            for part in (client, cluster):
                try:
                    if part is not None:
                        part.close()
                except Exception:
                    pass  # already half gone: the error below is the news
            raise FarmError(f"local:{n}: could not start the workers for {', '.join(targets)}: "
                            f"{type(e).__name__}: {e}") from e  # fmt: skip
        return Farm(client, cluster, f"local:{n}", on_note)

    # What the farm offers -------------------------------------------------------------------------
    def workers(self) -> dict[str, dict[str, Any]]:
        """Worker address -> its scheduler info (resources among it)."""
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def chips(self) -> dict[str, dict[str, tuple[str, Any]]]:
        """Worker address -> {target: (fingerprint, ChipInfo)} as each worker's plugin measured them."""
        return dict(self.client.run(report_chips))

    def targets(self) -> list[str]:
        """Every target some worker owns, in a stable order (``--target all``)."""
        return sorted({t for owned in self.chips().values() for t in owned})

    def measurer(self, target: str, backend: Any = None) -> FarmMeasurer:
        m = FarmMeasurer(self, target, backend or LocalBackend())
        self._measurers.append(m)
        return m

    def close(self) -> None:
        for m in self._measurers:
            m.close()
        self._measurers.clear()
        lost = self.client.status != "running"
        try:
            self.client.close(timeout=1 if lost else 5)
        except Exception:
            pass  # the scheduler is gone already
        if self.cluster is not None:
            if lost:  # the scheduler is gone: its nannies would wait for it, stop their workers now
                self._kill_local_workers()
            try:
                self.cluster.close(timeout=2 if lost else 10)
            except Exception:
                pass

    def _kill_local_workers(self) -> None:
        for nanny in list(getattr(self.cluster, "workers", {}).values()):
            proc = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
            if isinstance(proc, int):
                try:
                    os.kill(proc, signal.SIGKILL)
                except OSError:
                    pass  # it ended already

    def __enter__(self) -> Farm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FarmMeasurer:
    """Measures one target's candidates on a farm (the interface of LocalMeasurer and FakeMeasurer)."""

    def __init__(self, farm: Farm, target: str, backend: Any):
        self.farm, self.client, self.backend = farm, farm.client, backend
        self.target = str(parse_target(target))
        self.fingerprint, self.chip, owners = self._find_chip()
        self.resource = chip_resource(self.fingerprint)
        self.separate_build = bool(backend.separate_build(self.target))
        workers = self.farm.workers()
        if not any(w.get("resources", {}).get(self.resource) for w in workers.values()):
            raise FarmError(
                f"workers of {farm.address} report {self.target} ({self.fingerprint}) but none declares the "
                f"resource {self.resource!r} that pins its timings; start them with autosched worker"
            )
        self._known = set(workers)
        self._refs: dict[int, tuple[MeasureTask, Any]] = {}
        self._no_worker_since: float | None = None
        self.resubmitted = 0  # candidates measured again after their worker died
        farm.on_note(f"farm {farm.address}: {len(owners)} worker(s) time {self.target} ({self.fingerprint}); "
                     f"{len(workers)} build")  # fmt: skip

    def _find_chip(self) -> tuple[str, Any, list[str]]:
        """The chip of this target that most workers own (others are named: tune them separately)."""
        groups: dict[str, tuple[Any, list[str]]] = {}
        deadline = time.monotonic() + CHIPS_WAIT_S
        while True:
            chips = self.farm.chips()
            for addr, owned in chips.items():
                if self.target in owned:
                    fp, chip = owned[self.target]
                    groups.setdefault(fp, (chip, []))[1].append(addr)
            # A worker restarted after a death reports nothing until its plugin has measured again
            # (and while every worker restarts, none answers at all).
            if groups or (chips and all(chips.values())) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not groups:
            offered = ", ".join(self.farm.targets()) or "none"
            raise FarmError(
                f"no worker of the farm {self.farm.address} owns target {self.target!r} "
                f"(offered: {offered}); "
                f"start one with: autosched worker --scheduler ADDRESS --target '{self.target}'"
            )
        fp = max(groups, key=lambda k: (len(groups[k][1]), k))
        for other, (_, addrs) in groups.items():
            if other != fp:
                self.farm.on_note(f"{len(addrs)} worker(s) own {self.target} on another chip ({other}): not "
                                  "used in this run")  # fmt: skip
        return fp, groups[fp][0], groups[fp][1]

    def chip_facts(self, target: Any = None) -> Any:
        """The ChipInfo of the workers that time this target (the Tuner records it with every result)."""
        return self.chip

    # Measuring ------------------------------------------------------------------------------------
    def _ref(self, task: MeasureTask) -> Any:
        """The task's arrays on the farm: sent once, not with every candidate, and kept for the next
        batches of the last HELD_TASKS tasks only (a model's many tasks would fill the workers' memory)."""
        held = self._refs.pop(id(task), None) or (task, self.client.submit(_hold, task, pure=False))
        self._refs[id(task)] = held  # now the most recent
        while len(self._refs) > HELD_TASKS:
            del self._refs[next(iter(self._refs))]  # dropping the future releases its data on the workers
        return held[1]

    def _submit(self, ref: Any, trace: Any) -> Any:
        pin = {"resources": {self.resource: 1}, "pure": False}
        if not self.separate_build:
            return self.client.submit(_measure_task, self.backend, ref, trace, **pin)
        built = self.client.submit(build_task, self.backend, ref, trace, pure=False)
        return self.client.submit(run_task, self.backend, ref, built, trace, **pin)

    def measure(self, task: MeasureTask, traces: Sequence[Any]) -> list[MeasureResult]:
        """One result per trace, in order; raises FarmLostError only when the farm itself is gone.

        A candidate whose worker died is measured once more after the rest of the batch, alone, so
        that a second death is its own doing (a "crash"), not a neighbour's on the same worker. One that
        failed because the task's arrays were lost (their holder died while recomputing them) is not a
        suspect: the arrays are sent again and it is measured again, uncounted.
        """
        distributed = _import_distributed()
        results: list[MeasureResult | None] = [None] * len(traces)
        retried: set[int] = set()
        suspects: collections.deque[int] = collections.deque()
        pending: dict[Any, tuple[int, Any]] = {}  # future -> (candidate, the arrays' future it used)

        def submit(i: int) -> None:
            ref = self._ref(task)
            pending[self._submit(ref, traces[i])] = (i, ref)

        for i in range(len(traces)):
            submit(i)
        resent = 0
        while pending or suspects:
            if suspects and not pending:
                submit(suspects.popleft())
            for fut in self._wait(list(pending), distributed):
                i, used = pending.pop(fut)
                res = self._outcome(fut, distributed)
                if res is None and used.status == "error" and resent < MAX_RESENT:
                    if self._refs.get(id(task), (None, None))[1] is used:
                        del self._refs[id(task)]  # lost for good: the next _ref sends the arrays again
                        resent += 1
                    submit(i)
                elif res is None and i not in retried:
                    retried.add(i)
                    self.resubmitted += 1
                    suspects.append(i)
                elif res is None:
                    msg = "the farm worker measuring this candidate died, twice: the second time it ran alone"
                    results[i] = MeasureResult((), "crash", msg, check=task.check)
                else:
                    results[i] = res
            self._watch()
        return [r for r in results if r is not None]

    def _wait(self, futures: list[Any], distributed: Any) -> set[Any]:
        """The futures done within POLL_S (maybe none); FarmLostError when they were cancelled under us."""
        try:
            with self.client.as_current():  # wait() takes the default client; ours is not one
                done, _ = distributed.wait(futures, timeout=POLL_S, return_when="FIRST_COMPLETED")
            return set(done)
        except TimeoutError:
            return set()
        except Exception as e:
            if self.client.status != "running" or "cancel" in type(e).__name__.lower():
                raise self._lost("the client lost its connection to the scheduler") from e
            raise

    def _outcome(self, fut: Any, distributed: Any) -> MeasureResult | None:
        """The result, or None when the worker died under it; a farm gone raises FarmLostError."""
        if fut.status == "cancelled" or self.client.status != "running":
            raise self._lost("the client lost its connection to the scheduler")
        try:  # a result can still be lost after "finished" (its worker dies before it is fetched)
            return fut.result()  # type: ignore[no-any-return]
        except Exception as exc:
            if fut.status == "cancelled" or self.client.status != "running":
                raise self._lost("the client lost its connection to the scheduler") from exc
            if isinstance(exc, distributed.KilledWorker) or "worker" in type(exc).__name__.lower():
                return None
            return MeasureResult((), "run", f"farm task failed: {type(exc).__name__}: {exc}")

    def _lost(self, why: str) -> FarmLostError:
        return FarmLostError(
            f"the farm {self.farm.address} went away ({why}); the batch in flight is not logged, every "
            "finished batch is: start the farm again and continue with --resume"
        )

    def _watch(self) -> None:
        """Say when workers leave or join; stop when the scheduler or every owner of the chip is gone."""
        if self.client.status != "running":
            raise self._lost(f"client status {self.client.status}")
        try:
            workers = self.farm.workers()
        except Exception as e:
            raise self._lost(f"{type(e).__name__}: {e}") from e
        owners = [a for a, w in workers.items() if w.get("resources", {}).get(self.resource)]
        gone, new = self._known - set(workers), set(workers) - self._known
        for addr in sorted(gone):
            self.farm.on_note(
                f"worker {addr} left the farm; its candidates in flight are measured again; going on "
                f"with {len(workers)} worker(s), {len(owners)} timing {self.target}"
            )
        for addr in sorted(new):
            self.farm.on_note(f"worker {addr} joined the farm ({len(workers)} now)")
        self._known = set(workers)
        if owners:
            self._no_worker_since = None
        elif self._no_worker_since is None:
            self._no_worker_since = time.monotonic()
        elif time.monotonic() - self._no_worker_since > NO_WORKER_S:
            raise self._lost(f"no worker has owned {self.target} ({self.fingerprint}) for {NO_WORKER_S:g} s")

    def close(self) -> None:
        """Release the tasks' data on the workers (the farm does it when it closes)."""
        self._refs.clear()
