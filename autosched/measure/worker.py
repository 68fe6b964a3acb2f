"""The runner's worker process: holds a task's arrays, loads each candidate, checks it, then times it.

:class:`~.runner.LocalRunner` starts it and talks to it over a pipe ("task", "load", "run", "stop");
everything here runs in that process. A host kernel (a shared library) is called on aligned copies of
the inputs and timed by :func:`~autosched.hai.timing.time_calls`; a device kernel is compiled, launched
and timed by its adapter. Either way the outputs start as garbage and are compared with the reference
before any timing, and every failure is a reply naming its error kind, never an exception.
"""

from __future__ import annotations

import math
import os
import signal
import time
from typing import Any

import numpy as np

from ..errors import CompileError, LowerError, RunError, ScheduleError, TargetError
from ..hai.timing import TimingPolicy, time_calls, time_once
from ..runtime.repeat import HostCall
from .output_check import fill_garbage as _fill_garbage
from .output_check import outputs_match

SLOW_MIN_S = 0.005  # a first run shorter than this is cheap to repeat (and noisy: cold caches, dlopen)


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
# The misaligned case checked too: where numpy's large arrays usually start (glibc's mmap'd chunks sit
# 16 bytes past a page), and a multiple of every dtype's size, so elements stay naturally aligned.
MISALIGNED_OFFSET_BYTES = 16


def aligned_empty(
    shape: tuple[int, ...], dtype: Any, alignment: int = ALIGNMENT_BYTES, offset: int = 0
) -> np.ndarray:
    """An uninitialised array whose data starts ``offset`` bytes past a multiple of ``alignment``."""
    return aligned_views(shape, dtype, (offset,), alignment)[0]


def aligned_views(
    shape: tuple[int, ...], dtype: Any, offsets: tuple[int, ...], alignment: int = ALIGNMENT_BYTES
) -> list[np.ndarray]:
    """Views of one uninitialised buffer, each starting its offset past the same aligned address (so
    they overlap: the worker's misaligned case costs no memory of its own)."""
    dtype, count = np.dtype(dtype), int(np.prod(shape, dtype=np.int64))
    nbytes = max(count, 1) * dtype.itemsize  # an empty array still gets a valid pointer
    raw = np.empty(nbytes + alignment + max(offsets), np.uint8)
    start = -raw.ctypes.data % alignment
    return [raw[start + o : start + o + nbytes].view(dtype)[:count].reshape(shape) for o in offsets]


class _WorkerState:
    def __init__(self) -> None:
        self.target = ""
        self.pristine: list[np.ndarray] = []
        self.expected: list[np.ndarray] = []
        self.tolerances: list[tuple[float, float]] = []
        self.names: list[str] = []
        self.samples: list[np.ndarray | None] = []  # per output: flat indices checked, None for all
        self.arrays: list[np.ndarray] = []  # inputs then outputs, each at an aligned address
        self.shifted: list[np.ndarray] = []  # the same buffers, MISALIGNED_OFFSET_BYTES further on
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
            specs = [(a.shape, a.dtype) for a in self.pristine]
            specs += [(shape, e.dtype) for shape, e in zip(shapes, self.expected)]
            pairs = [aligned_views(shape, dtype, (0, MISALIGNED_OFFSET_BYTES)) for shape, dtype in specs]
            self.arrays = [aligned for aligned, _ in pairs]
            self.shifted = [shifted for _, shifted in pairs]
            self.kernel = None
            return ("ok",)
        if message[0] == "load":
            self.load(*message[1:])
            return ("ok",)
        if message[0] == "run":
            return ("ok", self.run(*message[1:]))
        if message[0] == "misaligned":
            return ("ok", self.run_misaligned(*message[1:]))
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
        stop_s: float = math.inf,
    ) -> list[float]:
        start = time.perf_counter()
        if self.kernel is None:
            raise RunError("runner: no candidate loaded")
        n_in = len(self.pristine)
        self.fill(self.arrays)
        if isinstance(self.kernel, tuple):  # a device kernel: launched and timed by its adapter
            adapter, kernel = self.kernel
            once = time_once(lambda: adapter.launch(kernel, self.arrays))  # copies too: an upper bound
            self.check(n_in)
            left = budget_s - (time.perf_counter() - start)
            repeat = max(1, min(repeat, int(left / max(once, 1e-9))))  # as time_calls caps a slow kernel
            return [float(c) for c in adapter.time(kernel, self.arrays, repeat=repeat, warmup=warmup)]
        call = HostCall(self.kernel, [a.ctypes.data for a in self.arrays])
        once = time_once(call)
        self.check(n_in)
        policy = TimingPolicy(repeat, warmup, min_repeat_s, flush_cache)
        left = budget_s - (time.perf_counter() - start)
        # far slower than the best (slow_s): the checked first run is its only sample; clearly slower
        # (stop_s): two repeats. Neither below SLOW_MIN_S: a microsecond kernel's repeats are cheap, and
        # a fresh worker's first ones ran 3x the best on a loaded machine.
        slow, stop = max(slow_s, SLOW_MIN_S), max(stop_s, SLOW_MIN_S)
        return time_calls(call, policy, first_s=once, budget_s=left, slow_s=slow, stop_s=stop)

    def run_misaligned(
        self, repeat: int, min_repeat_s: float, warmup: int, budget_s: float, flush_cache: bool = False
    ) -> list[float]:
        """The loaded host kernel on :attr:`shifted`: checked as :meth:`run` checks, then timed.

        The shifted views overlap the aligned buffers, so this clobbers them; :meth:`run` refills them.
        """
        start = time.perf_counter()
        if self.kernel is None or isinstance(self.kernel, tuple):
            raise RunError("runner: the misaligned case is for a loaded host kernel only")
        self.fill(self.shifted)
        call = HostCall(self.kernel, [a.ctypes.data for a in self.shifted])
        once = time_once(call)
        self.check(len(self.pristine), self.shifted)
        policy = TimingPolicy(repeat, warmup, min_repeat_s, flush_cache)
        left = budget_s - (time.perf_counter() - start)
        return time_calls(call, policy, first_s=once, budget_s=left)

    def fill(self, arrays: list[np.ndarray]) -> None:
        """Fresh inputs (a previous candidate may have scribbled on them) and garbage outputs."""
        n_in = len(self.pristine)
        for work, src in zip(arrays, self.pristine):
            np.copyto(work, src)
        for out in arrays[n_in:]:
            _fill_garbage(out)  # so a kernel that skips an element cannot pass by luck

    def check(self, n_in: int, arrays: list[np.ndarray] | None = None) -> None:
        """Raise _WrongResult (a "wrong_result") naming the output and its worst element."""
        arrays = self.arrays if arrays is None else arrays
        for i, (work, src) in enumerate(zip(arrays, self.pristine)):
            if not np.array_equal(work, src, equal_nan=work.dtype.kind in "fc"):
                raise _WrongResult(f"the kernel wrote to input {self.names[i]!r}")
        for j, (out, exp, (rtol, atol)) in enumerate(zip(arrays[n_in:], self.expected, self.tolerances)):
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
