"""The arena's buffers staggered across the 4 KB page: a step's buffers never share a page offset
(4K aliasing), at little cost in arena size, and the compiled model still matches onnxruntime."""

import itertools
import warnings

import numpy as np
import pytest

import autosched
from autosched.graph.memory import ALIGNMENT, PAGE, STAGGER_MIN_BYTES, Buffer, plan_memory, stagger_of
from autosched.graph.plan import build_plan
from autosched.graph.tasks import extract_tasks

from .builders import bert_like, random_inputs, reference_outputs, resnet_like
from .model_exporter import load_exporter, missing


def _residual_chain(n: int, pages: int) -> list[Buffer]:
    """Whole-page buffers as in a residual network: each read by the next step and the one after."""
    return [Buffer(f"b{k}", pages * PAGE, k, k + 2) for k in range(n)]


def _alive(buffers, step):
    return [b for b in buffers if b.first <= step <= b.last]


def test_stagger_counts_down_one_line_per_buffer():
    assert [stagger_of(k) for k in range(3)] == [0, PAGE - 64, PAGE - 128]
    assert stagger_of(PAGE // ALIGNMENT) == 0  # 64 slots, then round again


@pytest.mark.parametrize("pages", [16, 49])
def test_buffers_alive_together_never_share_a_page_offset(pages):
    buffers = _residual_chain(40, pages)
    plan = plan_memory(buffers)
    plain = plan_memory(buffers, stagger=False)
    assert all(off % ALIGNMENT == 0 for off in plan.offsets.values())
    assert {off % PAGE for off in plain.offsets.values()} == {0}  # the case the stagger is for
    for step in range(42):
        alive = _alive(buffers, step)
        assert len({plan.offsets[b.name] % PAGE for b in alive}) == len(alive), step
        for a, b in itertools.combinations(alive, 2):  # and never overlap
            oa, ob = plan.offsets[a.name], plan.offsets[b.name]
            assert oa + a.nbytes <= ob or ob + b.nbytes <= oa
    # reuse is kept: three buffers alive at a time, a page (at most) of stagger for each
    assert plan.arena_bytes <= plain.arena_bytes + 3 * PAGE
    assert plain.arena_bytes == plan.peak_live_bytes


def test_small_buffers_are_not_staggered():
    buffers = _residual_chain(10, 1)
    assert plan_memory(buffers) == plan_memory(buffers, stagger=False)
    assert STAGGER_MIN_BYTES > PAGE


@pytest.mark.parametrize(
    "make", [lambda: resnet_like(channels=64, size=16), lambda: bert_like(hidden=256, seq=64, heads=4)]
)
def test_a_steps_intermediates_sit_at_distinct_page_offsets(make):
    plan = build_plan(extract_tasks(make()))
    values = plan["values"]
    staggered = 0
    for step in plan["steps"]:
        large = [
            values[v]["offset"]
            for v in set(step["args"])
            if values[v]["kind"] == "intermediate" and _nbytes(values[v]) >= STAGGER_MIN_BYTES
        ]
        assert len({off % PAGE for off in large}) == len(large), step
        staggered += len(large) > 1
    assert staggered > 3  # the check is not vacuous
    mem = plan["memory"]
    assert mem["arena_bytes"] < mem["total_bytes"]


def _nbytes(value):
    return int(np.prod(value["shape"])) * np.dtype(value["dtype"]).itemsize


def test_the_staggered_model_matches_the_reference():
    graph = resnet_like(blocks=2, channels=64, size=16)  # 64 KB activations: staggered
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: default schedules
        model = autosched.compile_model(graph)
    for seed in (1, 2):
        inputs = random_inputs(graph, seed)
        expected = reference_outputs(graph, inputs)
        for name, got in model.run(inputs).items():
            np.testing.assert_allclose(got, expected[name], rtol=2e-4, atol=2e-5)


ABSENT = missing("torch", "torchvision", "onnx", "onnxruntime", "autosched.frontend.onnx")


@pytest.mark.skipif(ABSENT is not None, reason=f"{ABSENT} is not installed")
def test_resnet18_on_staggered_buffers_matches_onnxruntime(tmp_path):
    import onnxruntime as ort

    exporter = load_exporter()
    path = exporter.export_model("resnet18", tmp_path, small=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = autosched.compile_model(path)
    values = model.plan["values"]
    checked = 0
    for step in model.plan["steps"]:
        large = [
            v
            for v in step["args"]
            if values[v]["kind"] == "intermediate" and _nbytes(values[v]) >= STAGGER_MIN_BYTES
        ]
        assert len({values[v]["offset"] % PAGE for v in large}) == len(large)
        checked += len(large) > 1
    assert checked > 3
    inputs = exporter.example_inputs("resnet18", small=True, seed=5)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, inputs)[0]
    got = next(iter(model.run(inputs).values()))
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4
