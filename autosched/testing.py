"""Checking generated code against the numpy reference: the one test helper every test uses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .lower.pipeline import lower
from .search_space.schedule import Schedule
from .te.reference import evaluate, random_inputs
from .te.tensor import PlaceholderOp, Tensor

TOLERANCE = {"float32": (2e-4, 2e-5), "float64": (1e-9, 1e-12), "int32": (0, 0), "int64": (0, 0)}


def tolerance(dtype: str, expected: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) for comparing an output with its reference.

    The absolute part scales with the output's magnitude: a float32 sum of a thousand terms has
    rounding errors relative to the terms, so an element that cancels to near zero can be off by
    more than ``rtol`` of itself. A wrong kernel is off by the order of the values themselves.
    """
    rtol, atol = TOLERANCE.get(dtype, (1e-5, 1e-6))
    if expected.size and np.issubdtype(expected.dtype, np.floating):
        finite = np.abs(expected[np.isfinite(expected)])
        if finite.size:
            atol = max(atol, rtol * float(finite.max()))
    return rtol, atol


def split_args(args: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    inputs = [t for t in args if isinstance(t.op, PlaceholderOp)]
    outputs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    return inputs, outputs


def run_schedule(
    sch: Schedule, args: Sequence[Tensor], inputs: list[np.ndarray], target: str = "llvm-cpu"
) -> list[np.ndarray]:
    """Outputs of ``sch`` on ``inputs``. ``target="interpret"`` runs the loop IR in Python."""
    _, outs = split_args(args)
    # Outputs start as garbage so a kernel that skips an element cannot pass by luck.
    out_arrays = [np.full(t.shape, 7, dtype=t.dtype) for t in outs]
    arrays = [*inputs, *out_arrays]
    if target == "interpret":
        from .hai.reference import run_loops

        run_loops(lower(sch, args, "kernel"), arrays)
    else:
        from .build import build

        build(sch, args, target, name="kernel")(*arrays)
    return out_arrays


def assert_matches_numpy(
    sch: Schedule,
    args: Sequence[Tensor],
    target: str = "llvm-cpu",
    seed: int = 0,
    int_high: int = 2,
    inputs: list[np.ndarray] | None = None,
) -> None:
    """Run ``sch`` on fresh random inputs (or ``inputs``) and compare every output with the numpy
    reference. Outputs that are NaN in the reference fail the check: they prove nothing."""
    ins, outs = split_args(args)
    if inputs is None:
        inputs = random_inputs(ins, seed=seed, int_high=int_high)
    expected = evaluate(outs, dict(zip(ins, inputs)))
    got = run_schedule(sch, args, inputs, target)
    for t, e, g in zip(outs, expected, got):
        if np.issubdtype(e.dtype, np.floating) and np.isnan(e).any():
            raise AssertionError(f"the reference of {t.name!r} has NaNs: choose inputs in its domain")
        rtol, atol = tolerance(t.dtype, e)
        np.testing.assert_allclose(
            g, e, rtol=rtol, atol=atol, err_msg=f"output {t.name!r} differs from the numpy reference"
        )
