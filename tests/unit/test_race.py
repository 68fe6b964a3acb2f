"""compare.race and Race: contenders timed in turns, ratios taken round by round."""

from __future__ import annotations

import statistics

import pytest

from autosched.measure import compare
from autosched.measure.compare import Race


def test_round_by_round_ratio_cancels_a_slow_phase() -> None:
    # "ours" is 10% faster in every round, but the machine ran at half speed in three of five
    # rounds: the ratio of the overall medians mixes phases, the ratio round by round does not.
    speed = [1.0, 2.0, 2.0, 1.0, 2.0]
    ours = tuple((1.0 * s,) * 5 for s in speed)
    lib = tuple((1.1 * s,) * 5 for s in speed)
    done = Race((ours, lib))
    assert done.ratio(1, 0) == pytest.approx(1.1)
    assert done.median(1) / done.median(0) == pytest.approx(1.1)  # the same here...
    phased = Race((ours, tuple((1.1 * s,) * 5 for s in [1.0, 1.0, 2.0, 1.0, 2.0])))
    assert phased.median(1) / phased.median(0) == pytest.approx(0.55)  # ...but not when phases differ
    assert phased.ratio(1, 0) == pytest.approx(1.1)


def test_race_times_each_function_in_alternating_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(compare.time, "sleep", lambda s: calls.append("pause"))
    done = compare.race(
        [lambda: calls.append("a"), lambda: calls.append("b")], repeat=6, block=3, warmup_s=0.0
    )
    assert [len(b) for b in done.blocks] == [2, 2]  # two rounds of one block each
    assert all(len(block) == 3 for blocks in done.blocks for block in blocks)
    order = [c for c in calls if c != "pause"]
    first_b = order.index("b")
    assert set(order[:first_b]) == {"a"} and "a" in order[first_b:]  # a's block, then b's, then a's again
    assert statistics.median(done.blocks[0][0]) > 0
    assert compare.interleaved_medians([lambda: None], repeat=2, block=1, warmup_s=0.0)[0] >= 0
