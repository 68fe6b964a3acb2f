"""Loop IR to LLVM IR text for CPUs, through llvmlite. Pure: no device, no compilation here.

One pointer parameter per buffer, so ``void matmul(const float* A, const float* B, float* C)`` matches.
Integers are computed in i64 (int32 buffers are sign-extended on load, truncated on store). How each
loop kind is emitted is said at :meth:`LLVMCodegen.stmt_For`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from ..errors import CompileError
from ..lower.ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var, is_float, is_int
from . import llvm_parallel
from .llvm_intrinsics import CONTRACT, I32, declare, emit_intrinsic, like, splat
from .llvm_vector import affine_index, needs_lazy, strides, why_not_vectorizable

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
F32, F64, PTR, VOID = ir.FloatType(), ir.DoubleType(), ir.PointerType(), ir.VoidType()
VALUE_TYPES = {"int32": I64, "int64": I64, "float32": F32, "float64": F64, "bool": I1}
STORAGE_TYPES = {"int32": I32, "int64": I64, "float32": F32, "float64": F64, "bool": I8}
ITEM_BYTES = {"int32": 4, "int64": 8, "float32": 4, "float64": 8, "bool": 1}
MALLOC_ABOVE_BYTES = 64 * 1024  # OpenMP worker threads have small stacks


@dataclass
class Frame:
    """What is bound while emitting one LLVM function (the kernel, or an outlined parallel body)."""

    fn: ir.Function
    entry: ir.IRBuilder  # the entry block holds only allocas, so SROA/mem2reg can promote them
    b: ir.IRBuilder
    vars: dict[Var, ir.Value]
    buffers: dict[Buffer, ir.Value]
    in_parallel: bool

    @classmethod
    def open(cls, fn: ir.Function, in_parallel: bool) -> Frame:
        entry = ir.IRBuilder(fn.append_basic_block("entry"))
        return cls(fn, entry, ir.IRBuilder(fn.append_basic_block("start")), {}, {}, in_parallel)

    def close(self) -> None:
        self.b.ret_void()
        self.entry.branch(self.fn.blocks[1])

    def alloca(self, ty: ir.Type, name: str, align: int = 64) -> ir.Value:
        inst = self.entry.alloca(ty, name=name)
        inst.align = align
        inst.type = PTR  # llvmlite types allocas as typed pointers; the rest of the module is opaque
        return inst


class LLVMCodegen:
    """A visitor over loop IR: ``stmt_<Node>`` emits a statement, ``expr_<Node>`` returns a value.

    Inside a vector body (``self.vector`` set) a value is either uniform (a scalar, broadcast where
    it meets a vector) or a vector of ``lanes`` values.
    """

    def __init__(self, func: PrimFunc, *, triple: str, datalayout: str = ""):
        self.func = func
        self.module = ir.Module(name=func.name)
        self.module.triple = triple
        self.module.data_layout = datalayout
        self.vector: tuple[Var, int] | None = None
        self.n_outlined = 0
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

    def fail(self, msg: str) -> CompileError:
        return CompileError(f"llvm-cpu: {self.func.name}: {msg}")

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
            malloc = declare(self.module, "malloc", ir.FunctionType(PTR, [I64]))
            ptr = b.call(malloc, [ir.Constant(I64, nbytes)], name=buf.name)
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
        value = self.to_storage(self.expr(s.value), s.buffer.dtype)
        kind, addr = self.address(s.buffer, s.indices)
        b, align = self.frame.b, ITEM_BYTES[s.buffer.dtype]
        if kind == "scalar":
            if isinstance(value.type, ir.VectorType):
                raise self.fail(f"store to {s.buffer.name} reduces across vector lanes")
            b.store(value, addr, align=align)
        elif kind == "vector":
            b.store(self.broadcast(value, addr), self.gep(s.buffer, addr), align=align)
        else:  # scatter, lane by lane in order
            value = self.broadcast(value, addr)
            for lane in range(addr.type.count):
                k = ir.Constant(I32, lane)
                b.store(b.extract_element(value, k), self.gep(s.buffer, b.extract_element(addr, k)), align=align)

    def stmt_For(self, s: For) -> None:
        """serial: a loop. unrolled: the body ``extent`` times. vectorized: one body in vector types when
        :func:`why_not_vectorizable` allows, else serial. parallel: the outermost becomes a libgomp region,
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
        elif s.kind == "vectorized" and self.vector is None and why_not_vectorizable(s) is None:
            lanes = ir.Constant(ir.VectorType(I64, s.extent), list(range(s.extent)))
            self.vector = (s.var, s.extent)
            try:
                self.with_var(s.var, lanes, lambda: self.stmt(s.body))
            finally:
                self.vector = None
        elif s.kind == "parallel" and not self.frame.in_parallel:
            llvm_parallel.outline(self, s)
        else:
            self.serial_loop(s.var, ir.Constant(I64, 0), ir.Constant(I64, s.extent), s.body)

    def serial_loop(self, var: Var, begin: ir.Value, end: ir.Value, body: Stmt) -> None:
        b = self.frame.b
        before = b.block
        head = b.append_basic_block(f"for.{var.name}")
        loop, done = b.append_basic_block(f"for.{var.name}.body"), b.append_basic_block(f"for.{var.name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=var.name)
        i.add_incoming(begin, before)
        b.cbranch(b.icmp_signed("<", i, end), loop, done)
        b.position_at_end(loop)
        self.with_var(var, i, lambda: self.stmt(body))
        i.add_incoming(self.frame.b.add(i, ir.Constant(I64, 1), flags=("nsw",)), self.frame.b.block)
        self.frame.b.branch(head)
        self.frame.b.position_at_end(done)

    def with_var(self, var: Var, value: ir.Value, emit: Callable[[], None]) -> None:
        saved = self.frame.vars.get(var)
        self.frame.vars[var] = value
        try:
            emit()
        finally:
            if saved is None:
                del self.frame.vars[var]
            else:
                self.frame.vars[var] = saved

    # Memory -------------------------------------------------------------------------------------
    def address(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[str, ir.Value]:
        """("scalar", pointer) | ("vector", index of lane 0) | ("lanes", vector of indices)."""
        if self.vector is not None:
            var = self.vector[0]
            form = affine_index(buf, indices, var)
            if form is not None and form.coeff in (0, 1):
                # The index of lane 0; lane k then reads base + coeff * k.
                base: list[ir.Value] = []
                self.with_var(var, ir.Constant(I64, 0), lambda: base.append(self.flat_index(buf, indices)))
                return ("vector", base[0]) if form.coeff == 1 else ("scalar", self.gep(buf, base[0]))
        index = self.flat_index(buf, indices)
        if isinstance(index.type, ir.VectorType):
            return "lanes", index
        return "scalar", self.gep(buf, index)

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
        return self.frame.b.gep(self.buffer(buf), [index], inbounds=True, source_etype=STORAGE_TYPES[buf.dtype])

    def expr_Load(self, e: Load) -> ir.Value:
        kind, addr = self.address(e.buffer, e.indices)
        b, sty, align = self.frame.b, STORAGE_TYPES[e.buffer.dtype], ITEM_BYTES[e.buffer.dtype]
        if kind == "scalar":
            v = b.load(addr, typ=sty, align=align)
        elif kind == "vector":
            assert self.vector is not None
            v = b.load(self.gep(e.buffer, addr), typ=ir.VectorType(sty, self.vector[1]), align=align)
        else:  # gather from scalar loads
            v = ir.Constant(ir.VectorType(sty, addr.type.count), ir.Undefined)
            for lane in range(addr.type.count):
                k = ir.Constant(I32, lane)
                x = b.load(self.gep(e.buffer, b.extract_element(addr, k)), typ=sty, align=align)
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

    # Expressions --------------------------------------------------------------------------------
    def expr(self, e: Expr) -> ir.Value:
        for cls in type(e).__mro__:
            method = getattr(self, f"expr_{cls.__name__}", None)
            if method is not None:
                return method(e)  # type: ignore[no-any-return]
        raise self.fail(f"no codegen for expression {type(e).__name__}")

    def expr_Var(self, e: Var) -> ir.Value:
        v = self.frame.vars.get(e)
        if v is None:
            raise self.fail(f"variable {e.name} is not bound by an enclosing loop")
        return v

    def expr_Const(self, e: Const) -> ir.Value:
        return ir.Constant(VALUE_TYPES[e.dtype], int(e.value) if e.dtype == "bool" else e.value)

    def broadcast(self, v: ir.Value, to: ir.Value) -> ir.Value:
        """``v`` as wide as ``to`` (a scalar becomes a splat when ``to`` is a vector)."""
        if not isinstance(to.type, ir.VectorType) or isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, to.type.count)
        if isinstance(v, ir.Constant) and not isinstance(v.constant, (ir.Undefined, list)):
            return ir.Constant(vt, [v.constant] * vt.count)
        b = self.frame.b
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, vt.count), None))

    def pair(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self.broadcast(a, b), self.broadcast(b, a)

    def arith(self, op: Callable[..., ir.Value], a: ir.Value, b: ir.Value, **kw: object) -> ir.Value:
        a, b = self.pair(a, b)
        return op(a, b, **kw)

    def expr_Binary(self, e: Binary) -> ir.Value:
        a, c = self.pair(self.expr(e.a), self.expr(e.b))
        b = self.frame.b
        if is_float(e.a.dtype):
            ops = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}
            if e.op in ops:
                return ops[e.op](a, c, flags=CONTRACT)
            if e.op in ("min", "max"):
                return b.select(b.fcmp_ordered("<" if e.op == "min" else ">", a, c), a, c)
        elif is_int(e.a.dtype):
            if e.op in ("+", "-", "*"):
                return {"+": b.add, "-": b.sub, "*": b.mul}[e.op](a, c)
            if e.op in ("min", "max"):
                return b.select(b.icmp_signed("<" if e.op == "min" else ">", a, c), a, c)
            if e.op in ("//", "%"):
                return self.floor_divmod(e.op, a, c, e.b)
        raise self.fail(f"operator {e.op!r} on {e.a.dtype} in {e!r}")

    def floor_divmod(self, op: str, a: ir.Value, c: ir.Value, divisor: Expr) -> ir.Value:
        """Python's floor division/modulo from LLVM's truncating sdiv/srem: -7 // 2 == -4, -7 % 2 == 1."""
        b = self.frame.b
        q, r = b.sdiv(a, c), b.srem(a, c)
        zero = splat(r.type, 0)
        if isinstance(divisor, Const) and divisor.value > 0:
            fix = b.icmp_signed("<", r, zero)
        else:
            fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, c), zero))
        if op == "//":
            return b.select(fix, b.sub(q, splat(q.type, 1)), q)
        return b.select(fix, b.add(r, c), r)

    def expr_Compare(self, e: Compare) -> ir.Value:
        a, c = self.pair(self.expr(e.a), self.expr(e.b))
        b = self.frame.b
        if is_float(e.a.dtype):
            # Ordered, except != which is true for NaN as in numpy.
            return b.fcmp_unordered(e.op, a, c) if e.op == "!=" else b.fcmp_ordered(e.op, a, c)
        if e.a.dtype == "bool":
            return b.icmp_unsigned(e.op, a, c)
        return b.icmp_signed(e.op, a, c)

    def expr_Logical(self, e: Logical) -> ir.Value:
        if needs_lazy(e.b):  # `i < n and A[i] > 0` must not load A[i] when i >= n
            true, false = Const(True, "bool"), Const(False, "bool")
            return self.lazy_select(e.a, *((e.b, false) if e.op == "and" else (true, e.b)))
        a, c = self.pair(self.expr(e.a), self.expr(e.b))
        return self.frame.b.and_(a, c) if e.op == "and" else self.frame.b.or_(a, c)

    def expr_Not(self, e: Not) -> ir.Value:
        a = self.expr(e.a)
        return self.frame.b.xor(a, splat(a.type, 1))

    def expr_Select(self, e: Select) -> ir.Value:
        if needs_lazy(e.t) or needs_lazy(e.f):
            return self.lazy_select(e.cond, e.t, e.f)
        cond, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        t, f = self.pair(t, f)
        return self.frame.b.select(cond, self.broadcast(t, cond), self.broadcast(f, cond))

    def lazy_select(self, cond: Expr, t: Expr, f: Expr) -> ir.Value:
        """Branches and a phi: only the taken side is evaluated (it may load out of bounds otherwise)."""
        c = self.expr(cond)
        if isinstance(c.type, ir.VectorType):
            raise self.fail(f"condition {cond!r} guarding a load differs between vector lanes")
        b = self.frame.b
        then_bb, else_bb = b.append_basic_block("sel.then"), b.append_basic_block("sel.else")
        merge = b.append_basic_block("sel.end")
        b.cbranch(c, then_bb, else_bb)
        b.position_at_end(then_bb)
        tv, then_end = self.expr(t), self.frame.b.block
        b.position_at_end(else_bb)
        fv, else_end = self.expr(f), self.frame.b.block
        # Widen each side in its own block before joining, so the phi sees one type.
        b.position_at_end(then_end)
        tv = self.broadcast(tv, fv)
        b.branch(merge)
        b.position_at_end(else_end)
        fv = self.broadcast(fv, tv)
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(tv.type)
        phi.add_incoming(tv, then_end)
        phi.add_incoming(fv, else_end)
        return phi

    def expr_Cast(self, e: Cast) -> ir.Value:
        v, src, dst, b = self.expr(e.value), e.value.dtype, e.dtype, self.frame.b
        if src == dst:
            return v
        if dst == "bool":
            zero = splat(v.type, 0)
            return b.fcmp_unordered("!=", v, zero) if is_float(src) else b.icmp_unsigned("!=", v, zero)
        to = like(v, VALUE_TYPES[dst])
        if src == "bool":
            return b.uitofp(v, to) if is_float(dst) else b.zext(v, to)
        if is_int(src) and is_int(dst):  # both are i64 inside; int32 wraps as a real int32 would
            return b.sext(b.trunc(v, like(v, I32)), to) if dst == "int32" else v
        if is_int(src):
            return b.sitofp(v, to)
        if is_int(dst):  # toward zero, like C and numpy's astype
            return b.sext(b.fptosi(v, like(v, I32)), to) if dst == "int32" else b.fptosi(v, to)
        return b.fpext(v, to) if dst == "float64" else b.fptrunc(v, to)

    def expr_Call(self, e: Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        if len(args) == 2:
            args = list(self.pair(args[0], args[1]))
        return emit_intrinsic(self.frame.b, e.name, args, e.dtype)


def _attach_attributes(text: str, cpu: str, features: str, vector_bits: int) -> str:
    """llvmlite cannot spell string function attributes, so add them as an attribute group."""
    attrs = ["nounwind", f'"prefer-vector-width"="{vector_bits}"', f'"min-legal-vector-width"="{vector_bits}"']
    if cpu:
        attrs.append(f'"target-cpu"="{cpu}"')
    if features:
        attrs.append(f'"target-features"="{features}"')
    text = re.sub(r"^(define [^\n]*\))$", r"\1 #0", text, flags=re.MULTILINE)
    return f"{text}\nattributes #0 = {{ {' '.join(attrs)} }}\n"


def render_llvm(
    func: PrimFunc,
    *,
    triple: str,
    vector_bits: int = 512,
    cpu: str = "",
    features: str = "",
    datalayout: str = "",
) -> str:
    """Textual LLVM IR of ``func``: ``void <name>(ptr noalias, ...)`` plus outlined parallel bodies.

    Example::

        text = render_llvm(func, triple="x86_64-unknown-linux-gnu", cpu="haswell", vector_bits=256)
    """
    module = LLVMCodegen(func, triple=triple, datalayout=datalayout).emit()
    return _attach_attributes(str(module), cpu, features, vector_bits)
