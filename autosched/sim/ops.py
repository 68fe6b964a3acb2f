"""Counting the instructions of one evaluation of a stored value: which run on the vector ports, which
once per vector body, which on the integer ALUs, and which loads sit under a lane-varying guard.

Example: ``vec_ops, scalar_ops, int_ops = count_ops(store.value, loads, vector_var, inner_var)``
"""

from __future__ import annotations

from ..codegen.llvm_vector import depends_on
from ..lower.ir import Load
from ..te.expr import Binary, Call, Cast, Compare, Expr, Logical, Not, Select, Var, children

# FMA-port slots of one vector evaluation. exp: 15 instructions with AVX-512 (codegen.llvm_intrinsics),
# measured here at about 10 cycles a 16-lane vector beyond a plain FMA kernel (2026-12-06, Emerald
# Rapids): 20 slots on 2 FMA units; the functions built on exp carry its cost.
MATH_OPS = {"exp": 20, "log": 16, "tanh": 26, "sigmoid": 24, "erf": 30, "sqrt": 6, "rsqrt": 8, "pow": 32,
            "abs": 1, "floor": 1, "ceil": 1}  # fmt: skip
EXP_BASED = frozenset({"exp", "tanh", "sigmoid", "erf"})  # codegen builds these on its exp


def guarded_loads(e: Expr, var: Var) -> list[Load]:
    """The loads in a branch of a select whose condition varies over ``var``."""
    out: list[Load] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Select) and depends_on(n.cond, var):
            branch = [n.t, n.f]
            while branch:
                b = branch.pop()
                if isinstance(b, Load):
                    out.append(b)
                branch.extend(children(b))
        stack.extend(children(n))
    return out


def count_ops(
    e: Expr,
    loads: list[Load],
    var: Var | None,
    inner: Var | None = None,
    div_ops: float = 8.0,
    affine_free: bool = False,
    exp_extra: float = 0.0,
) -> tuple[float, float, float]:
    """(FMA-port slots that vary over the vector loop ``var``, those that do not (computed once per
    vector body), integer and boolean operations that vary over ``var`` or the innermost real loop
    ``inner``: the others are hoisted) of one evaluation of ``e``. A multiply feeding an add is one
    FMA. ``affine_free``: integer ``+ - *`` cost nothing (a loop unrolled into constant offsets).
    ``exp_extra``: what ``exp`` (and the functions built on it) costs beyond its AVX-512 form."""
    memo: dict[tuple[int, int], bool] = {}

    def varies(n: Expr, v: Var | None) -> bool:
        if v is None:
            return False
        got = memo.get((id(n), id(v)))
        if got is None:
            got = memo[(id(n), id(v))] = n is v or any(varies(c, v) for c in children(n))
        return got

    vec_ops, scalar_ops, int_ops = 0.0, 0.0, 0.0
    stack = [e]
    while stack:
        n = stack.pop()
        cost = 0.0
        if isinstance(n, Load):  # its address arithmetic: folded into addressing or hoisted (LSR, LICM)
            loads.append(n)
            continue
        if isinstance(n, Binary):
            fused = any(isinstance(x, Binary) and x.op == "*" for x in (n.a, n.b))
            if n.dtype.startswith("float") and n.op in ("+", "-") and fused:
                for x in (n.a, n.b):  # the multiply fuses into this add
                    stack.extend((x.a, x.b) if isinstance(x, Binary) and x.op == "*" else (x,))
                cost = 1.0
            else:
                cost = div_ops if n.op == "/" else 1.0
                if affine_free and not n.dtype.startswith("float") and n.op in ("+", "-", "*"):
                    cost = 0.0  # folded into the unrolled copies' constant offsets
                stack.extend((n.a, n.b))
        elif isinstance(n, Call):
            cost = MATH_OPS.get(n.name, 10) + (exp_extra if n.name in EXP_BASED else 0.0)
            stack.extend(n.args)
        elif isinstance(n, (Compare, Logical)):
            cost = 1.0
            stack.extend((n.a, n.b))
        elif isinstance(n, Select):
            cost = 1.0
            stack.extend((n.cond, n.t, n.f))
        elif isinstance(n, Cast):
            cost = 1.0
            stack.append(n.value)
        elif isinstance(n, Not):
            stack.append(n.a)
        if not cost:
            continue
        if not n.dtype.startswith("float"):  # index and guard arithmetic: ALU ports, unless hoisted
            int_ops += cost * (2.0 if varies(n, var) else 1.0 if varies(n, inner) else 0.0)
        elif varies(n, var):
            vec_ops += cost
        else:
            scalar_ops += cost
    return vec_ops, scalar_ops, int_ops
