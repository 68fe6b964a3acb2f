"""Scalar expression nodes shared by the tensor language and the loop IR.

Nodes are frozen dataclasses compared by identity (``eq=False``): ``==`` on an expression builds a
comparison node, as in TVM, so structural equality lives in :func:`structural_key` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("and", "or")
# Math intrinsics: name -> number of arguments. All take and return a float dtype.
INTRINSICS = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
    "abs": 1, "pow": 2, "floor": 1, "ceil": 1,
}  # fmt: skip


def check_dtype(dtype: str, where: str) -> str:
    if dtype not in DTYPES:
        raise TypeError(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


class Expr:
    """Base of every scalar expression; Python operators build new nodes."""

    dtype: str

    # Arithmetic -------------------------------------------------------------------------------
    def __add__(self, other: Any) -> Expr:
        return binary("+", self, other)

    def __radd__(self, other: Any) -> Expr:
        return binary("+", other, self)

    def __sub__(self, other: Any) -> Expr:
        return binary("-", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return binary("-", other, self)

    def __mul__(self, other: Any) -> Expr:
        return binary("*", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return binary("*", other, self)

    def __truediv__(self, other: Any) -> Expr:
        return binary("/", self, other)

    def __rtruediv__(self, other: Any) -> Expr:
        return binary("/", other, self)

    def __floordiv__(self, other: Any) -> Expr:
        return binary("//", self, other)

    def __rfloordiv__(self, other: Any) -> Expr:
        return binary("//", other, self)

    def __mod__(self, other: Any) -> Expr:
        return binary("%", self, other)

    def __rmod__(self, other: Any) -> Expr:
        return binary("%", other, self)

    def __neg__(self) -> Expr:
        return binary("-", const(0, self.dtype), self)

    # Comparisons ------------------------------------------------------------------------------
    def __lt__(self, other: Any) -> Expr:
        return compare("<", self, other)

    def __le__(self, other: Any) -> Expr:
        return compare("<=", self, other)

    def __gt__(self, other: Any) -> Expr:
        return compare(">", self, other)

    def __ge__(self, other: Any) -> Expr:
        return compare(">=", self, other)

    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        return compare("==", self, other)

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        return compare("!=", self, other)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            "a te expression has no truth value; use te.if_then_else, te.all or te.any "
            "instead of Python's if/and/or"
        )


ExprLike = Union[Expr, int, float, bool]


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str
    dtype: str = "int32"

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Var):
    """A loop axis of a compute: ``kind`` is "spatial" or "reduce"; the domain is ``[0, extent)``."""

    extent: int = 1
    kind: str = "spatial"

    @property
    def var(self) -> IterVar:
        return self


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Any
    dtype: str

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str

    def __repr__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a!r}, {self.b!r})"
        return f"({self.a!r} {self.op} {self.b!r})"


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"

    def __bool__(self) -> bool:
        # Lets `x in list` and dict lookups of Vars work: identity is the only truth we know.
        if self.op == "==":
            return self.a is self.b
        if self.op == "!=":
            return self.a is not self.b
        return Expr.__bool__(self)

    def __repr__(self) -> str:
        return f"({self.a!r} {self.op} {self.b!r})"


@dataclass(frozen=True, eq=False)
class Logical(Expr):
    op: str  # "and" | "or"
    a: Expr
    b: Expr
    dtype: str = "bool"

    def __repr__(self) -> str:
        return f"({self.a!r} {self.op} {self.b!r})"


@dataclass(frozen=True, eq=False)
class Not(Expr):
    a: Expr
    dtype: str = "bool"

    def __repr__(self) -> str:
        return f"not({self.a!r})"


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """``cond ? t : f`` evaluated lazily: only the taken branch runs, so it may guard a load."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: str

    def __repr__(self) -> str:
        return f"select({self.cond!r}, {self.t!r}, {self.f!r})"


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    value: Expr
    dtype: str

    def __repr__(self) -> str:
        return f"{self.dtype}({self.value!r})"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A math intrinsic from :data:`INTRINSICS`."""

    name: str
    args: tuple[Expr, ...]
    dtype: str

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.args))})"


# Construction helpers ---------------------------------------------------------------------------


def const(value: Any, dtype: str | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant of {type(value).__name__} {value!r}")
    check_dtype(dtype, "const")
    if dtype == "bool":
        value = bool(value)
    elif is_int(dtype):
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"constant {value!r} is not an integer but meets an {dtype} expression")
        value = int(value)
    else:
        value = float(value)
    return Const(value, dtype)


def as_expr(value: ExprLike, dtype: str | None = None) -> Expr:
    """Turn a Python number into a constant; ``dtype`` is the dtype of the expression it meets."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float)):
        if dtype is not None and not isinstance(value, bool):
            if isinstance(value, float) and is_int(dtype):
                return const(value, "float32")
            return const(value, dtype)
        return const(value)
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalar
        return as_expr(value.item(), dtype)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a te expression")


