"""A host kernel called ``n`` times from a loop in C, for timing: what a call from Python adds is gone.

A ctypes call from a Python loop costs about 0.25 us here (Zen 5; more on slower cores), which a 2 us
kernel reads as 12% slower; TVM's ``time_evaluator`` and onnxruntime loop in C++. So the timing
loop (:func:`autosched.hai.timing.time_calls`) runs a :class:`HostCall` through its
:meth:`HostCall.repeat_calls`: one ctypes call into a small C loop (built once per process with the C
compiler that links the kernels), which calls the kernel's entry point on the same addresses ``n`` times.

Example::

    call = HostCall(cfunc, [a.ctypes.data, b.ctypes.data, c.ctypes.data], keep=(a, b, c))
    call()            # one call, from Python
    call.repeat_calls(1000)  # a thousand, from C
    call.wake_threads()      # libgomp's workers spinning again, after a cache flush

The timing loop calls :meth:`HostCall.wake_threads` after each cache flush, so that a cold repeat times
the kernel on cold caches, not the wake-up of threads that slept through the flush.
"""

from __future__ import annotations

import ctypes
import functools
import os
from _ctypes import CFuncPtr  # the base of every ctypes foreign function (each CDLL has a subclass)
from collections.abc import Sequence
from typing import Any

from ..errors import CompileError
from .link import c_compiler
from .scratch import scratch_dir

MAX_ARGS = 64  # entry points with more pointer arguments are looped in Python
_LIBRARIES: list[Any] = []


def _source() -> str:
    """``int autosched_repeat(fn, n, args, nargs)``: 0 when it ran the loop, -1 for an arity it lacks."""
    cases = []
    for k in range(MAX_ARGS + 1):
        params = ", ".join(["void *"] * k) or "void"
        args = ", ".join(f"a[{i}]" for i in range(k))
        call = f"((void (*)({params}))fn)({args})"
        cases.append(f"  case {k}: for (long long i = 0; i < n; ++i) {call}; return 0;")
    return (
        "int autosched_repeat(void *fn, long long n, void **a, int nargs) {\n"
        "  switch (nargs) {\n" + "\n".join(cases) + "\n  default: return -1;\n  }\n}\n"
    )


@functools.cache
def _loop() -> Any:
    """The compiled C loop, or None where it cannot be built (the Python loop is the fallback)."""
    import subprocess

    try:
        with scratch_dir("autosched-repeat-") as tmp:
            src, so = tmp / "repeat.c", tmp / "repeat.so"
            src.write_text(_source())
            cmd = [*c_compiler(), "-O2", "-shared", "-fPIC", "-o", str(so), str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
            if proc.returncode != 0:
                raise CompileError(proc.stderr.strip()[:500])
            lib = ctypes.CDLL(str(so), mode=os.RTLD_LOCAL | os.RTLD_NOW)  # mapped: the file may go
    except (OSError, subprocess.SubprocessError, CompileError):
        return None
    _LIBRARIES.append(lib)  # loaded for good: the function must not outlive its code
    fn = lib.autosched_repeat
    fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_WAKE_SOURCE = """
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
static void nothing(void *data) { (void)data; }
void autosched_wake_threads(void) { GOMP_parallel(nothing, 0, 0, 0); }
"""


@functools.cache
def _wake() -> Any:
    """An empty parallel region of libgomp (the kernels' own), or None where it cannot be built."""
    import subprocess

    try:
        with scratch_dir("autosched-wake-") as tmp:
            src, so = tmp / "wake.c", tmp / "wake.so"
            src.write_text(_WAKE_SOURCE)
            cmd = [*c_compiler(), "-O2", "-shared", "-fPIC", "-o", str(so), str(src), "-lgomp"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
            if proc.returncode != 0:
                raise CompileError(proc.stderr.strip()[:500])
            lib = ctypes.CDLL(str(so), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except (OSError, subprocess.SubprocessError, CompileError):
        return None
    _LIBRARIES.append(lib)
    fn = lib.autosched_wake_threads
    fn.argtypes, fn.restype = [], None
    return fn


class HostCall:
    """A host kernel's C entry point (``cfunc``, a ctypes function of pointer arguments) on fixed
    addresses; ``keep`` holds what must outlive the calls (the compiled code, the arrays)."""

    def __init__(self, cfunc: Any, pointers: Sequence[int], keep: Any = None):
        self.cfunc = cfunc
        self.pointers = list(pointers)
        self._keep = keep
        self._args = (ctypes.c_void_p * max(1, len(self.pointers)))(*self.pointers)
        self._loop, self._address = None, None
        if isinstance(cfunc, CFuncPtr) and len(self.pointers) <= MAX_ARGS:  # else: Python calls
            self._loop = _loop()  # built here, not while timed
            _wake()
            self._address = ctypes.cast(cfunc, ctypes.c_void_p).value

    @property
    def in_c(self) -> bool:
        """Whether :meth:`repeat_calls` loops in C."""
        return self._loop is not None

    def __call__(self) -> None:
        self.cfunc(*self.pointers)

    def wake_threads(self) -> None:
        """Start libgomp's worker threads, which sleep after a pause such as a cache flush: one empty
        parallel region leaves them spinning, as they are between the kernels of a model run. Woken by
        the kernel itself, each cold repeat of a parallel kernel also timed their wake-up: a 9 us
        kernel on 100 KB read 112 us after a flush, 19 us with the threads woken first (Zen 5, VM)."""
        wake = _wake()
        if wake is not None:
            wake()

    def repeat_calls(self, n: int) -> None:
        """``n`` calls, from the C loop where there is one (else from Python: the same calls, slower)."""
        if self._loop is None or self._loop(self._address, n, self._args, len(self.pointers)) != 0:
            for _ in range(n):
                self.cfunc(*self.pointers)
