"""Running built candidates in a separate, long-lived worker process: check the result, then time it.

Every target is measured here, in one worker loop: the worker holds the task's inputs and expected
outputs. For each candidate it loads the kernel (dlopens the ``.so`` of an adapter that emits objects;
else has the target's adapter compile the lowered function the builder sent, within
``compile_timeout_s``: a compile error is "compile"), fills the outputs with garbage, runs once and
compares with the reference (a mismatch is "wrong_result", never a timing), warms up, then times
``repeat`` repeats of at least ``min_repeat_ms`` each (the adapter's own ``time()`` for a device
kernel, within the same budget). A candidate whose
checked first run is over ``slow_factor`` times the best this runner has timed for the task keeps that one
run as its cost: ten repeats of a hopeless kernel cost more than the rest of a batch, and one still
running after :data:`ABORT_FACTOR` times the best (at least :data:`ABORT_FLOOR_S`) is stopped as a
"timeout" rather than waited for until ``timeout_s``. The parent waits
a bounded time per candidate: a hang is killed ("timeout"), a death is a "crash" naming the signal, and
a fresh worker takes over. The worker runs under an address-space limit, so a huge allocation fails
("memory", or a crash marked "possibly out of memory") instead of taking the machine down; not
for device kernels, whose drivers reserve address space far beyond memory (CUDA's unified addressing).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..errors import CompileError, LowerError, RunError, ScheduleError, TargetError
from ..hai.timing import TimingPolicy, time_calls, time_once
from .output_check import fill_garbage as _fill_garbage
from .output_check import outputs_match
from .result import BuildResult, MeasureResult

if TYPE_CHECKING:
    from .task import MeasureTask

START_TIMEOUT_S = 60.0  # spawning a worker and handing it the task's arrays
COMPILE_TIMEOUT_S = 60.0  # loading a candidate: a dlopen, or an adapter's compile of a device kernel
ABORT_FACTOR = 100.0  # a candidate still running after this many times the best time is stopped ...
SLOW_MIN_S = 0.005  # a first run shorter than this is cheap to repeat (and noisy: cold caches, dlopen)
ABORT_FLOOR_S = 2.0  # ... but never before this (a worker restart costs about a second)
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
        compile_timeout_s: float = COMPILE_TIMEOUT_S,
    ):
        if repeat < 1 or timeout_s <= 0 or compile_timeout_s <= 0:
            raise ValueError(
                f"LocalRunner: need repeat >= 1 and timeouts > 0, "
                f"got {repeat}, {timeout_s}, {compile_timeout_s}"
            )
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.memory_limit_bytes = memory_limit_bytes or default_memory_limit()
        self.warmup = warmup
        self.num_threads = num_threads
        self.slow_factor = slow_factor
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
    def run(self, task: MeasureTask, built: list[BuildResult]) -> list[MeasureResult]:
        """One MeasureResult per build, in order; never raises for a bad candidate."""
        return [self._run_one(task, b) for b in built]

    def _run_one(self, task: MeasureTask, b: BuildResult) -> MeasureResult:
        if not b.ok:
            return MeasureResult((), b.error or "compile", b.error_msg, build_s=b.build_s, check=task.check)
        device = b.path is None  # the adapter compiles it in the worker, and times it with its time()
        if not device and b.workspace_bytes > self.memory_limit_bytes:
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
        message = (
            "run",
            self.repeat,
            self.min_repeat_ms / 1e3,
            self.warmup,
            budget,
            self.slow_factor * best,
            self.timing.flush_cache,
        )
        reply = self._call(message, wait)
        run_s = time.perf_counter() - t0
        if reply[0] == "ok":
            # A device kernel is timed by its adapter's time(), which takes repeat and warmup only.
            policy = TimingPolicy(self.repeat, self.warmup).to_json() if device else None
            timing = policy or {
                **self.timing.to_json(),
                "alignment_bytes": ALIGNMENT_BYTES,
            }  # buffers timed on
            costs = tuple(reply[1])
            result = MeasureResult(costs, build_s=build_s, run_s=run_s, check=task.check, timing=timing)
            self._best[key] = min(best, result.median)
            return result
        _, kind, msg = reply
        if kind == "timeout" and wait < self.timeout_s:
            msg += f" (stopped early: over {ABORT_FACTOR:g}x the best time so far, {best * 1e3:.3g} ms)"
        if kind == "crash" and not device and b.workspace_bytes > self.memory_limit_bytes // 4:
            msg += (
                f"; possibly out of memory: the kernel allocates {_gib(b.workspace_bytes)} "
                f"(limit {_gib(self.memory_limit_bytes)})"
            )
        return MeasureResult((), kind, msg, build_s=build_s, run_s=run_s, check=task.check)


def _runs_on_host(target: str) -> bool:
    """Whether the target's kernels are host code loaded from a shared library (else device kernels)."""
    from ..hai.registry import spec_of
    from ..target import parse_target

    return bool(spec_of(parse_target(target).kind).can_export)


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


