"""Compiled models against the te reference evaluator, and the errors of run()."""

import warnings

import numpy as np
import pytest

import autosched
from autosched import te, topi
from autosched.errors import AutoschedError
from autosched.graph.compiled import ModelInputError
from autosched.graph.ir import Graph, Input, Output
from tests.dlpack import DLPackOnly

from .builders import Weights, bert_like, random_inputs, reference_outputs, resnet_like


def _compile(graph, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = autosched.compile_model(graph, **kw)
    return model, [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def resnet():
    graph = resnet_like(blocks=2)
    return graph, _compile(graph)


@pytest.mark.parametrize("make", [resnet_like, bert_like])
def test_outputs_match_the_reference(make):
    graph = make()
    model, messages = _compile(graph)
    for seed in (1, 2):  # fresh random inputs each time; the arena is reused between runs
        inputs = random_inputs(graph, seed)
        expected = reference_outputs(graph, inputs)
        got = model.run(inputs)
        assert got.keys() == expected.keys()
        for name in got:
            assert got[name].shape == expected[name].shape
            np.testing.assert_allclose(got[name], expected[name], rtol=2e-4, atol=2e-5)
            assert np.abs(got[name]).max() > 0  # not a vacuous match on zeros


def test_one_warning_counts_the_untuned_tasks(resnet):
    graph, (model, messages) = resnet
    assert len(messages) == 1
    assert messages[0].startswith(f"{len(model.plan['tasks'])} of {len(model.plan['tasks'])} tasks")
    assert model.sources == ["default"] * len(model.plan["tasks"])


def test_wrong_inputs_are_named(resnet):
    graph, (model, _) = resnet
    x = random_inputs(graph)["input"]
    with pytest.raises(ModelInputError, match=r"unknown input\(s\) 'image'.*missing input\(s\) 'input'"):
        model.run({"image": x})
    with pytest.raises(ModelInputError, match=r"input 'input' expects float32\[1, 8, 8, 8\], got float64"):
        model.run({"input": x.astype("float64")})
    with pytest.raises(ModelInputError, match=r"expects float32\[1, 8, 8, 8\], got float32\[8, 8, 8\]"):
        model.run({"input": x[0]})
    with pytest.raises(ModelInputError, match="must be a numpy array or support DLPack"):
        model.run({"input": x.tolist()})
    with pytest.raises(ModelInputError, match="takes a dict"):
        model.run(x)


def test_dlpack_and_non_contiguous_inputs(resnet):
    graph, (model, _) = resnet
    x = random_inputs(graph, 3)["input"]
    expected = model.run({"input": x})["probs"]
    np.testing.assert_array_equal(model.run({"input": DLPackOnly(x)})["probs"], expected)
    strided = np.asfortranarray(x)
    np.testing.assert_array_equal(model.run({"input": strided})["probs"], expected)


def test_outputs_that_are_inputs_or_weights_are_copies():
    w = Weights()
    x = te.placeholder((4, 4), name="x")
    bias = w((4,), "bias")
    y = topi.add(x, bias)
    graph = Graph(
        "passthrough",
        (Input("x", x, "float32"),),
        (Output("y", y, "float32"), Output("same_x", x, "float32"), Output("bias", bias, "float32")),
        w.values,
    )
    model, _ = _compile(graph)
    xv = random_inputs(graph)["x"]
    out = model.run({"x": xv})
    np.testing.assert_allclose(out["y"], xv + w.values[bias.op], rtol=1e-6)
    np.testing.assert_array_equal(out["same_x"], xv)
    assert not np.shares_memory(out["same_x"], xv)
    out["bias"][:] = 0  # the caller may write its outputs; the model's weights stay
    np.testing.assert_allclose(model.run({"x": xv})["y"], xv + w.values[bias.op], rtol=1e-6)


def test_missing_log_is_an_error(tmp_path):
    with pytest.raises(AutoschedError, match=r"nope\.jsonl not found"):
        autosched.compile_model(resnet_like(blocks=1), log=tmp_path / "nope.jsonl")


def test_tasks_use_their_tuned_records(tmp_path):
    from autosched.graph.compiled import as_graph
    from autosched.graph.export import export_model
    from autosched.graph.tasks import extract_tasks
    from autosched.hai.registry import get_adapter
    from autosched.records.log import append_records
    from autosched.records.record import make_record
    from autosched.search_space.default import default_schedule
    from autosched.target import parse_target

    graph = as_graph(resnet_like(blocks=1))  # as compile_model sees it: conv weights output-channel last
    task = extract_tasks(graph).tasks[1]  # the block's second conv, with the residual add
    target = parse_target("llvm-cpu")
    trace = default_schedule(list(task.instance.outputs), cores=1).trace  # not the build's default
    log = tmp_path / "model.jsonl"
    record = make_record(task.instance, target, get_adapter(target).info(), trace, costs=(1e-4,))
    append_records(log, [record])
    model, messages = _compile(graph, log=log)
    assert model.sources == ["default", "log", "default"]
    assert len(messages) == 1 and messages[0].startswith("2 of 3 tasks")
    inputs = random_inputs(graph, 4)
    np.testing.assert_allclose(
        model.run(inputs)["probs"], reference_outputs(graph, inputs)["probs"], rtol=2e-4, atol=2e-5
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = export_model(graph, tmp_path / "built", log=log)
    tasks = autosched.load(res.directory).manifest["plan"]["tasks"]
    assert [t["source"] for t in tasks] == ["default", "log", "default"]
    assert tasks[1]["record"]["costs_s"] == [1e-4] and tasks[1]["key"] == task.key


def test_a_gpu_style_target_runs_the_same_plan():
    from tests.codegen.test_opencl import _why as no_opencl

    if no_opencl is not None:
        pytest.skip(no_opencl)
    graph = bert_like(layers=1)
    model, _ = _compile(graph, target="opencl")
    inputs = random_inputs(graph, 6)
    np.testing.assert_allclose(
        model.run(inputs)["out"], reference_outputs(graph, inputs)["out"], rtol=2e-4, atol=2e-5
    )
