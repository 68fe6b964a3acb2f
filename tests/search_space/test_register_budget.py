"""The accumulator tile leaves room for one step's operands: the vectors of its last axis and a
broadcast, beside the accumulators, fit the 32 registers of AVX-512."""

from __future__ import annotations

import math
import random

from autosched.search_space.sketch import SketchPolicy
from autosched.topi.workloads import make_conv2d, make_matmul

LANES, TOTAL = 16, 32


def _tiles(out, given=None):
    policy, rng = SketchPolicy([out], lanes=LANES), random.Random(3)
    for _ in range(60):
        sch, d = policy.sample(rng, given)
        local = sch[f"{out.name}.local"]
        inner = [d[f"{local.name}/tile/{a.name}"][-1] for a in local.op.axis]
        row = math.ceil(inner[-1] / LANES)
        yield math.prod(inner[:-1]) * row, row


def test_accumulators_and_operands_fit_the_registers() -> None:
    *_, out = make_conv2d(C=16, H=14, W=14, K=64, stride=1)
    seen = set()
    for acc, row in _tiles(out, {"conv2d.local/vector_axis": "ff"}):
        assert acc + row + 1 <= TOTAL, (acc, row)
        seen.add(row)
    assert 4 in seen  # 64 channels in one row of four vectors is still offered, with fewer rows


def test_a_given_tile_that_would_spill_is_resampled() -> None:
    """7 rows of 4 vectors: 28 accumulators and 4 weight vectors leave no register for the input."""
    *_, out = make_conv2d(C=16, H=14, W=14, K=64, stride=1)
    given = {
        "conv2d.local/vector_axis": "ff", "conv2d.local/tile/ff": [1, 1, 1, 64],
        "conv2d.local/tile/xx": [1, 1, 2, 7], "conv2d.local/tile/yy": [14, 1, 1, 1],
        "conv2d.local/tile/nn": [1, 1, 1, 1],
    }  # fmt: skip
    sch, d = SketchPolicy([out], lanes=LANES).sample(random.Random(0), given)
    assert (d["conv2d.local/tile/xx"][-1], d["conv2d.local/tile/ff"][-1]) != (7, 64)


def test_small_rows_keep_the_whole_budget() -> None:
    """Two vectors a row leave 28 accumulators, as before (matmul 14 x 32)."""
    *_, out = make_matmul(224, 256, 64)
    given = {
        "matmul.local/tile/i": [1, 1, 16, 14],
        "matmul.local/tile/j": [1, 1, 8, 32],
        "matmul.local/resident": False,
    }
    sch, d = SketchPolicy([out], lanes=LANES).sample(random.Random(0), given)
    assert d["matmul.local/tile/i"] == [1, 1, 16, 14] and d["matmul.local/tile/j"] == [1, 1, 8, 32]
