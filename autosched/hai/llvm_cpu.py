"""The ``llvm-cpu`` adapter: loop IR -> LLVM IR -> machine code in this process (llvmlite MCJIT).

``llvm-cpu`` targets the host CPU; ``llvm-cpu -mcpu=haswell -mattr=+avx2`` is another chip whose code
also runs here when the host has its features. Parallel loops call libgomp, loaded into the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.llvm import render_llvm
from ..errors import CompileError, RunError, TargetError
from ..lower.ir import PrimFunc
from ..runtime.repeat import HostCall
from ..target import Target, parse_target
from .base import ChipInfo
from .llvm_host import CPU_FEATURES, check_cpu_options, cpu_ghz, llvm_binding, sys_caches
from .llvm_host import llvm_cpu_names as llvm_cpu_names  # re-exported: part of this module's interface
from .spec import AdapterSpec
from .timing import TimingPolicy, time_calls


@dataclass
class LLVMKernel:
    """A compiled kernel: call ``cfunc`` with one data pointer per parameter buffer."""

    name: str
    func: PrimFunc
    cfunc: Any
    engine: Any = field(repr=False)  # owns the machine code: keep it alive as long as cfunc
    source: str = field(repr=False, default="")

    def __call__(self, *arrays: np.ndarray) -> None:
        _check_args(self, list(arrays))
        self.cfunc(*[a.ctypes.data for a in arrays])


def _check_args(kernel: LLVMKernel, args: list[Any]) -> None:
    params = kernel.func.params
    if len(args) != len(params):
        raise RunError(f"{kernel.name}: expected {len(params)} arrays, got {len(args)}")
    for i, (a, buf) in enumerate(zip(args, params, strict=True)):
        if not isinstance(a, np.ndarray):
            raise RunError(
                f"{kernel.name}: argument {i} ({buf.name}) must be a numpy array, got {type(a).__name__}"
            )
        if a.dtype != np.dtype(buf.dtype) or a.size != buf.size or not a.flags.c_contiguous:
            raise RunError(
                f"{kernel.name}: argument {i} ({buf.name}) expected a C-contiguous {buf.dtype} array of "
                f"shape {buf.shape}, got {a.dtype} {a.shape}"
            )


def _check_options(options: Any) -> None:
    if "mcpu" in options or "mattr" in options:
        check_cpu_options(options.get("mcpu"), options.get("mattr"))


class LLVMCPUAdapter:
    """HardwareAdapter for CPUs through LLVM.

    Example::

        adapter = LLVMCPUAdapter(parse_target("llvm-cpu -mcpu=haswell"))
        kernel = adapter.compile(func)
        adapter.launch(kernel, [a, b, c])
    """

    spec = AdapterSpec(
        "llvm-cpu", options=("mcpu", "mattr", "num-threads"), style="cpu", can_export=True,
        measures_facts=True, description="CPUs through LLVM (llvmlite MCJIT); -mcpu=NAME for another chip",
        source_label="LLVM IR", aliases=("llvm",), check_options=_check_options,
    )  # fmt: skip

    def __init__(self, target: Target | str = "llvm-cpu"):
        self.target = parse_target(target)
        if self.target.kind != self.spec.kind:
            raise TargetError(f"LLVMCPUAdapter takes an llvm-cpu target, got {self.target}")
        llvm = llvm_binding()
        self.triple = llvm.get_process_triple()
        self.host_cpu = llvm.get_host_cpu_name()
        self.cpu = self.target.get("mcpu") or self.host_cpu
        mattr = self.target.get("mattr") or ""
        base = llvm.get_host_cpu_features().flatten() if self.cpu == self.host_cpu else ""
        self.llvm_features = ",".join(x for x in (base, mattr) if x)
        self.features = self._features(mattr)
        if "avx512f" in self.features:
            self.vector_bits = 512
        elif "avx2" in self.features or "avx" in self.features:
            self.vector_bits = 256
        else:
            self.vector_bits = 128
        self._tm: dict[str, Any] = {}

    def _features(self, mattr: str) -> tuple[str, ...]:
        if self.cpu == self.host_cpu:
            feats = {k for k, on in llvm_binding().get_host_cpu_features().items() if on}
        else:
            feats = set(CPU_FEATURES.get(self.cpu, ("sse", "sse2")))
        for item in filter(None, mattr.split(",")):
            (feats.discard if item.startswith("-") else feats.add)(item.lstrip("+-"))
        return tuple(sorted(feats))

    def info(self) -> ChipInfo:
        caches = sys_caches()
        cores = os.cpu_count() or 1
        lanes = self.vector_bits // 32
        return ChipInfo(
            name=self.cpu,
            kind="cpu",
            arch=self.cpu,
            features=self.features,
            cores=cores,
            vector_bits=self.vector_bits,
            l1_bytes=caches.get(1, 32 * 1024),
            l2_bytes=caches.get(2, 1024 * 1024),
            l3_bytes=caches.get(3, 0),
            max_threads_per_block=1,
            peak_gflops=cores * cpu_ghz() * lanes * 2 * 2,  # 2 FMA units x 2 flops per FMA
            extra={"triple": self.triple, "mattr": self.target.get("mattr") or ""},
        )

    def measure_facts(self, info: ChipInfo) -> dict[str, float]:
        """Peak FLOP/s and bandwidth timed on this CPU (see :mod:`.chip_facts`)."""
        from .cpu_facts import measure_cpu_facts

        return measure_cpu_facts(self, info.cores, info.l2_bytes, info.l3_bytes)

    # Code -----------------------------------------------------------------------------------------
    def render(self, func: PrimFunc) -> str:
        return render_llvm(
            func, triple=self.triple, vector_bits=self.vector_bits, cpu=self.cpu,
            features=self.llvm_features, datalayout=str(self._machine("default").target_data),
            avx512="avx512f" in self.features,
        )  # fmt: skip

    def _machine(self, reloc: str, fresh: bool = False) -> Any:
        """A TargetMachine for this cpu; ``fresh`` for one an execution engine will own and free."""
        if fresh or reloc not in self._tm:
            target = llvm_binding().Target.from_triple(self.triple)
            tm = target.create_target_machine(
                cpu=self.cpu, features=self.llvm_features, opt=3, reloc=reloc, codemodel="jitdefault"
            )
            if fresh:
                return tm
            self._tm[reloc] = tm
        return self._tm[reloc]

    def _optimized_module(self, func: PrimFunc, reloc: str) -> Any:
        llvm = llvm_binding()
        source = self.render(func)
        try:
            mod = llvm.parse_assembly(source)
            mod.verify()
        except RuntimeError as e:
            raise CompileError(f"llvm-cpu: {func.name}: LLVM rejected the generated module: {e}") from e
        tm = self._machine(reloc)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod, source

    def compile(self, func: PrimFunc) -> LLVMKernel:
        """Render, optimise at O3 and JIT-compile ``func`` for this target's cpu and features."""
        llvm = llvm_binding()
        mod, source = self._optimized_module(func, "default")
        engine = llvm.create_mcjit_compiler(mod, self._machine("default", fresh=True))
        engine.finalize_object()
        addr = engine.get_function_address(func.name)
        if not addr:
            raise CompileError(f"llvm-cpu: {func.name}: no function {func.name!r} in the compiled module")
        proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(func.params))
        return LLVMKernel(func.name, func, proto(addr), engine, source)

    def compile_object(self, func: PrimFunc) -> bytes:
        """An ELF object (position independent) to link into a shared library with ``-lgomp``."""
        mod, _ = self._optimized_module(func, "pic")
        return bytes(self._machine("pic").emit_object(mod))

    # Memory and running -----------------------------------------------------------------------------
    def alloc(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def copy_in(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).copy()

    def copy_out(self, handle: np.ndarray, out: np.ndarray) -> None:
        out[...] = handle

    def launch(self, kernel: LLVMKernel, args: list[Any]) -> None:
        _check_args(kernel, args)
        threads = self.target.get("num-threads")
        if threads:
            self.set_num_threads(int(threads))
        kernel.cfunc(*[a.ctypes.data for a in args])

    def time(self, kernel: LLVMKernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        """Seconds per run for each repeat; a fast kernel runs several times per repeat (>= 1 ms)."""
        self.launch(kernel, args)  # checks args, applies num-threads
        call = HostCall(kernel.cfunc, [a.ctypes.data for a in args])  # looped in C, as the runner does
        return time_calls(call, TimingPolicy(repeat, warmup))

    def set_num_threads(self, n: int) -> None:
        """Threads of the next parallel regions started from this Python thread (libgomp)."""
        name = ctypes.util.find_library("gomp")
        if name is None:
            raise RunError("llvm-cpu: libgomp not found; parallel loops cannot run")
        ctypes.CDLL(name).omp_set_num_threads(int(n))
