"""The ``null`` adapter: a compile-only GPU-style device (tinygrad's ``ops_null`` idea).

It lowers with the GPU passes, renders C-like source (``null -dialect=cuda`` or the default OpenCL C)
and checks the launch limits a real GPU would, so CI without a GPU exercises every path up to the
launch. ``launch`` does nothing and ``time`` returns zeros; ``info()`` and ``spec.can_run`` say so,
and measurement and the conformance suite stop before running on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.c_like import DIALECTS, DeviceProgram, render_c_like
from ..errors import CompileError, RunError, TargetError
from ..lower.ir import PrimFunc
from ..target import Target, parse_target
from .base import ChipInfo
from .spec import AdapterSpec

MAX_THREADS = 1024
SHARED_BYTES = 48 * 1024


def _check_options(options: Any) -> None:
    dialect = options.get("dialect", "opencl")
    if dialect not in DIALECTS:
        raise TargetError(f"-dialect={dialect}: the null device renders one of {', '.join(DIALECTS)}")


@dataclass
class NullKernel:
    """A rendered program that nothing runs."""

    name: str
    func: PrimFunc
    program: DeviceProgram = field(repr=False)

    @property
    def source(self) -> str:
        return self.program.source


class NullAdapter:
    """HardwareAdapter that compiles and never runs.

    Example::

        adapter = NullAdapter("null -dialect=cuda")
        kernel = adapter.compile(lower(s, args, "k", target="null"))
        adapter.time(kernel, args)            # [0.0, ...]: nothing ran
    """

    spec = AdapterSpec(
        "null", options=("dialect",), style="gpu", can_run=False, check_options=_check_options,
        description="compile-only device: renders C-like GPU code; launch does nothing, time returns zeros",
        source_label="C-like GPU code",
    )  # fmt: skip

    def __init__(self, target: Target | str = "null"):
        self.target = parse_target(target)
        if self.target.kind != self.spec.kind:
            raise TargetError(f"NullAdapter takes a null target, got {self.target}")
        self.dialect = DIALECTS[self.target.get("dialect") or "opencl"]

    def info(self) -> ChipInfo:
        return ChipInfo(
            name="null device",
            kind="gpu",
            arch=f"null-{self.dialect.name}",
            shared_mem_bytes=SHARED_BYTES,
            max_threads_per_block=MAX_THREADS,
            extra={"compile_only": True, "note": "compile-only: launch does nothing, time returns zeros"},
        )

    def render(self, func: PrimFunc) -> DeviceProgram:
        return render_c_like(func, self.dialect)

    def compile(self, func: PrimFunc) -> NullKernel:
        """Render and check each kernel's threads and shared memory against a typical GPU's limits."""
        prog = self.render(func)
        for k in prog.kernels:
            if k.threads > MAX_THREADS or k.shared_bytes > SHARED_BYTES:
                raise CompileError(
                    f"null: {func.name}: {k.name} needs {k.threads} threads and {k.shared_bytes} B of "
                    f"shared memory; the null device allows {MAX_THREADS} and {SHARED_BYTES} B"
                )
        return NullKernel(func.name, func, prog)

    def alloc(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype="uint8" if dtype == "bool" else dtype)

    def copy_in(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).copy()

    def copy_out(self, handle: np.ndarray, out: np.ndarray) -> None:
        out[...] = handle

    def launch(self, kernel: NullKernel, args: list[Any]) -> None:
        """Checks the argument count, then does nothing: outputs keep whatever they held."""
        if len(args) != len(kernel.func.params):
            raise RunError(
                f"null: {kernel.name}: expected {len(kernel.func.params)} arguments, got {len(args)}"
            )

    def time(self, kernel: NullKernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        self.launch(kernel, args)
        return [0.0] * repeat
