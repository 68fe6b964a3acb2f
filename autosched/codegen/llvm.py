"""Loop IR to LLVM IR text for CPUs, through llvmlite. Pure: no device, no compilation here.

One pointer parameter per buffer, so ``void matmul(const float* A, const float* B, float* C)`` matches.
Integers are computed in i64 (int32 buffers are sign-extended on load, truncated on store). How each
loop kind is emitted is said at :meth:`LLVMCodegen.stmt_For`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from llvmlite import ir

from ..errors import CompileError
from ..lower.ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..te.expr import Expr, Var, is_float, is_int
from . import llvm_parallel
from .llvm_alias import AliasScopes
from .llvm_expr import I8, I64, ITEM_BYTES, PTR, STORAGE_TYPES, VOID, ExprCodegen, Frame
from .llvm_intrinsics import I32, declare, lane_range, like, splat
from .llvm_stream import emit_stream_loop, mark_nontemporal, stream_store
from .llvm_vector import affine_index, lane_reduction, strides, why_not_vectorizable

MALLOC_ABOVE_BYTES = 64 * 1024  # OpenMP worker threads have small stacks
MAX_LOAD_STRIDE = 4  # lanes up to this far apart load their span once and shuffle


class LLVMCodegen(ExprCodegen):
    """A visitor over loop IR: ``stmt_<Node>`` emits a statement; memory accesses live here too."""

    def __init__(
        self,
        func: PrimFunc,
        *,
        triple: str,
        datalayout: str = "",
        avx512: bool = False,
        vector_bits: int = 512,
    ):
        self.func = func
        self.avx512 = avx512
        self.chunk_lanes = max(1, vector_bits // 32)  # float32 lanes of one native register
        self.vector_bytes = self.chunk_lanes * 4  # bytes of one native register
        self.module = ir.Module(name=func.name)
        self.module.triple = triple
        self.module.data_layout = datalayout
        self.vector: tuple[Var, int] | None = None  # (loop var, lanes) inside a vector body
        self.vector_first: int | ir.Value = 0  # the loop var's value in lane 0 of the piece being emitted
        self.streaming: Store | None = None  # the store of a stream loop's vector body (llvm_stream)
        self.n_outlined = 0
        self.scopes = AliasScopes(self.module, func)  # every access says which buffer it touches
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR] * len(func.params)), func.name)
        self.frame = Frame.open(fn, in_parallel=False)
        for arg, buf in zip(fn.args, func.params, strict=True):
            arg.name = buf.name
            arg.add_attribute("noalias")
            self.frame.buffers[buf] = arg

    def emit(self) -> ir.Module:
        self.stmt(self.func.body)
        self.frame.close()
        return self.module

    # Statements ---------------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        if method is None:
            raise self.fail(f"no codegen for statement {type(s).__name__}")
        method(s)

    def stmt_Seq(self, s: Seq) -> None:
        for x in s.stmts:
            self.stmt(x)

    def stmt_Barrier(self, s: Barrier) -> None:
        pass  # one CPU thread runs a whole "block": nothing to wait for

    def stmt_IfThenElse(self, s: IfThenElse) -> None:
        cond, b = self.expr(s.cond), self.frame.b
        if isinstance(cond.type, ir.VectorType):
            raise self.fail(f"condition {s.cond!r} differs between vector lanes")
        if s.otherwise is None:
            with b.if_then(cond):
                self.stmt(s.then)
            return
        with b.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then)
            with otherwise:
                self.stmt(s.otherwise)

    def stmt_Allocate(self, s: Allocate) -> None:
        buf, b = s.buffer, self.frame.b
        nbytes = buf.size * ITEM_BYTES[buf.dtype]
        if nbytes <= MALLOC_ABOVE_BYTES:
            ptr = self.frame.alloca(ir.ArrayType(STORAGE_TYPES[buf.dtype], buf.size), buf.name)
        else:
            # 64-byte aligned, so vector loads of a packed tile never straddle two cache lines.
            alloc = declare(self.module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
            size = ir.Constant(I64, -(-nbytes // 64) * 64)
            ptr = b.call(alloc, [ir.Constant(I64, 64), size], name=buf.name)
        self.frame.buffers[buf] = ptr
        self.stmt(s.body)
        del self.frame.buffers[buf]
        if nbytes > MALLOC_ABOVE_BYTES:
            self.frame.b.call(declare(self.module, "free", ir.FunctionType(VOID, [PTR])), [ptr])

    def stmt_Store(self, s: Store) -> None:
        if is_float(s.value.dtype) != is_float(s.buffer.dtype) or (s.value.dtype == "bool") != (
            s.buffer.dtype == "bool"
        ):
            raise self.fail(f"store of {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name}")
        red = lane_reduction(s, self.vector[0]) if self.vector is not None else None
        if red is not None:
            self.store_lane_reduction(s, *red)
            return
        value = self.to_storage(self.expr(s.value), s.buffer.dtype)
        kind, addr = self.address(s.buffer, s.indices)
        b, align = self.frame.b, ITEM_BYTES[s.buffer.dtype]
        if kind == "scalar":
            if isinstance(value.type, ir.VectorType):
                raise self.fail(f"store to {s.buffer.name} reduces across vector lanes")
            self.scopes.tag(b.store(value, addr, align=align), s.buffer)
        elif kind == "vector":
            assert self.vector is not None
            streams = s is self.streaming  # a whole vector at an aligned address
            vector, ptr = self.widen(value, self.vector[1]), self.gep(s.buffer, addr)
            stored = self.scopes.tag(
                b.store(vector, ptr, align=self.vector_bytes if streams else align), s.buffer
            )
            if streams:
                mark_nontemporal(self.module, stored)
        else:  # scatter, lane by lane in order
            if kind.startswith("stride"):
                addr = self.lane_indices(addr, int(kind[6:]))
            value = self.broadcast(value, addr)
            for lane in range(addr.type.count):
                k = ir.Constant(I32, lane)
                elem = b.extract_element(value, k)
                self.scopes.tag(
                    b.store(elem, self.gep(s.buffer, b.extract_element(addr, k)), align=align), s.buffer
                )

    def store_lane_reduction(self, s: Store, op: str, term: Expr) -> None:
        """``acc = acc <op> term`` over all lanes: the lanes' terms halve as a tree (log2(lanes) vector
        ops, not a serial chain of lanes scalar ops), then meet the accumulator."""
        assert self.vector is not None
        b, dtype, lanes = self.frame.b, s.value.dtype, self.vector[1]
        v = self.widen(self.expr(term), lanes)
        while lanes > 1:
            half = lanes // 2
            lo, hi = (b.shuffle_vector(v, v, lane_range(k, half)) for k in (0, half))
            folded = self.binary(op, dtype, lo, hi)
            if lanes % 2:  # the odd lane joins lane 0
                last = b.extract_element(v, ir.Constant(I32, lanes - 1))
                first = self.binary(op, dtype, b.extract_element(folded, ir.Constant(I32, 0)), last)
                folded = b.insert_element(folded, first, ir.Constant(I32, 0))
            v, lanes = folded, half
        total = b.extract_element(v, ir.Constant(I32, 0))
        _, addr = self.address(s.buffer, s.indices)
        sty, align = STORAGE_TYPES[s.buffer.dtype], ITEM_BYTES[s.buffer.dtype]
        acc = self.from_storage(self.scopes.tag(b.load(addr, typ=sty, align=align), s.buffer), s.buffer.dtype)
        new = self.to_storage(self.binary(op, dtype, acc, total), s.buffer.dtype)
        self.scopes.tag(b.store(new, addr, align=align), s.buffer)

    def stmt_For(self, s: For) -> None:
        """serial: a loop. unrolled: the body ``extent`` times. vectorized: one body in vector types when
        :func:`why_not_vectorizable` allows, else serial; marked ``stream_stores``, a row of aligned
        non-temporal vectors (:mod:`.llvm_stream`). parallel: the outermost becomes a libgomp region,
        nested ones run serially. thread_binding: refused, it needs a GPU."""
        if s.kind == "thread_binding":
            raise CompileError(
                f"llvm-cpu: loop {s.var.name} is bound to {s.thread_tag}; thread binding needs a GPU target"
            )
        if s.kind not in ("serial", "parallel", "vectorized", "unrolled"):
            raise self.fail(f"unknown loop kind {s.kind!r} of loop {s.var.name}")
        if s.extent <= 0:
            return
        if s.kind == "unrolled" or (s.kind == "vectorized" and s.extent == 1):
            for i in range(s.extent):
                self.with_var(s.var, ir.Constant(I64, i), lambda: self.stmt(s.body))
        elif self.vector is None and (streamed := stream_store(s)) is not None:
            emit_stream_loop(self, s, streamed)
        elif s.kind == "vectorized" and self.vector is None and why_not_vectorizable(s) is None:
            for first, lanes in vector_chunks(s.extent, self.chunk_lanes):
                self.vector_chunk(s, first, lanes)
        elif s.kind == "parallel" and not self.frame.in_parallel:
            llvm_parallel.outline(self, s)
        else:
            self.serial_loop(s.var, ir.Constant(I64, 0), ir.Constant(I64, s.extent), s.body)

    def vector_chunk(self, s: For, first: int, lanes: int) -> None:
        """The body of vector loop ``s`` over its lanes ``first .. first + lanes - 1`` at once."""
        if lanes == 1:
            self.with_var(s.var, ir.Constant(I64, first), lambda: self.stmt(s.body))
            return
        values = ir.Constant(ir.VectorType(I64, lanes), list(range(first, first + lanes)))
        self.vector, self.vector_first = (s.var, lanes), first
        try:
            self.with_var(s.var, values, lambda: self.stmt(s.body))
        finally:
            self.vector = None

    def serial_loop(self, var: Var, begin: ir.Value, end: ir.Value, body: Stmt) -> None:
        self.range_loop(var.name, begin, end, lambda i: self.with_var(var, i, lambda: self.stmt(body)))

    def range_loop(self, name: str, begin: ir.Value, end: ir.Value, body: Callable[[ir.Value], None]) -> None:
        """``for i in range(begin, end): body(i)``, bounds known at run time."""
        b = self.frame.b
        before = b.block
        head = b.append_basic_block(f"for.{name}")
        loop, done = b.append_basic_block(f"for.{name}.body"), b.append_basic_block(f"for.{name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=name)
        i.add_incoming(begin, before)
        b.cbranch(b.icmp_signed("<", i, end), loop, done)
        b.position_at_end(loop)
        body(i)
        i.add_incoming(self.frame.b.add(i, ir.Constant(I64, 1), flags=("nsw",)), self.frame.b.block)
        self.frame.b.branch(head)
        self.frame.b.position_at_end(done)

    # Memory -------------------------------------------------------------------------------------
    def address(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[str, ir.Value]:
        """("scalar", pointer) | ("vector", index of lane 0) | ("lanes", vector of indices) |
        ("stride<s>", index of lane 0) for lanes ``s`` elements apart."""
        if self.vector is not None:
            var = self.vector[0]
            form = affine_index(buf, indices, var)
            if form is not None and 0 <= form.coeff <= MAX_LOAD_STRIDE:
                # The index of lane 0; lane k then reads base + coeff * k.
                base: list[ir.Value] = []
                first = self.vector_first
                lane0 = first if isinstance(first, ir.Value) else ir.Constant(I64, first)
                self.with_var(var, lane0, lambda: base.append(self.flat_index(buf, indices)))
                if form.coeff > 1:
                    return f"stride{form.coeff}", base[0]
                return ("vector", base[0]) if form.coeff == 1 else ("scalar", self.gep(buf, base[0]))
        index = self.flat_index(buf, indices)
        if isinstance(index.type, ir.VectorType):
            return "lanes", index
        return "scalar", self.gep(buf, index)

    def lane_indices(self, base: ir.Value, stride: int) -> ir.Value:
        """The vector ``base + stride * k`` over the lanes ``k``."""
        assert self.vector is not None
        lanes = self.vector[1]
        steps = ir.Constant(ir.VectorType(I64, lanes), [stride * k for k in range(lanes)])
        return self.frame.b.add(self.widen(base, lanes), steps)

    def flat_index(self, buf: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        if len(indices) != len(buf.shape):
            raise self.fail(f"{buf.name} has {len(buf.shape)} dimensions but is indexed with {len(indices)}")
        total: ir.Value | None = None
        for idx, stride in zip(indices, strides(buf), strict=True):
            if not is_int(idx.dtype):
                raise self.fail(f"index {idx!r} of {buf.name} is {idx.dtype}, not an integer")
            v = self.expr(idx)
            if stride != 1:
                v = self.frame.b.mul(v, splat(v.type, stride))
            total = v if total is None else self.arith(self.frame.b.add, total, v)
        return ir.Constant(I64, 0) if total is None else total

    def buffer(self, buf: Buffer) -> ir.Value:
        ptr = self.frame.buffers.get(buf)
        if ptr is None:
            raise self.fail(f"buffer {buf.name} is neither a parameter nor allocated here")
        return ptr

    def gep(self, buf: Buffer, index: ir.Value) -> ir.Value:
        return self.frame.b.gep(
            self.buffer(buf), [index], inbounds=True, source_etype=STORAGE_TYPES[buf.dtype]
        )

    def expr_Load(self, e: Load) -> ir.Value:
        kind, addr = self.address(e.buffer, e.indices)
        b, sty, align = self.frame.b, STORAGE_TYPES[e.buffer.dtype], ITEM_BYTES[e.buffer.dtype]
        if kind == "scalar":
            v = self.scopes.tag(b.load(addr, typ=sty, align=align), e.buffer)
        elif kind == "vector":
            assert self.vector is not None
            v = b.load(self.gep(e.buffer, addr), typ=ir.VectorType(sty, self.vector[1]), align=align)
            self.scopes.tag(v, e.buffer)
        elif kind.startswith("stride"):
            # Lanes s apart (a stride-2 conv's input): one load of the span they cover, exactly to the
            # last lane so it stays in bounds, then every s-th element (scalar loads cost one per lane).
            assert self.vector is not None
            stride, lanes = int(kind[6:]), self.vector[1]
            span = ir.VectorType(sty, stride * (lanes - 1) + 1)
            wide = self.scopes.tag(b.load(self.gep(e.buffer, addr), typ=span, align=align), e.buffer)
            v = b.shuffle_vector(
                wide, wide, ir.Constant(ir.VectorType(I32, lanes), list(range(0, span.count, stride)))
            )
        else:  # gather from scalar loads
            v = ir.Constant(ir.VectorType(sty, addr.type.count), ir.Undefined)
            for lane in range(addr.type.count):
                k = ir.Constant(I32, lane)
                x = b.load(self.gep(e.buffer, b.extract_element(addr, k)), typ=sty, align=align)
                self.scopes.tag(x, e.buffer)
                v = b.insert_element(v, x, k)
        return self.from_storage(v, e.buffer.dtype)

    def from_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "int32":
            return self.frame.b.sext(v, like(v, I64))
        if dtype == "bool":
            return self.frame.b.icmp_unsigned("!=", v, splat(v.type, 0))
        return v

    def to_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "int32":
            return self.frame.b.trunc(v, like(v, I32))
        if dtype == "bool":
            return self.frame.b.zext(v, like(v, I8))
        return v


def vector_chunks(extent: int, native: int) -> list[tuple[int, int]]:
    """(first lane, lanes) pieces of a vector loop of ``extent`` lanes. A power of two, or an extent that
    fits one native register, stays whole; any other is cut into native registers, then powers of two
    (48 -> 16+16+16, 28 -> 16+8+4). LLVM legalizes a <48 x float> through lane-by-lane shuffles that
    made such register tiles ~10x slower (measured: 1024-class GEMM tiles 4x48 at 15 against 197 GFLOP/s)."""
    if extent & (extent - 1) == 0 or extent <= native:
        return [(0, extent)]
    pieces, first = [], 0
    while first < extent:
        size = min(native, 1 << ((extent - first).bit_length() - 1))  # the largest power of two that fits
        pieces.append((first, size))
        first += size
    return pieces


def _attach_attributes(text: str, cpu: str, features: str, vector_bits: int) -> str:
    """llvmlite cannot spell string function attributes, so add them as an attribute group."""
    attrs = [
        "nounwind",
        f'"prefer-vector-width"="{vector_bits}"',
        f'"min-legal-vector-width"="{vector_bits}"',
    ]
    if cpu:
        attrs.append(f'"target-cpu"="{cpu}"')
    if features:
        attrs.append(f'"target-features"="{features}"')
    # Also after llvmlite's own attributes (a parallel body's ``alwaysinline``).
    text = re.sub(r"^(define [^\n]*\)(?: [a-z]+)*)$", r"\1 #0", text, flags=re.MULTILINE)
    return f"{text}\nattributes #0 = {{ {' '.join(attrs)} }}\n"


def render_llvm(
    func: PrimFunc,
    *,
    triple: str,
    vector_bits: int = 512,
    cpu: str = "",
    features: str = "",
    datalayout: str = "",
    avx512: bool = False,
) -> str:
    """Textual LLVM IR of ``func``: ``void <name>(ptr noalias, ...)`` plus outlined parallel bodies.

    Example::

        text = render_llvm(func, triple="x86_64-unknown-linux-gnu", cpu="haswell", vector_bits=256)
    """
    module = LLVMCodegen(
        func, triple=triple, datalayout=datalayout, avx512=avx512, vector_bits=vector_bits
    ).emit()
    return _attach_attributes(str(module), cpu, features, vector_bits)
