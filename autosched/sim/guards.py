"""How often a guard holds: the share of its loops' iterations where an ``IfThenElse`` condition is true.

Lowering guards padding and non-dividing splits with conditions on loop variables; the model weighs
each branch by the share of iterations that take it, estimated on sampled points of the loops around
it (integer arithmetic with the IR's floor semantics). Anything it cannot evaluate counts as true.

Testing a condition costs instructions too (:func:`guard_uops`), charged to the stores under it.

Example: ``share = guard_share(if_stmt.cond, loops)      # 0.96 for a padding check``
"""

from __future__ import annotations

import math
import random
from typing import Any

from ..codegen.llvm_vector import depends_on
from ..lower.ir import For
from ..te.expr import Binary, Cast, Compare, Const, Expr, Logical, Not, Var

SAMPLES = 64


class _Opaque(Exception):
    pass


def _eval(e: Expr, env: dict[int, int]) -> Any:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        if id(e) not in env:
            raise _Opaque
        return env[id(e)]
    if isinstance(e, Cast):
        return _eval(e.value, env)
    if isinstance(e, Not):
        return not _eval(e.a, env)
    if isinstance(e, Logical):
        a, b = _eval(e.a, env), _eval(e.b, env)
        return (a and b) if e.op == "and" else (a or b)
    if isinstance(e, Compare):
        a, b = _eval(e.a, env), _eval(e.b, env)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[e.op]
    if isinstance(e, Binary):
        a, b = _eval(e.a, env), _eval(e.b, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "//" and b:
            return a // b
        if e.op == "%" and b:
            return a % b
        if e.op == "min":
            return min(a, b)
        if e.op == "max":
            return max(a, b)
    raise _Opaque


def guard_share(cond: Expr, loops: list[For], seed: int = 0) -> float:
    """The estimated share (0..1) of the iterations of ``loops`` where ``cond`` holds."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(SAMPLES):
        env = {id(lp.var): rng.randrange(lp.extent) for lp in loops if lp.extent > 0}
        try:
            hits += bool(_eval(cond, env))
        except (_Opaque, KeyError, TypeError, ZeroDivisionError):
            return 1.0
    return hits / SAMPLES


UNSWITCH_MAX = 2  # loop-invariant conditions LLVM unswitches a loop for; past that they stay branches


def guard_uops(guards: tuple[tuple[Expr, int], ...], loops: list[For], auto: For | None, inner: Var | None,
               lanes: int) -> float:  # fmt: skip
    """Instructions of the conditions tested on the way to a store (each with the number of ``loops``
    around it), at every iteration of those loops: a compare fused with its branch where the condition
    varies over the innermost real loop ``inner`` (its affine arithmetic is induction variables, LSR);
    inside the loop ``auto`` that LLVM vectorizes, a mask compare per vector of ``lanes``. A condition
    that does not vary over ``inner`` costs nothing (unswitched) while the unrolled copies of such
    conditions in ``inner``'s body are few; past ``UNSWITCH_MAX`` distinct ones, each copy stays a
    branch in the body (a conv's padding tests inside a 2 x 7 x 3 x 3 unrolled register tile: modeled
    0.55 ms without them, 1.44 ms measured, 0.59 ms with the padding materialized instead)."""
    total, invariant, distinct = 0.0, 0.0, 0
    for cond, depth in guards:
        around = loops[:depth]
        pos = next((i for i, lp in enumerate(around) if lp.var is inner), None)
        if inner is None or pos is None:
            continue  # outside the innermost real loop: tested once a run of it
        n = float(math.prod(lp.extent for lp in around if lp.kind != "vectorized"))
        if depends_on(cond, inner):
            total += n / lanes if auto is not None and auto in around else n
            continue
        invariant += n
        distinct += math.prod(lp.extent for lp in around[pos + 1 :]
                              if lp.kind == "unrolled" and depends_on(cond, lp.var))  # fmt: skip
    return total + (invariant if distinct > UNSWITCH_MAX else 0.0)
