"""Representative instances of every operator, as tensor lists ``[inputs..., outputs...]``.

``make_<op>(...)`` builds one instance (these become registered workloads); :data:`SMALL_CASES` holds
one small instance per operator kind, every dim <= 16, so compiled versions test quickly.
Example: ``A, W, C = make_conv2d(stride=2, padding=1)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import te
from ..te import Tensor
from ..te.tensor import PlaceholderOp
from . import attention, conv, elementwise, norm, pool, reduction, transform
from .matmul import batch_matmul, dense, matmul

Ints = int | tuple[int, ...]


def make_matmul(M: int = 16, N: int = 16, K: int = 16, dtype: str = "float32") -> list[Tensor]:
    """C (M, N) = A (M, K) @ B (K, N)."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    return [A, B, matmul(A, B)]


def make_batch_matmul(
    B: int = 2, M: int = 8, N: int = 8, K: int = 16, transpose_b: bool = False, dtype: str = "float32"
) -> list[Tensor]:
    """A batch of B matmuls; ``transpose_b`` gives B as (B, N, K)."""
    A = te.placeholder((B, M, K), dtype, name="A")
    Bt = te.placeholder((B, N, K) if transpose_b else (B, K, N), dtype, name="B")
    return [A, Bt, batch_matmul(A, Bt, transpose_b=transpose_b)]


def make_dense(
    M: int = 8,
    N: int = 16,
    K: int = 16,
    bias: bool = True,
    activation: str | None = "relu",
    dtype: str = "float32",
) -> list[Tensor]:
    """dense (M, N) of X (M, K) and W (N, K), then bias and activation as their own stage."""
    X = te.placeholder((M, K), dtype, name="X")
    W = te.placeholder((N, K), dtype, name="W")
    b = te.placeholder((N,), dtype, name="bias") if bias else None
    out = dense(X, W, b, activation=activation)
    return [X, W, out] if b is None else [X, W, b, out]


