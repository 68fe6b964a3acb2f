"""The worker side of a measurement farm: what runs inside a Dask worker (issue 15).

A farm worker owns one or more targets. :class:`ChipFactsPlugin` measures (or reads the cached) chip
facts of each at start and keeps them on the worker, where :func:`report_chips` reads them for the
client; the worker's resources name each chip it owns by :func:`chip_resource`, so a timing submitted
with ``resources={chip_resource(fp): 1}`` runs only on a worker that has that chip, one at a time.

A backend says how a candidate is built and timed on a worker: :class:`LocalBackend` (the local
builder and runner, each in a child process of the worker, so a crashing kernel costs a result, not
the worker) or :class:`FakeBackend` (the fake measurer's costs, for tests). Timings on one host are also
serialised by a file lock per device (every target the adapter reports as a CPU shares one), so two
workers of one machine never time on the same device at once; builds share the CPU's lock with each
other but wait for (and hold off) a CPU timing, so a compile never runs beside one. Imported only by
:mod:`.farm` and the worker command (Dask is an optional extra).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dask
from distributed import Nanny, WorkerPlugin

from .result import BuildResult, MeasureResult
from .task import MeasureTask

_ATTR = "_autosched_chips"  # where the plugin leaves {target: (fingerprint, ChipInfo)} on the worker
# Dask caps OMP_NUM_THREADS (and BLAS threads) at 1 in the workers it spawns; a farm worker times kernels
# on all its cores, as the local runner does, so its nanny spawns workers without those caps.
# A worker fetching a candidate's data from a peer that just died retries its connection this long.
WORKER_CONFIG = {"distributed.worker.daemon": False,  # workers start children (builder, runner)
                 "distributed.nanny.pre-spawn-environ": {"MALLOC_TRIM_THRESHOLD_": 65536},
                 "distributed.comm.timeouts.connect": "5s"}  # fmt: skip
_STATE: dict[Any, Any] = {}  # this worker process's builder, runner and device measurers, made on first use


class FarmNanny(Nanny):
    """A nanny whose worker may start children (builder, runner) every time it starts it.

    A nanny reads ``distributed.worker.daemon`` whenever it (re)starts its worker; the nannies of a
    ``local:N`` cluster live in the client's process, whose config is not the workers' after start-up,
    so a worker restarted after a death would be daemonic and unable to build anything.
    """

    async def instantiate(self) -> Any:
        with dask.config.set({"distributed.worker.daemon": False}):
            return await super().instantiate()


def chip_resource(fingerprint: str) -> str:
    """The Dask resource naming one chip: ``chip:<fingerprint>`` (no ``=``, ``,`` or spaces)."""
    return "chip:" + re.sub(r"[^A-Za-z0-9:._-]", "_", fingerprint)


def chip_facts(target: str) -> tuple[str, Any]:
    """This machine's (fingerprint, ChipInfo) for ``target``, as the local tuner computes them."""
    from ..chip import fingerprint_of
    from ..hai.chip_facts import measured_info
    from ..hai.registry import get_adapter
    from ..target import parse_target

    t = parse_target(target)
    chip = measured_info(get_adapter(t))
    return fingerprint_of(t, chip), chip


class ChipFactsPlugin(WorkerPlugin):
    """A Dask worker plugin: measures the chip facts of ``targets`` when the worker starts."""

    name = "autosched-chip-facts"

    def __init__(self, targets: list[str]):
        self.targets = list(targets)

    def setup(self, worker: Any) -> None:
        setattr(worker, _ATTR, {t: chip_facts(t) for t in self.targets})

    def teardown(self, worker: Any) -> None:
        close_worker_state()


def report_chips(dask_worker: Any = None) -> dict[str, tuple[str, Any]]:
    """For ``client.run``: the chips this worker's plugin measured ({} on a worker without it)."""
    return dict(getattr(dask_worker, _ATTR, {}) or {})


@functools.cache
def device_of(target: str) -> str:
    """What a timing of ``target`` occupies on this host: the CPU's cores (``"cpu"``) for every target
    whose adapter reports a CPU (``llvm-cpu`` and its ``-mcpu`` variants, OpenCL on PoCL), else its
    kind's device. Without the device here, CPU-style targets still count as the CPU."""
    from ..hai.registry import get_adapter, style_of
    from ..target import parse_target

    t = parse_target(target)
    try:
        kind = get_adapter(t).info().kind
    except Exception:  # no driver or device on this host: no timing of it happens here either
        kind = "cpu" if style_of(t) == "cpu" else ""
    return "cpu" if kind == "cpu" else t.kind


