"""A measure task: what the builder and runner need to know about one workload on one target.

The expected outputs are made once, in one of three ways, named by :attr:`MeasureTask.check` (and
written to every measure result):

- ``"full"``: the numpy reference evaluator on every output element (small workloads);
- ``"numpy"``: above :data:`SAMPLE_ABOVE` points, the workload's own ``numpy=`` function in float64
  (BLAS-fast), first checked against the te definition at sampled outputs;
- ``"sampled:N"``: above it without ``numpy=``, the evaluator at N random output elements only
  (a 2048^3 matmul: 0.3 s instead of 8.5 s); kernels are compared there. A row-separable chain of
  stages (attention: scores, softmax, product per query row) is evaluated at a few hundred whole
  output rows instead (``te/reference_sampled.py``), and N counts the elements of those rows.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import WorkloadError
from ..lower.bounds import check_bounds
from ..target import parse_target
from ..te.expr import is_float
from ..te.reference import evaluate, evaluate_at, random_inputs, reference_work
from ..te.reference_sampled import evaluate_rows, row_flat_indices, sample_rows
from ..te.tensor import PlaceholderOp, Tensor
from ..te.workload import count_flops
from ..testing import tolerance

SAMPLE_ABOVE = 1 << 28  # evaluator points (about 0.3 s of numpy) above which the reference is sampled
SAMPLES = 4096  # output elements checked per output when sampled
MEMORY_FRACTION = 0.5  # the task's arrays may take at most this share of physical memory


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
    expected: tuple[np.ndarray, ...]  # per output: all of it, or its values at ``samples``
    tolerances: tuple[tuple[float, float], ...]  # (rtol, atol) per output
    flops: float
    samples: tuple[np.ndarray | None, ...] = ()  # per output: flat indices checked, None for all
    check: str = "full"  # "full" | "numpy" | "sampled:N": how outputs are checked (see module doc)

    @staticmethod
    def create(
        name: str,
        args: Sequence[Tensor],
        target: str = "llvm-cpu",
        *,
        seed: int = 0,
        flops: float | None = None,
        numpy_fn: Callable[..., Any] | None = None,
        on_reference: Callable[[str], None] | None = None,
    ) -> MeasureTask:
        """Draw fresh random non-zero inputs with ``seed`` and compute the expected outputs once.

        ``numpy_fn``: the workload's ``numpy=`` (inputs -> outputs), used above :data:`SAMPLE_ABOVE`.
        ``on_reference(text)`` is told before a reference that takes a while starts.
        """
        args = tuple(args)
        ins = [t for t in args if isinstance(t.op, PlaceholderOp)]
        outs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
        if args[: len(ins)] != tuple(ins) or not outs:
            raise ValueError(
                f"MeasureTask {name!r}: args must be inputs then at least one output, got {args}"
            )
        check_bounds(outs)  # an out-of-bounds program is refused before any reference or trial
        _check_memory(name, args)
        inputs = random_inputs(ins, seed=seed)
        work = reference_work(outs)
        if work <= SAMPLE_ABOVE:
            samples: list[np.ndarray | None] = [None] * len(outs)
            expected, check = evaluate(outs, dict(zip(ins, inputs))), "full"
        else:
            how = "the workload's numpy= function" if numpy_fn is not None else "sampled outputs"
            if on_reference is not None:
                on_reference(f"{name}: computing the reference ({how}, {work:.2g} points)...")
            expected, samples, check = _large_reference(name, ins, outs, inputs, numpy_fn, seed)
        return MeasureTask(
            name=name,
            args=args,
            target=str(parse_target(target)),
            inputs=tuple(inputs),
            expected=tuple(np.ascontiguousarray(e) for e in expected),
            tolerances=tuple(tolerance(t.dtype, e) for t, e in zip(outs, expected)),
            flops=float(count_flops(outs) if flops is None else flops),
            samples=tuple(samples),
            check=check,
        )

    @property
    def outputs(self) -> list[Tensor]:
        return list(self.args[len(self.inputs) :])

    @property
    def func_name(self) -> str:
        """The kernel's C symbol: the task name made a valid identifier."""
        ident = re.sub(r"\W", "_", self.name) or "kernel"
        return ident if not ident[0].isdigit() else f"k_{ident}"


def _large_reference(
    name: str,
    ins: list[Tensor],
    outs: list[Tensor],
    inputs: list[np.ndarray],
    numpy_fn: Callable[..., Any] | None,
    seed: int,
) -> tuple[list[np.ndarray], list[np.ndarray | None], str]:
    if numpy_fn is None:
        rows = sample_rows(outs, seed + 1)
        if rows is not None:  # whole rows of each stage: no stage evaluated everywhere
            at_rows = evaluate_rows(outs, dict(zip(ins, inputs)), rows)
            flat_rows = [row_flat_indices(t, rows) for t in outs]
            return [a.reshape(-1) for a in at_rows], list(flat_rows), f"sampled:{sum(map(len, flat_rows))}"
    rng = np.random.default_rng(seed + 1)
    flat = [np.unique(rng.integers(0, math.prod(t.shape), SAMPLES)) for t in outs]
    at_samples = evaluate_at(outs, dict(zip(ins, inputs)), flat)
    if numpy_fn is None:
        return at_samples, list(flat), f"sampled:{SAMPLES}"
    wide = [a.astype(np.float64) if is_float(str(a.dtype)) else a for a in inputs]
    try:
        got = numpy_fn(*wide)
    except Exception as e:
        raise WorkloadError(f"workload {name!r}: its numpy= function raised {type(e).__name__}: {e}") from e
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    if len(got) != len(outs):
        raise WorkloadError(
            f"workload {name!r}: numpy= returned {len(got)} array(s) for {len(outs)} output(s)"
        )
    expected = []
    for t, g, idx, want in zip(outs, got, flat, at_samples, strict=True):
        g = np.asarray(g)
        if g.shape != t.shape:
            raise WorkloadError(
                f"workload {name!r}: numpy= gives output {t.name!r} of shape {g.shape}, "
                f"the te definition {t.shape}"
            )
        g = g.astype(t.dtype)
        rtol, atol = tolerance(t.dtype, want)
        if not np.allclose(g.reshape(-1)[idx], want, rtol=rtol, atol=atol, equal_nan=True):
            raise WorkloadError(
                f"workload {name!r}: numpy= disagrees with the te definition of output {t.name!r} at "
                f"sampled elements; fix the numpy= function or remove it"
            )
        expected.append(g)
    return expected, [None] * len(outs), "numpy"


def _check_memory(name: str, args: Sequence[Tensor]) -> None:
    """A clear error instead of a MemoryError (or the OOM killer) for shapes that cannot fit."""
    need = sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in args)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > MEMORY_FRACTION * have:
        raise WorkloadError(
            f"workload {name!r}: its tensors need {need / 2**30:.1f} GiB, more than "
            f"{MEMORY_FRACTION:.0%} of this machine's {have / 2**30:.1f} GiB; use smaller shapes (--args)"
        )
