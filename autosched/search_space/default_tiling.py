"""The untuned schedule of a reduction with reuse (conv, matmul): the sketch's multi-level tiling
(:class:`~.sketch_tiling.TilingRules`) with fixed decisions instead of sampled ones.

A GEMM (one reduction, a packed operand) gets BLIS's micro-kernel instead: 6 rows of up to 4 vectors, the
last row tile partial where 6 does not divide the rows (:meth:`_FixedTiling.gemm_tile`).

Vectorized along the output's last axis with the reduction innermost, a 7- or 14-wide pointwise conv
ran in 2- and 7-lane vectors and reloaded its output on every step (MobileNetV2's 960 -> 160 at 7x7:
10-126 ms, tuned about 0.2-1.5). Here the vector axis is one whose extent fills whole vectors (the
width where it does, else an output channel that does, never a depthwise conv's), the accumulator tile
(up to 16 vectors) stays in registers while the whole reduction runs past it, a strided vector operand
is packed, and the outer loops are parallel. ``benchmarks/default_convs.py`` times every MobileNetV2 /
ResNet-18 conv kind against another revision's default.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..te.expr import IterVar
from ..te.tensor import ComputeOp, TensorRead, walk
from .schedule import Schedule
from .sketch import SketchPolicy
from .sketch_base import RFACTOR_LANES, divisors, has_reuse
from .sketch_reduction import ReductionRules
from .sketch_tiling import TilingRules, best_filled, plain_rows

ACCUMULATORS = 16  # vectors in the register tile: 16 of AVX-512's 32, the rest for operands
TILE_BYTES = 32 * 1024  # the producer's accumulator tile: L1
ROW_MAX = 16  # the reused axis's register tile
KC = 256  # a GEMM's reduction chunk
UNROLL = 64  # the register tile's loops and a 3x3 window's taps unrolled, a channel loop not
ROWS_VECTORS = 8  # a whole-row vector tile's most vectors
ROWS_CHUNK_BYTES = 24 * 1024  # half of L1
ROWS_ACCUMULATORS = 24  # its accumulators: 3 rows of channels x 7 vectors beside 7 data vectors
PACK_MIN_ROWS = 64  # a GEMM's B packed in the default where at least this many rows reuse it
GEMM_ROWS = 6  # rows of a GEMM's register tile, the last one partial where 6 does not divide the rows
GEMM_WASTE = 1 / 16  # the most padding (a share of the rows) that a partial last row tile may cost
GEMM_STEPS = 4  # reduction steps a GEMM's register tile takes per loop iteration
MV_LANES = 2  # vectors of partial sums a matrix-vector product's row reduction keeps


class _FixedTiling(TilingRules, ReductionRules):
    """:class:`TilingRules` on an existing schedule, each decision fixed (:meth:`choose`, :meth:`tiles`,
    :meth:`register_tiles`) rather than sampled; a matrix-vector product reduced row by row
    (:meth:`~.sketch_reduction.ReductionRules.plain_reduction`)."""

    def __init__(self, s: Schedule, cores: int, lanes: int):
        self.p = SketchPolicy([], cores=cores, lanes=lanes)
        self.rng = random.Random(0)  # never drawn from: every decision below is fixed
        self.given: dict[str, Any] = {}
        self.used: dict[str, Any] = {}
        self.s = s
        self.done: set[str] = set()
        self.packs = False
        self.channel_lanes = False
        self.kc = 0

    def choose(self, key: str, options: Sequence[Any]) -> Any:
        value = self.given.get(key)
        if value not in options:
            # Packing where the vector operand is not contiguous along the lanes; no unswitched border
            # tiles; a classifier's matrix-vector product reduced row by row in MV_LANES lanes (the
            # generic default put its 1000 outputs in lanes, gathering rows of W 5 KiB apart: 1.26 ms
            # against 0.27 so; MobileNetV2's 1280 -> 1000, 1 thread, CPU time), its outputs parallel
            # (the tiled stages' depth is given by register_tiles).
            fixed = {
                "pack": self.packs, "unroll": UNROLL, "unswitch_rows": False, "matrix_vector": True,
                "rfactor": True, "parallel_rfactor": False,
            }  # fmt: skip
            if key.endswith("/rfactor_lanes"):
                fixed["rfactor_lanes"] = self._mv_lanes(options)
            elif key.endswith("/parallel_depth"):
                fixed["parallel_depth"] = max(options)
            value = fixed.get(key.rsplit("/", 1)[-1], options[0])
            value = value if value in options else options[0]
        self.used[key] = value
        return value

    def _mv_lanes(self, options: Sequence[Any]) -> Any:
        """The widest of ``options`` up to MV_LANES vectors: several accumulators in flight (4 lanes, a
        quarter vector, ran the classifier at 0.47 ms; 16 to 64, 0.26-0.28)."""
        wide = [v for v in options if v in RFACTOR_LANES and v <= MV_LANES * self.p.lanes]
        return max(wide) if wide else None

    def tiles(
        self,
        key: str,
        extent: int,
        levels: int,
        inner_max: int = 64,
        inner_multiple: int = 1,
        tails: bool = False,
    ) -> list[int]:
        # Only the reduction axes come here (register_tiles does the spatial ones): all inner, so the
        # accumulators are loaded and stored once per tile, not once per outer reduction step.
        inner = self.kc if self.kc and extent % self.kc == 0 else extent
        value = [1] * (levels - 2) + [extent // inner, inner]
        self.used[key] = value
        return value

    def register_tiles(self, name: str, axes: list[IterVar], tails: bool = False) -> list[list[int]]:
        """The vector axis (last) in one or two whole vectors (or the best-filled divisor where its
        extent has none), one axis the vector operand is reused along tiled up to the register budget,
        everything else outside: the level-0 loops run the vector axis's tiles (the packed operand is
        copied once per tile), level 1 the rest."""
        lanes = self.p.lanes
        *outer, last = axes
        op = self.s[name].op
        assert isinstance(op, ComputeOp)
        rows = self.rows_per_tile(op, axes)
        if rows:  # whole rows in lanes (sketch_tiling.whole_rows): 56 wide, 2 rows are 7 full vectors
            v = last.extent
            row = rows * v // lanes
        elif self.one_row(op, axes):  # 112 wide: a row of 7 vectors (in tiles of 2, 1.2x slower)
            rows, v = 1, last.extent
            row = v // lanes
        elif last.extent % lanes == 0:
            v = 2 * lanes if last.extent % (2 * lanes) == 0 else lanes
            row = v // lanes
        else:  # the fullest vectors a divisor gives (1000 wide: 40, 83% of the lanes; 8 fills half)
            v = best_filled(last.extent, lanes)
            row = math.ceil(v / lanes)
        reads = [n for n in walk(op.body) if isinstance(n, TensorRead)]
        along = [r for r in reads if _uses(r, last)]
        # A conv's data across output channels, its weight across pixels, matmul's B across rows.
        reused = [a for a in outer if a.extent > 1 and any(not _uses(r, a) for r in along)]
        candidates = reused or [a for a in outer if a.extent > 1]
        row_axis = candidates[-1] if candidates else None
        # An input read across the lanes with a stride is packed with them contiguous: a conv's weight
        # with channels in lanes (not one stored K-last), dense's W[j, k] (BERT's 128 x 768 x 768 dense:
        # 5.7 ms gathering, 1.5 packed). A K-last weight read in place is packed too: its rows 2 KiB
        # apart (512 channels) shared L1 sets (ResNet-18's 7x7 3x3 conv: 4.0 ms in place, 2.0 packed;
        # 1 thread, CPU time).
        # So is a GEMM's row-major B[k, j] that enough rows reuse: read in place, each K chunk of a
        # panel is rows N * 4 bytes apart (2 threads, Zen 5: 1024^3 5.71 ms in place, 4.81 packed;
        # 128 x 3072 x 768 2.10 and 1.53; 64 x 1024 x 1024 0.50 and 0.41); for a few rows the copy is
        # most of the work (16 x 1024 x 1024: 0.16 in place, 0.20 packed).
        packable = self.packable(op)
        strided = any(layout is not None for _, layout in packable)
        gemm_rows = reused[-1].extent if reused and len(op.reduce_axis) == 1 else 0
        self.packs = self.channel_lanes or strided or (bool(packable) and gemm_rows >= PACK_MIN_ROWS)
        # Up to 16 along an axis the vector operand is reused on (MobileNetV2's 56x56 144 -> 24
        # projection: 0.52 ms at 8, 0.31 at 12), 8 otherwise (a depthwise conv's rows reuse nothing:
        # its 112x112 one ran 0.29 ms at 8, 0.43 at 16).
        # AVX2 has 16 registers, not 32: its tile keeps to the policy's 12 (16 spilled on a Zen 3).
        most = min(ROWS_ACCUMULATORS if rows else ACCUMULATORS, self.p.registers)
        cap = ROW_MAX if reused else ROW_MAX // 2

        def rows_budget(row: int) -> int:  # rows of a register tile with ``row`` vectors a row
            return max(1, min(cap, most // row))

        def filled(row: int) -> int:  # accumulators of the register tile with ``row`` vectors a row
            if row_axis is None:
                return row
            return row * max(d for d in divisors(row_axis.extent) if d <= rows_budget(row))

        # Two vectors a row, unless one fills more registers: 7 rows of 512 channels on AVX2 fit as
        # 7 x 1 vectors, as 6 x 2 not at all (1 x 2 ran 10.3 ms, 7 x 1 4.9; Zen 3, 1 thread).
        if not rows and v == 2 * lanes and filled(1) > filled(2):
            v, row = lanes, 1
        budget = rows_budget(row)
        inner = {
            id(a): max(d for d in divisors(a.extent) if d <= budget) if a is row_axis else 1 for a in outer
        }
        gemm_like = tails and self.packs and not (self.channel_lanes or rows)
        gemm = self.gemm_tile(last.extent, gemm_rows) if gemm_like else None
        if gemm is not None and row_axis is not None:
            v, row = gemm * lanes, gemm
            inner[id(row_axis)] = GEMM_ROWS
        if rows:
            inner[id(outer[-1])] = rows
        # With too few vector tiles for the cores, the loops outside the producer's tile are parallel
        # and a packed weight is packed once per producer tile: that tile (level 2) grows over the
        # other axes, innermost first, up to TILE_BYTES of accumulators and 2 tiles a core (192 -> 32
        # channels at 28x28, packed per register tile: 0.45 ms, per 7 x 28 tile: 0.12). Otherwise it
        # is the register tile (a tile over level 2 is reloaded on every reduction step).
        few = last.extent // v < 2 * self.p.cores
        # A GEMM's long K is swept in chunks of KC over a producer tile grown the same way, so that
        # the chunk of B and the block of A stay in cache (BERT's 128 x 768 x 3072: 11.5 ms with
        # one register tile per sweep of K, 6.3 so; 1 thread, CPU time).
        self.kc = 0
        red = op.reduce_axis
        if len(red) == 1 and red[0].extent > KC:
            self.kc = max(d for d in divisors(red[0].extent) if d <= KC)
        room = 1
        if gemm is not None:  # the register tile holds C over the whole reduction, 4 steps unrolled
            self.kc = GEMM_STEPS
        elif few or self.kc:
            room = min(TILE_BYTES // 4 // v, math.prod(a.extent for a in outer) // (2 * self.p.cores))
        room //= math.prod(inner.values())  # in register tiles
        tiles = {id(a): -(-a.extent // inner[id(a)]) for a in outer}  # the last one partial, if any
        level2 = {}
        for a in reversed(outer):
            level2[id(a)] = max(d for d in divisors(tiles[id(a)]) if d <= max(1, room))
            room //= level2[id(a)]
        if rows and row_axis is not None:
            # Whole rows: the producer's tile is the channels over one register tile of rows (up to
            # ROWS_CHUNK_BYTES of accumulators: all 96 of a 16 -> 96 conv at 112x112 ran 0.85x), the
            # reduction swept in chunks whose data stays in L1 while every channel tile reads it
            # (56x56 96 -> 24: 0.28 ms with one channel tile per sweep of all 96, 0.21 so).
            level2 = {id(a): 1 for a in outer}
            tile = inner[id(row_axis)] * rows * v * 4  # bytes of accumulators per register tile
            groups = row_axis.extent // inner[id(row_axis)]
            fit = [d for d in divisors(groups) if d * tile <= ROWS_CHUNK_BYTES]
            level2[id(row_axis)] = max(fit, default=1)
            long = [r for r in red if r.extent > 1]
            if len(long) == 1:
                chunk = ROWS_CHUNK_BYTES // (rows * v * 4)
                self.kc = max(d for d in divisors(long[0].extent) if d <= max(1, chunk))
            few = True  # level 0: the row tiles are the parallel loop
        # The loops outside the producer's tile: level 1 (inside the packing, once per vector tile) where
        # the vector operand is packed or reused across the rest, and the vector tiles alone give the
        # cores enough to share: its panel then stays in cache (BERT's 128 x 768 x 768 matmul: 2.3 ms
        # with the rows outermost, 1.2 so); else level 0, in the output's order (a depthwise conv's
        # 8-wide column strips outermost, each over all 96 channels: 1.3 ms; rows outermost: 0.78).
        s1 = (self.packs or bool(reused)) and not few
        lengths = []
        for a in outer:
            rest = tiles[id(a)] // level2[id(a)]
            lengths.append([1 if s1 else rest, rest if s1 else 1, level2[id(a)], inner[id(a)]])
        lengths.append([last.extent // v, 1, 1, v])
        for a, ln in zip(axes, lengths):
            self.used[f"{name}/tile/{a.name}"] = ln
        self.given[f"{name}/parallel_depth"] = 1
        return lengths

    def gemm_tile(self, width: int, rows: int) -> int | None:
        """Vectors a row of a GEMM's register tile of GEMM_ROWS rows, the last row tile partial where
        6 does not divide ``rows`` (:mod:`autosched.lower.tails`): the widest row of up to 4 vectors
        whose accumulators fit the policy's registers (those left beside one step's operands), as
        BLIS's 6 x 16 on AVX2. None where no row fits or the padding costs over GEMM_WASTE. The tile
        holds C over the whole reduction (a producer tile of several, reloaded every KC steps, ran 1024^3
        at 0.87x numpy with 6 x 64 register tiles, 1.11-1.20x so). Against the previous default, 8 x 32
        tiles in producer tiles swept in KC chunks (2 threads, Emerald Rapids, in turns, 30 rounds):
        1024^3 1.40x faster (1.16x numpy); 64 x 1024 x 1024 1.23x; dense 512 x 1024 x 1024 1.26x;
        BERT's 128 x 768 x {768, 3072} and 128 x 3072 x 768 1.04-1.08x."""
        lanes = self.p.lanes
        if rows % GEMM_ROWS and (-rows % GEMM_ROWS) > GEMM_WASTE * rows:
            return None
        for row in (4, 2, 1):
            if width % (row * lanes) == 0 and GEMM_ROWS * row <= self.p.registers:
                return row
        return None

    def rows_per_tile(self, op: ComputeOp, axes: list[IterVar]) -> int:
        """The fewest rows of the last axis that make whole vectors, where :meth:`whole_rows` takes them
        (at most ROWS_VECTORS vectors), else 0."""
        if len(axes) < 2 or axes[-1] is not op.axis[-1]:
            return 0
        width, height = axes[-1].extent, axes[-2].extent
        for t in divisors(height):
            if t < 2 or t * width % self.p.lanes or not self.rows_fit(t * width // self.p.lanes):
                continue
            lengths = [[1, 1, 1, 1] for _ in axes[:-2]] + [[1, 1, 1, t], [1, 1, 1, width]]
            if self.row_vectors(op, lengths) is not None:
                return t
        return 0

    def one_row(self, op: ComputeOp, axes: list[IterVar]) -> bool:
        """A 1x1 conv's row of whole vectors, longer than two (112 wide: 7), is its vector tile."""
        width, lanes = axes[-1].extent, self.p.lanes
        if (
            len(axes) < 2
            or axes[-1] is not op.axis[-1]
            or width % lanes
            or width // lanes <= 2
            or not self.rows_fit(width // lanes)
        ):
            return False
        return plain_rows(op)

    def rows_fit(self, vectors: int) -> bool:
        """A whole-row tile of ``vectors`` vectors leaves room for two rows of channels: on AVX2's 16
        registers a 56-wide row of 7 vectors does not (one channel a tile: 1.27 ms for MobileNetV2's
        56x56 144 -> 24 on a Zen 3, 1 thread; channels in tiles of 12 x 1 vector instead: see below)."""
        return vectors <= ROWS_VECTORS and 2 * vectors <= min(ROWS_ACCUMULATORS, self.p.registers)

    def vector_axis(self, st_name: str, op: ComputeOp) -> str:
        """The output's last axis where it fills whole vectors, else the first channel axis that does
        (a 7/14/28-wide conv with 16k output channels), else the last axis."""
        lanes = self.p.lanes
        if op.axis[-1].extent % lanes == 0:
            return "last"
        # Not a depthwise conv's channel, which every input reads: in lanes, the data is packed
        # channels-last on every call (MobileNetV2's 14x14 depthwise: 0.127 ms so, 0.059 by the width).
        reads = [n for n in walk(op.body) if isinstance(n, TensorRead)]
        full = [
            op.axis[d].name
            for d in self.channel_axes(op)
            if op.axis[d].extent % lanes == 0 and any(not _uses(r, op.axis[d]) for r in reads)
        ]
        return full[0] if full else "last"


def _uses(read: TensorRead, axis: IterVar) -> bool:
    return any(v is axis for i in read.indices for v in walk(i))


def tile_with_reuse(
    s: Schedule, cores: int, lanes: int = 16, skip: set[str] | None = None
) -> tuple[set[str], dict[str, Any]]:
    """Register-tile every root reduction with reuse of ``s`` (and the elementwise stage it is computed
    in, if any) with fixed decisions, but for the stages in ``skip`` (a flash attention's, which stay
    plain root stages); the names of the stages it scheduled, and its decisions under the sketch's
    keys (what seeds a search from the default: :func:`~.default.default_candidate`)."""
    tiler = _FixedTiling(s, cores, lanes)
    tiler.done |= set(skip or ())
    for st in reversed(list(s.stages)):
        op = st.op
        if st.name in tiler.done or st.attach[0] != "root" or not isinstance(op, ComputeOp):
            continue
        if not op.reduce_axis or not has_reuse(op):
            continue
        if tiler.matrix_vector(st):
            tiler.plain_reduction(st)
            continue
        host = tiler.fusion_host(st)
        if host is not None and host.name in tiler.done:
            continue  # its host already holds another tiled reduction (ONNX Scatter's hits and values)
        axis = tiler.vector_axis(st.name, op)
        tiler.given[f"{st.name}.local/vector_axis"] = axis
        tiler.channel_lanes = axis != "last"
        tiler.multi_level_tiling(st)
    return tiler.done - set(skip or ()), dict(tiler.used)