# The worker ----------------------------------------------------------------------------------------


def _worker_main(conn: Any, memory_limit: int | None, num_threads: int | None) -> None:
    """Serve "task", "load" and "run" messages until "stop" or the pipe closes."""
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the tuner, which then stops us
    if num_threads:
        os.environ["OMP_NUM_THREADS"] = str(num_threads)  # read by libgomp when the first kernel loads it
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing kernel must not write core dumps
    if memory_limit is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    state = _WorkerState()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        try:
            reply = state.handle(message)
        except MemoryError as e:
            reply = ("error", "memory", f"allocation failed in the runner (MemoryError {e})")
        except _WrongResult as e:
            reply = ("error", "wrong_result", str(e))
        except (ScheduleError, LowerError) as e:
            reply = ("error", "schedule", str(e))
        except (CompileError, TargetError) as e:  # the adapter refused the device kernel, or has no device
            reply = ("error", "compile", f"{type(e).__name__}: {e}"[:2000])
        except RunError as e:
            kind = "memory" if _looks_like_oom(str(e)) else "run"
            reply = ("error", kind, str(e))
        except Exception as e:  # whatever a driver raises: this candidate's failure
            reply = ("error", "run", f"{type(e).__name__}: {e}"[:2000])
        conn.send(reply)


def _looks_like_oom(text: str) -> bool:
    text = text.lower()
    return any(
        s in text for s in ("cannot allocate memory", "zero-fill", "failed to map segment", "out of memory")
    )


# Every buffer the worker times on starts at a multiple of this (a cache line, an AVX-512 vector):
# a kernel's time then does not depend on where numpy happened to put its arrays.
ALIGNMENT_BYTES = 64


def aligned_empty(shape: tuple[int, ...], dtype: Any, alignment: int = ALIGNMENT_BYTES) -> np.ndarray:
    """An uninitialised array whose data starts at a multiple of ``alignment`` bytes."""
    dtype, count = np.dtype(dtype), int(np.prod(shape, dtype=np.int64))
    nbytes = max(count, 1) * dtype.itemsize  # an empty array still gets a valid pointer
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start : start + nbytes].view(dtype)[:count].reshape(shape)