def _unify(op: str, a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    da = a.dtype if isinstance(a, Expr) else None
    db = b.dtype if isinstance(b, Expr) else None
    ea = as_expr(a, db)
    eb = as_expr(b, da)
    if ea.dtype != eb.dtype:
        pair = {ea.dtype, eb.dtype}
        if pair == {"int32", "int64"}:
            ea, eb = (cast("int64", ea), cast("int64", eb))
        else:
            raise TypeError(
                f"operator {op!r}: dtypes {ea.dtype} and {eb.dtype} differ; use te.cast to convert "
                f"({ea!r} {op} {eb!r})"
            )
    return ea, eb


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    ea, eb = _unify(op, a, b)
    if ea.dtype == "bool":
        raise TypeError(f"operator {op!r} does not take booleans ({ea!r}, {eb!r})")
    if op == "/" and is_int(ea.dtype):
        raise TypeError(f"'/' on integers is ambiguous; use '//' for floor division ({ea!r} / {eb!r})")
    if op in ("//", "%") and is_float(ea.dtype):
        raise TypeError(f"operator {op!r} needs integers, got {ea.dtype} ({ea!r} {op} {eb!r})")
    return Binary(op, ea, eb, ea.dtype)


def compare(op: str, a: ExprLike, b: ExprLike) -> Expr:
    ea, eb = _unify(op, a, b)
    return Compare(op, ea, eb)


def logical(op: str, a: ExprLike, b: ExprLike) -> Expr:
    ea, eb = as_expr(a), as_expr(b)
    for e in (ea, eb):
        if e.dtype != "bool":
            raise TypeError(f"te.{'all' if op == 'and' else 'any'} takes conditions, got {e!r} ({e.dtype})")
    return Logical(op, ea, eb)


def cast(dtype: str, value: ExprLike) -> Expr:
    check_dtype(dtype, "te.cast")
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    return Cast(e, dtype)


def call(name: str, *args: ExprLike) -> Expr:
    if name not in INTRINSICS:
        raise TypeError(f"unknown intrinsic {name!r}; known: {', '.join(INTRINSICS)}")
    if len(args) != INTRINSICS[name]:
        raise TypeError(f"te.{name} takes {INTRINSICS[name]} argument(s), got {len(args)}")
    dtype = next((a.dtype for a in args if isinstance(a, Expr)), "float32")
    exprs = [as_expr(a, dtype) for a in args]
    if name == "abs" and is_int(dtype):
        return Call(name, tuple(exprs), dtype)
    for e in exprs:
        if not is_float(e.dtype):
            raise TypeError(f"te.{name} needs a float argument, got {e!r} of dtype {e.dtype}")
    if len({e.dtype for e in exprs}) != 1:
        raise TypeError(f"te.{name}: argument dtypes differ ({', '.join(e.dtype for e in exprs)})")
    return Call(name, tuple(exprs), dtype)


def select(cond: ExprLike, t: ExprLike, f: ExprLike) -> Expr:
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"te.if_then_else: condition {c!r} must be a comparison, got dtype {c.dtype}")
    et, ef = _unify("if_then_else", t, f)
    return Select(c, et, ef, et.dtype)


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e`` (loads and reductions define theirs elsewhere)."""
    if isinstance(e, (Binary, Compare, Logical)):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    sub = getattr(e, "children", None)
    if sub is not None:
        return sub()  # type: ignore[no-any-return]
    return ()


def const_value(e: Expr) -> Any:
    """The Python value of a constant, or None."""
    return e.value if isinstance(e, Const) else None
