"""The tensor-expression language: write an operator once, in TVM's ``te`` style."""

from .builtins import (
    abs,
    all,
    any,
    cast,
    ceil,
    const,
    erf,
    exp,
    floor,
    if_then_else,
    log,
    logical_not,
    max,
    min,
    pow,
    rsqrt,
    sigmoid,
    sqrt,
    sum,
    tanh,
)
from .expr import Expr, IterVar, Var
from .tensor import (
    ComputeOp,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    comm_reducer,
    compute,
    placeholder,
    reduce_axis,
)

__all__ = [
    "ComputeOp", "Expr", "IterVar", "PlaceholderOp", "Reduce", "Tensor", "TensorRead", "Var",
    "abs", "all", "any", "cast", "ceil", "comm_reducer", "compute", "const", "erf", "exp", "floor",
    "if_then_else", "log", "logical_not", "max", "min", "placeholder", "pow", "reduce_axis",
    "rsqrt", "sigmoid", "sqrt", "sum", "tanh",
]  # fmt: skip