class _WorkerState:
    def __init__(self) -> None:
        self.target = ""
        self.pristine: list[np.ndarray] = []
        self.expected: list[np.ndarray] = []
        self.tolerances: list[tuple[float, float]] = []
        self.names: list[str] = []
        self.samples: list[np.ndarray | None] = []  # per output: flat indices checked, None for all
        self.arrays: list[np.ndarray] = []
        self.adapters: dict[str, Any] = {}
        self.kernel: Any = None  # the loaded candidate: a ctypes function, or (adapter, kernel)

    def handle(self, message: tuple[Any, ...]) -> tuple[Any, ...]:
        if message[0] == "task":
            (
                _,
                self.target,
                self.pristine,
                self.expected,
                self.tolerances,
                self.names,
                shapes,
                self.samples,
            ) = message
            outs = [aligned_empty(shape, e.dtype) for shape, e in zip(shapes, self.expected)]
            self.arrays = [aligned_empty(a.shape, a.dtype) for a in self.pristine] + outs
            self.kernel = None
            return ("ok",)
        if message[0] == "load":
            self.load(*message[1:])
            return ("ok",)
        if message[0] == "run":
            return ("ok", self.run(*message[1:]))
        raise RunError(f"runner: unknown message {message[0]!r}")

    def load(self, path: str | None, func: Any, name: str, nargs: int) -> None:
        """The candidate to run next: the library at ``path``, else ``func`` compiled by the adapter."""
        self.kernel = None
        if nargs != len(self.arrays):
            raise RunError(f"{name} takes {nargs} buffers, the task has {len(self.arrays)}")
        if path is not None:
            from ..runtime.link import load_function

            self.kernel = load_function(path, name, nargs)
            return
        adapter = self.adapters.get(self.target)
        if adapter is None:
            from ..hai.registry import get_adapter

            adapter = self.adapters[self.target] = get_adapter(self.target)
        self.kernel = (adapter, adapter.compile(func))

    def run(
        self,
        repeat: int,
        min_repeat_s: float,
        warmup: int,
        budget_s: float,
        slow_s: float = math.inf,
        flush_cache: bool = False,
    ) -> list[float]:
        start = time.perf_counter()
        if self.kernel is None:
            raise RunError("runner: no candidate loaded")
        n_in = len(self.pristine)
        for work, src in zip(self.arrays, self.pristine):
            np.copyto(work, src)  # a previous candidate may have scribbled on the inputs
        for out in self.arrays[n_in:]:
            _fill_garbage(out)  # so a kernel that skips an element cannot pass by luck
        if isinstance(self.kernel, tuple):  # a device kernel: launched and timed by its adapter
            adapter, kernel = self.kernel
            once = time_once(lambda: adapter.launch(kernel, self.arrays))  # copies too: an upper bound
            self.check(n_in)
            left = budget_s - (time.perf_counter() - start)
            repeat = max(1, min(repeat, int(left / max(once, 1e-9))))  # as time_calls caps a slow kernel
            return [float(c) for c in adapter.time(kernel, self.arrays, repeat=repeat, warmup=warmup)]
        fn = self.kernel
        ptrs = [a.ctypes.data for a in self.arrays]
        once = time_once(lambda: fn(*ptrs))
        self.check(n_in)
        policy = TimingPolicy(repeat, warmup, min_repeat_s, flush_cache)
        left = budget_s - (time.perf_counter() - start)
        # far slower than the best (slow_s): the checked first run is its only sample
        slow = max(slow_s, SLOW_MIN_S)
        return time_calls(lambda: fn(*ptrs), policy, first_s=once, budget_s=left, slow_s=slow)

    def check(self, n_in: int) -> None:
        """Raise _WrongResult (a "wrong_result") naming the output and its worst element."""
        for i, (work, src) in enumerate(zip(self.arrays, self.pristine)):
            if not np.array_equal(work, src, equal_nan=work.dtype.kind in "fc"):
                raise _WrongResult(f"the kernel wrote to input {self.names[i]!r}")
        for j, (out, exp, (rtol, atol)) in enumerate(zip(self.arrays[n_in:], self.expected, self.tolerances)):
            idx = self.samples[j]
            got = out if idx is None else out.reshape(-1)[idx]  # a sampled reference: those elements
            if not outputs_match(got, exp, rtol, atol):
                raise _WrongResult(_mismatch(self.names[n_in + j], got, exp, rtol, atol))


class _WrongResult(RunError):
    pass


def _mismatch(name: str, got: np.ndarray, exp: np.ndarray, rtol: float, atol: float) -> str:
    g, e = got.astype(np.float64), exp.astype(np.float64)
    with np.errstate(all="ignore"):
        abs_err = np.abs(g - e)
        rel_err = abs_err / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
        bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
    rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
    worst = np.unravel_index(int(np.argmax(np.where(bad, abs_err, -1.0))), got.shape)
    return (
        f"output {name!r}: {int(bad.sum())} of {got.size} elements differ from the reference "
        f"(rtol {rtol:g}, atol {atol:g}); max abs error {abs_err[bad].max():.3g}, "
        f"max rel error {rel_err[bad].max():.3g}; at {tuple(map(int, worst))}: got {got[worst].item()!r}, "
        f"expected {exp[worst].item()!r}"
    )
