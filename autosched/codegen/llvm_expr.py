"""Expressions of the loop IR as LLVM values: the half of the CPU codegen visitor that returns values.

Integers are i64 inside a kernel, float32/float64 are float/double, bool is i1. Inside a vector body
a value is either uniform (a scalar, broadcast where it meets a vector) or a vector of ``lanes``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from ..errors import CompileError
from ..lower.ir import Buffer, PrimFunc
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var, is_float, is_int
from .llvm_intrinsics import CONTRACT, I32, declare, emit_intrinsic, like, splat
from .llvm_vector import needs_lazy

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
F32, F64, PTR, VOID = ir.FloatType(), ir.DoubleType(), ir.PointerType(), ir.VoidType()
VALUE_TYPES = {"int32": I64, "int64": I64, "float32": F32, "float64": F64, "bool": I1}
STORAGE_TYPES = {"int32": I32, "int64": I64, "float32": F32, "float64": F64, "bool": I8}
ITEM_BYTES = {"int32": 4, "int64": 8, "float32": 4, "float64": 8, "bool": 1}


@dataclass
class Frame:
    """What is bound while emitting one LLVM function (the kernel, or an outlined parallel body)."""

    fn: ir.Function
    entry: ir.IRBuilder  # the entry block holds only allocas, so SROA/mem2reg can promote them
    b: ir.IRBuilder
    vars: dict[Var, ir.Value]
    buffers: dict[Buffer, ir.Value]
    in_parallel: bool
    streamed: bool = False  # non-temporal stores were emitted: a fence before returning orders them

    @classmethod
    def open(cls, fn: ir.Function, in_parallel: bool) -> Frame:
        entry = ir.IRBuilder(fn.append_basic_block("entry"))
        return cls(fn, entry, ir.IRBuilder(fn.append_basic_block("start")), {}, {}, in_parallel)

    def close(self) -> None:
        if self.streamed:
            self.fence_streams()
        self.b.ret_void()
        self.entry.branch(self.fn.blocks[1])

    def fence_streams(self) -> None:
        """``sfence`` on x86, the fence documented for non-temporal stores and the one glibc's streaming
        copies end with (LLVM 22 emits a seq_cst fence as a locked ``or``); a full fence elsewhere."""
        module = self.fn.module
        if module.triple.startswith(("x86_64", "i386", "i686")):
            self.b.call(declare(module, "llvm.x86.sse.sfence", ir.FunctionType(ir.VoidType(), [])), [])
        else:
            self.b.fence("seq_cst")

    def alloca(self, ty: ir.Type, name: str, align: int = 64) -> ir.Value:
        inst = self.entry.alloca(ty, name=name)
        inst.align = align
        inst.type = PTR  # llvmlite types allocas as typed pointers; the rest of the module is opaque
        return inst


class ExprCodegen:
    """``expr_<Node>`` methods, dispatched on the node's class; statements live in the subclass."""

    func: PrimFunc
    frame: Frame
    vector: tuple[Var, int] | None  # (loop var, lanes) inside a vector body
    avx512: bool  # the target has AVX-512: exp rounds and scales by 2**n in one instruction each

    def fail(self, msg: str) -> CompileError:
        return CompileError(f"llvm-cpu: {self.func.name}: {msg}")

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
        if not isinstance(to.type, ir.VectorType):
            return v
        return self.widen(v, to.type.count)

    def widen(self, v: ir.Value, lanes: int) -> ir.Value:
        """A vector of ``lanes`` copies of a scalar ``v`` (a vector is returned as it is)."""
        if isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and isinstance(v.constant, (int, float)):
            return ir.Constant(vt, [v.constant] * vt.count)
        b = self.frame.b
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(
            one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, vt.count), None)
        )

    def pair(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self.broadcast(a, b), self.broadcast(b, a)

    def arith(self, op: Callable[..., ir.Value], a: ir.Value, b: ir.Value, **kw: object) -> ir.Value:
        a, b = self.pair(a, b)
        return op(a, b, **kw)

    def expr_Binary(self, e: Binary) -> ir.Value:
        return self.binary(e.op, e.a.dtype, self.expr(e.a), self.expr(e.b), e.b)

    def binary(self, op: str, dtype: str, a: ir.Value, c: ir.Value, divisor: Expr | None = None) -> ir.Value:
        """``a <op> c`` on values of ``dtype`` (``divisor``: the right operand's expression, for //)."""
        a, c = self.pair(a, c)
        b = self.frame.b
        if is_float(dtype):
            ops = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}
            if op in ops:
                return ops[op](a, c, flags=CONTRACT)
            if op in ("min", "max"):
                return b.select(b.fcmp_ordered("<" if op == "min" else ">", a, c), a, c)
        elif is_int(dtype):
            if op in ("+", "-", "*"):
                return {"+": b.add, "-": b.sub, "*": b.mul}[op](a, c)
            if op in ("min", "max"):
                return b.select(b.icmp_signed("<" if op == "min" else ">", a, c), a, c)
            if op in ("//", "%"):
                assert divisor is not None
                return self.floor_divmod(op, a, c, divisor)
        raise self.fail(f"operator {op!r} on {dtype}")

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
        return emit_intrinsic(self.frame.b, e.name, args, e.dtype, self.avx512)

    def with_var(self, var: Var, value: ir.Value, emit: Callable[[], None]) -> None:
        """Run ``emit`` with ``var`` bound to ``value``, then restore what was bound before."""
        saved = self.frame.vars.get(var)
        self.frame.vars[var] = value
        try:
            emit()
        finally:
            if saved is None:
                del self.frame.vars[var]
            else:
                self.frame.vars[var] = saved
