"""A model as data: one te program from named inputs and constant weights to named outputs.

The ONNX frontend (``autosched/frontend/onnx``) produces a :class:`Graph`; ``autosched/graph`` fuses it
into tasks (one te workload each), plans memory, compiles and runs it. Nothing here knows ONNX.

- Leaves are placeholders: either a model input (in :attr:`Graph.inputs`) or a weight (a key of
  :attr:`Graph.weights`, holding its constant value). Every placeholder the outputs read is one of them.
- An output may be any tensor of the program, a model input or a weight included (ONNX ``Identity``).
- te has no bool tensors: an ONNX bool tensor is held as int32 0/1; :attr:`Output.dtype` is the numpy
  dtype the user gets back (``"bool"`` there, cast at the boundary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..te.graph import topo_order
from ..te.tensor import Operation, PlaceholderOp, Tensor


@dataclass(frozen=True, eq=False)
class Input:
    name: str  # as in the ONNX graph
    tensor: Tensor  # a placeholder
    dtype: str  # numpy dtype the caller passes ("bool" for a bool input held as int32)
    shape: tuple[int, ...] | None = None  # model's shape if not the tensor's: () for a scalar held as (1,)


@dataclass(frozen=True, eq=False)
class Output:
    name: str
    tensor: Tensor
    dtype: str  # numpy dtype the caller gets back
    shape: tuple[int, ...] | None = None  # model's shape if not the tensor's: () for a scalar held as (1,)


@dataclass(frozen=True, eq=False)
class Graph:
    name: str
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    weights: Mapping[Operation, np.ndarray] = field(default_factory=dict)  # placeholder op -> value
    opset: int = 0  # the model's default-domain opset (information only)

    def __post_init__(self) -> None:
        known = {i.tensor.op for i in self.inputs} | set(self.weights)
        for op in topo_order([o.tensor for o in self.outputs]):
            if isinstance(op, PlaceholderOp) and op not in known:
                raise ValueError(
                    f"graph {self.name!r}: placeholder {op.name!r} is neither an input nor a weight"
                )
        for op, value in self.weights.items():
            if tuple(value.shape) != tuple(op.shape) or value.dtype != np.dtype(op.dtype):
                raise ValueError(
                    f"graph {self.name!r}: weight {op.name!r} is {value.dtype}{list(value.shape)}, "
                    f"its placeholder {op.dtype}{list(op.shape)}"
                )

    def ops(self) -> list[Operation]:
        """Every operation the outputs depend on, producers first."""
        return topo_order([o.tensor for o in self.outputs])
