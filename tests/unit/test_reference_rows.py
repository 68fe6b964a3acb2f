"""The row-sampled reference: a row-separable chain of stages (attention) evaluated at whole rows only."""

import numpy as np
import pytest

from autosched import te
from autosched.measure import task as task_mod
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import measure_batch
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.ops.workloads import ops_attention
from autosched.search_space.default import default_schedule
from autosched.te import reference_sampled as rs
from autosched.te.reference import evaluate, random_inputs
from autosched.te.tensor import PlaceholderOp
from autosched.topi.workloads import SMALL_CASES, case_inputs


def _attention(**kw):
    return ops_attention.workload.function(**{**ops_attention.workload.defaults, **kw})


VARIANTS = {
    "plain": {},
    "causal": {"causal": True, "S": 40, "L": 72},
    "gqa_causal": {"H": 4, "Hkv": 2, "causal": True, "S": 33, "L": 33},
    "mask": {"masked": True, "S": 33, "L": 50, "Dv": 24},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rows_of_attention_match_the_full_reference(variant):
    args = _attention(**VARIANTS[variant])
    ins, out = list(args[:-1]), args[-1]
    assert rs.row_axes([out]) == 3  # (batch, head, query)
    arrays = dict(zip(ins, random_inputs(ins, seed=3)))
    full = evaluate([out], arrays)[0]
    S = out.shape[2]
    rows = np.array([[0, h, i] for h in range(out.shape[1]) for i in (0, 3, S - 2, S - 1)])
    (got,) = rs.evaluate_rows([out], arrays, rows, max_grid=512)  # several chunks of rows per stage
    assert got.shape == (len(rows), out.shape[3])
    np.testing.assert_allclose(got, full[0, rows[:, 1], rows[:, 2]], rtol=1e-6, atol=1e-7)
    flat = rs.row_flat_indices(out, rows)
    np.testing.assert_array_equal(full.reshape(-1)[flat], full[0, rows[:, 1], rows[:, 2]].reshape(-1))


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_rows_of_every_separable_small_case_match(name):
    args = SMALL_CASES[name]()
    ins = [t for t in args if isinstance(t.op, PlaceholderOp)]
    outs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    k = rs.row_axes(outs)
    if k == 0:
        pytest.skip("not row-separable: checked per point by evaluate_at")
    arrays = dict(zip(ins, case_inputs(name, args)))
    full = evaluate(outs, arrays)
    lead = outs[0].shape[:k]
    flat_rows = np.unique(np.random.default_rng(1).integers(0, int(np.prod(lead)), 5))
    rows = np.stack(np.unravel_index(flat_rows, lead), axis=1)
    for f, t, g in zip(full, outs, rs.evaluate_rows(outs, arrays, rows)):
        np.testing.assert_allclose(g.reshape(-1), f.reshape(-1)[rs.row_flat_indices(t, rows)], rtol=1e-5)


def test_what_is_not_row_separable():
    A, B = te.placeholder((64, 32), name="A"), te.placeholder((32, 64), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    assert rs.row_axes([C]) == 0  # one stage: its points are as cheap as rows
    T = te.compute((64, 64), lambda i, j: C[j, i] + 1.0, name="T")  # reads C transposed
    assert rs.row_axes([T]) == 0 and rs.sample_rows([T], seed=0) is None
    S = te.compute((64, 64), lambda i, j: C[i, 63 - j] * 2.0, name="S")  # same row, any column
    assert rs.row_axes([S]) == 1


def test_sample_rows_are_stratified_and_include_the_ends():
    (out,) = _attention(H=8, S=256, L=256, D=16)[-1:]
    rows = rs.sample_rows([out], seed=0, budget=64 * rs.reference_work([out]) // (8 * 256))
    assert rows is not None and rows.shape[1] == 3
    flat = np.ravel_multi_index(tuple(rows.T), out.shape[:3])
    assert 64 <= len(flat) <= 66 and flat[0] == 0 and flat[-1] == 8 * 256 - 1
    assert set(rows[:, 1]) == set(range(8))  # every head visited
    assert rs.sample_rows([out], seed=0, budget=10) is None  # not even MIN_ROWS rows fit


def test_large_attention_is_checked_at_rows_and_a_wrong_row_is_caught(monkeypatch):
    monkeypatch.setattr(task_mod, "SAMPLE_ABOVE", 1000)
    args = _attention(H=8, S=256, L=256, D=16, causal=True)
    out = args[-1]
    monkeypatch.setattr(rs, "ROW_BUDGET", 100 * rs.reference_work([out]) // (8 * 256))
    task = MeasureTask.create("attention", args)
    (idx,) = task.samples
    assert idx is not None and task.check == f"sampled:{idx.size}" and idx.size % 16 == 0
    assert 100 * 16 <= idx.size <= 102 * 16  # whole rows of 16 values
    q, k, v = (x.astype(np.float64) for x in task.inputs)
    s = np.einsum("bhid,bhjd->bhij", q, k) / 4.0
    s[..., np.triu_indices(256, 1)[0], np.triu_indices(256, 1)[1]] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    exact = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(task.expected[0], exact.reshape(-1)[idx], rtol=1e-4, atol=1e-5)
    trace = default_schedule(out, cores=1).trace
    with LocalBuilder(n_workers=1) as builder, LocalRunner(timeout_s=60, num_threads=1) as runner:
        (ok,) = measure_batch(task, [trace], builder, runner)
        task.expected[0][-1] += 1.0  # the last row's last value: any correct kernel now disagrees
        (wrong,) = measure_batch(MeasureTask(**{**task.__dict__}), [trace], builder, runner)
    assert ok.error is None and ok.check == task.check, str(ok)
    assert wrong.error == "wrong_result"
