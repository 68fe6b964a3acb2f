"""What building and running a candidate produced. Errors are data: the tuner never sees an exception.

Example::

    MeasureResult(costs=(1.2e-3, 1.1e-3, 1.2e-3))                 # ok; the tuner uses the median
    MeasureResult((), "timeout", "no result within 10 s", build_s=0.4, run_s=10.0)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ..errors import ERROR_KINDS as ERROR_KINDS  # defined with the exceptions: one place for failures
from ..errors import FAILED_COST as FAILED_COST


@dataclass(frozen=True)
class BuildResult:
    """A built candidate, or why there is none: a shared library (``path`` defines
    ``void func_name(void*...)``) for an adapter that emits objects, else the lowered function
    (``func``, already rendered once) that the runner's worker compiles with the adapter."""

    path: str | None
    func_name: str = ""
    nargs: int = 0
    error: str | None = None
    error_msg: str = ""
    build_s: float = 0.0
    workspace_bytes: int = 0  # heap the kernel allocates (upper bound); explains crashes near the limit
    func: Any = None  # the lowered PrimFunc, where the adapter compiles in the process that runs it

    def __post_init__(self) -> None:
        if self.error is not None and self.error not in ERROR_KINDS:
            raise ValueError(f"BuildResult: unknown error kind {self.error!r}; expected one of {ERROR_KINDS}")

    @property
    def ok(self) -> bool:
        return self.error is None and (self.path is not None or self.func is not None)


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per run of each timed repeat, or an error kind from :data:`ERROR_KINDS` and a message."""

    costs: tuple[float, ...]
    error: str | None = None
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    check: str = "full"  # how the outputs were checked: "full", "numpy" or "sampled:N" (MeasureTask.check)
    timing: dict[str, Any] | None = None  # how the costs were timed (hai.timing.TimingPolicy.to_json())

    def __post_init__(self) -> None:
        if self.error is not None and self.error not in ERROR_KINDS:
            raise ValueError(
                f"MeasureResult: unknown error kind {self.error!r}; expected one of {ERROR_KINDS}"
            )

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def median(self) -> float:
        """The median cost in seconds; :data:`FAILED_COST` for a failed candidate."""
        return statistics.median(self.costs) if self.ok else FAILED_COST

    def __str__(self) -> str:
        if self.ok:
            return f"{self.median * 1e3:.4f} ms (median of {len(self.costs)})"
        return f"{self.error}: {self.error_msg}"
