"""The ``sim`` adapter: a chip described by a chip file, timed by the model of :mod:`autosched.sim`.

``--target "sim -chip=FILE"`` (or a shipped chip by name, ``sim -chip=avx2-desktop``). Each kernel is
compiled by llvm-cpu for the host, restricted to the chip's ISA where the host can run that
(``-mcpu=haswell`` for an AVX2 chip, 128-bit ``x86-64-v2`` for a 128-bit chip), and run there for the
correctness check; ``time`` returns the modeled seconds on the chip instead of a measurement. So
``autosched tune``, logs and reports work on a chip that is not here. The chip facts say
``extra["simulated"]``, and the log fingerprint is ``sim:<chip>-<content hash>-m<model version>:...``
(the same for a shipped chip named or given by path; a new model version starts afresh): a simulated
record never matches a real chip's fingerprint, so it is never taken for a measurement of one. Only CPU
chips are modeled: a GPU chip file is refused until there is a GPU model.

Example::

    adapter = SimAdapter("sim -chip=avx2-desktop")
    kernel = adapter.compile(func)
    adapter.time(kernel, args)          # [modeled seconds] * repeat
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TargetError
from ..lower.ir import PrimFunc
from ..sim.chip import ChipSpec, load_chip
from ..sim.model import SIM_MODEL_VERSION, Prediction, predict
from ..target import Target, parse_target
from .base import ChipInfo
from .llvm_host import CPU_FEATURES, llvm_binding
from .spec import AdapterSpec


def _check_options(options: Any) -> None:
    if "chip" not in options:
        from ..sim.chip import shipped_chips

        raise TargetError(f"sim needs -chip=FILE (a chip file, or one of {', '.join(shipped_chips())})")
    chip = load_chip(options["chip"])  # a ChipFileError (a TargetError) names the file and the field
    if chip.kind != "cpu":
        raise TargetError(
            f"sim: chip {chip.name!r} ({chip.path}) is a {chip.kind} chip; the sim model covers CPU chips "
            "only (there is no GPU model yet)"
        )


@dataclass
class SimKernel:
    """A host-compiled kernel and the loop IR the model times."""

    name: str
    func: PrimFunc
    host: Any = field(repr=False)
    prediction: Prediction | None = field(default=None, repr=False)

    @property
    def source(self) -> str:
        return str(getattr(self.host, "source", ""))


def host_target(chip: ChipSpec) -> str:
    """The llvm-cpu target that runs the chip's kernels here: its own ISA when the host has it."""
    llvm = llvm_binding()
    host_cpu = llvm.get_host_cpu_name()
    host_feats = {k for k, on in llvm.get_host_cpu_features().items() if on}
    if chip.llvm_cpu == host_cpu:
        return "llvm-cpu"
    wanted = CPU_FEATURES.get(chip.llvm_cpu)
    if wanted is not None and set(wanted) <= host_feats:
        return f"llvm-cpu -mcpu={chip.llvm_cpu}"
    if chip.simd_bits <= 128 and set(CPU_FEATURES["x86-64-v2"]) <= host_feats:
        return "llvm-cpu -mcpu=x86-64-v2"  # another ISA (NEON): the same 128-bit vectors on this host
    if chip.simd_bits <= 256 and set(CPU_FEATURES["haswell"]) <= host_feats:
        return "llvm-cpu -mcpu=haswell"
    return "llvm-cpu"


class SimAdapter:
    """HardwareAdapter of a simulated chip: host runs for correctness, modeled times."""

    spec = AdapterSpec(
        "sim", options=("chip",), style="cpu", check_options=_check_options, source_label="LLVM IR",
        runs_on_host=True, simulated=True,
        description="a chip from a chip file: kernels run here for the check, timed by the model (simulated)",
    )  # fmt: skip

    def __init__(self, target: Target | str):
        from .llvm_cpu import LLVMCPUAdapter

        self.target = parse_target(target)
        if self.target.kind != self.spec.kind:
            raise TargetError(f"SimAdapter takes a sim target, got {self.target}")
        _check_options(dict(self.target.options))  # a Target built by hand skipped parse_target's check
        self.chip = load_chip(self.target.get("chip") or "")
        self.host = LLVMCPUAdapter(host_target(self.chip))

    def info(self) -> ChipInfo:
        c = self.chip
        levels = {cache.level: cache.size_bytes for cache in c.caches}
        return ChipInfo(
            name=c.name, kind=c.kind, arch=f"{c.name}-{c.sha[:8]}-m{SIM_MODEL_VERSION}",
            features=tuple(sorted(c.features)),
            cores=c.cores, vector_bits=c.simd_bits, l1_bytes=levels.get(1, 0), l2_bytes=levels.get(2, 0),
            l3_bytes=levels.get(3, 0), shared_mem_bytes=c.gpu.shared_memory_per_sm_bytes if c.gpu else 0,
            max_threads_per_block=c.gpu.max_threads_per_block if c.gpu else 1,
            peak_gflops=round(c.peak_gflops, 1), bandwidth_gbs=c.memory_bandwidth_gbs,
            extra={"simulated": True, "facts": "chip file", "chip_file": c.path, "chip_sha": c.sha,
                   "sim_model_version": SIM_MODEL_VERSION, "host_target": str(self.host.target),
                   "unhashed_options": ["chip"]},  # the arch names the chip file by its content
        )  # fmt: skip

    def predict(self, func: PrimFunc) -> Prediction:
        return predict(func, self.chip)

    def render(self, func: PrimFunc) -> str:
        return self.host.render(func)

    def compile(self, func: PrimFunc) -> SimKernel:
        return SimKernel(func.name, func, self.host.compile(func))

    def alloc(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return self.host.alloc(shape, dtype)  # the kernels run on the host: its buffers

    def copy_in(self, array: np.ndarray) -> np.ndarray:
        return self.host.copy_in(array)

    def copy_out(self, handle: np.ndarray, out: np.ndarray) -> None:
        self.host.copy_out(handle, out)

    def launch(self, kernel: SimKernel, args: list[Any]) -> None:
        """Runs the host build: the outputs are real, for the correctness check."""
        self.host.launch(kernel.host, args)

    def time(self, kernel: SimKernel, args: list[Any], repeat: int = 5, warmup: int = 1) -> list[float]:
        """The modeled seconds on the chip, ``repeat`` times (the model is deterministic)."""
        if len(args) != len(kernel.func.params):
            from ..errors import RunError

            raise RunError(f"sim: {kernel.name}: expected {len(kernel.func.params)} arrays, got {len(args)}")
        if kernel.prediction is None:
            kernel.prediction = self.predict(kernel.func)
        return [kernel.prediction.seconds] * repeat
