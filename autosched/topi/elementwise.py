"""Elementwise operators: numpy-broadcasting binary ops and unary activations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_same_dtype, check_tensor
from .index import axis_names, named

Operand = Tensor | int | float
SQRT_HALF = 0.7071067811865476


def broadcast_shape(fn: str, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes.

    Example: ``broadcast_shape("add", (4, 1, 3), (5, 1))`` is (4, 5, 3).
    """
    out = []
    for d in range(1, max(len(a), len(b)) + 1):
        x = a[-d] if d <= len(a) else 1
        y = b[-d] if d <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(
                f"{fn}: shapes {tuple(a)} and {tuple(b)} do not broadcast (dim -{d}: {x} vs {y})"
            )
        out.append(max(x, y))
    return tuple(reversed(out))


def broadcast_read(t: Tensor, idx: Sequence[Any]) -> Any:
    """Read ``t`` at the trailing indices of ``idx``, using index 0 along its size-1 dims."""
    own = idx[len(idx) - t.ndim :]
    return t[tuple(0 if d == 1 else i for i, d in zip(own, t.shape, strict=True))]


def _binary(fn: str, a: Operand, b: Operand, op: Callable[[Any, Any], Any], name: str) -> Tensor:
    for arg, v in (("a", a), ("b", b)):
        if not isinstance(v, (Tensor, int, float)) or isinstance(v, bool):
            raise TypeError(f"{fn}: {arg} must be a te.Tensor or a Python number, got {type(v).__name__}")
    tensors = {arg: v for arg, v in (("a", a), ("b", b)) if isinstance(v, Tensor)}
    if not tensors:
        raise TypeError(f"{fn}: at least one of a, b must be a te.Tensor, got {a!r} and {b!r}")
    check_same_dtype(fn, **tensors)
    shapes = [t.shape for t in tensors.values()]
    shape = shapes[0] if len(shapes) == 1 else broadcast_shape(fn, *shapes)

    def body(*idx: Any) -> Any:
        x = broadcast_read(a, idx) if isinstance(a, Tensor) else a
        y = broadcast_read(b, idx) if isinstance(b, Tensor) else b
        return op(x, y)

    return te.compute(shape, named(body, axis_names(len(shape))), name=name)


def add(a: Operand, b: Operand, name: str = "add") -> Tensor:
    """``a + b`` with numpy broadcasting. Example: ``add(x, bias)`` with x (2, 8) and bias (8,)."""
    return _binary("add", a, b, lambda x, y: x + y, name)


def subtract(a: Operand, b: Operand, name: str = "subtract") -> Tensor:
    """``a - b`` with numpy broadcasting. Example: ``subtract(x, 1.0)``."""
    return _binary("subtract", a, b, lambda x, y: x - y, name)


def multiply(a: Operand, b: Operand, name: str = "multiply") -> Tensor:
    """``a * b`` with numpy broadcasting. Example: ``multiply(x, scale)`` with scale (1, C, 1, 1)."""
    return _binary("multiply", a, b, lambda x, y: x * y, name)


def divide(a: Operand, b: Operand, name: str = "divide") -> Tensor:
    """``a / b`` (true division; floats only) with numpy broadcasting. Example: ``divide(x, norm)``."""
    for arg, v in (("a", a), ("b", b)):
        if isinstance(v, Tensor):
            check_float("divide", arg, v)
    return _binary("divide", a, b, lambda x, y: x / y, name)


def maximum(a: Operand, b: Operand, name: str = "maximum") -> Tensor:
    """Elementwise max with numpy broadcasting. Example: ``maximum(x, 0.0)`` is relu."""
    return _binary("maximum", a, b, te.max, name)


def minimum(a: Operand, b: Operand, name: str = "minimum") -> Tensor:
    """Elementwise min with numpy broadcasting. Example: ``minimum(x, 6.0)``."""
    return _binary("minimum", a, b, te.min, name)


def _unary(fn: str, x: Tensor, f: Callable[[Any], Any], name: str) -> Tensor:
    check_tensor(fn, "x", x)
    check_float(fn, "x", x)
    return te.compute(x.shape, named(lambda *i: f(x[i]), axis_names(x.ndim)), name=name)


def relu_expr(v: Any) -> Any:
    return te.max(v, 0.0)


def gelu_expr(v: Any) -> Any:
    """Exact gelu, ``0.5 x (1 + erf(x / sqrt 2))`` (not the tanh approximation)."""
    return 0.5 * v * (1.0 + te.erf(v * SQRT_HALF))


def relu(x: Tensor, name: str = "relu") -> Tensor:
    """``max(x, 0)``. Example: ``relu(conv)``."""
    return _unary("relu", x, relu_expr, name)


def exp(x: Tensor, name: str = "exp") -> Tensor:
    """``e ** x``. Example: ``exp(x)``."""
    return _unary("exp", x, te.exp, name)


def tanh(x: Tensor, name: str = "tanh") -> Tensor:
    """Hyperbolic tangent. Example: ``tanh(x)``."""
    return _unary("tanh", x, te.tanh, name)


def sigmoid(x: Tensor, name: str = "sigmoid") -> Tensor:
    """``1 / (1 + e ** -x)``. Example: ``sigmoid(x)``."""
    return _unary("sigmoid", x, te.sigmoid, name)


def gelu(x: Tensor, name: str = "gelu") -> Tensor:
    """Exact (erf) gelu. Example: ``gelu(dense_out)``."""
    return _unary("gelu", x, gelu_expr, name)
