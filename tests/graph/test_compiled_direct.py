"""The compiled model's direct path: after one checked run, the steps' C functions on addresses, on an
arena kept between runs; still the reference's answers, from concurrent runs too."""

import threading
import warnings

import numpy as np
import pytest

import autosched
from autosched.graph.compiled import CompiledModel

from .builders import bert_like, random_inputs, reference_outputs, resnet_like


def _compile(graph):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: default schedules
        return autosched.compile_model(graph)


def _check(model, graph, seed):
    inputs = random_inputs(graph, seed)
    expected = reference_outputs(graph, inputs)
    got = model.run(inputs)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=2e-4, atol=2e-5)
        assert np.abs(got[name]).max() > 0


@pytest.mark.parametrize("make", [resnet_like, bert_like])
def test_runs_after_the_first_take_the_direct_path_and_keep_the_arena(make):
    graph = make()
    model = _compile(graph)
    assert model._calls is not None  # every default-schedule kernel has a C entry on this host
    _check(model, graph, 1)  # checked
    assert model._checked
    arena = model._free[0].arena
    for seed in (2, 3):  # direct, on the same arena
        _check(model, graph, seed)
    assert len(model._free) == 1 and model._free[0].arena is arena


def test_outputs_are_fresh_arrays_each_run():
    graph = resnet_like()
    model = _compile(graph)
    x = random_inputs(graph, 1)
    first = model.run(x)["probs"]
    kept = first.copy()
    second = model.run(random_inputs(graph, 2))["probs"]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)  # the second run did not write over the first's output


def test_concurrent_runs_each_get_an_arena():
    graph = resnet_like()
    model = _compile(graph)
    _check(model, graph, 1)
    errors = []

    def worker(seed):
        try:
            for _ in range(3):
                _check(model, graph, seed)
        except AssertionError as e:  # reported below, from the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (4, 5, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 1 <= len(model._free) <= 3


def test_kernels_without_a_c_entry_keep_the_checked_calls():
    graph = resnet_like()
    compiled = _compile(graph)
    wrapped = [lambda *arrays, k=k: k(*arrays) for k in compiled._kernels]  # plain Python callables
    model = CompiledModel(compiled.plan, [w for w in compiled._weights.values()], wrapped, compiled.sources)
    assert model._calls is None
    for seed in (1, 2):
        _check(model, graph, seed)


def test_in_model_times_every_task_where_it_runs():
    from autosched.graph.task_race import in_model, print_in_model

    graph = resnet_like()
    model = _compile(graph)
    rows = in_model(model, random_inputs(graph, 1), rounds=2)
    assert [r.task for r in rows] == list(range(len(model.plan["tasks"])))
    assert sum(r.calls for r in rows) == len(model.plan["steps"])
    assert all(r.in_model_s >= 0 and r.warm_s >= 0 for r in rows)
    _check(model, graph, 2)  # the bound steps ran on buffers of their own: the model is unchanged
    print_in_model(rows)
