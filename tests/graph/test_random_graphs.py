"""Seeded random graphs of topi ops: fusion keeps every group convex with one escaping tensor, and the
compiled model matches the reference evaluator."""

import random
import warnings

import numpy as np
import pytest

import autosched
from autosched import te, topi
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.tasks import extract_tasks

from .builders import Weights, random_inputs, reference_outputs

N = 8  # every tensor is (N, N): any op can read any earlier one


def random_graph(seed: int, n_ops: int = 14) -> Graph:
    rng = random.Random(seed)
    w = Weights(seed)
    x = te.placeholder((N, N), name="x")
    pool = [x]
    for i in range(n_ops):
        a, b = rng.choice(pool), rng.choice(pool)
        kind = rng.choice(["add", "relu", "bias", "dense", "matmul", "transpose", "softmax", "exp_mean"])
        if kind == "add":
            t = topi.add(a, b, name=f"add{i}")
        elif kind == "relu":
            t = topi.relu(a, name=f"relu{i}")
        elif kind == "bias":
            t = topi.add(a, w((N,), f"b{i}"), name=f"bias{i}")
        elif kind == "dense":
            t = topi.dense(a, w((N, N), f"w{i}", -0.5, 0.5), w((N,), f"db{i}"), "gelu", name=f"dense{i}")
        elif kind == "matmul":
            t = topi.matmul(a, b, name=f"matmul{i}")
        elif kind == "transpose":
            t = topi.transpose(a, name=f"transpose{i}")
        elif kind == "softmax":
            t = topi.softmax(a, name=f"softmax{i}")
        else:
            mean = topi.mean(topi.exp(topi.multiply(a, 0.1)), axis=1, keepdims=True, name=f"mean{i}")
            t = topi.subtract(a, mean, name=f"center{i}")
        pool.append(t)
    outputs = [pool[-1]] + ([pool[len(pool) // 2]] if rng.random() < 0.5 and len(pool) > 2 else [])
    outs = tuple(Output(f"y{n}", t, "float32") for n, t in enumerate(dict.fromkeys(outputs)))
    return Graph(f"random{seed}", (Input("x", x, "float32"),), outs, w.values)


@pytest.mark.parametrize("seed", range(40))
def test_groups_are_convex_with_one_escaping_tensor(seed):
    graph = random_graph(seed)
    tg = extract_tasks(graph)
    outputs = {o.tensor.op for o in graph.outputs}
    position = {}
    for n, call in enumerate(tg.calls):
        for op in call.group.ops:
            assert op not in position, f"{op.name} is in two groups"
            position[op] = n
    readers = {}
    for op in graph.ops():
        for t in op.input_tensors:
            readers.setdefault(t.op, []).append(op)
    for n, call in enumerate(tg.calls):
        members = set(call.group.ops)
        for op in call.group.ops[:-1]:  # only the root escapes: the rest are read inside the group
            assert op not in outputs and all(r in members for r in readers.get(op, [])), op.name
        for src in call.inputs:  # inputs come from earlier calls (or are placeholders)
            assert src not in position or position[src] < n


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5, 8])
def test_random_graph_runs_like_the_reference(seed):
    graph = random_graph(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = autosched.compile_model(graph)
    inputs = random_inputs(graph, seed + 100)
    expected = reference_outputs(graph, inputs)
    got = model.run(inputs)
    for name, want in expected.items():
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5 * scale)
