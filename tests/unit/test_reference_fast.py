"""The reference of a large workload: sampled outputs or the workload's numpy=, said in every result."""

import numpy as np
import pytest

from autosched import te
from autosched.errors import WorkloadError
from autosched.measure import task as task_mod
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import measure_batch
from autosched.measure.runner import LocalRunner
from autosched.measure.task import SAMPLES, MeasureTask
from autosched.search_space.default import default_schedule
from autosched.te.reference import evaluate, evaluate_at, random_inputs, reference_work
from autosched.te.tensor import PlaceholderOp
from autosched.topi.workloads import SMALL_CASES, case_inputs


def _matmul(M, N, K):
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_evaluate_at_points_matches_the_full_reference(name):
    args = SMALL_CASES[name]()
    ins = [t for t in args if isinstance(t.op, PlaceholderOp)]
    outs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    arrays = dict(zip(ins, case_inputs(name, args)))
    full = evaluate(outs, arrays)
    rng = np.random.default_rng(3)
    flat = [rng.integers(0, f.size, 40) for f in full]
    # max_grid=64: most computes are evaluated lazily, only at the points their readers need
    got = evaluate_at(outs, arrays, flat, max_grid=64)
    for f, idx, g in zip(full, flat, got):
        np.testing.assert_allclose(g, f.reshape(-1)[idx], rtol=1e-5, atol=1e-6)


def test_large_matmul_reference_is_sampled_and_says_so():
    A, B, C = _matmul(2048, 2048, 2048)
    assert reference_work([C]) > task_mod.SAMPLE_ABOVE
    notes = []
    task = MeasureTask.create("mm", [A, B, C], on_reference=notes.append)
    assert task.check == f"sampled:{SAMPLES}" and notes and "computing the reference" in notes[0]
    (idx,) = task.samples
    assert task.expected[0].shape == idx.shape and 3000 < idx.size <= SAMPLES
    a, b = (x.astype(np.float64) for x in task.inputs)
    rows, cols = np.unravel_index(idx, (2048, 2048))
    exact = np.einsum("pk,kp->p", a[rows], b[:, cols])
    np.testing.assert_allclose(task.expected[0], exact, rtol=1e-5, atol=1e-5)


def test_large_reference_uses_the_workloads_numpy_function_checked_against_te(monkeypatch):
    monkeypatch.setattr(task_mod, "SAMPLE_ABOVE", 1000)
    A, B, C = _matmul(32, 16, 8)
    task = MeasureTask.create("mm", [A, B, C], numpy_fn=np.matmul)
    assert task.check == "numpy" and task.expected[0].shape == (32, 16) and task.samples == (None,)
    np.testing.assert_allclose(task.expected[0], task.inputs[0] @ task.inputs[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(WorkloadError, match="numpy= disagrees with the te definition of output 'C'"):
        MeasureTask.create("mm", [A, B, C], numpy_fn=lambda a, b: a @ b + 1)
    with pytest.raises(WorkloadError, match=r"numpy= gives output 'C' of shape \(16, 32\)"):
        MeasureTask.create("mm", [A, B, C], numpy_fn=lambda a, b: (a @ b).T)


def test_small_reference_is_full():
    A, B, C = _matmul(8, 8, 8)
    task = MeasureTask.create("mm", [A, B, C], numpy_fn=np.matmul)
    assert task.check == "full" and task.samples == (None,)


def test_runner_checks_the_samples_and_records_how(monkeypatch):
    monkeypatch.setattr(task_mod, "SAMPLE_ABOVE", 1000)
    A, B, C = _matmul(64, 64, 64)
    task = MeasureTask.create("mm", [A, B, C])
    assert task.check.startswith("sampled:")
    trace = default_schedule(C, cores=1).trace
    with LocalBuilder(n_workers=1) as builder, LocalRunner(timeout_s=30, num_threads=1) as runner:
        (ok,) = measure_batch(task, [trace], builder, runner)
        task.expected[0][5] += 1.0  # the reference at one sample now disagrees with any correct kernel
        wrong_task = MeasureTask(**{**task.__dict__})
        (wrong,) = measure_batch(wrong_task, [trace], builder, runner)
    assert ok.error is None and ok.check == task.check, str(ok)
    assert wrong.error == "wrong_result" and wrong.check == task.check


def test_huge_shapes_are_a_clear_error_not_a_memory_error():
    A, B, C = _matmul(200000, 200000, 200000)
    with pytest.raises(WorkloadError, match=r"tensors need .* GiB.*smaller shapes"):
        MeasureTask.create("mm", [A, B, C])


def test_random_inputs_stay_nonzero():
    (a,) = random_inputs([te.placeholder((64,), name="A")])
    assert np.all(a != 0)
