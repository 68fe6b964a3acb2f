"""LLVM CPU codegen: hand-built loop IR run through MCJIT and checked against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autosched.codegen.llvm import render_llvm
from autosched.errors import CompileError
from autosched.hai.llvm_cpu import LLVMCPUAdapter
from autosched.lower.ir import Allocate, For, IfThenElse, Load, PrimFunc, Store, seq
from autosched.te.expr import Var, call, cast, compare, const, logical, select
from tests.codegen.ir_builders import buf, ld

TRIPLE = "x86_64-unknown-linux-gnu"


def rand(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32", lo: float = -2, hi: float = 2
):
    if dtype.startswith("int"):
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def test_elementwise_serial(run, rng):
    A, B, C = buf("A", (37,)), buf("B", (37,)), buf("C", (37,))
    i = Var("i")
    f = PrimFunc("add", (A, B, C), For(i, 37, "serial", Store(C, (i,), ld(A, i) * ld(B, i) + ld(A, i))))
    a, b, c = rand(rng, (37,)), rand(rng, (37,)), np.zeros(37, "float32")
    run(f, a, b, c)
    np.testing.assert_allclose(c, a * b + a, rtol=1e-6)


def test_signature_and_attributes():
    A, B = buf("A", (4,)), buf("B", (4,))
    i = Var("i")
    f = PrimFunc("copy", (A, B), For(i, 4, "serial", Store(B, (i,), ld(A, i))))
    text = render_llvm(f, triple=TRIPLE, cpu="haswell", vector_bits=256)
    assert 'define void @"copy"(ptr noalias %"A", ptr noalias %"B") #0' in text
    assert '"target-cpu"="haswell"' in text and '"prefer-vector-width"="256"' in text


@pytest.mark.parametrize("kind", ["serial", "unrolled", "vectorized", "parallel"])
def test_matmul_with_local_accumulator(run, rng, kind):
    M, N, K = 6, 8, 5
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    acc = buf("acc", (1,), scope="local")
    i, j, k = Var("i"), Var("j"), Var("k")
    body = Allocate(
        acc,
        seq(
            Store(acc, (const(0),), const(0.0)),
            For(k, K, "serial", Store(acc, (const(0),), ld(acc, 0) + ld(A, i, k) * ld(B, k, j))),
            Store(C, (i, j), ld(acc, 0)),
        ),
    )
    f = PrimFunc("mm", (A, B, C), For(i, M, kind, For(j, N, "serial", body)))
    a, b, c = rand(rng, (M, K)), rand(rng, (K, N)), np.zeros((M, N), "float32")
    run(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["serial", "unrolled", "vectorized", "parallel"])
def test_each_kind_with_non_dividing_guard(run, rng, kind):
    n, factor = 10, 4  # 3 x 4 = 12 > 10: the split needs a guard
    A, B = buf("A", (n,)), buf("B", (n,))
    io, ii = Var("io"), Var("ii")
    idx = io * factor + ii
    guarded = IfThenElse(idx < n, Store(B, (idx,), ld(A, idx) * 2.0 + 1.0))
    f = PrimFunc("g", (A, B), For(io, 3, "serial", For(ii, factor, kind, guarded)))
    a, b = rand(rng, (n,)), np.zeros(n, "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_if_then_else_both_branches(run, rng):
    A, B = buf("A", (16,)), buf("B", (16,))
    i = Var("i")
    body = IfThenElse(ld(A, i) > 0.0, Store(B, (i,), ld(A, i)), Store(B, (i,), ld(A, i) * -3.0))
    f = PrimFunc("ite", (A, B), For(i, 16, "serial", body))
    a, b = rand(rng, (16,)), np.zeros(16, "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, np.where(a > 0, a, a * -3), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_dtypes(run, rng, dtype, kind):
    A, B, C = buf("A", (16,), dtype), buf("B", (16,), dtype), buf("C", (16,), dtype)
    i = Var("i")
    a_, b_ = ld(A, i), ld(B, i)
    value = Store(C, (i,), a_ * b_ + a_ - Load(B, (const(15) - i,), dtype))
    f = PrimFunc("dt", (A, B, C), For(i, 16, kind, value))
    a, b, c = rand(rng, (16,), dtype), rand(rng, (16,), dtype), np.zeros(16, dtype)
    run(f, a, b, c)
    np.testing.assert_allclose(c, a * b + a - b[::-1], rtol=1e-6)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_floor_division_and_modulo(run, rng, kind):
    n = 32
    A, D = buf("A", (n,), "int32"), buf("D", (n,), "int32")
    Q, R, Q2, R2 = (buf(x, (n,), "int32") for x in ("Q", "R", "Q2", "R2"))
    i = Var("i")
    a, d = ld(A, i), ld(D, i)
    body = seq(
        Store(Q, (i,), a // d), Store(R, (i,), a % d),  # divisor of either sign, loaded
        Store(Q2, (i,), a // 4), Store(R2, (i,), (i - 16) % 3),  # constant divisor
    )  # fmt: skip
    f = PrimFunc("divmod", (A, D, Q, R, Q2, R2), For(i, n, kind, body))
    a_ = rng.integers(-40, 40, n).astype("int32")
    d_ = rng.choice([-7, -3, -2, 2, 3, 5], n).astype("int32")
    q, r, q2, r2 = (np.zeros(n, "int32") for _ in range(4))
    run(f, a_, d_, q, r, q2, r2)
    np.testing.assert_array_equal(q, a_ // d_)
    np.testing.assert_array_equal(r, a_ % d_)
    np.testing.assert_array_equal(q2, a_ // 4)
    np.testing.assert_array_equal(r2, (np.arange(n) - 16) % 3)
    assert (-7) // 2 == -4 and q[0] == a_[0] // d_[0]


def _np_intrinsic(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x64, y64 = x.astype("float64"), y.astype("float64")
    ref = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
        "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "abs": np.abs, "floor": np.floor,
        "ceil": np.ceil, "erf": np.vectorize(math.erf),
    }  # fmt: skip
    if name == "pow":
        return np.power(x64, y64)
    return ref[name](x64)


INTRINSIC_RANGES = {"log": (1e-3, 50.0), "sqrt": (1e-3, 50.0), "rsqrt": (1e-3, 50.0), "pow": (0.1, 4.0)}


@pytest.fixture(params=["llvm-cpu", "llvm-cpu -mcpu=haswell"])
def scaling_cpu(request, cpu) -> LLVMCPUAdapter:
    """The host, and an AVX2 chip: float32 exp scales by 2**n with AVX-512's vscalefps on one and
    with exponent bits, in two halves, on the other."""
    adapter = cpu if request.param == "llvm-cpu" else LLVMCPUAdapter(request.param)
    if not set(adapter.features) <= set(cpu.features):
        pytest.skip(f"this machine cannot run {request.param}")
    return adapter


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["serial", "vectorized"])
@pytest.mark.parametrize(
    "name", ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "pow", "floor", "ceil"]
)
def test_intrinsics(scaling_cpu, rng, name, kind, dtype):
    n = 64
    X, Y, Z = buf("X", (n,), dtype), buf("Y", (n,), dtype), buf("Z", (n,), dtype)
    i = Var("i")
    args = (ld(X, i), ld(Y, i)) if name == "pow" else (ld(X, i),)
    f = PrimFunc(f"f_{name}", (X, Y, Z), For(i, n, kind, Store(Z, (i,), call(name, *args))))
    lo, hi = INTRINSIC_RANGES.get(name, (-6.0, 6.0))
    x, y, z = rand(rng, (n,), dtype, lo, hi), rand(rng, (n,), dtype, 0.5, 2.5), np.zeros(n, dtype)
    x[:4] = [0.0, 1e-4, -1e-4, 0.5] if name not in INTRINSIC_RANGES else x[:4]
    scaling_cpu.launch(scaling_cpu.compile(f), [x, y, z])
    rtol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(
        z, _np_intrinsic(name, x, y), rtol=rtol, atol=1e-7 if dtype == "float32" else 0
    )


@pytest.mark.parametrize("lanes", [12, 32])
def test_exp_log_special_values(scaling_cpu, lanes):
    """12 lanes: llvm.ldexp on AVX-512; 32: two 16-lane vscalefps."""
    vals = [-np.inf, -200.0, -100.0, -87.5, 0.0, 88.0, 88.8, 100.0, np.inf, np.nan, 1e-40, -1.0]
    vals = (vals * 3)[:lanes]
    n = len(vals)
    X, E, L = buf("X", (n,)), buf("E", (n,)), buf("L", (n,))
    i = Var("i")
    body = seq(Store(E, (i,), call("exp", ld(X, i))), Store(L, (i,), call("log", ld(X, i))))
    f = PrimFunc("special", (X, E, L), For(i, n, "vectorized", body))
    x = np.array(vals, "float32")
    e, lg = np.zeros(n, "float32"), np.zeros(n, "float32")
    kernel = scaling_cpu.compile(f)
    scaling_cpu.launch(kernel, [x, e, lg])
    native = "llvm.ldexp" if lanes == 12 else "llvm.x86.avx512.mask.scalef"
    assert (native in kernel.source) == ("avx512f" in scaling_cpu.features)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(e, np.exp(x.astype("float64")).astype("float32"), rtol=2e-6, atol=1e-44)
        np.testing.assert_allclose(lg, np.log(x), rtol=2e-6)


def test_int_abs_and_casts(run, rng):
    n = 16
    X, Iv = buf("X", (n,)), buf("Iv", (n,), "int32")
    T, F, B = buf("T", (n,), "int32"), buf("F", (n,), "float64"), buf("B", (n,), "bool")
    i = Var("i")
    body = seq(
        Store(T, (i,), cast("int32", ld(X, i))),  # toward zero
        Store(F, (i,), cast("float64", call("abs", ld(Iv, i))) + cast("float64", ld(X, i))),
        Store(B, (i,), logical("or", ld(X, i) > 1.0, compare("==", ld(Iv, i) % 2, 0))),
    )
    f = PrimFunc("casts", (X, Iv, T, F, B), For(i, n, "serial", body))
    x, iv = rand(rng, (n,), lo=-5, hi=5), rand(rng, (n,), "int32")
    t, fo, bo = np.zeros(n, "int32"), np.zeros(n, "float64"), np.zeros(n, "bool")
    run(f, x, iv, t, fo, bo)
    np.testing.assert_array_equal(t, x.astype("int32"))
    np.testing.assert_allclose(fo, np.abs(iv) + x.astype("float64"), rtol=1e-12)
    np.testing.assert_array_equal(bo, (x > 1) | (iv % 2 == 0))


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_lazy_select_guards_out_of_bounds_load(run, rng, kind):
    """The untaken side loads 2**40 elements past the end: evaluating it would crash."""
    n = 8
    A, B = buf("A", (n,)), buf("B", (4, n))
    r, i = Var("r"), Var("i")
    far = Load(A, (i + (1 << 40),), "float32")
    uniform = select(r < 2, ld(A, i), far)  # condition on the outer var: vector branches
    per_lane = select(i < 5, ld(A, i) + 1.0, select(i < 100, const(7.0), far))  # falls back to scalar
    guarded = logical("and", i < 1, Load(A, (i * (1 << 40),), "float32") > 0.0)  # short-circuit
    body = Store(B, (r, i), uniform + per_lane + select(guarded, const(1.0), const(0.0)))
    f = PrimFunc("lazy", (A, B), For(r, 2, "serial", For(i, n, kind, body)))
    a, b = rand(rng, (n,)), np.zeros((4, n), "float32")
    a[0] = 0.5
    run(f, a, b)
    idx = np.arange(n)
    expect = a + np.where(idx < 5, a + 1, 7.0) + ((idx == 0) & (a[0] > 0))
    np.testing.assert_allclose(b[:2], np.stack([expect, expect]), rtol=1e-6)
    assert not b[2:].any()


def test_thread_binding_is_refused(cpu):
    A = buf("A", (4,))
    i = Var("i")
    f = PrimFunc(
        "tb", (A,), For(i, 4, "thread_binding", Store(A, (i,), const(1.0)), thread_tag="threadIdx.x")
    )
    with pytest.raises(CompileError, match=r"bound to threadIdx\.x; thread binding needs a GPU"):
        cpu.compile(f)


def test_unbound_buffer_and_var_are_compile_errors(cpu):
    A, Tmp = buf("A", (4,)), buf("Tmp", (4,), scope="local")
    i, j = Var("i"), Var("j")
    with pytest.raises(CompileError, match="Tmp is neither a parameter nor allocated"):
        cpu.compile(PrimFunc("nobuf", (A,), For(i, 4, "serial", Store(A, (i,), ld(Tmp, i)))))
    with pytest.raises(CompileError, match="variable j is not bound"):
        cpu.compile(PrimFunc("novar", (A,), For(i, 4, "serial", Store(A, (j,), const(1.0)))))


def test_bad_module_is_a_compile_error(cpu, monkeypatch):
    A = buf("A", (4,))
    i = Var("i")
    f = PrimFunc("broken", (A,), For(i, 4, "serial", Store(A, (i,), const(1.0))))
    text = cpu.render(f)
    monkeypatch.setattr(cpu, "render", lambda func: text.replace("ret void", "ret i32 0"))
    with pytest.raises(CompileError, match="broken"):
        cpu.compile(f)
