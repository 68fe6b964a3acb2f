"""Math intrinsics as LLVM IR, for scalar and vector operands alike.

LLVM turns a vector ``llvm.exp.v16f32`` into sixteen libm calls, so float32 ``exp`` and ``log`` are
written here as Cephes-style polynomials that stay in vector registers; ``tanh``, ``sigmoid`` and
``erf`` are built on them. float64 keeps libm's accuracy: ``llvm.exp/log.f64`` or libm calls lane by
lane (MCJIT resolves libm symbols in-process). On AVX-512 chips exp rounds with ``vrndscaleps``
and scales by 2**n with ``vscalefps`` (15 vector instructions; about 23 with the portable bit tricks).
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from ..errors import CompileError

I32 = ir.IntType(32)
F32 = ir.FloatType()
F64 = ir.DoubleType()
CONTRACT = ("contract",)

# Cephes expf: exp(r) ~ 1 + r + r^2 * P(r) on |r| <= ln2/2.
_EXP_P = (
    1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
)  # fmt: skip
# Cephes logf: log(1 + x) ~ x - x^2/2 + x^3 * P(x) on sqrt(1/2) - 1 <= x <= sqrt(2) - 1.
_LOG_P = (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1,
)  # fmt: skip
# Cephes tanhf: tanh(x) ~ x + x^3 * P(x^2) on |x| < 0.625.
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
# Cephes erff: erf(x) ~ x * P(x^2) on |x| < 1.
_ERF_P = (
    7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3, -2.685381193529856e-2,
    1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710e0,
)  # fmt: skip
# Abramowitz-Stegun 7.1.26 for |x| >= 1: absolute error 1.5e-7, i.e. relative 2e-7 there.
_AS_P = 0.3275911
_AS_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_FLT_MIN = 1.17549435e-38
_ROUND_MAGIC, _ROUND_MAGIC_BITS = 12582912.0, 0x4B400000  # 1.5 * 2**23 and its bit pattern


def splat(ty: ir.Type, value: float | int) -> ir.Constant:
    """A constant of ``ty``: a scalar, or the same value in every lane of a vector."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [value] * ty.count)
    return ir.Constant(ty, value)


def lane_range(start: int, n: int) -> ir.Constant:
    """A shufflevector mask selecting lanes ``start`` .. ``start + n - 1``."""
    return ir.Constant(ir.VectorType(I32, n), list(range(start, start + n)))


def like(value: ir.Value, scalar_ty: ir.Type) -> ir.Type:
    """``scalar_ty``, or a vector of it as wide as ``value``."""
    if isinstance(value.type, ir.VectorType):
        return ir.VectorType(scalar_ty, value.type.count)
    return scalar_ty


def type_suffix(ty: ir.Type) -> str:
    """The overload suffix of an LLVM intrinsic: f32, f64, v16f32, i64..."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    raise CompileError(f"llvm-cpu: no intrinsic overload for type {ty}")


def declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    """Declare ``name`` once per module (llvmlite's declare_intrinsic cannot mangle vector types)."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, fnty, name)


def llvm_intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    ty = args[0].type
    fn = declare(b.module, f"llvm.{name}.{type_suffix(ty)}", ir.FunctionType(ty, [ty] * len(args)))
    return b.call(fn, list(args))


def libm_call(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """A scalar libm double function applied lane by lane."""
    fn = declare(b.module, name, ir.FunctionType(F64, [F64]))
    if not isinstance(x.type, ir.VectorType):
        return b.call(fn, [x])
    out: ir.Value = ir.Constant(x.type, ir.Undefined)
    for lane in range(x.type.count):
        idx = ir.Constant(I32, lane)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, idx)]), idx)
    return out


