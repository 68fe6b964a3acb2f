"""The numpy reference evaluator against hand-written numpy, op category by op category."""

import math

import numpy as np
import pytest

from autosched import te
from autosched.te import reference
from autosched.te.reference import evaluate, random_inputs, reference_for


def _rand(*shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


def _matmul(M, N, K, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_matmul():
    A, B, C = _matmul(17, 9, 33)
    a, b = random_inputs([A, B, C], seed=1)
    (c,) = evaluate([C], {A: a, "B": b})
    assert c.dtype == np.float32 and c.shape == (17, 9)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-6, atol=1e-6)


def test_batch_matmul_transposed_b():
    X = te.placeholder((3, 5, 7), name="X")
    Y = te.placeholder((3, 6, 7), name="Y")
    k = te.reduce_axis((0, 7), name="k")
    Z = te.compute((3, 5, 6), lambda b, i, j: te.sum(X[b, i, k] * Y[b, j, k], axis=k), name="Z")
    x, y = random_inputs([X, Y], seed=2)
    (z,) = evaluate([Z], {X: x, Y: y})
    np.testing.assert_allclose(z, np.einsum("bik,bjk->bij", x, y), rtol=1e-5, atol=1e-6)


def _conv2d_numpy(x, w, stride, pad, dil):
    n, _, h, wd = x.shape
    f, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    wo = (wd + 2 * pad - dil * (s - 1) - 1) // stride + 1
    out = np.zeros((n, f, ho, wo))
    for ry in range(r):
        for rx in range(s):
            patch = xp[:, :, ry * dil :: stride, rx * dil :: stride][:, :, :ho, :wo]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, ry, rx])
    return out


