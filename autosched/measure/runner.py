"""Running built candidates in a separate, long-lived worker process: check the result, then time it.

Every target is measured here, in one worker loop: the worker holds the task's inputs and expected
outputs. For each candidate it loads the kernel (dlopens the ``.so`` of an adapter that emits objects;
else has the target's adapter compile the lowered function the builder sent, within
``compile_timeout_s``: a compile error is "compile"), fills the outputs with garbage, runs once and
compares with the reference (a mismatch is "wrong_result", never a timing), warms up, then times
``repeat`` repeats of at least ``min_repeat_ms`` each (the adapter's own ``time()`` for a device
kernel, within the same budget). A candidate whose
checked first run is over ``slow_factor`` times the best this runner has timed for the task keeps that one
run as its cost: ten repeats of a hopeless kernel cost more than the rest of a batch; one whose first
two repeats are over ``stop_factor`` times the best stops there (a long attention kernel's repeats
were most of its tuning time), and one still
running after :data:`ABORT_FACTOR` times the best (at least :data:`ABORT_FLOOR_S`) is stopped as a
"timeout" rather than waited for until ``timeout_s``. The parent waits
a bounded time per candidate: a hang is killed ("timeout"), a death is a "crash" naming the signal, and
a fresh worker takes over. The worker runs under an address-space limit, so a huge allocation fails
("memory", or a crash marked "possibly out of memory") instead of taking the machine down; not
for device kernels, whose drivers reserve address space far beyond memory (CUDA's unified addressing);
host code that an adapter compiles (``runs_on_host``, the sim adapter's) is limited too. A ``simulated``
adapter's modeled times never set the best that stops a slow candidate early.

Host kernels are timed on 64-byte-aligned buffers (``timing.alignment_bytes`` in the record). A host
kernel that becomes the best so far is also run with every buffer :data:`MISALIGNED_OFFSET_BYTES` past
that boundary (where numpy's large arrays start), checked against the same reference and timed
:data:`MISALIGNED_REPEAT` times: ``timing.misaligned`` is ``{"offset_bytes", "median_s", "repeat"}``,
and a kernel that fails there fails as a whole, its message naming the misaligned case. Only the
best few of a run pay for this, and they are the ones a library is built from.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..hai.timing import TimingPolicy
from .result import BuildResult, MeasureResult
from .worker import ALIGNMENT_BYTES as ALIGNMENT_BYTES  # where the worker's buffers start; named here too
from .worker import MISALIGNED_OFFSET_BYTES as MISALIGNED_OFFSET_BYTES  # the misaligned case checked
from .worker import _worker_main
from .worker import aligned_empty as aligned_empty

if TYPE_CHECKING:
    from ..target import AdapterSpec
    from .task import MeasureTask

START_TIMEOUT_S = 60.0  # spawning a worker and handing it the task's arrays
COMPILE_TIMEOUT_S = 60.0  # loading a candidate: a dlopen, or an adapter's compile of a device kernel
ABORT_FACTOR = 100.0  # a candidate still running after this many times the best time is stopped ...
ABORT_FLOOR_S = 2.0  # ... but never before this (a worker restart costs about a second)
MISALIGNED_REPEAT = 3  # repeats of a new best on misaligned buffers: a figure for the log, not a ranking
_GIB = 1 << 30
_T = TypeVar("_T")


def start_without_sigint(start: Callable[[], _T]) -> _T:
    """``start()`` (which spawns worker processes) with SIGINT ignored meanwhile.

    A spawned child keeps an ignored signal ignored across exec, and Python then installs no
    KeyboardInterrupt handler: Ctrl-C at the terminal reaches only the parent, which stops its
    workers, and no worker prints a traceback, even one still importing. (Blocking the signal
    instead does not carry over: the spawn resets the child's signal mask.)
    """
    if threading.current_thread() is not threading.main_thread():
        return start()  # only the main thread may change handlers; workers started here are rare
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, previous)


def default_memory_limit() -> int:
    """75% of physical memory (8 GiB where that is unknown): room for the tuner and the rest."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 3 // 4)
    except (ValueError, OSError, AttributeError):
        return 8 * _GIB


class LocalRunner:
    """Checks and times candidates in one worker process at a time, restarted after a hang or crash.

    Example::

        with LocalRunner(timeout_s=10, num_threads=2) as runner:
            results = runner.run(task, builder.build(task, traces))
            best = min(results, key=lambda r: r.median)

    ``memory_limit_bytes`` caps the worker's address space (virtual memory, so thread stacks and malloc
    arenas count too); ``num_threads`` sets OMP_NUM_THREADS for it.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        repeat: int = 5,
        min_repeat_ms: float = 2.0,
        memory_limit_bytes: int | None = None,
        *,
        warmup: int = 1,
        num_threads: int | None = None,
        slow_factor: float = 3.0,
        flush_cache: bool = False,
        stop_factor: float = 1.5,
        compile_timeout_s: float = COMPILE_TIMEOUT_S,
    ):
        if repeat < 1 or timeout_s <= 0 or compile_timeout_s <= 0:
            raise ValueError(
                f"LocalRunner: need repeat >= 1 and timeouts > 0, "
                f"got {repeat}, {timeout_s}, {compile_timeout_s}"
            )
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self.memory_limit_bytes = memory_limit_bytes or default_memory_limit()
        self.num_threads = num_threads
        self.slow_factor = slow_factor
        self.stop_factor = stop_factor
        self.timing = TimingPolicy(repeat, warmup, min_repeat_ms / 1e3, flush_cache)  # recorded with costs
        self._best: dict[tuple[int, str], float] = {}  # per task: best median timed here (slow shortcut)
        self._proc: Any = None
        self._conn: Any = None
        self._task: MeasureTask | None = None  # the task the live worker holds
        self._host: bool | None = None  # whether the live worker runs host code (under the memory limit)

    # Worker lifetime --------------------------------------------------------------------------------
    def _start(self, host: bool = True) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork: the tuner has threads (pools, xgboost)
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_worker_main,
            args=(child, self.memory_limit_bytes if host else None, self.num_threads),
            daemon=True,  # dies with the tuner
            name="autosched-runner",
        )
        self._conn, self._task, self._host = parent, None, host
        try:
            start_without_sigint(self._proc.start)
        finally:
            child.close()

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.pid is not None:  # it started
                self._proc.kill()
                self._proc.join(timeout=5)
            self._conn.close()
        self._proc = self._conn = self._task = None

    def close(self) -> None:
        """Stop the worker."""
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(timeout=2)
            except (OSError, EOFError):
                pass
        self._kill()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _ensure(self, task: MeasureTask) -> tuple[str, str] | None:
        """A live worker that holds ``task``; an (error kind, message) when none can be had."""
        host = _runs_on_host(task.target)
        if self._proc is None or not self._proc.is_alive() or self._host != host:
            self._kill()
            self._start(host)
        if self._task is task:
            return None
        shapes = [t.shape for t in task.outputs]
        samples = list(task.samples) or [None] * len(shapes)
        message = ("task", task.target, list(task.inputs), list(task.expected), list(task.tolerances),
                   _names(task), shapes, samples)  # fmt: skip
        reply = self._call(message, START_TIMEOUT_S)
        if reply[0] == "ok":
            self._task = task
            return None
        self._kill()
        return reply[1], "cannot start the runner with this task: " + reply[2]

    def _call(
        self, message: tuple[Any, ...], timeout_s: float, on_timeout: str = "timeout"
    ) -> tuple[Any, ...]:
        """Send and wait; a hang or a death of the worker comes back as an error reply, the worker killed."""
        try:
            self._conn.send(message)
            if self._conn.poll(timeout_s):
                return self._conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            pass  # the worker died: its exit code says how
        else:
            self._kill()
            return ("error", on_timeout, f"no result within {timeout_s:g} s; the runner process was killed")
        self._proc.join(timeout=5)
        code = self._proc.exitcode
        self._kill()
        return ("error", "crash", _describe_death(code))

    # Running --------------------------------------------------------------------------------------
    def run(
        self,
        task: MeasureTask,
        built: list[BuildResult],
        *,
        misaligned_all: bool = False,
        timing: TimingPolicy | None = None,
    ) -> list[MeasureResult]:
        """One MeasureResult per build, in order; never raises for a bad candidate. A finalists round's
        run: ``misaligned_all`` checks and times every host kernel misaligned too, not only a new best;
        ``timing`` replaces the runner's policy, and no candidate is cut short for being slower than the
        best (every one is a contender)."""
        return [self._run_one(task, b, misaligned_all, timing) for b in built]

    def _run_one(
        self,
        task: MeasureTask,
        b: BuildResult,
        misaligned_all: bool = False,
        timing: TimingPolicy | None = None,
    ) -> MeasureResult:
        if not b.ok:
            return MeasureResult((), b.error or "compile", b.error_msg, build_s=b.build_s, check=task.check)
        device = b.path is None  # the adapter compiles it in the worker, and times it with its time()
        spec = _spec(task.target)
        host = spec.runs_on_host or spec.can_export  # host code: under the memory limit
        if host and b.workspace_bytes > self.memory_limit_bytes:
            limit = _gib(self.memory_limit_bytes)
            msg = f"the kernel allocates {_gib(b.workspace_bytes)}, over the memory limit {limit}"
            return MeasureResult((), "memory", msg, build_s=b.build_s, check=task.check)
        t0 = time.perf_counter()
        failed = self._ensure(task)
        if failed is None:
            load = ("load", b.path, b.func, b.func_name, b.nargs)
            reply = self._call(load, self.compile_timeout_s, "compile" if device else "timeout")
            failed = None if reply[0] == "ok" else (reply[1], reply[2])
        build_s = b.build_s + (time.perf_counter() - t0 if device else 0.0)  # a device compile is a build
        if failed is not None:
            run_s = time.perf_counter() - t0
            return MeasureResult((), failed[0], failed[1], build_s=build_s, run_s=run_s, check=task.check)
        t0 = time.perf_counter()
        key = (id(task), task.name)
        best = self._best.get(key, math.inf)
        # A kernel far slower than the best is stopped early rather than waited for up to the timeout.
        wait = min(self.timeout_s, max(ABORT_FLOOR_S, ABORT_FACTOR * best))
        budget = 0.8 * wait  # the worker times fewer repeats of a slow kernel rather than time out
        policy = timing or self.timing
        slow, stop = (math.inf, math.inf) if timing else (self.slow_factor * best, self.stop_factor * best)
        message = ("run", policy.repeat, policy.min_repeat_s, policy.warmup, budget, slow,
                   policy.flush_cache, stop)  # fmt: skip
        reply = self._call(message, wait)
        run_s = time.perf_counter() - t0
        if reply[0] == "ok":
            # A device kernel is timed by its adapter's time(), which takes repeat and warmup only.
            device_policy = TimingPolicy(policy.repeat, policy.warmup).to_json() if device else None
            # host kernels: the buffers' alignment is part of how they were timed
            timed = device_policy or {**policy.to_json(), "alignment_bytes": ALIGNMENT_BYTES}
            costs = tuple(reply[1])
            if not device and costs and (misaligned_all or statistics.median(costs) < best):  # misaligned too
                misaligned, failed = self._check_misaligned(wait)
                run_s = time.perf_counter() - t0
                if failed is not None:
                    return MeasureResult((), failed[0], failed[1], build_s=build_s, run_s=run_s,
                                         check=task.check)  # fmt: skip
                timed["misaligned"] = misaligned
            result = MeasureResult(costs, build_s=build_s, run_s=run_s, check=task.check, timing=timed)
            if not spec.simulated:  # modeled seconds say nothing of how long the host run takes
                self._best[key] = min(best, result.median)
            return result
        _, kind, msg = reply
        if kind == "timeout" and wait < self.timeout_s:
            msg += f" (stopped early: over {ABORT_FACTOR:g}x the best time so far, {best * 1e3:.3g} ms)"
        if kind == "crash" and host and b.workspace_bytes > self.memory_limit_bytes // 4:
            msg += (
                f"; possibly out of memory: the kernel allocates {_gib(b.workspace_bytes)} "
                f"(limit {_gib(self.memory_limit_bytes)})"
            )
        return MeasureResult((), kind, msg, build_s=build_s, run_s=run_s, check=task.check)

    def _check_misaligned(self, wait: float) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
        """The loaded host kernel again, on every buffer :data:`MISALIGNED_OFFSET_BYTES` past its
        aligned start: the timing's ``"misaligned"`` entry, or (error kind, message) naming the case."""
        t = self.timing
        repeat = min(t.repeat, MISALIGNED_REPEAT)
        message = ("misaligned", repeat, t.min_repeat_s, t.warmup, 0.8 * wait, t.flush_cache)
        reply = self._call(message, wait)
        if reply[0] == "ok":
            costs = [float(c) for c in reply[1]]
            return {"offset_bytes": MISALIGNED_OFFSET_BYTES, "median_s": statistics.median(costs),
                    "repeat": len(costs)}, None  # fmt: skip
        case = (
            f"misaligned case failed (right on {ALIGNMENT_BYTES}-byte-aligned buffers, but not with every "
            f"input and output starting {MISALIGNED_OFFSET_BYTES} bytes past such a boundary)"
        )
        return None, (reply[1], f"{case}: {reply[2]}")


def _spec(target: str) -> AdapterSpec:
    from ..hai.registry import spec_of
    from ..target import parse_target

    return spec_of(parse_target(target).kind)


def _runs_on_host(target: str) -> bool:
    """Whether the target's kernels are host code (a shared library, or an adapter that declares so)."""
    spec = _spec(target)
    return spec.runs_on_host or spec.can_export


def _names(task: MeasureTask) -> list[str]:
    return [t.name for t in task.args]


def _gib(n: int) -> str:
    return f"{n / _GIB:.3g} GiB"


def _describe_death(code: int | None) -> str:
    if code is None:
        return "the runner process stopped answering"
    if code < 0:
        try:
            sig = signal.Signals(-code)
            what = f"{sig.name} ({signal.strsignal(sig)})"
        except ValueError:
            what = f"signal {-code}"
        msg = f"the runner process died with {what}"
        if -code == signal.SIGKILL:  # not ours (we record a timeout when we kill): the OOM killer's
            msg += "; possibly out of memory (the kernel OOM killer sends SIGKILL)"
        return msg
    return f"the runner process exited with status {code}"
