"""The one timing loop: warm-up, repeats, median, and an optional cache flush between repeats.

Every path that times a kernel uses :func:`time_calls`: the adapters' ``time()``, the CPU runner's
worker, the tuner's numpy baseline. It lives in ``hai`` because the adapters, the lowest layer that
times anything, need it. A repeat runs the call ``number`` times, enough to last ``min_repeat_s``
(timer resolution and call overhead stay small), and gives seconds per call; callers take the median.
A host kernel's call (:class:`autosched.runtime.repeat.HostCall`) makes those calls from a loop in C,
so that a microsecond kernel is not timed with the quarter microsecond a call from Python adds.

The cache flush (writing a buffer larger than the last-level cache before each repeat, Triton's
``do_bench`` idea) is off by default: CPU kernels run on warm data in real use. With it on, a repeat
is one call, since a flush between the calls of a repeat is impossible; a host kernel's threads are
woken after the flush (:meth:`~autosched.runtime.repeat.HostCall.wake_threads`), as they are awake
between the kernels of a model run. The policy goes into every log record (``timing`` in the JSON
line), so times taken cold are never compared with warm ones unseen.

Example::

    costs = time_calls(lambda: kernel(*ptrs), TimingPolicy(repeat=5, flush_cache=True))
    seconds = statistics.median(costs)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import RunError

FLUSH_BYTES = 256 * 1024 * 1024  # larger than the last-level cache of the chips autosched meets
SETTLED_AFTER = 2  # repeats all over ``stop_s``: two, so that one noisy repeat settles nothing


@dataclass(frozen=True)
class TimingPolicy:
    """How a kernel is timed; ``to_json()`` is what a record keeps."""

    repeat: int = 5
    warmup: int = 1
    min_repeat_s: float = 1e-3
    flush_cache: bool = False

    def __post_init__(self) -> None:
        if self.repeat < 1 or self.warmup < 0 or not self.min_repeat_s >= 0:
            raise RunError(
                f"TimingPolicy: need repeat >= 1, warmup >= 0 and min_repeat_s >= 0, got "
                f"repeat={self.repeat}, warmup={self.warmup}, min_repeat_s={self.min_repeat_s}"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_flush_buffer: np.ndarray | None = None


def flush_cache(nbytes: int = FLUSH_BYTES) -> None:
    """Evict the caches by writing ``nbytes`` (one buffer per process, made on first use)."""
    global _flush_buffer
    if _flush_buffer is None or _flush_buffer.nbytes < nbytes:
        _flush_buffer = np.empty(nbytes, np.uint8)
    _flush_buffer[:nbytes] += 1


def time_calls(
    call: Callable[[], Any],
    policy: TimingPolicy = TimingPolicy(),
    *,
    device_timed: bool = False,
    sync: Callable[[], None] | None = None,
    first_s: float | None = None,
    budget_s: float = math.inf,
    slow_s: float = math.inf,
    stop_s: float = math.inf,
) -> list[float]:
    """Seconds per call of ``call``, one number per repeat.

    ``call`` runs the kernel once (what it returns is ignored); with ``device_timed`` it returns its
    own seconds (profiling events), otherwise the wall clock up to each ``sync()`` counts. ``first_s``:
    the time of a first run already made (the runner checks its outputs in between); else one run is
    timed here. A kernel whose first run and a second, warm one are both longer than ``slow_s`` has
    the second as its only sample (its rank is clear without repeats), and the repeats stop within
    ``budget_s`` of the start (at least one is made). The first run alone is no verdict: it can be
    cold (fresh memory faulted in; in this VM a 0.6 ms conv's first runs took 8-15 ms, and that one
    sample was kept, its schedule logged 13x slower than it runs).
    """
    start = time.perf_counter()
    if first_s is None:
        first_s = _timed(call, 1, sync, device_timed)
    if first_s > slow_s:
        first_s = _timed(call, 1, sync, device_timed)
        if first_s > slow_s:
            return [first_s]
    for _ in range(policy.warmup):
        call()
    if sync is not None:
        sync()
    number = max(1, min(1_000_000, math.ceil(policy.min_repeat_s / max(first_s, 1e-9))))
    if policy.flush_cache:
        number = 1  # the flush comes before each repeat: a repeat is one cold call
    repeat = policy.repeat
    left = budget_s - (time.perf_counter() - start)
    if left < math.inf:  # fewer repeats of a slow kernel rather than a timeout
        repeat = max(1, min(repeat, int(left / max(first_s * number, 1e-9))))
    costs = []
    wake = getattr(call, "wake_threads", None)  # a host kernel's (runtime.repeat.HostCall)
    for _ in range(repeat):
        if policy.flush_cache:
            flush_cache()
            if wake is not None:  # the flush let the kernel's worker threads fall asleep
                wake()
        costs.append(_timed(call, number, sync, device_timed))
        if len(costs) >= SETTLED_AFTER and min(costs) > stop_s:
            break
        if time.perf_counter() - start > budget_s:  # slower than the first run promised (a loaded machine)
            break
    return costs


def time_once(call: Callable[[], Any], sync: Callable[[], None] | None = None) -> float:
    """Seconds of one call (a first run, before its outputs are checked)."""
    return _timed(call, 1, sync, False)


def _timed(
    call: Callable[[], Any], number: int, sync: Callable[[], None] | None, device_timed: bool
) -> float:
    """Seconds per call over ``number`` calls: the wall clock, or the sum of the calls' own times."""
    device = 0.0
    repeat = getattr(call, "repeat_calls", None)  # a host kernel's C loop (runtime.repeat.HostCall)
    t0 = time.perf_counter()
    if repeat is not None and not device_timed:
        repeat(number)
    else:
        for _ in range(number):
            seconds = call()
            if device_timed:
                device += float(seconds)
    if sync is not None:
        sync()
    wall = time.perf_counter() - t0
    return (device if device_timed else wall) / number
