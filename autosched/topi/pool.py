"""2-d pooling over NCHW: max_pool2d and avg_pool2d with stride and padding (floor output mode)."""

from __future__ import annotations

from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_ints, check_padding, check_tensor
from .conv import out_size, pad_spatial
from .index import scaled
from .transform import lowest


def _pool_args(fn: str, data: Tensor, kernel: Any, stride: Any, padding: Any) -> Any:
    check_tensor(fn, "data", data, 4, "N, C, H, W")
    kh, kw = check_ints(fn, "kernel", kernel, 2, minimum=1)
    strides = check_ints(fn, "stride", kernel if stride is None else stride, 2, minimum=1)
    before, after = check_padding(fn, padding, 2)
    for arg, pads in (("before", before), ("after", after)):
        if pads[0] >= kh or pads[1] >= kw:
            # Otherwise a window could lie wholly in the padding and have no element to pool.
            raise ValueError(f"{fn}: padding {arg} {pads} must be smaller than the kernel {(kh, kw)}")
    N, C, H, W = data.shape
    oh = out_size(fn, H, kh, strides[0], before[0], after[0], 1)
    ow = out_size(fn, W, kw, strides[1], before[1], after[1], 1)
    return (kh, kw), strides, before, after, (N, C, oh, ow)


def max_pool2d(
    data: Tensor, kernel: Any, stride: Any = None, padding: Any = 0, name: str = "max_pool2d"
) -> Tensor:
    """Max over each window; padding never wins (it pads with -inf). ``stride`` defaults to ``kernel``.

    Example: ``max_pool2d(x, kernel=3, stride=2, padding=1)``.
    """
    fn = "max_pool2d"
    (kh, kw), (sh, sw), before, after, shape = _pool_args(fn, data, kernel, stride, padding)
    padded = pad_spatial(data, before, after, value=lowest(data.dtype))
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    return te.compute(
        shape,
        lambda n, c, y, x: te.max(padded[n, c, scaled(y, sh) + ry, scaled(x, sw) + rx], axis=[ry, rx]),
        name=name,
    )


def avg_pool2d(
    data: Tensor,
    kernel: Any,
    stride: Any = None,
    padding: Any = 0,
    count_include_pad: bool = False,
    name: str = "avg_pool2d",
) -> Tensor:
    """Mean over each window, as a "pool_sum" reduction then a divide stage.

    By default the divisor counts only the real (unpadded) elements of each window, as TVM/Relay's
    default and ONNX's; ``count_include_pad=True`` divides by the full kernel size, as PyTorch's default.
    Example: ``avg_pool2d(x, kernel=2, stride=2)``.
    """
    fn = "avg_pool2d"
    (kh, kw), (sh, sw), before, after, shape = _pool_args(fn, data, kernel, stride, padding)
    check_float(fn, "data", data)
    _, _, H, W = data.shape
    padded = pad_spatial(data, before, after)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    pool_sum = te.compute(
        shape,
        lambda n, c, y, x: te.sum(padded[n, c, scaled(y, sh) + ry, scaled(x, sw) + rx], axis=[ry, rx]),
        name="pool_sum",
    )
    no_pad = not any(before) and not any(after)
    if count_include_pad or no_pad:
        area = float(kh * kw)
        return te.compute(shape, lambda n, c, y, x: pool_sum[n, c, y, x] / area, name=name)

    def valid(o: Any, s: int, b: int, k: int, size: int) -> Any:
        # The window covers input rows [o*s - b, o*s - b + k) clipped to [0, size).
        start = scaled(o, s) - b
        return te.min(start + k, size) - te.max(start, 0)

    def body(n: Any, c: Any, y: Any, x: Any) -> Any:
        count = valid(y, sh, before[0], kh, H) * valid(x, sw, before[1], kw, W)
        return pool_sum[n, c, y, x] / te.cast(data.dtype, count)

    return te.compute(shape, body, name=name)
