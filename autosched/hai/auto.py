"""``platform="auto"``: which available target runs a workload best.

In order: the target with the fastest tuned record (the caller looks records up, since logs sit
above the HAI), else the one a roofline over the chip facts calls fastest: the larger of
``flops / peak`` and ``bytes / bandwidth``, so compute-bound work goes to the highest peak and
memory-bound work (low arithmetic intensity) to the highest bandwidth. Only adapters whose spec says
they run (``can_run``) and whose chip answers ``info()`` here take part. The choice is logged at
debug level (logger ``autosched.hai``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from .base import ChipInfo

log = logging.getLogger("autosched.hai")

# (target string, chip) -> seconds of the fastest tuned record there, or None
TunedSeconds = Callable[[str, ChipInfo], "float | None"]


def available() -> list[tuple[str, ChipInfo]]:
    """(target string, chip facts) of every registered adapter that runs kernels here."""
    from .chip_facts import measured_info
    from .registry import get_adapter, kinds, spec_of

    found = []
    for kind in kinds():
        try:
            if not spec_of(kind).can_run:
                continue
            adapter = get_adapter(kind)
            found.append((str(adapter.target), measured_info(adapter, measure_now=False)))
        except Exception as e:  # a missing driver or package: not available, and not an error here
            log.debug("platform=auto: %s is not available here: %s", kind, e)
    return found


def workload_size(workload: Any) -> tuple[float, float]:
    """(flops, bytes of its inputs and outputs) of a workload instance, or (0, 0) for None."""
    if workload is None:
        return 0.0, 0.0
    nbytes = sum(math.prod(t.shape) * _itemsize(t.dtype) for t in workload.tensors)
    return float(workload.flop_count()), float(nbytes)


def _itemsize(dtype: str) -> int:
    import numpy as np

    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def roofline_seconds(chip: ChipInfo, flops: float, nbytes: float) -> float:
    """The roofline's time for the work on ``chip`` (a chip without facts takes forever)."""
    compute = flops / (chip.peak_gflops * 1e9) if chip.peak_gflops > 0 else math.inf
    memory = nbytes / (chip.bandwidth_gbs * 1e9) if chip.bandwidth_gbs > 0 else 0.0
    if flops == 0 and nbytes == 0:  # no workload: the highest peak
        return 1.0 / chip.peak_gflops if chip.peak_gflops > 0 else math.inf
    return max(compute, memory)


def choose_target(workload: Any = None, tuned_seconds: TunedSeconds | None = None) -> str:
    """The target string ``platform="auto"`` means for ``workload`` (a WorkloadInstance, or None)."""
    from .registry import default_target

    candidates = available()
    if not candidates:
        return default_target("cpu")
    name = getattr(workload, "name", "any workload")
    if tuned_seconds is not None:
        tuned = [(s, t) for t, chip in candidates if (s := tuned_seconds(t, chip)) is not None]
        if tuned:
            seconds, target = min(tuned)
            log.debug("platform=auto: %s on %s, its fastest tuned record (%.3g s)", name, target, seconds)
            return target
    flops, nbytes = workload_size(workload)
    seconds, target = min((roofline_seconds(chip, flops, nbytes), t) for t, chip in candidates)
    ridge = max(_ridge(chip) for _, chip in candidates)  # below it, the highest peak is out of reach
    bound = "memory" if nbytes and flops / nbytes < ridge else "compute"
    log.debug(
        "platform=auto: %s on %s, no tuned record; %s-bound, roofline %.3g s", name, target, bound, seconds
    )
    return target


def _ridge(chip: ChipInfo) -> float:
    """The chip's ridge point (flops per byte): work below it is memory-bound there."""
    return chip.peak_gflops / chip.bandwidth_gbs if chip.bandwidth_gbs > 0 else 0.0
