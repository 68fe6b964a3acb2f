"""The CPU search space, Ansor style: rules that look at a workload's structure, never its name.

A candidate is produced by :meth:`SketchPolicy.sample`, which walks the stages from the outputs
back and applies the first rule that fits each stage:

- elementwise intermediates (padding, bias, activations) are inlined into their consumers; one
  read by several stages (softmax's exp) or through a window with every spatial axis (a depthwise
  conv's padding) may instead be materialized;
- a reduction with data reuse (matmul, conv: some input ignores a spatial axis) gets multi-level
  tiling "SSRSRS" inside a consumer that writes the result: its elementwise consumer when it has
  one (dense -> bias+relu), else a ``cache_write`` copy; the accumulator tile lives in registers;
- a reduction without reuse (softmax, norms, pooling) is either vectorized across its spatial
  lanes (a small window unrolled around them, with a few outputs of the next spatial axis inside it,
  each its own accumulator) or ``rfactor``-ed so that its contiguous reduction runs in vector
  lanes (whose partials then combine as a tree), and is computed at the root or inside the outer
  loops of the one root loop nest all its readers run in (softmax: max, exps and sum inside the
  output's row loop);
- any remaining stage gets its outer loops fused and parallel and its inner loop vectorized.

Every random choice is kept in a ``Decisions`` dict (JSON-able), so a candidate can be rebuilt,
mutated one decision at a time (:mod:`.mutate`) and recorded next to its trace.

The rules live by concept: :mod:`.sketch_tiling` (multi-level tiling), :mod:`.sketch_reduction`
(reductions without reuse, elementwise stages and their placement), on :mod:`.sketch_base` (the
structural tests and the builder's decisions); this module picks the rule for each stage.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..chip import vector_registers
from ..te.tensor import ComputeOp, Tensor
from .schedule import Schedule
from .sketch_attention import AttentionRules
from .sketch_base import (
    RFACTOR_LANES,
    UNROLL_STEPS,
    WINDOW_UNROLL_MAX,
    Decisions,
    _prod,
    contiguous_reduction,
    divisors,
    has_reuse,
    inner_options,
    sample_tiles,
    window_read,
)
from .sketch_reduction import ReductionRules
from .sketch_tiling import TilingRules

__all__ = [
    "RFACTOR_LANES", "UNROLL_STEPS", "WINDOW_UNROLL_MAX", "Decisions", "SketchPolicy", "_Builder", "_prod",
    "contiguous_reduction", "divisors", "has_reuse", "inner_options", "sample_tiles", "window_read",
]  # fmt: skip


class SketchPolicy:
    """``registers``: vector registers the accumulator tile may fill; by default 32 - 4 with 16
    float32 lanes (AVX-512 has 32) and 16 - 4 otherwise (AVX2, SSE; conservative elsewhere), 4 left
    for the operands. ``stream_outputs``: large outputs may be stored past the caches (the ``/stream``
    decision of sketch_reduction); off where another kernel reads the output next (a model's tasks)."""

    def __init__(
        self,
        outputs: Sequence[Tensor],
        cores: int = 2,
        lanes: int = 16,
        registers: int | None = None,
        stream_outputs: bool = True,
        flash: bool = True,
    ):
        self.outputs = list(outputs)
        self.flash = flash  # attentions as one flash loop nest (lowers for CPU-style targets only)
        self.cores = cores
        self.lanes = lanes
        self.registers = registers or vector_registers(lanes) - 4
        self.stream_outputs = stream_outputs

    def sample(self, rng: random.Random, decisions: Decisions | None = None) -> tuple[Schedule, Decisions]:
        """A random candidate; choices already in ``decisions`` are reused where still valid."""
        return _Builder(self, rng, dict(decisions or {})).build()


class _Builder(TilingRules, AttentionRules, ReductionRules):
    """Applies the first rule that fits each stage, outputs first."""

    def build(self) -> tuple[Schedule, Decisions]:
        s = self.s
        self.flash_rule()  # attentions become one flash loop nest each (sketch_attention)
        for st in list(s.stages):
            if st.name in self.done:
                continue
            if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output:
                # Read by several stages (softmax's exp: by the sum and the division), inlining
                # computes it once per reader; read through a window (a depthwise conv's padding),
                # its condition is evaluated on every tap and lane. A materialized copy is placed
                # like any other stage, and the window then reads plain vectors.
                readers = [c for c in s.stages if st in s.reads(c)]
                offered = len(readers) > 1 or any(window_read(c.op, st.op) for c in readers)
                if offered and not self.choose(f"{st.name}/inline", (True, False)):
                    continue
                st.compute_inline()
                self.done.add(st.name)
        hosts = {c.name for st in s.stages if (c := self.fusion_host(st)) is not None}
        for st in reversed(list(s.stages)):
            if st.name in self.done or st.name in hosts or not isinstance(st.op, ComputeOp):
                continue
            op = st.op
            if op.reduce_axis and has_reuse(op) and not self.matrix_vector(st):
                self.multi_level_tiling(st)
            elif op.reduce_axis:
                self.plain_reduction(st)
            else:
                self.elementwise(st)
        return s, self.used
