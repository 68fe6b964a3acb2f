"""Fair speed comparisons in one process: the tuned kernel against a library (numpy/OpenBLAS).

On a shared or two-core machine, speed drifts over seconds and the libraries' spinning worker
threads (OpenBLAS, libgomp) steal cores from each other. So the contenders are timed in alternating
blocks with a pause between blocks; each gets the median of its own samples, and a ratio is taken
round by round, between blocks that ran within a second of each other.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..hai.timing import TimingPolicy, time_calls
from ..runtime.repeat import HostCall


@dataclass(frozen=True)
class Race:
    """The samples of contenders timed in turns: ``blocks[i][r]`` holds contender i's calls in round r."""

    blocks: tuple[tuple[tuple[float, ...], ...], ...]

    def median(self, i: int) -> float:
        """Contender i's median seconds per call over all its samples."""
        return statistics.median(t for block in self.blocks[i] for t in block)

    def ratio(self, num: int, den: int) -> float:
        """The median over rounds of (num's block median / den's block median).

        A round's two blocks run within a second of each other, so a slow phase of the machine (a
        two-core VM's FMA throughput moved between 227 and 339 GFLOP/s from one second to the next)
        mostly slows both and cancels in that round's ratio; a ratio of overall medians mixes phases.
        """
        rounds = zip(self.blocks[num], self.blocks[den])
        return statistics.median(statistics.median(a) / statistics.median(b) for a, b in rounds)


def race(
    fns: Sequence[Callable[[], Any]],
    repeat: int = 20,
    block: int = 5,
    pause_s: float = 0.3,
    warmup_s: float = 0.3,
) -> Race:
    """Each function timed in alternating blocks of ``block`` calls, ``repeat // block`` rounds.

    ``pause_s`` before each block lets the previous contender's threads stop spinning (OpenBLAS
    spins for about 0.1-0.2 s after a call; a shorter pause slowed the next kernel by up to 1.5x).
    Each block is preceded by ``warmup_s`` of calls, so that both contenders are timed warm (caches,
    thread pools, clocks) and the first slow calls after the other's block are not counted.
    """
    blocks: list[list[tuple[float, ...]]] = [[] for _ in fns]
    for _ in range(max(1, repeat // block)):
        for i, fn in enumerate(fns):
            time.sleep(pause_s)
            warm_until = time.perf_counter() + warmup_s
            fn()
            while time.perf_counter() < warm_until:
                fn()
            # one call a sample; warm already, so no first run of its own
            policy = TimingPolicy(repeat=block, warmup=0, min_repeat_s=0.0)
            blocks[i].append(tuple(time_calls(fn, policy, first_s=0.0)))
    return Race(tuple(tuple(b) for b in blocks))


def interleaved_medians(
    fns: Sequence[Callable[[], Any]],
    repeat: int = 20,
    block: int = 5,
    pause_s: float = 0.3,
    warmup_s: float = 0.3,
) -> list[float]:
    """Median seconds per call of each function, timed in turns by :func:`race`."""
    done = race(fns, repeat, block, pause_s, warmup_s)
    return [done.median(i) for i in range(len(fns))]


def compare_with_baseline(
    args: Sequence[Any],
    trace: Any,
    target: str,
    inputs: Sequence[Any],
    baseline: Callable[..., Any],
    repeat: int = 40,
) -> tuple[float, float]:
    """(tuned seconds, baseline seconds): ``trace`` rebuilt in this process and timed against
    ``baseline(*inputs)`` with :func:`interleaved_medians`.

    The kernel is timed as the runner times it: its compiled entry point called on the arrays'
    addresses, without the argument checks of ``BuiltFunction.__call__`` (about 6 us a call, which
    made a 2.2 us kernel read 8.1 us). Its outputs are checked against the baseline's first.
    """
    import numpy as np

    from ..errors import RunError
    from ..testing import split_args, tolerance
    from .isolated import build_isolated

    ins, outs = split_args(args)
    # In a worker with time and memory limits: with --resume the trace is a record from the log.
    fn = build_isolated(list(args), trace, target, name="tuned")
    out_arrays = [np.empty(t.shape, t.dtype) for t in outs]
    fn(*inputs, *out_arrays)  # checks the arrays once and applies the target's thread count
    expected = baseline(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for t, got, want in zip(outs, out_arrays, expected):
        rtol, atol = tolerance(t.dtype, np.asarray(want))
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            raise RunError(
                f"the re-built best kernel's {t.name} disagrees with the workload's numpy baseline"
            )
    ours, ref = interleaved_medians([raw_call(fn, [*inputs, *out_arrays]), lambda: baseline(*inputs)], repeat)
    return ours, ref


def raw_call(fn: Any, arrays: Sequence[Any]) -> Callable[[], Any]:
    """A call of ``fn``'s compiled entry point on ``arrays``' addresses, as the runner makes it.

    ``fn`` (an :class:`~.isolated.IsolatedFunction`, or a CPU BuiltFunction) was already called
    once on ``arrays``, which checked them; its kernel's ``cfunc`` is the C entry point.
    """
    # the compiled code and the buffers must outlive the calls (a freed fn segfaults)
    return HostCall(fn.kernel.cfunc, [a.ctypes.data for a in arrays], keep=(fn, arrays))
