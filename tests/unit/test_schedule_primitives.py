"""Each schedule primitive, alone and combined, against the numpy reference (loop IR interpreted).

The same cases run compiled through LLVM in tests/codegen/test_schedules_llvm.py.
"""

import pytest

from autosched import te
from autosched.search_space.schedule import create_schedule, replay
from autosched.testing import assert_matches_numpy


def matmul(M=13, N=17, K=11):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def dense_relu(M=9, N=12, K=10):
    A, W, C = matmul(M, N, K)
    bias = te.placeholder((N,), name="bias")
    D = te.compute((M, N), lambda i, j: te.max(C[i, j] + bias[j], 0.0), name="D")
    return [A, W, bias, D], C


def conv_padded(N=1, C=3, H=7, W=7, K=4, stride=2, pad=1):
    X = te.placeholder((N, C, H, W), name="X")
    F = te.placeholder((K, C, 3, 3), name="F")
    P = te.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, w: te.if_then_else(
            te.all(h >= pad, h < H + pad, w >= pad, w < W + pad), X[n, c, h - pad, w - pad], 0.0
        ),
        name="pad",
    )
    OH, OW = (H + 2 * pad - 3) // stride + 1, (W + 2 * pad - 3) // stride + 1
    rc, ry, rx = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    Y = te.compute(
        (N, K, OH, OW),
        lambda n, k, h, w: te.sum(
            P[n, rc, h * stride + ry, w * stride + rx] * F[k, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )
    return [X, F, Y], P


def softmax(M=5, N=19):
    X = te.placeholder((M, N), name="X")
    k = te.reduce_axis((0, N), "k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="max")
    k2 = te.reduce_axis((0, N), "k2")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="sum")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
    return [X, out], (mx, ex, sm)


def _mm_split(s, C):
    s[C].split(C.op.axis[0], factor=4)


def _mm_split_nparts(s, C):
    s[C].split(C.op.axis[1], nparts=3)


def _mm_tile_reorder(s, C):
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=3)
    s[C].reorder(io, jo, ko, ii, ki, ji)


def _mm_fuse_parallel(s, C):
    f = s[C].fuse(C.op.axis[0], C.op.axis[1])
    s[C].parallel(f)


def _mm_vectorize_unroll(s, C):
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(C.op.axis[0], jo, ko, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)


def _mm_pragma(s, C):
    io, ii = s[C].split(C.op.axis[0], factor=2)
    s[C].pragma(io, "auto_unroll_max_step", 64)


def _mm_cache_write(s, C):
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], jo)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, s[CC].op.axis[0], ki, s[CC].op.axis[1])
    s[CC].vectorize(s[CC].op.axis[1])
    s[CC].unroll(ki)
    s[C].parallel(s[C].fuse(io, jo))


def _mm_cache_read(s, C):
    A = s.outputs[0].op.input_tensors[0]
    AA = s.cache_read(A, "local", [C])
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(C.op.axis[0], ko, C.op.axis[1], ki)
    s[AA].compute_at(s[C], ko)


def _mm_cache_read_transposed(s, C):
    """A's tile copied transposed (AT[k, i]) inside the j loop, vectorized along i."""
    A = s.outputs[0].op.input_tensors[0]
    AT = s.cache_read(A, "local", [C], layout=(1, 0))
    assert s[AT].op.shape == (A.shape[1], A.shape[0])
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[AT].compute_at(s[C], io)
    s[AT].vectorize(s[AT].op.axis[1])


def _mm_rfactor_inner(s, C):
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    CF = s.rfactor(C, ki)
    s[CF].parallel(s[CF].op.axis[0])


def _mm_rfactor_outer(s, C):
    ko, ki = s[C].split(C.op.reduce_axis[0], nparts=3)
    s.rfactor(C, ko, factor_axis=2)


def _mm_rfactor_root(s, C):
    CF = s.rfactor(C, C.op.reduce_axis[0])
    s[CF].vectorize(s[CF].op.axis[2])


def _mm_bind(s, C):
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(io, "blockIdx.x")
    s[C].bind(ii, "threadIdx.x")


def _mm_compute_root_after_at(s, C):
    CC = s.cache_write(C, "local")
    s[CC].compute_at(s[C], C.op.axis[0])
    s[CC].compute_root()


MATMUL_CASES = {
    f.__name__[4:]: f
    for f in [
        _mm_split, _mm_split_nparts, _mm_tile_reorder, _mm_fuse_parallel, _mm_vectorize_unroll, _mm_pragma,
        _mm_cache_write, _mm_cache_read, _mm_cache_read_transposed, _mm_rfactor_inner, _mm_rfactor_outer,
        _mm_rfactor_root,
        _mm_compute_root_after_at,
    ]
}  # fmt: skip


def _fused_dense(target):
    args, C = dense_relu()
    D = args[-1]
    s = create_schedule(D)
    io, jo, ii, ji = s[D].tile(D.op.axis[0], D.op.axis[1], 4, 4)
    s[C].compute_at(s[D], jo)
    s[D].vectorize(ji)
    s[D].parallel(io)
    assert_matches_numpy(s, args, target)


def _conv_at(target):
    args, P = conv_padded()
    Y = args[-1]
    s = create_schedule(Y)
    n, k, h, w = Y.op.axis
    ho, hi = s[Y].split(h, factor=2)
    s[P].compute_at(s[Y], ho)
    s[Y].parallel(k)
    assert_matches_numpy(s, args, target)


def _conv_inline(target):
    args, P = conv_padded()
    s = create_schedule(args[-1])
    s[P].compute_inline()
    assert_matches_numpy(s, args, target)


def _softmax_at(target):
    args, (mx, ex, sm) = softmax()
    out = args[-1]
    s = create_schedule(out)
    s[ex].compute_inline()
    s[mx].compute_at(s[out], out.op.axis[0])
    s[sm].compute_at(s[out], out.op.axis[0])
    jo, ji = s[out].split(out.op.axis[1], factor=8)
    s[out].vectorize(ji)
    assert_matches_numpy(s, args, target)


def _softmax_exp_at(target):
    args, (mx, ex, sm) = softmax()
    out = args[-1]
    s = create_schedule(out)
    s[mx].compute_at(s[out], out.op.axis[0])
    s[ex].compute_at(s[out], out.op.axis[0])
    s[sm].compute_at(s[out], out.op.axis[0])
    assert_matches_numpy(s, args, target)


OTHER_CASES = {
    f.__name__[1:]: f for f in [_fused_dense, _conv_at, _conv_inline, _softmax_at, _softmax_exp_at]
}


@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_matmul_primitive_interpreted(case):
    args = matmul()
    s = create_schedule(args[-1])
    MATMUL_CASES[case](s, args[-1])
    assert_matches_numpy(s, args, "interpret")
    # The trace replays to a schedule that computes the same thing.
    again = replay([args[-1]], s.trace)
    assert again.trace == s.trace
    assert_matches_numpy(again, args, "interpret", seed=1)


def test_bind_lowers_and_runs_serially_in_interpreter():
    args = matmul()
    s = create_schedule(args[-1])
    _mm_bind(s, args[-1])
    assert_matches_numpy(s, args, "interpret")


@pytest.mark.parametrize("case", sorted(OTHER_CASES))
def test_composed_schedules_interpreted(case):
    OTHER_CASES[case]("interpret")
