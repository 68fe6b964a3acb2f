"""Streaming stores: a vectorized row loop marked ``pragma(axis, "stream_stores", 1)``.

An output written once and not read again soon (a stencil's, an elementwise op's) costs the core a read
for ownership of each line before it overwrites it. Non-temporal vector stores skip that read, but only a
whole vector at an aligned address streams (LLVM splits an unaligned one into scalar ``movnti``s, no faster
than plain stores). So the row is cut where its addresses, known only at run time, reach a vector
boundary: scalar lanes up to there, then aligned vectors stored non-temporally, then the scalar rest.
Streamed lines are weakly ordered: the function (or each thread's part of a parallel loop) ends with a
fence, once, since a fence per row cost 12% (five-point stencil, 2046 x 2046 outputs on two cores, in C:
plain stores 0.84 ms, streamed 0.71-0.76, streamed with a fence per row 0.80).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ..lower.ir import For, Store
from .llvm_expr import I64, ITEM_BYTES
from .llvm_vector import affine_index, why_not_vectorizable

if TYPE_CHECKING:
    from .llvm import LLVMCodegen

PRAGMA = "stream_stores"


def stream_store(loop: For) -> Store | None:
    """The store that ``loop`` streams: its whole body, one store unit-stride in the loop variable,
    the loop marked with the pragma and vectorizable. None otherwise (the loop is then emitted as any)."""
    if dict(loop.annotations).get(PRAGMA, 0) != 1 or loop.kind != "vectorized":
        return None
    body = loop.body
    if not isinstance(body, Store) or why_not_vectorizable(loop) is not None:
        return None
    form = affine_index(body.buffer, body.indices, loop.var)
    return body if form is not None and form.coeff == 1 else None


def emit_stream_loop(cg: LLVMCodegen, loop: For, store: Store) -> None:
    """Scalar head to the first aligned vector, aligned non-temporal vectors, scalar tail."""
    b = cg.frame.b
    item = ITEM_BYTES[store.buffer.dtype]
    vector_bytes = cg.vector_bytes
    lanes = vector_bytes // item
    zero, extent = ir.Constant(I64, 0), ir.Constant(I64, loop.extent)
    first: list[ir.Value] = []  # the address of the row's first item
    address = lambda: first.append(cg.address(store.buffer, store.indices)[1])  # noqa: E731
    cg.with_var(loop.var, zero, address)
    mask = ir.Constant(I64, vector_bytes - 1)
    misaligned = b.and_(b.ptrtoint(first[0], I64), mask)
    to_boundary = b.and_(b.sub(ir.Constant(I64, vector_bytes), misaligned), mask)
    # An address that is not even a multiple of the item size never reaches a boundary: all scalar.
    whole_items = b.icmp_unsigned("==", b.urem(misaligned, ir.Constant(I64, item)), zero)
    head = b.udiv(to_boundary, ir.Constant(I64, item))
    head = b.select(b.and_(whole_items, b.icmp_unsigned("<", head, extent)), head, extent)
    vectors = b.udiv(b.sub(extent, head), ir.Constant(I64, lanes))
    tail = b.add(head, b.mul(vectors, ir.Constant(I64, lanes)))
    cg.serial_loop(loop.var, zero, head, loop.body)
    vector_body = lambda k: _vector_body(cg, loop, store, head, k, lanes)  # noqa: E731
    cg.range_loop(f"{loop.var.name}.stream", zero, vectors, vector_body)
    cg.serial_loop(loop.var, tail, extent, loop.body)
    cg.frame.streamed = True


def _vector_body(cg: LLVMCodegen, loop: For, store: Store, head: ir.Value, k: ir.Value, lanes: int) -> None:
    b = cg.frame.b
    base = b.add(head, b.mul(k, ir.Constant(I64, lanes)))
    steps = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))
    values = b.add(cg.widen(base, lanes), steps)
    cg.vector, cg.vector_first, cg.streaming = (loop.var, lanes), base, store
    try:
        cg.with_var(loop.var, values, lambda: cg.stmt(store))
    finally:
        cg.vector, cg.vector_first, cg.streaming = None, 0, None


def mark_nontemporal(module: ir.Module, instr: ir.Instruction) -> None:
    instr.set_metadata("nontemporal", module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
