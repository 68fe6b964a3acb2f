"""The op library: ``autosched.ops.matmul(a, b, platform="auto")`` and friends, on numpy arrays.

Each call builds the op's te for the arrays' shapes, picks a device, looks for a tuned record (logs
given with ``logs=``, then ``$AUTOSCHED_LOGS``, then the shipped ``tuning_logs/``) for that exact
workload and chip, and otherwise runs the default schedule with one :class:`UntunedWarning`.
Kernels are cached in memory and on disk (``$AUTOSCHED_CACHE_DIR``), so a second process does not
compile. Example::

    import autosched
    c = autosched.ops.matmul(a, b)
    y = autosched.ops.dense(x, w, bias, activation="relu", logs="my_tuning.jsonl")
"""

from .api import (
    add,
    attention,
    avg_pool2d,
    batch_matmul,
    conv2d,
    dense,
    depthwise_conv2d,
    divide,
    exp,
    gelu,
    layer_norm,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    multiply,
    relu,
    sigmoid,
    softmax,
    subtract,
    sum,
    tanh,
)
from .dispatch import UntunedWarning, clear_memory_cache
from .kernels import STATS, cache_dir

__all__ = [
    "STATS", "UntunedWarning", "add", "attention", "avg_pool2d", "batch_matmul", "cache_dir",
    "clear_memory_cache", "conv2d", "dense", "depthwise_conv2d", "divide", "exp", "gelu", "layer_norm",
    "matmul", "max", "max_pool2d", "maximum", "mean", "min", "minimum", "multiply", "relu", "sigmoid",
    "softmax", "subtract", "sum", "tanh",
]  # fmt: skip