class _Math:
    """Float arithmetic on one operand type (scalar or vector), with FMA contraction allowed."""

    def __init__(self, b: ir.IRBuilder, ty: ir.Type, avx512: bool = False):
        self.b, self.ty, self.avx512 = b, ty, avx512
        self.ity = ir.VectorType(I32, ty.count) if isinstance(ty, ir.VectorType) else I32

    def c(self, value: float) -> ir.Constant:
        return splat(self.ty, value)

    def ci(self, value: int) -> ir.Constant:
        return splat(self.ity, value)

    def add(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fadd(x, y, flags=CONTRACT)

    def sub(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fsub(x, y, flags=CONTRACT)

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fmul(x, y, flags=CONTRACT)

    def horner(self, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
        acc: ir.Value = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.add(self.mul(acc, x), self.c(k))
        return acc

    def clamp_above(self, x: ir.Value, hi: float) -> ir.Value:
        # fcmp+select rather than minnum: NaN passes through untouched.
        return self.b.select(self.b.fcmp_ordered(">", x, self.c(hi)), self.c(hi), x)

    def clamp_below(self, x: ir.Value, lo: float) -> ir.Value:
        return self.b.select(self.b.fcmp_ordered("<", x, self.c(lo)), self.c(lo), x)

    def pow2(self, n: ir.Value) -> ir.Value:
        """2**n for an int32 exponent n in [-126, 127], built from the exponent bits."""
        bits = self.b.shl(self.b.add(n, self.ci(127)), self.ci(23))
        return self.b.bitcast(bits, self.ty)

    # Functions ------------------------------------------------------------------------------------
    def exp(self, x: ir.Value) -> ir.Value:
        b = self.b
        xc = self.clamp_below(self.clamp_above(x, 89.0), -104.0)  # beyond: inf / 0 anyway
        t = self.mul(xc, self.c(1.44269504088896341))
        if self.avx512:
            fn = llvm_intrinsic(b, "roundeven", t)  # one instruction where vscalefps exists
        else:
            # Round without a rounding instruction (a libm call before SSE4.1): adding 1.5 * 2**23
            # leaves n in the low mantissa bits (no reassociation is allowed, so it is not folded).
            t = self.add(t, self.c(_ROUND_MAGIC))
            fn = self.sub(t, self.c(_ROUND_MAGIC))
        r = self.sub(self.sub(xc, self.mul(fn, self.c(_LN2_HI))), self.mul(fn, self.c(_LN2_LO)))
        y = self.add(self.add(self.mul(self.horner(r, _EXP_P), self.mul(r, r)), r), self.c(1.0))
        # A NaN x stays NaN through r and y; only the scale by 2**n is left.
        if self.avx512:
            return self.scale(y, fn)
        # In two halves so that results down to denormals and up to overflow stay right.
        n = b.sub(b.bitcast(t, self.ity), self.ci(_ROUND_MAGIC_BITS))
        n1 = b.ashr(n, self.ci(1))
        return b.fmul(b.fmul(y, self.pow2(n1)), self.pow2(b.sub(n, n1)))

    def scale(self, y: ir.Value, fn: ir.Value) -> ir.Value:
        """y * 2**fn for an integral float fn, right down to denormals: AVX-512's vscalefps takes fn
        as it is, 16 lanes at a time; other widths go through llvm.ldexp and an int conversion."""
        b = self.b
        count = self.ty.count if isinstance(self.ty, ir.VectorType) else 1
        chunks = count // 16
        if count % 16 or chunks & (chunks - 1):  # not a power of two of 16-lane chunks
            ldexp = f"llvm.ldexp.{type_suffix(self.ty)}.{type_suffix(self.ity)}"
            fn_ty = ir.FunctionType(self.ty, [self.ty, self.ity])
            return b.call(declare(b.module, ldexp, fn_ty), [y, b.fptosi(fn, self.ity)])
        v16 = ir.VectorType(F32, 16)
        scalef = declare(b.module, "llvm.x86.avx512.mask.scalef.ps.512",
                         ir.FunctionType(v16, [v16, v16, v16, ir.IntType(16), I32]))  # fmt: skip
        parts = []
        for k in range(0, count, 16):
            ys, fs = b.shuffle_vector(y, y, lane_range(k, 16)), b.shuffle_vector(fn, fn, lane_range(k, 16))
            # All lanes (mask -1), the current rounding mode (4).
            parts.append(b.call(scalef, [ys, fs, ys, ir.Constant(ir.IntType(16), -1), ir.Constant(I32, 4)]))
        while len(parts) > 1:  # concatenate pairwise back to ``count`` lanes
            parts = [
                b.shuffle_vector(a, c, lane_range(0, 2 * a.type.count))
                for a, c in zip(parts[::2], parts[1::2])
            ]
        return parts[0]

    def log(self, x: ir.Value) -> ir.Value:
        b = self.b
        # Denormals have no implicit bit: scale them into the normal range first.
        tiny = b.fcmp_ordered("<", x, self.c(_FLT_MIN))
        xs = b.select(tiny, b.fmul(x, self.c(8388608.0)), x)
        bits = b.bitcast(xs, self.ity)
        e = b.sub(b.lshr(bits, self.ci(23)), self.ci(126))
        e = b.select(tiny, b.sub(e, self.ci(23)), e)
        m = b.bitcast(b.or_(b.and_(bits, self.ci(0x807FFFFF)), self.ci(0x3F000000)), self.ty)  # [0.5, 1)
        low = b.fcmp_ordered("<", m, self.c(0.707106781186547524))
        e = b.select(low, b.sub(e, self.ci(1)), e)
        f = self.sub(b.select(low, self.add(m, m), m), self.c(1.0))
        fe = b.sitofp(e, self.ty)
        z = self.mul(f, f)
        y = self.mul(self.mul(self.horner(f, _LOG_P), f), z)
        y = self.add(y, self.mul(fe, self.c(_LN2_LO)))
        y = self.sub(y, self.mul(z, self.c(0.5)))
        y = self.add(self.add(f, y), self.mul(fe, self.c(_LN2_HI)))
        # Special cases: log(0) = -inf, log(inf) = inf, log(<0) = log(nan) = nan.
        y = b.select(b.fcmp_ordered("==", x, self.c(0.0)), self.c(float("-inf")), y)
        y = b.select(b.fcmp_ordered("==", x, self.c(float("inf"))), x, y)
        return b.select(b.fcmp_unordered("<", x, self.c(0.0)), self.c(float("nan")), y)

    def tanh(self, x: ir.Value) -> ir.Value:
        ax = llvm_intrinsic(self.b, "fabs", x)
        z = self.mul(x, x)
        small = self.add(self.mul(self.mul(self.horner(z, _TANH_P), z), x), x)
        e = self.exp(self.add(ax, ax))
        large = self.sub(self.c(1.0), self.b.fdiv(self.c(2.0), self.add(e, self.c(1.0))))
        large = llvm_intrinsic(self.b, "copysign", large, x)
        return self.b.select(self.b.fcmp_ordered("<", ax, self.c(0.625)), small, large)

    def sigmoid(self, x: ir.Value) -> ir.Value:
        e = self.exp(self.b.fneg(x))
        return self.b.fdiv(self.c(1.0), self.add(self.c(1.0), e))

    def erf(self, x: ir.Value) -> ir.Value:
        ax = llvm_intrinsic(self.b, "fabs", x)
        z = self.mul(x, x)
        small = self.mul(x, self.horner(z, _ERF_P))
        t = self.b.fdiv(self.c(1.0), self.add(self.c(1.0), self.mul(ax, self.c(_AS_P))))
        tail = self.mul(self.mul(self.horner(t, _AS_A), t), self.exp(self.b.fneg(z)))
        large = llvm_intrinsic(self.b, "copysign", self.sub(self.c(1.0), tail), x)
        return self.b.select(self.b.fcmp_ordered("<", ax, self.c(1.0)), small, large)


def emit_intrinsic(
    b: ir.IRBuilder, name: str, args: Sequence[ir.Value], dtype: str, avx512: bool = False
) -> ir.Value:
    """The value of intrinsic ``name`` (see te.expr.INTRINSICS) of dtype ``dtype`` on ``args``;
    ``avx512``: the target has AVX-512 (one-instruction rounding and scaling by 2**n for exp)."""
    x = args[0]
    if name == "abs" and dtype in ("int32", "int64"):
        neg = b.icmp_signed("<", x, splat(x.type, 0))
        return b.select(neg, b.sub(splat(x.type, 0), x), x)
    if dtype not in ("float32", "float64"):
        raise CompileError(f"llvm-cpu: intrinsic {name} takes a float, got {dtype}")
    if name in ("sqrt", "floor", "ceil"):
        return llvm_intrinsic(b, name, x)
    if name == "abs":
        return llvm_intrinsic(b, "fabs", x)
    if name == "rsqrt":
        return b.fdiv(splat(x.type, 1.0), llvm_intrinsic(b, "sqrt", x))
    if name == "pow":
        return llvm_intrinsic(b, "pow", x, args[1])
    m = _Math(b, x.type, avx512)
    if dtype == "float32":
        fn = getattr(m, name, None)
        if fn is None:
            raise CompileError(f"llvm-cpu: unknown intrinsic {name!r}")
        return fn(x)  # type: ignore[no-any-return]
    # float64: libm accuracy.
    if name in ("exp", "log"):
        return llvm_intrinsic(b, name, x)
    if name == "sigmoid":
        e = llvm_intrinsic(b, "exp", b.fneg(x))
        return b.fdiv(splat(x.type, 1.0), b.fadd(splat(x.type, 1.0), e))
    if name in ("tanh", "erf"):
        return libm_call(b, name, x)
    raise CompileError(f"llvm-cpu: unknown intrinsic {name!r}")
