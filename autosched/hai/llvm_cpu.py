"""The ``llvm-cpu`` adapter: loop IR -> LLVM IR -> machine code in this process (llvmlite MCJIT).

``llvm-cpu`` targets the host CPU; ``llvm-cpu -mcpu=haswell -mattr=+avx2`` is another chip whose code
also runs here when the host has its features. Parallel loops call libgomp, loaded into the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import functools
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.llvm import render_llvm
from ..errors import CompileError, RunError, TargetError
from ..lower.ir import PrimFunc
from ..target import Target, parse_target
from .base import ChipInfo
from .spec import AdapterSpec
from .timing import TimingPolicy, time_calls

# ISA features implied by common -mcpu names, for chip facts (LLVM itself knows the full lists).
_X86_V2 = ("sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16")
_X86_V3 = (*_X86_V2, "avx", "avx2", "fma", "bmi", "bmi2", "f16c", "lzcnt", "movbe")
_X86_V4 = (*_X86_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_CPU_FEATURES = {
    "x86-64": ("sse", "sse2"), "x86-64-v2": _X86_V2, "x86-64-v3": _X86_V3, "x86-64-v4": _X86_V4,
    "nehalem": _X86_V2, "sandybridge": (*_X86_V2, "avx"), "ivybridge": (*_X86_V2, "avx", "f16c"),
    "haswell": _X86_V3, "broadwell": _X86_V3, "skylake": _X86_V3, "alderlake": _X86_V3,
    "znver1": _X86_V3, "znver2": _X86_V3, "znver3": _X86_V3,
    "skylake-avx512": _X86_V4, "cascadelake": _X86_V4, "cooperlake": _X86_V4,
    "icelake-server": _X86_V4, "sapphirerapids": _X86_V4, "emeraldrapids": _X86_V4,
    "znver4": _X86_V4, "znver5": _X86_V4,
}  # fmt: skip

_llvm_ready = False


def _llvm() -> Any:
    """llvmlite.binding, initialised for the native target, with libgomp loaded for parallel loops."""
    global _llvm_ready
    import llvmlite.binding as llvm

    if not _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        gomp = ctypes.util.find_library("gomp")
        if gomp is not None:
            llvm.load_library_permanently(gomp)
        _llvm_ready = True
    return llvm


@functools.cache
def llvm_cpu_names() -> tuple[frozenset[str], frozenset[str]]:
    """The CPU names and ISA features LLVM knows for this process's triple.

    llvmlite does not list them, but LLVM prints both lists to stderr when asked for cpu "help";
    the listing is captured from file descriptor 2 (once a process).
    """
    llvm = _llvm()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    with tempfile.TemporaryFile("w+") as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            target.create_target_machine(cpu="help", features="")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read()
    cpus: set[str] = set()
    features: set[str] = set()
    section: set[str] | None = None
    for line in text.splitlines():
        if line.startswith("Available CPUs"):
            section = cpus
        elif line.startswith("Available features"):
            section = features
        elif section is not None and line.startswith("  ") and " - " in line:
            section.add(line.split()[0])
    return frozenset(cpus), frozenset(features)


def check_cpu_options(mcpu: str | None, mattr: str | None) -> None:
    """Refuse an ``-mcpu`` or ``-mattr`` that LLVM does not know: it would ignore the name and may
    then abort the whole process ("LLVM ERROR") when it emits code."""
    cpus, features = llvm_cpu_names()
    if not cpus:
        return  # LLVM printed no listing: nothing to check against
    if mcpu is not None and mcpu not in cpus:
        close = difflib.get_close_matches(mcpu, sorted(cpus), n=5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise TargetError(
            f"-mcpu={mcpu}: LLVM knows no such CPU; {hint}the host is {_llvm().get_host_cpu_name()}. "
            "`llc -mcpu=help` lists the names (python: autosched.hai.llvm_cpu.llvm_cpu_names())"
        )
    for item in filter(None, (mattr or "").split(",")):
        name = item.lstrip("+-")
        if not item.startswith(("+", "-")):
            raise TargetError(
                f"-mattr={mattr}: {item!r} needs a sign: +{name} enables it, -{name} disables it"
            )
        if name not in features:
            close = difflib.get_close_matches(name, sorted(features), n=5)
            hint = f" (did you mean {', '.join('+' + c for c in close)}?)" if close else ""
            raise TargetError(
                f"-mattr={mattr}: LLVM knows no feature {name!r}{hint}; `llc -mattr=help` lists them"
            )


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


def _sys_caches() -> dict[int, int]:
    """Cache sizes in bytes by level (data or unified caches) from sysfs, where readable."""
    out: dict[int, int] = {}
    root = "/sys/devices/system/cpu/cpu0/cache"
    for entry in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        try:
            with open(f"{root}/{entry}/level") as f:
                level = int(f.read())
            with open(f"{root}/{entry}/type") as f:
                kind = f.read().strip()
            with open(f"{root}/{entry}/size") as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1024, "M": 1024 * 1024, "G": 1024**3}.get(size[-1:], 1)
        out[level] = int(size.rstrip("KMG")) * mult
    return out


def _cpu_ghz() -> float:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) / 1000.0
    except (OSError, ValueError):
        pass
    return 3.0


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
        llvm = _llvm()
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
            feats = {k for k, on in _llvm().get_host_cpu_features().items() if on}
        else:
            feats = set(_CPU_FEATURES.get(self.cpu, ("sse", "sse2")))
        for item in filter(None, mattr.split(",")):
            (feats.discard if item.startswith("-") else feats.add)(item.lstrip("+-"))
        return tuple(sorted(feats))

    def info(self) -> ChipInfo:
        caches = _sys_caches()
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
            peak_gflops=cores * _cpu_ghz() * lanes * 2 * 2,  # 2 FMA units x 2 flops per FMA
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
            target = _llvm().Target.from_triple(self.triple)
            tm = target.create_target_machine(
                cpu=self.cpu, features=self.llvm_features, opt=3, reloc=reloc, codemodel="jitdefault"
            )
            if fresh:
                return tm
            self._tm[reloc] = tm
        return self._tm[reloc]

    def _optimized_module(self, func: PrimFunc, reloc: str) -> Any:
        llvm = _llvm()
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
        llvm = _llvm()
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
        ptrs = [a.ctypes.data for a in args]
        cfunc = kernel.cfunc
        return time_calls(lambda: cfunc(*ptrs), TimingPolicy(repeat, warmup))

    def set_num_threads(self, n: int) -> None:
        """Threads of the next parallel regions started from this Python thread (libgomp)."""
        name = ctypes.util.find_library("gomp")
        if name is None:
            raise RunError("llvm-cpu: libgomp not found; parallel loops cannot run")
        ctypes.CDLL(name).omp_set_num_threads(int(n))
