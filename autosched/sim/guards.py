"""How often a guard holds: the share of its loops' iterations where an ``IfThenElse`` condition is true.

Lowering guards padding and non-dividing splits with conditions on loop variables; the model weighs
each branch by the share of iterations that take it, estimated on sampled points of the loops around
it (integer arithmetic with the IR's floor semantics). Anything it cannot evaluate counts as true.

Testing a condition costs instructions too (:func:`guard_uops`), charged to the stores under it.

Example: ``share = guard_share(if_stmt.cond, loops)      # 0.96 for a padding check``
"""

from __future__ import annotations

import itertools
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
    0.55 ms without them, 1.44 ms measured, 0.59 ms with the padding materialized instead).

    Only the parts of a condition that can fail count (:func:`_live_tests`): LLVM folds a test that
    holds over its loops' whole ranges, and peels the first iterations of ``inner`` off a test that
    fails only there (a max pool's ``2 x + rx - 1 >= 0``: one peeled iteration, no test in the loop)."""
    total, invariant, distinct = 0.0, 0.0, 0
    for cond, depth in guards:
        around = loops[:depth]
        pos = next((i for i, lp in enumerate(around) if lp.var is inner), None)
        if inner is None or pos is None:
            continue  # outside the innermost real loop: tested once a run of it
        tests = _live_tests(cond, around, around[pos])
        if not tests:
            continue
        n = float(math.prod(lp.extent for lp in around if lp.kind != "vectorized"))
        if any(depends_on(t, inner) for t in tests):
            total += n / lanes if auto is not None and auto in around else n
            continue
        invariant += n
        unrolled = [
            lp
            for lp in around[pos + 1 :]
            if lp.kind == "unrolled" and any(depends_on(t, lp.var) for t in tests)
        ]
        distinct += _failing_copies(tests, around, unrolled)
    return total + (invariant if distinct > UNSWITCH_MAX else 0.0)


PEEL_MAX = 3  # first iterations of a loop LLVM peels off to make a test known in the rest


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Logical) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _affine(e: Expr) -> bool:
    """Built of constants, loop variables, + and - and products with a constant: extremes at corners."""
    if isinstance(e, (Const, Var)):
        return True
    if isinstance(e, Cast):
        return _affine(e.value)
    if isinstance(e, Compare):
        return _affine(e.a) and _affine(e.b)
    if isinstance(e, Binary) and e.op in ("+", "-"):
        return _affine(e.a) and _affine(e.b)
    if isinstance(e, Binary) and e.op == "*":
        return (isinstance(e.a, Const) or isinstance(e.b, Const)) and _affine(e.a) and _affine(e.b)
    return False


def _holds(test: Expr, loops: list[For], fixed: dict[int, int], ranges: dict[int, tuple[int, int]]) -> bool:
    """Whether an affine ``test`` holds at every corner (so everywhere) of the loops it depends on, with
    ``fixed`` values and ``ranges`` (first, last) overriding the loops' own."""
    free = [lp for lp in loops if id(lp.var) not in fixed and depends_on(test, lp.var)]
    if len(free) > 12:
        return False
    ends = [ranges.get(id(lp.var), (0, lp.extent - 1)) for lp in free]
    for corner in itertools.product(*ends):
        env = {**fixed, **{id(lp.var): v for lp, v in zip(free, corner)}}
        try:
            if not _eval(test, env):
                return False
        except (_Opaque, KeyError, TypeError, ZeroDivisionError):
            return False
    return True


def _live_tests(cond: Expr, loops: list[For], inner: For) -> list[Expr]:
    """The tests of ``cond`` (its conjuncts) that stay in ``inner``'s body: not those that always hold,
    nor those that hold once ``inner``'s first ``PEEL_MAX`` iterations are peeled off."""
    live = []
    for t in _conjuncts(cond):
        if not _affine(t):
            live.append(t)
            continue
        if _holds(t, loops, {}, {}):
            continue
        peel = min(PEEL_MAX, inner.extent - 1)
        if (
            depends_on(t, inner.var)
            and peel > 0
            and _holds(t, loops, {}, {id(inner.var): (peel, inner.extent - 1)})
        ):
            continue
        live.append(t)
    return live


def _failing_copies(tests: list[Expr], loops: list[For], unrolled: list[For]) -> int:
    """How many unrolled copies of ``tests`` may fail (a copy that always holds is folded away)."""
    count = math.prod(lp.extent for lp in unrolled)
    if count > 256 or not all(_affine(t) for t in tests):
        return count
    n = 0
    for values in itertools.product(*(range(lp.extent) for lp in unrolled)):
        fixed = {id(lp.var): v for lp, v in zip(unrolled, values)}
        n += not all(_holds(t, loops, fixed, {}) for t in tests)
    return n
