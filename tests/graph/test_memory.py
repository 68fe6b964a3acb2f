"""The static memory plan: reuse by liveness, never two live buffers in the same bytes."""

import pytest

from autosched.graph.memory import Buffer, plan_memory
from autosched.graph.plan import build_plan
from autosched.graph.tasks import extract_tasks

from .builders import bert_like, resnet_like


def _check_no_overlap(buffers, plan):
    for a in buffers:
        for b in buffers:
            if a is b or a.last < b.first or b.last < a.first:
                continue
            oa, ob = plan.offsets[a.name], plan.offsets[b.name]
            assert oa + a.nbytes <= ob or ob + b.nbytes <= oa, (a, b)


def test_a_chain_reuses_buffers():
    chain = [Buffer(f"b{n}", 4096, n, n + 1) for n in range(6)]
    plan = plan_memory(chain, stagger=False)  # the page stagger: tests/graph/test_arena_stagger.py
    assert plan.arena_bytes == 8192 and plan.peak_live_bytes == 8192 and plan.total_bytes == 6 * 4096
    assert plan.offsets["b0"] == plan.offsets["b2"] == plan.offsets["b4"]
    _check_no_overlap(chain, plan)


def test_larger_buffers_first_and_alignment():
    bufs = [Buffer("small", 10, 0, 2), Buffer("big", 1000, 1, 3), Buffer("late", 500, 3, 4)]
    plan = plan_memory(bufs)
    assert plan.offsets["big"] == 0 and all(off % 64 == 0 for off in plan.offsets.values())
    _check_no_overlap(bufs, plan)
    assert plan.arena_bytes >= plan.peak_live_bytes


def test_bad_buffers_are_refused():
    with pytest.raises(ValueError, match="'x'"):
        plan_memory([Buffer("x", 8, 3, 1)])
    with pytest.raises(ValueError, match="distinct"):
        plan_memory([Buffer("x", 8, 0, 1), Buffer("x", 8, 0, 1)])


@pytest.mark.parametrize("make", [resnet_like, bert_like])
def test_model_plans_reuse_memory(make):
    plan = build_plan(extract_tasks(make()))
    mem = plan["memory"]
    assert 0 < mem["peak_live_bytes"] <= mem["arena_bytes"] < mem["total_bytes"]
    inter = [v for v in plan["values"] if v["kind"] == "intermediate"]
    offsets = [v["offset"] for v in inter]
    assert len(set(offsets)) < len(offsets)  # some buffers share memory
    # A step never writes over what it reads: its output's bytes are disjoint from its inputs'.
    values = plan["values"]
    for step in plan["steps"]:
        out = values[step["args"][-1]]
        if out["kind"] != "intermediate":
            continue
        for vid in step["args"][:-1]:
            v = values[vid]
            if v["kind"] == "intermediate":
                assert out["offset"] >= v["offset"] + 4 or v["offset"] >= out["offset"] + 4
