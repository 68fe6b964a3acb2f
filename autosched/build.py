"""``autosched.build``: a schedule to a callable kernel on a target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .hai.registry import get_adapter
from .lower.ir import PrimFunc
from .lower.pipeline import lower
from .search_space.schedule import Schedule
from .target import Target
from .te.tensor import Tensor


def check_arrays(name: str, params: Sequence[Any], arrays: Sequence[Any]) -> list[np.ndarray]:
    """The arrays, checked against the kernel's parameters, with a message naming any misfit."""
    if len(arrays) != len(params):
        expected = ", ".join(f"{p.name}: {p.dtype}{list(p.shape)}" for p in params)
        raise TypeError(f"{name}: expected {len(params)} arrays ({expected}), got {len(arrays)}")
    out = []
    for i, (p, a) in enumerate(zip(params, arrays)):
        if not isinstance(a, np.ndarray):
            if hasattr(a, "__dlpack__"):
                a = np.from_dlpack(a)
            else:
                raise TypeError(
                    f"{name}: argument {i} ({p.name!r}) must be a numpy array, got {type(a).__name__}"
                )
        if a.dtype != np.dtype(p.dtype) or tuple(a.shape) != tuple(p.shape):
            raise ValueError(
                f"{name}: argument {i} ({p.name!r}) expects {p.dtype}{list(p.shape)}, "
                f"got {a.dtype}{list(a.shape)}"
            )
        if not a.flags.c_contiguous:
            raise ValueError(
                f"{name}: argument {i} ({p.name!r}) must be C-contiguous (use np.ascontiguousarray)"
            )
        out.append(a)
    return out


class BuiltFunction:
    """A compiled kernel callable on numpy arrays: inputs, then the outputs it fills."""

    def __init__(self, func: PrimFunc, adapter: Any, kernel: Any):
        self.func = func
        self.adapter = adapter
        self.kernel = kernel
        self.name = func.name

    @property
    def params(self) -> tuple[Any, ...]:
        return self.func.params

    def __call__(self, *arrays: Any) -> None:
        checked = check_arrays(self.name, self.func.params, arrays)
        self.adapter.launch(self.kernel, checked)

    def time(self, *arrays: Any, repeat: int = 5) -> list[float]:
        checked = check_arrays(self.name, self.func.params, arrays)
        return self.adapter.time(self.kernel, checked, repeat=repeat)

    def source(self) -> str:
        return str(self.adapter.render(self.func))


def build(
    sch: Schedule, args: Sequence[Tensor], target: str | Target = "llvm-cpu", name: str = "main"
) -> BuiltFunction:
    """Lower and compile ``sch``; the result takes numpy arrays for ``args`` (inputs, then outputs).

    Example: ``f = autosched.build(s, [A, B, C], "llvm-cpu"); f(a, b, c)``.
    """
    func = lower(sch, args, name)
    adapter = get_adapter(target)
    return BuiltFunction(func, adapter, adapter.compile(func))
