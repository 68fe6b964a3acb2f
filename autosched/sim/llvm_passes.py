"""What LLVM's O3 passes do to a loop nest, as the time model assumes: which serial loops the full
unroller takes, which loop the loop vectorizer takes (when it leaves one alone, and the lanes it
fills), how often LICM and GVN leave a load or a gather to run, and the loads and shuffles of one
vector read.

Example: ``flat = fully_unrolled(loops, body_instructions, vector_loop, threshold=100)``
"""

from __future__ import annotations

import math

from ..codegen.llvm_vector import affine_index
from ..lower.ir import For, Load, Store
from ..te.expr import Var
from .ops import guarded_loads
from .reuse import Access

# LLVM's loop vectorizer leaves a loop of a constant trip count below this (``-vectorizer-min-trip-count``)
# to the full unroller when it would need masking, so a guarded load there runs lane by lane behind a
# branch: a depthwise conv's padded 8-wide row under -mcpu=haswell compiled to 102 scalar FMAs and 52
# branches (0.34 ms), the same row 56 wide to a vector loop with vmaskmovps (0.056 ms).
VECTORIZER_MIN_TRIP_COUNT = 16


def gathers(acc: Access, loops: list[For], vloop: For, real: list[For], n_exec: float) -> float:
    """How often a gather not hoisted runs: once per vector body, but the copies that unrolled loops
    inside the innermost real loop make of the same gather are one (GVN; seen in the assembly of a
    dense candidate: one gather a k step for its 10 unrolled rows)."""
    inside = loops[loops.index(real[-1]) + 1 :] if real else loops
    same = math.prod(lp.extent for lp in inside if lp is not vloop and not acc.depends_on(id(lp.var)))
    return n_exec / vloop.extent / same


def executions(acc: Access, loops: list[For], vloop: For | None, flat: set[int]) -> float:
    """How often a load of ``acc`` runs: LICM hoists it out of the innermost loops that do not move
    it, up to the innermost real loop that does; copies in unrolled loops inside that one are CSE'd."""
    n, hoisting = 1.0, True
    for lp in reversed(loops):
        if lp is vloop:
            continue
        dep = acc.depends_on(id(lp.var))
        real = lp.kind != "unrolled" and id(lp) not in flat and lp.extent > 1
        if dep or not hoisting:
            n *= lp.extent
        if dep and real:
            hoisting = False
    return n


def fully_unrolled(loops: list[For], body: float, vec: For | None, threshold: float) -> set[int]:
    """Serial loops LLVM unrolls completely itself: innermost first, while the unrolled body stays
    under its full-unroll threshold (constant trip counts, O3). A vectorized loop codegen could not
    vectorize is a serial one."""
    out: set[int] = set()
    cost = body
    for lp in reversed(loops):
        if lp.kind == "unrolled" or lp is vec or lp.extent == 1:
            cost *= lp.extent if lp.kind == "unrolled" else 1
            continue
        if lp.kind not in ("serial", "vectorized") or cost * lp.extent > threshold:
            break
        cost *= lp.extent
        out.add(id(lp))
    return out


def auto_vectorized(s: Store, loads: list[Load], real: list[For], store_acc: Access, lanes: int) -> bool:
    """LLVM's loop vectorizer takes the innermost real loop when it writes unit-stride elements, reads
    unit-stride, invariant or interleaved ones, and is not a float reduction over that loop (it may
    not reorder those without fast-math). A load under a condition that varies over the loop (a
    guarded padding read) it does with masked loads, unless the loop runs fewer than
    ``VECTORIZER_MIN_TRIP_COUNT`` times: the full unroller takes that loop first."""
    if not real or real[-1].extent < lanes:
        return False
    var = real[-1].var
    if real[-1].extent < VECTORIZER_MIN_TRIP_COUNT and guarded_loads(s.value, var):
        return False
    st = affine_index(s.buffer, s.indices, var)
    if st is None or st.coeff != 1 or not store_acc.depends_on(id(var)):
        return False
    return all((f := affine_index(ld.buffer, ld.indices, var)) is not None and 0 <= f.coeff <= 2
               for ld in loads)  # fmt: skip


def auto_vector_lanes(s: Store, var: Var, lanes: int, guarded_divisor: int) -> int:
    """The lanes one vector body of an auto-vectorized loop over ``var`` fills: all of them, unless a
    guarded load is strided (a masked gather or shuffles: ``lanes // guarded_divisor``); a contiguous
    one is one masked load."""
    if any((f := affine_index(ld.buffer, ld.indices, var)) is None or f.coeff not in (0, 1)
           for ld in guarded_loads(s.value, var)):  # fmt: skip
        return max(1, lanes // guarded_divisor)
    return lanes


def vector_access(acc: Access, vec: For | None, regs: int, lanes: int) -> tuple[float, float]:
    """(load instructions, shuffles) of one read of ``acc`` per vector body."""
    if vec is None:
        return 1.0, 0.0
    worst = (1.0, 0.0)
    for idx in acc.indices:
        f = affine_index(acc.buffer, idx, vec.var)
        if f is None or f.coeff > 4 or f.coeff < 0:
            cost = (float(vec.extent), 3.0 * vec.extent)  # lane by lane: index, address, insert
        elif f.coeff == 0:
            cost = (1.0, 1.0)  # one element broadcast
        else:
            cost = (float(regs * f.coeff), float(regs * (f.coeff - 1)))
        worst = max(worst, cost)
    return worst
