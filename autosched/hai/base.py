"""The Hardware Abstraction Interface: the handful of calls a chip implements to join autosched.

An adapter holds no operator code. It turns loop IR into its own source (through ``codegen``),
compiles that source, moves memory, launches and times kernels, and states its chip facts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..lower.ir import PrimFunc
from ..target import Target


@dataclass(frozen=True)
class ChipInfo:
    """Facts about a chip, recorded in logs and used as cost-model features."""

    name: str  # e.g. "znver4" or "NVIDIA H200"
    kind: str  # "cpu" | "gpu"
    arch: str  # LLVM cpu name, "sm_90", OpenCL device version...
    features: tuple[str, ...] = ()  # ISA features such as "avx512f"
    cores: int = 1
    vector_bits: int = 128
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 0
    shared_mem_bytes: int = 0
    max_threads_per_block: int = 1
    peak_gflops: float = 0.0  # fp32, estimated from clock x lanes x FMA units where not measured
    bandwidth_gbs: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["features"] = list(self.features)
        return d


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
