"""Building te programs, and the messages of the mistakes users make while doing it."""

import pytest

from autosched import te
from autosched.te.expr import Binary, Cast, Const


def test_matmul_builds_with_a_reduction_at_the_top():
    A = te.placeholder((8, 4), name="A")
    B = te.placeholder((4, 6), name="B")
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((8, 6), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    assert C.shape == (8, 6) and C.dtype == "float32"
    assert [a.name for a in C.op.axis] == ["i", "j"]
    assert C.op.reduce_axis == (k,)
    assert [t.name for t in C.op.input_tensors] == ["A", "B"]
    assert repr(C.op.body) == "sum((A[i, k] * B[k, j]), axis=[k])"


def test_python_number_takes_the_dtype_it_meets():
    x = te.placeholder((4,), "float32", name="x")
    y = 0.2 * x[0]
    assert isinstance(y, Binary) and y.dtype == "float32"
    assert isinstance(y.a, Const) and y.a.dtype == "float32"
    z = te.placeholder((4,), "float64", name="z")
    assert (z[0] + 1).dtype == "float64"


def test_int32_and_int64_widen():
    a = te.placeholder((4,), "int64", name="a")
    e = a[0] + te.placeholder((4,), "int32", name="b")[0]
    assert e.dtype == "int64" and isinstance(e.b, Cast)


def test_mismatched_dtypes_are_rejected():
    x = te.placeholder((4,), "float32", name="x")
    y = te.placeholder((4,), "float64", name="y")
    with pytest.raises(TypeError, match=r"dtypes float32 and float64 differ; use te.cast"):
        te.compute((4,), lambda i: x[i] + y[i])
    with pytest.raises(TypeError, match="dtypes"):
        te.compute((4,), lambda i: x[i] * i)


def test_float_constant_meeting_an_integer_is_rejected():
    with pytest.raises(TypeError, match="int32 and float32 differ"):
        te.compute((4,), lambda i: i * 0.5)


def test_integer_true_division_is_rejected():
    with pytest.raises(TypeError, match="use '//'"):
        te.compute((4,), lambda i: i / 2)


def test_floor_ops_need_integers():
    x = te.placeholder((4,), name="x")
    with pytest.raises(TypeError, match="needs integers"):
        te.compute((4,), lambda i: x[i] // 2.0)


def test_wrong_number_of_indices():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(IndexError, match=r"'A' has 2 dimension\(s\) \(4, 4\), indexed with 1"):
        te.compute((4,), lambda i: A[i])


def test_non_integer_index():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match=r"index .* of tensor 'A' must be an integer, got float32"):
        te.compute((4,), lambda i: A[A[i]])
    with pytest.raises(TypeError, match="float32"):
        te.compute((4,), lambda i: A[1.5])


def test_reduction_must_be_the_whole_body():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="a reduction must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0, name="S")


def test_reduction_axis_name_clash():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="i")
    with pytest.raises(ValueError, match="axis name 'i' is used twice"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k))


def test_reduction_axis_must_come_from_reduce_axis():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TypeError, match=r"te\.reduce_axis"):
        te.compute((4,), lambda i: te.sum(A[i, 0], axis=i))


@pytest.mark.parametrize("shape", [(0, 4), (-1,), (2.0, 3), (True, 2), "ab"])
def test_bad_shapes(shape):
    with pytest.raises((ValueError, TypeError), match="shape must be a tuple of positive ints"):
        te.placeholder(shape, name="A")
    with pytest.raises((ValueError, TypeError), match="shape must be a tuple of positive ints"):
        te.compute(shape, lambda *i: te.const(1.0))


def test_bad_reduce_axis_and_dtype():
    with pytest.raises(ValueError, match=r"expected \(0, extent\)"):
        te.reduce_axis((1, 4), name="k")
    with pytest.raises(TypeError, match="unknown dtype 'float16'"):
        te.placeholder((4,), "float16", name="A")
    with pytest.raises(TypeError, match="bool tensors are not supported"):
        te.placeholder((4,), "bool", name="A")


def test_lambda_arity_must_match_the_shape():
    with pytest.raises(TypeError, match=r"shape has 2 dimension\(s\) but the lambda takes 1"):
        te.compute((4, 4), lambda i: te.const(1.0), name="C")


def test_unknown_intrinsic_and_bad_arguments():
    from autosched.te.expr import call

    x = te.placeholder((4,), name="x")
    with pytest.raises(TypeError, match="unknown intrinsic 'gelu'"):
        call("gelu", x[0])
    with pytest.raises(TypeError, match=r"te\.exp needs a float argument"):
        te.exp(te.placeholder((4,), "int32", name="n")[0])
    with pytest.raises(TypeError, match="takes 2 argument"):
        call("pow", x[0])


def test_python_if_on_an_expression_raises():
    x = te.placeholder((4,), name="x")
    with pytest.raises(TypeError, match=r"te\.if_then_else"):
        te.compute((4,), lambda i: x[i] if i < 2 else 0.0)
    with pytest.raises(TypeError, match="no truth value"):
        bool(te.all(x[0] > 0, x[1] > 0))


def test_if_then_else_checks_condition_and_branches():
    x = te.placeholder((4,), name="x")
    with pytest.raises(TypeError, match="must be a comparison"):
        te.if_then_else(x[0], 1.0, 0.0)
    with pytest.raises(TypeError, match="dtypes"):
        te.compute((4,), lambda i: te.if_then_else(i < 2, x[i], i))
    e = te.if_then_else(x[0] > 0, x[0], 0)  # the 0 becomes a float32 constant
    assert e.dtype == "float32"


def test_max_min_are_reducers_with_axis_and_elementwise_without():
    x = te.placeholder((4, 4), name="x")
    k = te.reduce_axis((0, 4), name="k")
    r = te.compute((4,), lambda i: te.max(x[i, k], axis=k))
    assert isinstance(r.op.body, te.Reduce) and r.op.body.reducer.name == "max"
    e = te.min(x[0, 0], 0.0)
    assert isinstance(e, Binary) and e.op == "min"
    with pytest.raises(TypeError, match="two expressions"):
        te.max(x[0, 0])


def test_compute_body_cannot_be_a_condition():
    with pytest.raises(TypeError, match="body is a condition"):
        te.compute((4,), lambda i: i < 2)


def test_comm_reducer_checks_its_where():
    x = te.placeholder((4, 4), name="x")
    k = te.reduce_axis((0, 4), name="k")
    prod = te.comm_reducer(lambda a, b: a * b, lambda t: 1, name="prod")
    with pytest.raises(TypeError, match="where= must be a condition"):
        te.compute((4,), lambda i: prod(x[i, k], axis=k, where=x[i, k]))


def test_compute_rejects_axes_it_does_not_own():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="uses variable 'k', which is neither one of its axes"):
        te.compute((4,), lambda i: A[i, k], name="C")
    C = te.compute((4,), lambda i: A[i, 0], name="C")
    with pytest.raises(ValueError, match="variable 'i'"):
        te.compute((4,), lambda j: A[C.op.axis[0], j], name="D")
    k2 = te.reduce_axis((0, 4), name="k2")
    with pytest.raises(ValueError, match="variable 'k2'"):
        te.compute((4,), lambda i: te.sum(A[i, k] * A[k2, i], axis=k), name="E")
