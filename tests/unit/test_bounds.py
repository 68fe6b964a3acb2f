"""Lowering proves every tensor read in bounds, or refuses the program naming the read (issue 19)."""

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.errors import LowerError
from autosched.lower.bounds import check_bounds, value_range
from autosched.lower.pipeline import lower
from autosched.measure.task import MeasureTask
from autosched.search_space.schedule import create_schedule
from autosched.te.reference import random_inputs, reference_for
from autosched.te.tensor import PlaceholderOp
from autosched.topi.workloads import SMALL_CASES

N = 16


def _shifted(f):
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), f(A), name="B")
    return A, B


@pytest.mark.parametrize(
    ("body", "reach"),
    [
        (lambda A: lambda i: A[i + 1], "[1, 16]"),
        (lambda A: lambda i: A[i * 10000000], "[0, 150000000]"),
        (lambda A: lambda i: A[i - 1], "[-1, 14]"),
        (lambda A: lambda i: A[15 - i + 1], "[1, 16]"),
        # a guard that does not cover the shift
        (lambda A: lambda i: te.if_then_else(i < N, A[i + 1], 0.0), "[1, 16]"),
    ],
)
def test_out_of_bounds_read_is_refused_naming_tensor_index_and_range(body, reach):
    A, B = _shifted(body)
    with pytest.raises(LowerError) as err:
        lower(create_schedule(B), [A, B], "k")
    msg = str(err.value)
    assert "compute 'B' reads A[" in msg and reach in msg and "extent 16" in msg


def test_message_shows_the_index_as_written():
    A, B = _shifted(lambda A: lambda i: A[i + 1])
    with pytest.raises(LowerError, match=r"reads A\[i \+ 1\] out of bounds: index i \+ 1 \(dimension 0\)"):
        autosched.build(create_schedule(B), [A, B], "llvm-cpu")


def test_refused_on_every_adapter_before_any_code_is_made():
    # lower() is shared by every adapter; the check runs before codegen, so no device is needed.
    A, B = _shifted(lambda A: lambda i: A[i * 10000000])
    for target in ("llvm-cpu", "opencl", "cuda"):
        with pytest.raises(LowerError, match="out of bounds"):
            autosched.build(create_schedule(B), [A, B], target)


@pytest.mark.parametrize(
    "body",
    [
        lambda A: lambda i: te.if_then_else(i < N - 1, A[i + 1], 0.0),
        lambda A: lambda i: te.if_then_else(i >= 1, A[i - 1], 0.0),
        lambda A: lambda i: te.if_then_else(te.all(i >= 2, i + 2 < N), A[i - 2] + A[i + 2], 0.0),
        lambda A: lambda i: te.if_then_else(i >= N - 1, 0.0, A[i + 1]),  # the else branch's guard
        lambda A: lambda i: A[(i * 7) % N] + A[i // 2] + A[te.min(i + 3, N - 1)],
    ],
)
def test_guarded_and_folded_reads_build_and_match_the_reference(body):
    A, B = _shifted(body)
    f = autosched.build(create_schedule(B), [A, B], "llvm-cpu")
    (a,) = random_inputs([A])
    b = np.empty(N, "float32")
    f(a, b)
    np.testing.assert_allclose(b, reference_for([A, B], [a])[0], rtol=1e-6)


def test_reduction_where_guards_its_source():
    A = te.placeholder((N,), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((N,), lambda i: te.sum(A[i + k], axis=k, where=i + k < N), name="B")
    check_bounds([B])
    k2 = te.reduce_axis((0, 4), name="k")
    C = te.compute((N,), lambda i: te.sum(A[i + k2], axis=k2), name="C")
    with pytest.raises(LowerError, match=r"A\[i \+ k\]"):
        check_bounds([C])


def test_data_dependent_index_needs_a_clip_or_guard():
    A = te.placeholder((N,), name="A")
    idx = te.placeholder((4,), "int32", name="idx")
    raw = te.compute((4,), lambda i: A[idx[i]], name="raw")
    with pytest.raises(LowerError, match=r"unbounded.*te\.max\(te\.min\(index, 15\), 0\)"):
        check_bounds([raw])
    clipped = te.compute((4,), lambda i: A[te.max(te.min(idx[i], N - 1), 0)], name="clipped")
    guarded = te.compute(
        (4,), lambda i: te.if_then_else(te.all(idx[i] >= 0, idx[i] < N), A[idx[i]], 0.0), name="guarded"
    )
    check_bounds([clipped, guarded])


def test_a_guard_the_analysis_cannot_read_does_not_reject_a_legal_program():
    A = te.placeholder((N,), name="A")
    idx = te.placeholder((4,), "int32", name="idx")
    B = te.compute((4,), lambda i: te.if_then_else(A[i] > 0, A[idx[i] % N], 0.0), name="B")
    check_bounds([B])  # idx % N is in range anyway
    C = te.compute((4,), lambda i: te.if_then_else(A[i] > 0, A[idx[i]], 0.0), name="C")
    check_bounds([C])  # the float guard may be what keeps it in range: not refused


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_every_topi_op_proves_in_bounds(name):
    args = SMALL_CASES[name]()
    check_bounds([t for t in args if not isinstance(t.op, PlaceholderOp)])


def test_value_range_of_clipped_and_folded_indices():
    i = te.compute((10,), lambda i: i, name="x").op.axis[0]
    assert value_range(i * 3 - 2) == (-2, 25)
    assert value_range(i % 4) == (0, 3)
    assert value_range(i // 3) == (0, 3)
    assert value_range(te.max(te.min(i - 5, 2), 0)) == (0, 2)


def test_tune_refuses_an_out_of_bounds_program_up_front():
    A, B = _shifted(lambda A: lambda i: A[i + 1])
    with pytest.raises(LowerError, match=r"A\[i \+ 1\]"):
        MeasureTask.create("shifted", [A, B], "llvm-cpu")