def _lock_path(device: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", device)
    return Path(tempfile.gettempdir()) / f"autosched-device-{os.getuid()}-{slug}.lock"


@contextmanager
def device_lock(target: str, *, shared: bool = False) -> Iterator[None]:
    """Hold this host's lock on the device ``target`` runs on (released by the kernel if the worker dies).

    A timing holds it alone; ``shared`` holders (builds, which use the CPU's cores) run together but never
    during a timing. A waiting timing passes the turnstile first, so a stream of builds cannot starve it.
    """
    path = _lock_path(device_of(target))
    with open(path, "a") as f, open(path.with_suffix(".turnstile"), "a") as gate:
        fcntl.flock(gate.fileno(), fcntl.LOCK_EX)  # builds queue behind a timing that waits here
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        finally:
            fcntl.flock(gate.fileno(), fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def close_worker_state() -> None:
    """Stop this process's builder and runner processes (worker teardown)."""
    for obj in list(_STATE.values()):
        try:
            obj.close()
        except Exception:
            pass
    _STATE.clear()


def _cached(key: Any, make: Callable[[], Any]) -> Any:
    if key not in _STATE:
        _STATE[key] = make()
    return _STATE[key]


# Backends -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Built:
    """What a build task hands to the run task: the library's bytes (workers may be other machines)."""

    result: BuildResult
    library: bytes = b""


@dataclasses.dataclass(frozen=True)
class LocalBackend:
    """The real thing: the local builder and runner, kept alive in each worker between candidates."""

    timeout_s: float = 10.0
    repeat: int = 5
    num_threads: int | None = None
    flush_cache: bool = False
    build_timeout_s: float = 30.0

    def separate_build(self, target: str) -> bool:
        """Targets with linkable objects build anywhere; others compile where they are timed."""
        from ..hai.registry import get_adapter

        return bool(get_adapter(target).spec.can_export)

    def build(self, task: MeasureTask, trace: Any) -> Built:
        from .builder import LocalBuilder

        builder = _cached(("builder", self.build_timeout_s), lambda: LocalBuilder(1, self.build_timeout_s))
        (b,) = builder.build(task, [trace])
        if not b.ok or b.path is None:  # a failure, or a lowered function the runner compiles itself
            return Built(b)
        library = Path(b.path).read_bytes()
        shutil.rmtree(Path(b.path).parent, ignore_errors=True)
        return Built(b, library)

    def run(self, task: MeasureTask, built: Built, trace: Any = None) -> MeasureResult:
        from .runner import LocalRunner

        # All the cores this worker may use unless told otherwise, whatever OMP_NUM_THREADS it inherited.
        threads = self.num_threads or len(os.sched_getaffinity(0))
        key = ("runner", self.timeout_s, self.repeat, threads, self.flush_cache)
        runner = _cached(key, lambda: LocalRunner(self.timeout_s, self.repeat, num_threads=threads,
                                                  flush_cache=self.flush_cache))  # fmt: skip
        if not built.library:
            return runner.run(task, [built.result])[0]
        folder = Path(tempfile.mkdtemp(prefix="autosched-farm-"))
        try:
            path = folder / f"{built.result.func_name}.so"
            path.write_bytes(built.library)
            return runner.run(task, [dataclasses.replace(built.result, path=str(path))])[0]
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def measure(self, task: MeasureTask, trace: Any) -> MeasureResult:
        """Compile and time together (GPU-style targets), in the adapter's device worker."""
        from .device_measurer import DeviceMeasurer

        key = ("device", task.target, self.repeat, self.timeout_s)
        m = _cached(key, lambda: DeviceMeasurer(task.target, repeat=self.repeat, timeout_s=self.timeout_s))
        return m.measure(task, [trace])[0]  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True)
class FakeBackend:
    """The fake measurer's deterministic costs, measured on farm workers (tests and benchmarks).

    ``delay_s``: seconds each timing takes (so a test can kill a worker mid-batch); a trace for which
    ``crash_if(trace)`` is true kills the worker process itself, as a kernel that takes it down would.
    """

    cost_fn: Callable[[Any], float]
    errors: Mapping[str, float] | None = None
    repeat: int = 3
    seed: int = 0
    delay_s: float = 0.0
    crash_if: Callable[[Any], bool] | None = None

    def separate_build(self, target: str) -> bool:
        return True

    def build(self, task: MeasureTask, trace: Any) -> Built:
        return Built(BuildResult(None, task.func_name))

    def run(self, task: MeasureTask, built: Built, trace: Any = None) -> MeasureResult:
        from .fake import FakeMeasurer

        if self.crash_if is not None and self.crash_if(trace):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.delay_s)
        fake = FakeMeasurer(self.cost_fn, errors=self.errors, repeat=self.repeat, seed=self.seed)
        return fake.measure(task, [trace])[0]

    def measure(self, task: MeasureTask, trace: Any) -> MeasureResult:
        return self.run(task, self.build(task, trace), trace)


# Dask task bodies (module-level, so workers import them by name) ---------------------------------


def build_task(backend: Any, task: MeasureTask, trace: Any) -> Built:
    # A compile uses this host's cores: builds share them with each other, never with a CPU timing here.
    with device_lock("llvm-cpu", shared=True):
        return backend.build(task, trace)  # type: ignore[no-any-return]


def run_task(backend: Any, task: MeasureTask, built: Built, trace: Any) -> MeasureResult:
    with device_lock(task.target):
        return backend.run(task, built, trace)  # type: ignore[no-any-return]


def measure_task(backend: Any, task: MeasureTask, trace: Any) -> MeasureResult:
    with device_lock(task.target):
        return backend.measure(task, trace)  # type: ignore[no-any-return]
