"""Fair speed comparisons in one process: the tuned kernel against a library (numpy/OpenBLAS).

On a shared or two-core machine, speed drifts over seconds and the libraries' spinning worker
threads (OpenBLAS, libgomp) steal cores from each other. So the contenders are timed in alternating
blocks with a pause between blocks, and each gets the median of its own samples.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def interleaved_medians(
    fns: Sequence[Callable[[], Any]],
    repeat: int = 20,
    block: int = 5,
    pause_s: float = 0.3,
    warmup_s: float = 0.3,
) -> list[float]:
    """Median seconds per call of each function, timed in alternating blocks of ``block`` calls.

    ``pause_s`` before each block lets the previous contender's threads stop spinning (OpenBLAS
    spins for about 0.1-0.2 s after a call; a shorter pause slowed the next kernel by up to 1.5x).
    Each block is preceded by ``warmup_s`` of calls, so that both contenders are timed warm (caches,
    thread pools, clocks) and the first slow calls after the other's block are not counted.
    """
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(max(1, repeat // block)):
        for i, fn in enumerate(fns):
            time.sleep(pause_s)
            warm_until = time.perf_counter() + warmup_s
            fn()
            while time.perf_counter() < warm_until:
                fn()
            for _ in range(block):
                start = time.perf_counter()
                fn()
                times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def compare_with_baseline(
    args: Sequence[Any],
    trace: Any,
    target: str,
    inputs: Sequence[Any],
    baseline: Callable[..., Any],
    repeat: int = 40,
) -> tuple[float, float]:
    """(tuned seconds, baseline seconds): ``trace`` rebuilt in this process and timed against
    ``baseline(*inputs)`` with :func:`interleaved_medians`."""
    import numpy as np

    from ..build import build
    from ..search_space.schedule import replay
    from ..testing import split_args

    ins, outs = split_args(args)
    fn = build(replay(outs, trace), list(args), target, name="tuned")
    out_arrays = [np.empty(t.shape, t.dtype) for t in outs]
    ours, ref = interleaved_medians([lambda: fn(*inputs, *out_arrays), lambda: baseline(*inputs)], repeat)
    return ours, ref