@pytest.mark.parametrize("inline_pad", [False, True])
@pytest.mark.parametrize(("stride", "pad", "dil"), [(1, 1, 1), (2, 2, 1), (2, 1, 2)])
def test_conv2d(stride, pad, dil, inline_pad):
    n, c, h, w, f, r = 2, 3, 9, 8, 4, 3
    X = te.placeholder((n, c, h, w), name="X")
    W = te.placeholder((f, c, r, r), name="W")
    ho = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    wo = (w + 2 * pad - dil * (r - 1) - 1) // stride + 1
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")

    def padded(b, ch, y, x):  # reads X at (y - pad, x - pad), guarded: the guard makes the read legal
        inside = te.all(y >= pad, y < h + pad, x >= pad, x < w + pad)
        return te.if_then_else(inside, X[b, ch, y - pad, x - pad], 0.0)

    if inline_pad:
        src = padded
    else:
        P = te.compute((n, c, h + 2 * pad, w + 2 * pad), padded, name="P")

        def src(b, ch, y, x):
            return P[b, ch, y, x]

    Y = te.compute(
        (n, f, ho, wo),
        lambda b, o, y, x: te.sum(
            src(b, rc, y * stride + ry * dil, x * stride + rx * dil) * W[o, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="Y",
    )
    x, wt = random_inputs([X, W], seed=3)
    (y,) = evaluate([Y], {X: x, W: wt})
    np.testing.assert_allclose(y, _conv2d_numpy(x, wt, stride, pad, dil), rtol=1e-5, atol=1e-5)


def test_max_and_avg_pooling():
    X = te.placeholder((2, 8, 8), name="X")
    ry, rx = te.reduce_axis((0, 2), "ry"), te.reduce_axis((0, 2), "rx")
    Mx = te.compute((2, 4, 4), lambda c, i, j: te.max(X[c, 2 * i + ry, 2 * j + rx], axis=[ry, rx]), "Mx")
    S = te.compute((2, 4, 4), lambda c, i, j: te.sum(X[c, 2 * i + ry, 2 * j + rx], axis=[ry, rx]), "S")
    Avg = te.compute((2, 4, 4), lambda c, i, j: S[c, i, j] / 4.0, name="Avg")
    (x,) = random_inputs([X], seed=4)
    mx, avg = evaluate([Mx, Avg], {X: x})
    blocks = x.reshape(2, 4, 2, 4, 2)
    np.testing.assert_array_equal(mx, blocks.max(axis=(2, 4)))
    np.testing.assert_allclose(avg, blocks.astype(np.float64).mean(axis=(2, 4)), rtol=1e-6, atol=1e-7)


def test_softmax():
    X = te.placeholder((4, 10), name="X")
    k1, k2 = te.reduce_axis((0, 10), "k1"), te.reduce_axis((0, 10), "k2")
    Mx = te.compute((4,), lambda i: te.max(X[i, k1], axis=k1), name="Mx")
    E = te.compute((4, 10), lambda i, j: te.exp(X[i, j] - Mx[i]), name="E")
    S = te.compute((4,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((4, 10), lambda i, j: E[i, j] / S[i], name="Y")
    (x,) = random_inputs([X], seed=5)
    (y,) = evaluate([Y], {X: x})
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    assert y.dtype == np.float32


def test_layer_norm():
    n, d = 3, 16
    X = te.placeholder((n, d), name="X")
    G, B = te.placeholder((d,), name="G"), te.placeholder((d,), name="B")
    k, k2 = te.reduce_axis((0, d), "k"), te.reduce_axis((0, d), "k2")
    S = te.compute((n,), lambda i: te.sum(X[i, k], axis=k), name="S")
    Mean = te.compute((n,), lambda i: S[i] / d, name="Mean")
    SS = te.compute((n,), lambda i: te.sum((X[i, k2] - Mean[i]) * (X[i, k2] - Mean[i]), axis=k2), name="SS")
    Var = te.compute((n,), lambda i: SS[i] / d, name="Var")
    Y = te.compute((n, d), lambda i, j: (X[i, j] - Mean[i]) * te.rsqrt(Var[i] + 1e-5) * G[j] + B[j], name="Y")
    x, g, b = random_inputs([X, G, B], seed=6)
    (y,) = evaluate([Y], {X: x, G: g, B: b})
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=1e-5)


def test_custom_comm_reducer_product_with_where():
    prod = te.comm_reducer(lambda a, b: a * b, lambda dtype: 1, name="prod")
    # A reducer numpy cannot recognise folds its combine template instead.
    absmax = te.comm_reducer(lambda a, b: te.max(te.abs(a), te.abs(b)), lambda dtype: 0.0, "absmax")
    X = te.placeholder((5, 6), name="X")
    k = te.reduce_axis((0, 6), "k")
    P = te.compute((5,), lambda i: prod(X[i, k], axis=k), name="P")
    Q = te.compute((5,), lambda i: absmax(X[i, k], axis=k, where=k < i), name="Q")
    (x,) = random_inputs([X], seed=7)
    p, q = evaluate([P, Q], {X: x})
    np.testing.assert_allclose(p, x.prod(axis=1), rtol=1e-5)
    expected = [np.abs(x[i, :i]).max(initial=0.0) for i in range(5)]
    np.testing.assert_array_equal(q, np.array(expected, np.float32))


def test_where_masks_with_the_identity():
    X = te.placeholder((6, 6), name="X")
    k = te.reduce_axis((0, 6), "k")
    Tri = te.compute((6,), lambda i: te.sum(X[i, k], axis=k, where=k <= i), name="Tri")
    Mn = te.compute((6,), lambda i: te.min(X[i, k], axis=k, where=k > i), name="Mn")
    (x,) = random_inputs([X], seed=8)
    tri, mn = evaluate([Tri, Mn], {X: x})
    np.testing.assert_allclose(tri, [x[i, : i + 1].sum() for i in range(6)], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(mn, [x[i, i + 1 :].min(initial=np.inf) for i in range(6)])


def test_where_is_lazy_for_the_source():
    X = te.placeholder((4,), name="X")
    k = te.reduce_axis((0, 8), "k")
    S = te.compute((1,), lambda i: te.sum(X[k], axis=k, where=k < 4), name="S")  # X[4..7] never read
    (x,) = random_inputs([X], seed=9)
    np.testing.assert_allclose(evaluate([S], {X: x})[0], [x.sum()], rtol=1e-6)


def test_gather_with_int32_indices():
    T = te.placeholder((10, 4), name="T")
    Ix = te.placeholder((6,), "int32", name="Ix")
    G = te.compute((6, 4), lambda i, j: T[Ix[i], j], name="G")
    t, ix = random_inputs([T, Ix], seed=10, int_high=10)
    assert ix.dtype == np.int32 and ix.min() >= 0 and ix.max() < 10
    np.testing.assert_array_equal(evaluate([G], {T: t, Ix: ix})[0], t[ix])


def test_floor_division_and_modulo_on_negative_ints():
    X = te.placeholder((8,), "int32", name="X")
    D = te.compute((8,), lambda i: X[i] // 3, name="D")
    M = te.compute((8,), lambda i: X[i] % -3, name="M")
    F = te.compute((8,), lambda i: te.cast("int32", te.cast("float32", X[i]) * 0.5), name="F")
    x = np.array([-7, -6, -5, -1, 0, 1, 5, 7], np.int32)
    d, m, f = evaluate([D, M, F], {X: x})
    np.testing.assert_array_equal(d, x // 3)  # floors: -7 // 3 == -3
    np.testing.assert_array_equal(m, x % -3)
    np.testing.assert_array_equal(f, np.trunc(x * 0.5).astype(np.int32))  # cast truncates toward zero
    assert d.dtype == np.int32 and d[0] == -3


def test_integer_division_by_zero_is_reported():
    X = te.placeholder((3,), "int32", name="X")
    D = te.compute((3,), lambda i: 6 // X[i], name="D")
    with pytest.raises(ZeroDivisionError, match=r"compute .D.* at i=1"):
        evaluate([D], {X: np.array([1, 0, 2], np.int32)})


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("exp", np.exp), ("log", lambda x: np.log(np.abs(x))), ("sqrt", lambda x: np.sqrt(np.abs(x))),
        ("rsqrt", lambda x: 1 / np.sqrt(np.abs(x))), ("tanh", np.tanh),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("erf", np.vectorize(math.erf)), ("abs", np.abs), ("floor", np.floor), ("ceil", np.ceil),
        ("pow", lambda x: np.abs(x) ** 1.5),
    ],
)  # fmt: skip
def test_intrinsics(name, fn):
    X = te.placeholder((64,), name="X")
    f = getattr(te, name)
    positive = name in ("log", "sqrt", "rsqrt", "pow")
    arg = (lambda i: te.abs(X[i])) if positive else (lambda i: X[i])
    Y = te.compute((64,), (lambda i: f(arg(i), 1.5)) if name == "pow" else (lambda i: f(arg(i))), name="Y")
    (x,) = random_inputs([X], seed=11)
    x = x * 3
    (y,) = evaluate([Y], {X: x})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, fn(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_erf_fallback_without_scipy(monkeypatch):
    monkeypatch.setattr(reference, "_scipy_erf", None)
    x = np.linspace(-5, 5, 101)
    np.testing.assert_allclose(reference._erf(x), [math.erf(v) for v in x], rtol=0, atol=1e-15)
    assert reference._erf(x.astype(np.float32)).dtype == np.float32
    assert reference._erf(np.float32(0.5)) == np.float32(math.erf(0.5))
    Y = te.compute((2,), lambda i: te.erf(te.const(0.5)) + te.cast("float32", i), name="Y")
    np.testing.assert_allclose(evaluate([Y], {})[0], [math.erf(0.5), 1 + math.erf(0.5)], rtol=1e-7)


def test_if_then_else_is_lazy():
    X = te.placeholder((4,), name="X")
    # Reads X[i - 2] only where i >= 2; at i < 2 the index is negative and must not be checked.
    Y = te.compute((6,), lambda i: te.if_then_else(te.all(i >= 2, i < 6), X[i - 2], -1.0), name="Y")
    (x,) = random_inputs([X], seed=12)
    np.testing.assert_array_equal(evaluate([Y], {X: x})[0], np.concatenate([[-1, -1], x]).astype("f4"))


def test_out_of_bounds_read_is_an_error():
    X = te.placeholder((4,), name="X")
    Y = te.compute((5,), lambda i: X[i] * 2.0, name="Y")
    with pytest.raises(IndexError, match=r"compute 'Y': X\[i\] reads out of bounds: index 4 in dimension 0"):
        evaluate([Y], {X: np.ones(4, np.float32)})
    # Guarded, but by the wrong condition: i == 5 is out of bounds and taken.
    Z = te.compute((6,), lambda i: te.if_then_else(i > 0, X[i - 1], 0.0), name="Z")
    with pytest.raises(IndexError, match=r"index 4 in dimension 0 of 'X' \(shape \(4,\)\) at i=5"):
        evaluate([Z], {X: np.ones(4, np.float32)})


def test_chunked_evaluation_matches_whole():
    A, B, C = _matmul(6, 5, 300)
    a, b = random_inputs([A, B], seed=13)
    expected = a.astype(np.float64) @ b
    boxes = list(reference._boxes((6, 5, 300), 64))  # too small for one row: the reduce axis is cut
    assert len(boxes) == 6 * 5 * 5 and boxes[0] == ((0, 1), (0, 1), (0, 64))
    for max_grid in (64, 1000, 1 << 24):
        (c,) = evaluate([C], {A: a, B: b}, max_grid=max_grid)
        np.testing.assert_allclose(c, expected, rtol=1e-6, atol=1e-6)
    # A custom reducer combines partial results of reduce chunks with its template.
    prod = te.comm_reducer(lambda x, y: te.max(x, y) + 0.0, lambda dtype: -np.inf, name="max2")
    k = te.reduce_axis((0, 300), "k")
    R = te.compute((6,), lambda i: prod(A[i, k], axis=k), name="R")
    (r,) = evaluate([R], {A: a}, max_grid=32)
    np.testing.assert_array_equal(r, a.max(axis=1))


def test_float_sums_accumulate_in_float64():
    X = te.placeholder((1 << 16,), name="X")
    k = te.reduce_axis((0, 1 << 16), "k")
    S = te.compute((1,), lambda i: te.sum(X[k], axis=k), name="S")
    x = np.full(1 << 16, 0.1, np.float32)
    (s,) = evaluate([S], {X: x}, max_grid=1000)
    assert s[0] == np.float32(x.astype(np.float64).sum())


def test_input_checks_name_the_tensor():
    A, B, C = _matmul(4, 4, 4)
    a, b = random_inputs([A, B], seed=14)
    with pytest.raises(ValueError, match=r"input 'B': expected float32 array of shape \(4, 4\), got float64"):
        evaluate([C], {A: a, B: b.astype(np.float64)})
    with pytest.raises(ValueError, match=r"got float32 of shape \(4, 3\)"):
        evaluate([C], {A: a, B: b[:, :3]})
    with pytest.raises(ValueError, match="missing input"):
        evaluate([C], {A: a})
    with pytest.raises(ValueError, match="'Bee' matches no placeholder"):
        evaluate([C], {A: a, B: b, "Bee": b})
    with pytest.raises(ValueError, match="got list"):
        evaluate([C], {A: a, B: b.tolist()})


def test_random_inputs_and_reference_for():
    A, B, C = _matmul(8, 8, 8)
    Ix = te.placeholder((3,), "int32", name="Ix")
    a, b = random_inputs([A, B, C], seed=15)
    assert a.dtype == np.float32 and np.all(a != 0) and a.min() >= -1 and a.max() < 1
    a2, _ = random_inputs([A, B], seed=15)
    np.testing.assert_array_equal(a, a2)  # seeded
    for seed in range(20):  # small int tensors are never all zero
        (ix,) = random_inputs([Ix], seed=seed)
        assert ix.any() and set(ix.tolist()) <= {0, 1}
    (c,) = reference_for([A, B, C], [a, b, np.empty((8, 8), np.float32)])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    assert np.array_equal(reference_for([A, B, C], [a, b])[0], c)
    with pytest.raises(ValueError, match="1 array"):
        reference_for([A, B, C], [a])


def test_placeholder_outputs_are_copies_and_names_must_be_unambiguous():
    A1, A2 = te.placeholder((2,), name="A"), te.placeholder((2,), name="A")
    S = te.compute((2,), lambda i: A1[i] + A2[i], name="S")
    a1, a2 = random_inputs([A1, A2], seed=16)
    s, a1_out = evaluate([S, A1], {A1: a1, A2: a2})
    np.testing.assert_array_equal(s, a1 + a2)
    assert a1_out is not a1 and np.array_equal(a1_out, a1)
    with pytest.raises(ValueError, match="'A' names several placeholders; key by tensor"):
        evaluate([S], {"A": a1})
