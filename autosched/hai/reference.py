"""A plain Python interpreter of the loop IR: the living definition of what lowered code means.

It is slow (one Python call per node per iteration) and meant for tiny sizes: it lets tests check
lowering apart from any compiler, and pins down the semantics every codegen must follow. Loop
kinds change nothing here: a parallel, vectorized or unrolled loop runs like a serial one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lower.ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var

_NP: dict[str, Callable[[Any], Any]] = {
    "float32": np.float32, "float64": np.float64, "int32": np.int64, "int64": np.int64, "bool": bool,
}  # fmt: skip


def _erf(x: Any) -> Any:
    return type(x)(math.erf(float(x)))


_CALLS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: type(x)(1) / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: type(x)(1) / (type(x)(1) + np.exp(-x)), "erf": _erf,
    "abs": abs, "pow": np.power, "floor": np.floor, "ceil": np.ceil,
}  # fmt: skip


class Interpreter:
    def __init__(self, func: PrimFunc, arrays: list[np.ndarray]):
        if len(arrays) != len(func.params):
            raise ValueError(f"{func.name}: expected {len(func.params)} arrays, got {len(arrays)}")
        self.mem: dict[int, np.ndarray] = {id(b): a for b, a in zip(func.params, arrays)}
        self.env: dict[int, int] = {}
        self.func = func

    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.stmt(self.func.body)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            for i in range(s.extent):
                self.env[id(s.var)] = i
                self.stmt(s.body)
            del self.env[id(s.var)]
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, Store):
            arr = self.array(s.buffer)
            arr[self.index(s.buffer, s.indices)] = self.expr(s.value)
        elif isinstance(s, IfThenElse):
            if self.expr(s.cond):
                self.stmt(s.then)
            elif s.otherwise is not None:
                self.stmt(s.otherwise)
        elif isinstance(s, Allocate):
            # Fill with NaN (or a sentinel) so reading before writing shows up in results.
            fill = np.nan if s.buffer.dtype.startswith("float") else -12345
            self.mem[id(s.buffer)] = np.full(s.buffer.shape, fill, dtype=s.buffer.dtype)
            self.stmt(s.body)
            del self.mem[id(s.buffer)]
        elif isinstance(s, Barrier):
            pass
        else:
            raise TypeError(f"interpreter: unknown statement {type(s).__name__}")

    def array(self, buf: Buffer) -> np.ndarray:
        arr = self.mem.get(id(buf))
        if arr is None:
            raise RuntimeError(f"interpreter: buffer {buf.name!r} used outside its allocation")
        return arr

    def index(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[int, ...]:
        idx = tuple(int(self.expr(i)) for i in indices)
        for d, (i, n) in enumerate(zip(idx, buf.shape)):
            if not 0 <= i < n:
                raise IndexError(
                    f"interpreter: {buf.name}{list(idx)} out of bounds in dimension {d} (size {n})"
                )
        return idx

    def expr(self, e: Expr) -> Any:
        if isinstance(e, Const):
            return _NP[e.dtype](e.value)
        if isinstance(e, Var):
            return self.env[id(e)]
        if isinstance(e, Load):
            return self.array(e.buffer)[self.index(e.buffer, e.indices)]
        if isinstance(e, Binary):
            a, b = self.expr(e.a), self.expr(e.b)
            op = e.op
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return a / b
            if op == "//":
                return a // b
            if op == "%":
                return a % b
            return min(a, b) if op == "min" else max(a, b)
        if isinstance(e, Compare):
            a, b = self.expr(e.a), self.expr(e.b)
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[e.op]
        if isinstance(e, Logical):
            if e.op == "and":
                return bool(self.expr(e.a)) and bool(self.expr(e.b))
            return bool(self.expr(e.a)) or bool(self.expr(e.b))
        if isinstance(e, Not):
            return not self.expr(e.a)
        if isinstance(e, Select):
            return self.expr(e.t) if self.expr(e.cond) else self.expr(e.f)
        if isinstance(e, Cast):
            v = self.expr(e.value)
            if e.dtype in ("int32", "int64"):
                return np.int64(math.trunc(float(v)))
            return _NP[e.dtype](v)
        if isinstance(e, Call):
            return _NP[e.dtype](_CALLS[e.name](*(self.expr(a) for a in e.args)))
        raise TypeError(f"interpreter: unknown expression {type(e).__name__}")


def run_loops(func: PrimFunc, arrays: list[np.ndarray]) -> None:
    """Run ``func`` on numpy arrays (inputs, then outputs to fill), in place."""
    Interpreter(func, arrays).run()
