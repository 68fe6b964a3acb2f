"""A ``parallel`` loop as an OpenMP region: outline the body, call libgomp's ``GOMP_parallel``.

The kernel packs what the body uses (buffer pointers, values of enclosing loop vars) into 8-byte
slots on its stack; the outlined ``void body(ptr data)`` unpacks them and calls ``body_noalias``, which
runs a static chunk of the iterations on each thread. Allocations inside the body are made inside the
outlined function, so each thread gets its own.

``body_noalias`` takes the buffers as ``noalias`` arguments, as the kernel does, and is always inlined:
pointers loaded from the closure would otherwise carry no aliasing facts, so LLVM had to assume that a
store to the output may change the input and kept every store of an accumulator in memory (a max pool's
window stored its partial maximum after each of its 9 taps); inlining turns ``noalias`` into scoped
alias metadata that keeps the facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ..lower.ir import Buffer, For, Load, Stmt
from ..te.expr import Var
from .llvm_expr import Frame
from .llvm_intrinsics import declare
from .llvm_vector import stmt_exprs, stmt_stores, walk_exprs

if TYPE_CHECKING:
    from .llvm import LLVMCodegen

I32, I64, PTR, VOID = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()


def references(s: Stmt) -> tuple[list[Var], list[Buffer]]:
    """Vars and buffers used in ``s``, each once, in order of first use."""
    vars_: dict[int, Var] = {}
    bufs: dict[int, Buffer] = {}
    for st in stmt_stores(s):
        bufs.setdefault(id(st.buffer), st.buffer)
    for e in stmt_exprs(s):
        for x in walk_exprs(e):
            if isinstance(x, Var):
                vars_.setdefault(id(x), x)
            elif isinstance(x, Load):
                bufs.setdefault(id(x.buffer), x.buffer)
    return list(vars_.values()), list(bufs.values())


def outline(cg: LLVMCodegen, loop: For) -> None:
    """Emit ``loop`` as a call to GOMP_parallel with an outlined body function."""
    outer = cg.frame
    used_vars, used_bufs = references(loop.body)
    bufs = [x for x in used_bufs if x in outer.buffers]
    vars_ = [v for v in used_vars if v in outer.vars]
    fn = ir.Function(cg.module, ir.FunctionType(VOID, [PTR]), f"{cg.func.name}_par{cg.n_outlined}")
    fn.linkage = "internal"
    cg.n_outlined += 1

    # Caller: fill the closure and start the region (0 threads = omp_set_num_threads' value).
    slots = outer.alloca(ir.ArrayType(I64, max(1, len(bufs) + len(vars_))), "closure", align=8)
    values = [outer.buffers[x] for x in bufs] + [outer.vars[v] for v in vars_]
    for k, value in enumerate(values):
        outer.b.store(value, outer.b.gep(slots, [ir.Constant(I64, k)], source_etype=I64))
    gomp = declare(cg.module, "GOMP_parallel", ir.FunctionType(VOID, [PTR, PTR, I32, I32]))
    outer.b.call(gomp, [fn, slots, ir.Constant(I32, 0), ir.Constant(I32, 0)])

    # Callee: unpack and call the noalias body with the buffers and values.
    slot_types = [PTR] * len(bufs) + [I64] * len(vars_)
    body_fn = ir.Function(cg.module, ir.FunctionType(VOID, slot_types), f"{fn.name}_noalias")
    body_fn.linkage = "internal"
    body_fn.attributes.add("alwaysinline")
    entry = Frame.open(fn, in_parallel=True)
    unpacked = [
        entry.b.load(entry.b.gep(fn.args[0], [ir.Constant(I64, k)], source_etype=I64), typ=typ, align=8)
        for k, typ in enumerate(slot_types)
    ]
    entry.b.call(body_fn, unpacked)
    entry.close()

    # The body: this thread's static chunk, run serially.
    cg.frame = inner = Frame.open(body_fn, in_parallel=True)
    b = inner.b
    for arg, buf in zip(body_fn.args[: len(bufs)], bufs, strict=True):
        arg.add_attribute("noalias")
        inner.buffers[buf] = arg
    for arg, var in zip(body_fn.args[len(bufs) :], vars_, strict=True):
        inner.vars[var] = arg
    nthreads = b.sext(b.call(declare(cg.module, "omp_get_num_threads", ir.FunctionType(I32, [])), []), I64)
    tid = b.sext(b.call(declare(cg.module, "omp_get_thread_num", ir.FunctionType(I32, [])), []), I64)
    extent = ir.Constant(I64, loop.extent)
    chunk = b.sdiv(b.add(extent, b.sub(nthreads, ir.Constant(I64, 1))), nthreads)
    begin = _smin(b, b.mul(tid, chunk), extent)
    end = _smin(b, b.add(begin, chunk), extent)
    try:
        cg.serial_loop(loop.var, begin, end, loop.body)
        inner.close()
    finally:
        cg.frame = outer


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)
