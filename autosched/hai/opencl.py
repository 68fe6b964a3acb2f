"""The ``opencl`` adapter: loop IR -> OpenCL C -> a pyopencl program (PoCL runs it on a CPU).

``opencl`` takes the first device of the first platform; ``opencl -device=N`` the N-th device over
all platforms. A function becomes one or more kernels (see :mod:`autosched.codegen.c_like`),
launched in order; global intermediates live in device buffers the kernel object owns.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.c_like import OPENCL, DeviceProgram, render_c_like
from ..errors import CompileError, RunError, TargetError
from ..lower.ir import PrimFunc
from ..target import Target, parse_target
from .base import ChipInfo
from .spec import AdapterSpec
from .timing import TimingPolicy, time_calls


def _cl() -> Any:
    try:
        import pyopencl as cl
    except ImportError as e:
        raise TargetError(f"opencl: pyopencl is not installed ({e}); pip install pyopencl") from e
    return cl


@dataclass
class OpenCLKernel:
    """A built program: ``kernels`` are (kernel object, launch) pairs run in order."""

    name: str
    func: PrimFunc
    program: DeviceProgram = field(repr=False)
    kernels: list[tuple[Any, Any]] = field(repr=False)
    temps: list[Any] = field(repr=False)  # device buffers for the program's temps

    @property
    def source(self) -> str:
        return self.program.source


class OpenCLAdapter:
    """HardwareAdapter for OpenCL devices.

    Example::

        adapter = OpenCLAdapter("opencl")
        kernel = adapter.compile(func)
        adapter.launch(kernel, [a, b, c])      # numpy arrays, copied in and out
    """

    spec = AdapterSpec(
        "opencl", options=("device",), style="gpu", description="OpenCL devices (pyopencl; PoCL on a CPU)",
        source_label="OpenCL C",
    )  # fmt: skip

    def __init__(self, target: Target | str = "opencl"):
        self.target = parse_target(target)
        if self.target.kind != self.spec.kind:
            raise TargetError(f"OpenCLAdapter takes an opencl target, got {self.target}")
        self._opened: tuple[Any, Any, Any] | None = None  # rendering needs no OpenCL platform

    def _open(self) -> tuple[Any, Any, Any]:
        """(device, context, queue), made on first use: the platform is looked for only then."""
        if self._opened is None:
            cl = _cl()
            # PoCL's CPU device reads this when the platform loads: its worker threads pinned one a
            # core. Unpinned, both often shared one core for a whole process here: the same layer
            # norm kernel read 42 GFLOP/s in 4 of 5 fresh processes and 83 in the fifth; pinned,
            # 73-76 in 4 of 4. (A user's own setting stands; other platforms ignore it.)
            os.environ.setdefault("POCL_AFFINITY", "1")
            try:
                devices = [d for p in cl.get_platforms() for d in p.get_devices()]
            except cl.Error as e:
                raise TargetError(
                    f"opencl: no OpenCL platform here ({e}); install an ICD such as pocl-opencl-icd"
                ) from e
            index = int(self.target.get("device") or 0)
            if not 0 <= index < len(devices):
                raise TargetError(f"opencl: device {index} requested, {len(devices)} found")
            ctx = cl.Context([devices[index]])
            queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
            self._opened = (devices[index], ctx, queue)
        return self._opened

    @property
    def device(self) -> Any:
        return self._open()[0]

    @property
    def ctx(self) -> Any:
        return self._open()[1]

    @property
    def queue(self) -> Any:
        return self._open()[2]

    def info(self) -> ChipInfo:
        d = self.device
        cl = _cl()
        is_gpu = bool(d.type & cl.device_type.GPU)
        return ChipInfo(
            name=d.name.strip(),
            kind="gpu" if is_gpu else "cpu",
            arch=d.version.strip(),
            cores=d.max_compute_units,
            vector_bits=32 * max(1, d.preferred_vector_width_float),
            l1_bytes=d.local_mem_size,
            l2_bytes=max(d.global_mem_cache_size, 1),
            shared_mem_bytes=d.local_mem_size,
            max_threads_per_block=d.max_work_group_size,
            peak_gflops=d.max_compute_units * d.max_clock_frequency * 1e-3 * 2,
            extra={"platform": d.platform.name.strip(), "driver": d.driver_version},
        )

    # Code -----------------------------------------------------------------------------------------
    def render(self, func: PrimFunc) -> DeviceProgram:
        return render_c_like(func, OPENCL)  # lower(..., target) ran the GPU passes

    def compile(self, func: PrimFunc) -> OpenCLKernel:
        """Render and build; a refused program is a CompileError carrying the build log."""
        cl = _cl()
        prog = self.render(func)
        for k in prog.kernels:
            if k.threads > self.device.max_work_group_size or k.shared_bytes > self.device.local_mem_size:
                raise CompileError(
                    f"opencl: {func.name}: {k.name} needs {k.threads} work-items and {k.shared_bytes} B of "
                    f"local memory; the device allows {self.device.max_work_group_size} and "
                    f"{self.device.local_mem_size} B"
                )
        try:
            built = cl.Program(self.ctx, prog.source).build()
        except cl.Error as e:
            raise CompileError(
                f"opencl: {func.name}: build failed:\n{e}\n--- source ---\n{prog.source}"
            ) from e
        kernels = [(getattr(built, k.name), k) for k in prog.kernels]
        temps = [self.alloc(b.shape, b.dtype) for b in prog.temps]
        return OpenCLKernel(func.name, func, prog, kernels, temps)

    # Memory and running -----------------------------------------------------------------------------
    def alloc(self, shape: tuple[int, ...], dtype: str) -> Any:
        cl = _cl()
        nbytes = max(4, math.prod(shape) * np.dtype(_np(dtype)).itemsize)
        return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nbytes)

    def copy_in(self, array: np.ndarray) -> Any:
        cl = _cl()
        a = np.ascontiguousarray(array, dtype=_np(str(array.dtype)))
        return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)

    def copy_out(self, handle: Any, out: np.ndarray) -> None:
        cl = _cl()
        host = np.empty(out.shape, _np(str(out.dtype)))
        cl.enqueue_copy(self.queue, host, handle)
        out[...] = host

    def _run(self, kernel: OpenCLKernel, bufs: list[Any]) -> list[Any]:
        prog = kernel.program
        by_id = {id(b): x for b, x in zip([*prog.params, *prog.temps], [*bufs, *kernel.temps])}
        events = []
        for knl, launch in kernel.kernels:
            local = launch.block
            glob = tuple(g * b for g, b in zip(launch.grid, launch.block))
            events.append(knl(self.queue, glob, local, *[by_id[id(p)] for p in launch.params]))
        return events

    def launch(self, kernel: OpenCLKernel, args: list[Any]) -> None:
        """Run on device buffers, or on numpy arrays (copied in, and outputs copied back)."""
        prog = kernel.program
        if len(args) != len(prog.params):
            raise RunError(f"opencl: {kernel.name}: expected {len(prog.params)} arguments, got {len(args)}")
        bufs = [self.copy_in(a) if isinstance(a, np.ndarray) else a for a in args]
        try:
            self._run(kernel, bufs)
            self.queue.finish()
        except _cl().Error as e:
            raise RunError(f"opencl: {kernel.name}: launch failed: {e}") from e
        outputs = {id(b) for b in prog.outputs}
        for p, a, b in zip(prog.params, args, bufs):
            if id(p) in outputs and isinstance(a, np.ndarray):
                self.copy_out(b, a)

    def time(self, kernel: OpenCLKernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        """Seconds per run (all kernels of the program), from profiling events; no copies timed."""
        cl = _cl()
        bufs = [self.copy_in(a) if isinstance(a, np.ndarray) else a for a in args]

        def run_once() -> float:  # the device's own time of the program's kernels
            events = self._run(kernel, bufs)
            self.queue.finish()
            return sum((e.profile.end - e.profile.start) * 1e-9 for e in events)

        try:
            return time_calls(run_once, TimingPolicy(repeat, warmup), device_timed=True)
        except cl.Error as e:
            raise RunError(f"opencl: {kernel.name}: launch failed: {e}") from e


def _np(dtype: str) -> str:
    return "uint8" if dtype == "bool" else dtype
