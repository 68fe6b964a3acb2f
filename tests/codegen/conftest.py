"""Fixtures for the LLVM CPU codegen tests: one adapter for the host, and a compile-and-run helper."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from autosched.hai.llvm_cpu import LLVMCPUAdapter, LLVMKernel
from autosched.lower.ir import PrimFunc


@pytest.fixture(scope="session")
def cpu() -> LLVMCPUAdapter:
    return LLVMCPUAdapter("llvm-cpu")


@pytest.fixture
def run(cpu: LLVMCPUAdapter) -> Callable[..., LLVMKernel]:
    """Compile ``func`` and run it once on ``arrays`` (outputs are written in place)."""

    def _run(func: PrimFunc, *arrays: np.ndarray) -> LLVMKernel:
        kernel = cpu.compile(func)
        cpu.launch(kernel, list(arrays))
        return kernel

    return _run


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
