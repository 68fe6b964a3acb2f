"""What a converter sees: the values of an ONNX graph and one node with its inputs and attributes.

A :class:`Value` is one named ONNX tensor: its ONNX shape and dtype, and either a te tensor or a
constant numpy array known at import (a weight, or something folded from weights and shapes). te has
no 0-d tensors and no bools, so a scalar is held as a te tensor of shape (1,) and a bool as int32 0/1;
the ONNX shape and dtype stay on the Value.

A one-element constant (a scalar ``Constant``, a 1-element initializer) that an elementwise body reads is
a te constant there (:meth:`Node.scalar`), not a read of a weight: ``isnan(p) ? 0 : p`` then reads as
such, so exported attention (torch's ``Where(IsNaN(p), 0, p)``) matches as the zero-row softmax.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...errors import OnnxImportError
from ...te import Tensor, placeholder
from ...te.expr import Const, const

SUPPORTED_DTYPES = ("float32", "float64", "int32", "int64", "bool")


class NotConstantError(OnnxImportError):
    """A shape-like input (Reshape's shape, Slice's starts...) computed at run time; names the value."""

    def __init__(self, message: str, value: str):
        super().__init__(message)
        self.value = value


def te_dtype(dtype: str) -> str:
    """The te dtype that holds an ONNX dtype (bool is int32 0/1)."""
    return "int32" if dtype == "bool" else dtype


def te_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The te shape that holds an ONNX shape (a scalar is one element)."""
    return tuple(shape) or (1,)


def identifier(name: str) -> str:
    """An ONNX name ("input.1", "/conv/Conv_output_0") as a readable identifier."""
    return re.sub(r"\W+", "_", name).strip("_") or "t"


def onnx_dtype(elem_type: int, where: str) -> str:
    """The numpy dtype name of an ONNX element type, or an error naming ``where`` when unsupported."""
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        name = ""
    if name not in SUPPORTED_DTYPES:
        onnx_name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "UNDEFINED"
        raise OnnxImportError(
            f"{where} has dtype {onnx_name}, which autosched does not support (supported: float32, "
            "float64, int32, int64, bool); convert the model to float32"
        )
    return name


@dataclass(frozen=True, eq=False)
class Value:
    name: str
    shape: tuple[int, ...]
    dtype: str  # the ONNX dtype, as numpy names it (bool included)
    tensor: Tensor | None = None
    const: np.ndarray | None = None  # ONNX shape and dtype

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass(frozen=True, eq=False)
class Out:
    """A converter's output whose ONNX shape or dtype differs from its te tensor's (scalar, bool)."""

    tensor: Tensor
    shape: tuple[int, ...]
    dtype: str


class Node:
    """One ONNX node while it converts: its inputs as Values, its attributes as Python values."""

    def __init__(
        self,
        proto: Any,
        inputs: list[Value | None],
        opset: int,
        attrs: dict[str, Any],
        materialize: Callable[[Value], Tensor],
    ):
        self.proto = proto
        self.op_type: str = proto.op_type
        self.name: str = proto.name or f"{proto.op_type} -> {', '.join(proto.output)}"
        self.inputs = inputs
        self.opset = opset
        self.attrs = attrs
        self._materialize = materialize

    def __len__(self) -> int:
        return len(self.inputs)

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"node {self.name!r} ({self.op_type}, opset {self.opset}): {message}")

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def value(self, i: int) -> Value | None:
        """Input ``i``, or None when it is absent (past the end, or given as "")."""
        return self.inputs[i] if i < len(self.inputs) else None

    def has(self, i: int) -> bool:
        return self.value(i) is not None

    def input(self, i: int) -> Value:
        v = self.value(i)
        if v is None:
            raise self.error(f"input {i} is required but missing")
        return v

    def tensor(self, i: int) -> Tensor:
        """Input ``i`` as a te tensor (a constant becomes a weight placeholder)."""
        v = self.input(i)
        return v.tensor if v.tensor is not None else self._materialize(v)

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s value, which must be known at import (a weight or folded from shapes)."""
        v = self.input(i)
        if v.const is None:
            raise NotConstantError(
                str(
                    self.error(
                        f"input {i} ({what}, {v.name!r}) must be a constant known at import, but it is "
                        "computed from the model's inputs; autosched compiles static shapes only"
                    )
                ),
                v.name,
            )
        return v.const

    def scalar(self, i: int) -> Const | None:
        """Input ``i`` as a te constant of its dtype when it is a one-element constant, else None."""
        v = self.value(i)
        return None if v is None else scalar_const(v)

    def optional_const(self, i: int, what: str) -> np.ndarray | None:
        return self.const(i, what) if self.has(i) else None

    def shape(self, i: int) -> tuple[int, ...]:
        return self.input(i).shape

    def dtype(self, i: int) -> str:
        return self.input(i).dtype

    def axis(self, axis: int, ndim: int, what: str = "axis") -> int:
        """``axis`` in [0, ndim), negative counting from the end; an error names the node otherwise."""
        if not -ndim <= axis < max(ndim, 1):
            raise self.error(f"{what} {axis} is out of range for a tensor of {ndim} dims")
        return axis % max(ndim, 1)


def scalar_const(value: Value) -> Const | None:
    """A one-element constant Value as a te constant of its te dtype (bool as int32 0/1); else None.

    Only one element: a larger constant stays a weight even when its elements are all equal, since
    that is usually a parameter at its initial value (a LayerNorm's ones, a bias's zeros) that a
    trained model replaces; folding it would put the value into the kernels and their task keys.
    """
    if value.const is None or value.const.size != 1:
        return None
    dtype = te_dtype(value.dtype)
    return const(value.const.reshape(-1)[0].item(), dtype)


def make_placeholder(value: Value) -> Tensor:
    return placeholder(te_shape(value.shape), te_dtype(value.dtype), name=identifier(value.name))
