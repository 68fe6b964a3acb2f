"""The operator library: functions that build te tensors for common operators (TVM's topi).

No scheduling and no devices here: each function takes te Tensors and returns the output Tensor.
Example: ``y = topi.dense(x, w, b, activation="relu")``.
"""

from .attention import scaled_dot_product_attention
from .conv import conv1d, conv2d, conv2d_transpose, conv3d, depthwise_conv2d
from .elementwise import (
    add,
    broadcast_shape,
    divide,
    exp,
    gelu,
    maximum,
    minimum,
    multiply,
    relu,
    sigmoid,
    subtract,
    tanh,
)
from .matmul import batch_matmul, dense, matmul
from .norm import batch_norm, layer_norm, softmax
from .pool import avg_pool2d, max_pool2d
from .reduction import max, mean, min, sum
from .transform import concatenate, gather, pad, reshape, take, transpose

__all__ = [
    "add", "avg_pool2d", "batch_matmul", "batch_norm", "broadcast_shape", "concatenate", "conv1d",
    "conv2d", "conv2d_transpose", "conv3d", "dense", "depthwise_conv2d", "divide", "exp", "gather",
    "gelu", "layer_norm", "matmul", "max", "max_pool2d", "maximum", "mean", "min", "minimum",
    "multiply", "pad", "relu", "reshape", "scaled_dot_product_attention", "sigmoid", "softmax",
    "subtract", "sum", "take", "tanh", "transpose",
]  # fmt: skip
