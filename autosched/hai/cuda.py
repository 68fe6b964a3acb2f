"""The ``cuda`` adapter: loop IR -> CUDA C -> PTX with NVRTC -> cupy kernels.

NVRTC needs no driver, so :meth:`CUDAAdapter.compile_ptx` checks generated code on any machine
(``cuda -arch=sm_80`` picks the architecture; the default is the GPU's, else sm_90). Running needs
a GPU: without one, :meth:`compile`, :meth:`info` and memory calls raise a :class:`TargetError`
that says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.c_like import CUDA, DeviceProgram, render_c_like
from ..errors import CompileError, RunError, TargetError
from ..lower.ir import PrimFunc
from ..target import Target, parse_target
from .base import ChipInfo
from .spec import AdapterSpec
from .timing import TimingPolicy, time_calls


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as e:
        raise TargetError(f"cuda: cupy is not installed ({e}); pip install cupy-cuda12x") from e
    return cupy


def gpu_count() -> int:
    """CUDA GPUs usable here (0 without cupy, a driver or a device)."""
    try:
        return int(_cupy().cuda.runtime.getDeviceCount())
    except Exception:  # no driver, no device, no cupy: all mean "none here"
        return 0


@dataclass
class CUDAKernel:
    """A loaded module: ``kernels`` are (cupy RawKernel, launch) pairs run in order."""

    name: str
    func: PrimFunc
    program: DeviceProgram = field(repr=False)
    ptx: str = field(repr=False)
    kernels: list[tuple[Any, Any]] = field(repr=False)
    temps: list[Any] = field(repr=False)

    @property
    def source(self) -> str:
        return self.program.source


class CUDAAdapter:
    """HardwareAdapter for NVIDIA GPUs through cupy.

    Example::

        adapter = CUDAAdapter("cuda -arch=sm_90")
        ptx = adapter.compile_ptx(func)            # works without a GPU
        kernel = adapter.compile(func)             # needs one
        adapter.launch(kernel, [a, b, c])
    """

    spec = AdapterSpec(
        "cuda", options=("arch",), style="gpu", description="NVIDIA GPUs (cupy + NVRTC)",
        source_label="CUDA C",
    )  # fmt: skip

    def __init__(self, target: Target | str = "cuda"):
        self.target = parse_target(target)
        if self.target.kind != self.spec.kind:
            raise TargetError(f"CUDAAdapter takes a cuda target, got {self.target}")
        self.has_gpu = gpu_count() > 0
        arch = self.target.get("arch")
        if arch is None and self.has_gpu:
            major, minor = _cupy().cuda.Device(0).compute_capability
            arch = f"sm_{major}{minor}"
        self.arch = arch or "sm_90"

    def _need_gpu(self, what: str) -> Any:
        if not self.has_gpu:
            raise TargetError(
                f"cuda: {what} needs a CUDA GPU and driver; none here (compile_ptx still works)"
            )
        return _cupy()

    def info(self) -> ChipInfo:
        cp = self._need_gpu("info")
        props = cp.cuda.runtime.getDeviceProperties(0)
        sms = int(props["multiProcessorCount"])
        return ChipInfo(
            name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            kind="gpu",
            arch=self.arch,
            cores=sms,
            vector_bits=32 * 32,  # a warp of 32 lanes
            l1_bytes=int(props.get("sharedMemPerMultiprocessor", 0)),
            l2_bytes=int(props.get("l2CacheSize", 0)),
            shared_mem_bytes=int(props["sharedMemPerBlock"]),
            max_threads_per_block=int(props["maxThreadsPerBlock"]),
            peak_gflops=sms * 128 * 2 * int(props["clockRate"]) * 1e-6,  # 128 fp32 lanes per SM
            bandwidth_gbs=2 * int(props["memoryClockRate"]) * int(props["memoryBusWidth"]) / 8 * 1e-6,
        )

    # Code -----------------------------------------------------------------------------------------
    def render(self, func: PrimFunc) -> DeviceProgram:
        return render_c_like(func, CUDA)  # lower(..., target) ran the GPU passes

    def compile_ptx(self, func: PrimFunc, arch: str | None = None) -> str:
        """PTX of ``func`` for ``arch`` (default: this target's) via NVRTC; no GPU needed."""
        return nvrtc_compile(self.render(func).source, arch or self.arch, func.name)

    def compile(self, func: PrimFunc) -> CUDAKernel:
        cp = self._need_gpu("compile")
        prog = self.render(func)
        limit = cp.cuda.Device().attributes["MaxThreadsPerBlock"]
        for k in prog.kernels:
            if k.threads > limit:
                raise CompileError(
                    f"cuda: {func.name}: {k.name} has {k.threads} threads per block, max {limit}"
                )
        ptx = nvrtc_compile(prog.source, self.arch, func.name)
        try:
            module = cp.RawModule(code=ptx)
            kernels = [(module.get_function(k.name), k) for k in prog.kernels]
        except cp.cuda.driver.CUDADriverError as e:
            raise CompileError(f"cuda: {func.name}: the driver refused the PTX: {e}") from e
        temps = [self.alloc(b.shape, b.dtype) for b in prog.temps]
        return CUDAKernel(func.name, func, prog, ptx, kernels, temps)

    # Memory and running -----------------------------------------------------------------------------
    def alloc(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self._need_gpu("alloc").empty(shape, "uint8" if dtype == "bool" else dtype)

    def copy_in(self, array: np.ndarray) -> Any:
        return self._need_gpu("copy_in").asarray(np.ascontiguousarray(array))

    def copy_out(self, handle: Any, out: np.ndarray) -> None:
        out[...] = handle.get()

    def _run(self, kernel: CUDAKernel, bufs: list[Any]) -> None:
        prog = kernel.program
        by_id = {id(b): x for b, x in zip([*prog.params, *prog.temps], [*bufs, *kernel.temps])}
        for fn, launch in kernel.kernels:
            fn(launch.grid, launch.block, tuple(by_id[id(p)] for p in launch.params))

    def launch(self, kernel: CUDAKernel, args: list[Any]) -> None:
        """Run on device arrays, or on numpy arrays (copied in, and outputs copied back)."""
        cp = self._need_gpu("launch")
        prog = kernel.program
        if len(args) != len(prog.params):
            raise RunError(f"cuda: {kernel.name}: expected {len(prog.params)} arguments, got {len(args)}")
        bufs = [self.copy_in(a) if isinstance(a, np.ndarray) else a for a in args]
        try:
            self._run(kernel, bufs)
            cp.cuda.Device().synchronize()
        except cp.cuda.driver.CUDADriverError as e:
            raise RunError(f"cuda: {kernel.name}: launch failed: {e}") from e
        outputs = {id(b) for b in prog.outputs}
        for p, a, b in zip(prog.params, args, bufs):
            if id(p) in outputs and isinstance(a, np.ndarray):
                self.copy_out(b, a)

    def time(self, kernel: CUDAKernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        """Seconds per run (all kernels), wall clock to the device sync; fast ones run several per repeat."""
        cp = self._need_gpu("time")
        bufs = [self.copy_in(a) if isinstance(a, np.ndarray) else a for a in args]
        try:  # launches queue up; the clock stops after the device synchronises at each repeat's end
            sync = cp.cuda.Device().synchronize
            return time_calls(lambda: self._run(kernel, bufs), TimingPolicy(repeat, warmup), sync=sync)
        except cp.cuda.driver.CUDADriverError as e:
            raise RunError(f"cuda: {kernel.name}: launch failed: {e}") from e


def nvrtc_compile(source: str, arch: str, name: str = "kernel") -> str:
    """PTX for ``arch`` (``"sm_90"``); NVRTC's log is in the CompileError when it refuses."""
    try:
        from cupy.cuda import nvrtc
    except ImportError as e:
        raise TargetError(f"cuda: cupy is not installed ({e}); pip install cupy-cuda12x") from e
    try:
        prog = nvrtc.createProgram(source, f"{name}.cu", [], [])
    except Exception as e:  # the NVRTC library itself is missing: cupy raises its own types
        raise TargetError(f"cuda: NVRTC is not usable here ({e}); pip install nvidia-cuda-nvrtc-cu12") from e
    try:
        try:
            nvrtc.compileProgram(
                prog, [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}", "-std=c++17"]
            )
        except nvrtc.NVRTCError as e:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(
                f"cuda: {name}: NVRTC ({arch}) refused the kernel: {e}\n{log}\n{source}"
            ) from e
        ptx = nvrtc.getPTX(prog)
        return ptx.decode() if isinstance(ptx, bytes) else str(ptx)
    finally:
        nvrtc.destroyProgram(prog)
