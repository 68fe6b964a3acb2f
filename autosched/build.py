"""``autosched.build``: a schedule to a callable kernel on a target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .hai.registry import get_adapter
from .lower.ir import PrimFunc
from .lower.pipeline import lower
from .runtime.arrays import check_call
from .search_space.schedule import Schedule
from .target import Target
from .te.tensor import PlaceholderOp, Tensor


def check_arrays(
    name: str, params: Sequence[Any], arrays: Sequence[Any], n_inputs: int | None = None
) -> list[np.ndarray]:
    """The arrays, checked against the kernel's parameters, with a message naming any misfit.

    With ``n_inputs``, the parameters after the inputs are outputs: they must be writable and share
    no memory with any other argument (:func:`autosched.runtime.arrays.check_call`).
    """
    first_output = len(params) if n_inputs is None else n_inputs
    specs = [(p.name, tuple(p.shape), np.dtype(p.dtype), i >= first_output) for i, p in enumerate(params)]
    return check_call(name, specs, arrays)


def count_inputs(args: Sequence[Tensor]) -> int:
    """How many of ``args`` (inputs, then outputs) are placeholders."""
    return sum(1 for t in args if isinstance(t.op, PlaceholderOp))


class BuiltFunction:
    """A compiled kernel callable on numpy arrays: inputs, then the outputs it fills."""

    def __init__(self, func: PrimFunc, adapter: Any, kernel: Any, n_inputs: int | None = None):
        self.func = func
        self.adapter = adapter
        self.kernel = kernel
        self.name = func.name
        self.n_inputs = n_inputs

    @property
    def params(self) -> tuple[Any, ...]:
        return self.func.params

    def __call__(self, *arrays: Any) -> None:
        checked = check_arrays(self.name, self.func.params, arrays, self.n_inputs)
        self.adapter.launch(self.kernel, checked)

    def time(self, *arrays: Any, repeat: int = 5) -> list[float]:
        checked = check_arrays(self.name, self.func.params, arrays, self.n_inputs)
        return self.adapter.time(self.kernel, checked, repeat=repeat)

    def source(self) -> str:
        return str(self.adapter.render(self.func))


def build(
    sch: Schedule, args: Sequence[Tensor], target: str | Target = "llvm-cpu", name: str = "main"
) -> BuiltFunction:
    """Lower and compile ``sch``; the result takes numpy arrays for ``args`` (inputs, then outputs).

    Example: ``f = autosched.build(s, [A, B, C], "llvm-cpu"); f(a, b, c)``.
    """
    func = lower(sch, args, name, target=target)
    adapter = get_adapter(target)
    return BuiltFunction(func, adapter, adapter.compile(func), count_inputs(args))
