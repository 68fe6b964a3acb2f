"""A measure task: what the builder and runner need to know about one workload on one target."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..lower.bounds import check_bounds
from ..target import parse_target
from ..te.reference import evaluate, random_inputs
from ..te.tensor import PlaceholderOp, Tensor
from ..te.workload import count_flops
from ..testing import tolerance


@dataclass(frozen=True, eq=False)
class MeasureTask:
    """A workload's tensors (inputs, then outputs), its target, and reference data made once.

    Example::

        task = MeasureTask.create("matmul", [A, B, C], "llvm-cpu")
        task.expected[0]            # the numpy reference's C for task.inputs
    """

    name: str
    args: tuple[Tensor, ...]
    target: str
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    tolerances: tuple[tuple[float, float], ...]  # (rtol, atol) per output
    flops: float

    @staticmethod
    def create(
        name: str,
        args: Sequence[Tensor],
        target: str = "llvm-cpu",
        *,
        seed: int = 0,
        flops: float | None = None,
    ) -> MeasureTask:
        """Draw fresh random non-zero inputs with ``seed`` and compute the expected outputs once."""
        args = tuple(args)
        ins = [t for t in args if isinstance(t.op, PlaceholderOp)]
        outs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
        if args[: len(ins)] != tuple(ins) or not outs:
            raise ValueError(
                f"MeasureTask {name!r}: args must be inputs then at least one output, got {args}"
            )
        check_bounds(outs)  # an out-of-bounds program is refused before any reference or trial
        inputs = random_inputs(ins, seed=seed)
        expected = evaluate(outs, dict(zip(ins, inputs)))
        return MeasureTask(
            name=name,
            args=args,
            target=str(parse_target(target)),
            inputs=tuple(inputs),
            expected=tuple(np.ascontiguousarray(e) for e in expected),
            tolerances=tuple(tolerance(t.dtype, e) for t, e in zip(outs, expected)),
            flops=float(count_flops(outs) if flops is None else flops),
        )

    @property
    def outputs(self) -> list[Tensor]:
        return list(self.args[len(self.inputs) :])

    @property
    def func_name(self) -> str:
        """The kernel's C symbol: the task name made a valid identifier."""
        ident = re.sub(r"\W", "_", self.name) or "kernel"
        return ident if not ident[0].isdigit() else f"k_{ident}"