def make_conv1d(
    N: int = 1, C: int = 4, W: int = 16, K: int = 8, S: int = 3, stride: Ints = 1, padding: Ints = 1,
    dilation: Ints = 1, groups: int = 1, dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """NCW conv1d with a (K, C/groups, S) weight."""
    data = te.placeholder((N, C, W), dtype, name="data")
    weight = te.placeholder((K, C // groups, S), dtype, name="weight")
    return [data, weight, conv.conv1d(data, weight, stride, padding, dilation, groups)]


def make_conv2d(
    N: int = 1, C: int = 8, H: int = 12, W: int = 12, K: int = 16, R: int = 3, S: int = 3, stride: Ints = 2,
    padding: Ints = 1, dilation: Ints = 1, groups: int = 1, dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """NCHW conv2d with a (K, C/groups, R, S) weight, after a pad stage when padding > 0."""
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((K, C // groups, R, S), dtype, name="weight")
    return [data, weight, conv.conv2d(data, weight, stride, padding, dilation, groups)]


def make_conv3d(
    N: int = 1, C: int = 2, D: int = 6, H: int = 6, W: int = 6, K: int = 4, T: int = 3, R: int = 3,
    S: int = 3, stride: Ints = 1, padding: Ints = 1, dilation: Ints = 1, groups: int = 1,
    dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """NCDHW conv3d with a (K, C/groups, T, R, S) weight."""
    data = te.placeholder((N, C, D, H, W), dtype, name="data")
    weight = te.placeholder((K, C // groups, T, R, S), dtype, name="weight")
    return [data, weight, conv.conv3d(data, weight, stride, padding, dilation, groups)]


def make_depthwise_conv2d(
    N: int = 1, C: int = 8, H: int = 12, W: int = 12, M: int = 1, R: int = 3, S: int = 3, stride: Ints = 1,
    padding: Ints = 1, dilation: Ints = 1, dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """Depthwise NCHW conv with a (C, M, R, S) weight; C*M output channels."""
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, M, R, S), dtype, name="weight")
    return [data, weight, conv.depthwise_conv2d(data, weight, stride, padding, dilation)]


def make_conv2d_transpose(
    N: int = 1, C: int = 4, H: int = 6, W: int = 6, K: int = 4, R: int = 3, S: int = 3, stride: Ints = 2,
    padding: Ints = 1, output_padding: Ints = 1, dilation: Ints = 1, groups: int = 1, dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """Transposed NCHW conv with a (C, K/groups, R, S) weight (PyTorch semantics)."""
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, K // groups, R, S), dtype, name="weight")
    out = conv.conv2d_transpose(data, weight, stride, padding, output_padding, dilation, groups)
    return [data, weight, out]


def make_max_pool2d(
    N: int = 1, C: int = 4, H: int = 12, W: int = 12, kernel: int = 3, stride: Ints = 2, padding: Ints = 1,
    dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """Max pooling of an NCHW tensor over kernel x kernel windows."""
    data = te.placeholder((N, C, H, W), dtype, name="data")
    return [data, pool.max_pool2d(data, kernel, stride, padding)]


def make_avg_pool2d(
    N: int = 1, C: int = 4, H: int = 12, W: int = 12, kernel: int = 3, stride: Ints = 2, padding: Ints = 1,
    count_include_pad: bool = False, dtype: str = "float32",
) -> list[Tensor]:  # fmt: skip
    """Average pooling; by default padding is not counted in the divisor."""
    data = te.placeholder((N, C, H, W), dtype, name="data")
    return [data, pool.avg_pool2d(data, kernel, stride, padding, count_include_pad)]


BINARY = {
    "add": elementwise.add, "subtract": elementwise.subtract, "multiply": elementwise.multiply,
    "divide": elementwise.divide, "maximum": elementwise.maximum, "minimum": elementwise.minimum,
}  # fmt: skip
UNARY = {
    "relu": elementwise.relu, "exp": elementwise.exp, "tanh": elementwise.tanh,
    "sigmoid": elementwise.sigmoid, "gelu": elementwise.gelu,
}  # fmt: skip


def make_broadcast(
    op: str = "add",
    shape_a: tuple[int, ...] = (4, 1, 6),
    shape_b: tuple[int, ...] = (3, 1),
    dtype: str = "float32",
) -> list[Tensor]:
    """A binary op (a key of BINARY) of two shapes that broadcast as in numpy."""
    a = te.placeholder(shape_a, dtype, name="a")
    b = te.placeholder(shape_b, dtype, name="b")
    return [a, b, BINARY[op](a, b)]


def make_unary(op: str = "gelu", shape: tuple[int, ...] = (4, 16), dtype: str = "float32") -> list[Tensor]:
    """A unary activation (a key of UNARY)."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, UNARY[op](x)]


REDUCERS = {"sum": reduction.sum, "max": reduction.max, "min": reduction.min, "mean": reduction.mean}


def make_reduce(
    op: str = "sum",
    shape: tuple[int, ...] = (4, 6, 8),
    axis: int | tuple[int, ...] | None = (0, 2),
    keepdims: bool = False,
    dtype: str = "float32",
) -> list[Tensor]:
    """A reduction (a key of REDUCERS) over ``axis``."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, REDUCERS[op](x, axis=axis, keepdims=keepdims)]


def make_softmax(shape: tuple[int, ...] = (4, 16), dtype: str = "float32") -> list[Tensor]:
    """Softmax over the last axis, in four stages."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, norm.softmax(x)]


def make_layer_norm(
    shape: tuple[int, ...] = (2, 4, 16), axis: int = -1, dtype: str = "float32"
) -> list[Tensor]:
    """Layer norm over the dims from ``axis`` on, with gamma and beta of those dims."""
    x = te.placeholder(shape, dtype, name="x")
    inner = shape[axis % len(shape) :]
    gamma = te.placeholder(inner, dtype, name="gamma")
    beta = te.placeholder(inner, dtype, name="beta")
    return [x, gamma, beta, norm.layer_norm(x, gamma, beta, axis=axis)]


def make_batch_norm(N: int = 2, C: int = 4, H: int = 6, W: int = 6, dtype: str = "float32") -> list[Tensor]:
    """Inference batch norm of an NCHW tensor; moving_var must be positive when run."""
    x = te.placeholder((N, C, H, W), dtype, name="x")
    gamma, beta, mean, var = (
        te.placeholder((C,), dtype, name=n) for n in ("gamma", "beta", "moving_mean", "moving_var")
    )
    return [x, gamma, beta, mean, var, norm.batch_norm(x, gamma, beta, mean, var)]


def make_attention(
    B: int = 1, H: int = 2, S: int = 8, L: int = 8, D: int = 16, causal: bool = False, dtype: str = "float32"
) -> list[Tensor]:
    """Scaled dot-product attention, (B, H, S, D) queries over L keys."""
    q = te.placeholder((B, H, S, D), dtype, name="q")
    k = te.placeholder((B, H, L, D), dtype, name="k")
    v = te.placeholder((B, H, L, D), dtype, name="v")
    return [q, k, v, attention.scaled_dot_product_attention(q, k, v, causal=causal)]


def make_transpose(
    shape: tuple[int, ...] = (2, 3, 4, 5), axes: tuple[int, ...] = (0, 2, 3, 1), dtype: str = "float32"
) -> list[Tensor]:
    """A permutation of dims."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, transform.transpose(x, axes)]


def make_reshape(
    shape: tuple[int, ...] = (2, 3, 4), newshape: tuple[int, ...] = (4, -1), dtype: str = "float32"
) -> list[Tensor]:
    """A row-major reshape."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, transform.reshape(x, newshape)]


def make_pad(
    shape: tuple[int, ...] = (2, 5, 6),
    before: tuple[int, ...] = (0, 1, 2),
    after: tuple[int, ...] = (1, 0, 3),
    value: float = 0.5,
    dtype: str = "float32",
) -> list[Tensor]:
    """Constant padding before and after each dim."""
    x = te.placeholder(shape, dtype, name="x")
    return [x, transform.pad(x, before, after, pad_value=value)]


def make_take(
    shape: tuple[int, ...] = (10, 6),
    indices_shape: tuple[int, ...] = (3, 4),
    axis: int = 0,
    dtype: str = "float32",
) -> list[Tensor]:
    """``numpy.take`` along ``axis`` with an int32 index tensor (clipped)."""
    x = te.placeholder(shape, dtype, name="x")
    idx = te.placeholder(indices_shape, "int32", name="indices")
    return [x, idx, transform.take(x, idx, axis)]


def make_gather(
    shape: tuple[int, ...] = (4, 10), axis: int = 1, n_index: int = 6, dtype: str = "float32"
) -> list[Tensor]:
    """``numpy.take_along_axis`` with an int32 index tensor (clipped)."""
    x = te.placeholder(shape, dtype, name="x")
    ishape = tuple(n_index if d == axis % len(shape) else s for d, s in enumerate(shape))
    idx = te.placeholder(ishape, "int32", name="indices")
    return [x, idx, transform.gather(x, axis, idx)]


def make_concatenate(
    shapes: tuple[tuple[int, ...], ...] = ((2, 3, 4), (2, 5, 4), (2, 1, 4)),
    axis: int = 1,
    dtype: str = "float32",
) -> list[Tensor]:
    """Concatenation along ``axis``."""
    xs = [te.placeholder(s, dtype, name=f"x{i}") for i, s in enumerate(shapes)]
    return [*xs, transform.concatenate(xs, axis)]


SMALL_CASES: dict[str, Callable[[], list[Tensor]]] = {
    "matmul": lambda: make_matmul(M=8, N=12, K=16),
    "batch_matmul": lambda: make_batch_matmul(B=3, M=5, N=7, K=9),
    "batch_matmul_nt": lambda: make_batch_matmul(B=2, M=6, N=5, K=8, transpose_b=True),
    "dense_bias_relu": lambda: make_dense(M=6, N=10, K=12, activation="relu"),
    "dense_bias_gelu": lambda: make_dense(M=4, N=8, K=16, activation="gelu"),
    "conv1d": lambda: make_conv1d(N=2, C=4, W=15, K=6, S=3, stride=2, padding=2, dilation=2, groups=2),
    "conv2d": lambda: make_conv2d(N=1, C=4, H=9, W=10, K=6, R=3, S=3, stride=1, padding=1),
    "conv2d_strided_dilated_grouped": lambda: make_conv2d(
        N=2, C=6, H=11, W=10, K=4, R=3, S=2, stride=2, padding=2, dilation=2, groups=2
    ),
    "conv3d": lambda: make_conv3d(N=1, C=2, D=5, H=6, W=7, K=3, T=3, R=3, S=2, stride=(1, 2, 1), padding=1),
    "depthwise_conv2d": lambda: make_depthwise_conv2d(C=4, H=9, W=9, M=2, stride=2, padding=1, dilation=1),
    "conv2d_transpose": lambda: make_conv2d_transpose(
        C=4, H=5, W=6, K=6, stride=2, padding=1, output_padding=1
    ),
    "conv2d_transpose_grouped": lambda: make_conv2d_transpose(
        C=4, H=4, W=5, K=4, R=2, S=3, stride=3, padding=(0, 2), output_padding=0, dilation=2, groups=2
    ),
    "max_pool2d": lambda: make_max_pool2d(C=3, H=11, W=10, kernel=3, stride=2, padding=1),
    "avg_pool2d": lambda: make_avg_pool2d(C=3, H=10, W=9, kernel=3, stride=2, padding=1),
    "avg_pool2d_include_pad": lambda: make_avg_pool2d(
        C=2, H=8, W=8, kernel=2, stride=2, padding=1, count_include_pad=True
    ),
    "broadcast_add": lambda: make_broadcast("add", (4, 1, 6), (3, 1)),
    "broadcast_divide": lambda: make_broadcast("divide", (5, 1), (1, 7)),
    "broadcast_maximum": lambda: make_broadcast("maximum", (2, 3, 4), (2, 1, 4)),
    "gelu": lambda: make_unary("gelu", (4, 16)),
    "sigmoid": lambda: make_unary("sigmoid", (3, 5, 2)),
    "reduce_sum": lambda: make_reduce("sum", (4, 6, 8), axis=(0, 2)),
    "reduce_max_keepdims": lambda: make_reduce("max", (5, 7), axis=-1, keepdims=True),
    "reduce_min_all": lambda: make_reduce("min", (3, 4, 5), axis=None),
    "reduce_mean": lambda: make_reduce("mean", (2, 6, 4), axis=1),
    "softmax": lambda: make_softmax((3, 4, 16)),
    "layer_norm": lambda: make_layer_norm((2, 4, 16), axis=-1),
    "layer_norm_2d": lambda: make_layer_norm((3, 4, 6), axis=1),
    "batch_norm": lambda: make_batch_norm(N=2, C=4, H=5, W=6),
    "attention": lambda: make_attention(B=1, H=2, S=6, L=8, D=8),
    "attention_causal": lambda: make_attention(B=2, H=1, S=5, L=7, D=4, causal=True),
    "transpose": lambda: make_transpose((2, 3, 4, 5), (0, 2, 3, 1)),
    "reshape": lambda: make_reshape((2, 3, 4), (4, -1)),
    "pad": lambda: make_pad((2, 5, 6), (0, 1, 2), (1, 0, 3)),
    "take": lambda: make_take((10, 6), (3, 4), axis=0),
    "gather": lambda: make_gather((4, 10), axis=1, n_index=6),
    "concatenate": lambda: make_concatenate(((2, 3, 4), (2, 5, 4), (2, 1, 4)), axis=1),
}


def case_inputs(name: str, args: list[Tensor], seed: int = 0) -> list[Any]:
    """Random inputs for ``SMALL_CASES[name]`` that lie in the op's domain (a variance is positive,
    indices cover more than one row), fresh and never zeros."""
    import numpy as np

    from ..te.reference import random_inputs

    ins = [t for t in args if isinstance(t.op, PlaceholderOp)]
    arrays = random_inputs(ins, seed=seed, int_high=14)
    if name == "batch_norm":
        arrays[-1] = np.abs(arrays[-1]) + 0.1
    return arrays
