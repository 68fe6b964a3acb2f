"""The llvm-cpu adapter: chip facts, target variants, the registry, objects, launching and timing."""

from __future__ import annotations

import os

import numpy as np
import pytest

from autosched.errors import RunError, TargetError
from autosched.hai import detect, get_adapter
from autosched.hai.base import HardwareAdapter
from autosched.hai.llvm_cpu import LLVMCPUAdapter
from autosched.lower.ir import Buffer, For, Load, PrimFunc, Store
from autosched.te.expr import Var, call


def _exp_add(n: int = 64) -> PrimFunc:
    A, B, C = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32"), Buffer("C", (n,), "float32")
    io, ii = Var("io"), Var("ii")
    i = io * 16 + ii
    value = call("exp", Load(A, (i,), "float32")) + Load(B, (i,), "float32")
    return PrimFunc(
        "exp_add", (A, B, C), For(io, n // 16, "serial", For(ii, 16, "vectorized", Store(C, (i,), value)))
    )


def test_protocol_and_host_info(cpu):
    assert isinstance(cpu, HardwareAdapter)
    info = cpu.info()
    assert info.kind == "cpu" and info.name == info.arch == cpu.host_cpu
    assert info.cores == os.cpu_count()
    assert info.l1_bytes > 0 and info.l2_bytes > 0 and info.peak_gflops > 0
    assert info.vector_bits in (128, 256, 512)
    assert ("avx512f" in info.features) == (info.vector_bits == 512)


@pytest.mark.parametrize(
    ("target", "bits", "feature"),
    [("llvm-cpu -mcpu=haswell", 256, "avx2"), ("llvm-cpu -mcpu=x86-64", 128, "sse2")],
)
def test_cpu_variants_are_distinct_chips_and_run_here(rng, target, bits, feature):
    adapter = get_adapter(target)
    assert isinstance(adapter, LLVMCPUAdapter)
    info = adapter.info()
    assert info.vector_bits == bits and feature in info.features
    assert info.name == target.split("=")[1] and "avx512f" not in info.features
    a, b, c = (rng.uniform(-3, 3, 64).astype("float32") for _ in range(3))
    adapter.launch(adapter.compile(_exp_add()), [a, b, c])
    np.testing.assert_allclose(c, np.exp(a) + b, rtol=2e-6, atol=1e-6)


def test_mattr_changes_features(cpu):
    if cpu.vector_bits != 512:
        pytest.skip("host has no AVX-512")
    narrowed = LLVMCPUAdapter("llvm-cpu -mattr=-avx512f")
    assert narrowed.vector_bits == 256 and "avx512f" not in narrowed.info().features


def test_registry(monkeypatch):
    from autosched.hai import registry

    assert detect() == "llvm-cpu"
    assert isinstance(get_adapter(detect()), LLVMCPUAdapter)
    monkeypatch.setattr(registry, "ADAPTERS", {"llvm-cpu": registry.ADAPTERS["llvm-cpu"]})
    monkeypatch.setattr(registry, "_CACHE", {})
    with pytest.raises(TargetError, match="no adapter for target kind 'cuda'"):
        get_adapter("cuda")
    with pytest.raises(TargetError, match="unknown target kind 'tpu'"):
        get_adapter("tpu")


def test_compile_object_is_elf(cpu):
    obj = cpu.compile_object(_exp_add())
    assert obj[:4] == b"\x7fELF"


def test_launch_checks_arguments(cpu):
    kernel = cpu.compile(_exp_add())
    a = np.ones(64, "float32")
    with pytest.raises(RunError, match="expected 3 arrays"):
        cpu.launch(kernel, [a, a])
    with pytest.raises(RunError, match=r"argument 2 \(C\)"):
        cpu.launch(kernel, [a, a, np.ones(64, "float64")])


def test_memory_and_time(cpu, rng):
    kernel = cpu.compile(_exp_add())
    a = cpu.copy_in(rng.uniform(-1, 1, 64).astype("float32"))
    b = cpu.copy_in(rng.uniform(-1, 1, 64).astype("float32"))
    c = cpu.alloc((64,), "float32")
    times = cpu.time(kernel, [a, b, c], repeat=3)
    assert len(times) == 3 and all(0 < t < 0.01 for t in times)
    out = np.zeros(64, "float32")
    cpu.copy_out(c, out)
    np.testing.assert_allclose(out, np.exp(a) + b, rtol=2e-6, atol=1e-6)
