"""The Hardware Abstraction Interface: the handful of calls a chip implements to join autosched.

An adapter holds no operator code. It turns loop IR into its own source (through ``codegen``),
compiles that source, moves memory, launches and times kernels, and states its chip facts.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..chip import ChipInfo as ChipInfo  # the chip facts live next to the target; named here too
from ..lower.ir import PrimFunc
from ..target import Target


class Kernel(Protocol):
    """A compiled function: ``params`` mirror the PrimFunc's, inputs then outputs."""

    name: str


@runtime_checkable
class HardwareAdapter(Protocol):
    target: Target

    def info(self) -> ChipInfo: ...

    def render(self, func: PrimFunc) -> Any:
        """Loop IR to this adapter's source (text or a module); pure, no device needed."""
        ...

    def compile(self, func: PrimFunc) -> Kernel:
        """Render and compile; raises CompileError."""
        ...

    def alloc(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    def copy_in(self, array: np.ndarray) -> Any: ...

    def copy_out(self, handle: Any, out: np.ndarray) -> None: ...

    def launch(self, kernel: Kernel, args: list[Any]) -> None: ...

    def time(self, kernel: Kernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        """Seconds per run for each repeat, after warm-up; raises RunError."""
        ...
