"""Adapters found by target kind. Adapters are imported only when asked for (they pull in llvmlite,
pyopencl or cupy), so listing kinds costs nothing."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import TargetError
from ..target import KINDS, Target, parse_target

# target kind -> "module:Class"; an adapter joins by adding one line here.
ADAPTERS = {
    "llvm-cpu": "autosched.hai.llvm_cpu:LLVMCPUAdapter",
    "opencl": "autosched.hai.opencl:OpenCLAdapter",
    "cuda": "autosched.hai.cuda:CUDAAdapter",
}


_CACHE: dict[str, Any] = {}


def get_adapter(target: str | Target) -> Any:
    """The adapter for ``target`` (one per target string and process).

    Example::

        adapter = get_adapter("llvm-cpu -mcpu=haswell")
    """
    t = parse_target(target)
    cached = _CACHE.get(str(t))
    if cached is not None:
        return cached
    spec = ADAPTERS.get(t.kind)
    if spec is None:
        known = ", ".join(k for k in KINDS if k in ADAPTERS)
        raise TargetError(f"no adapter for target kind {t.kind!r} ({t}); available: {known}")
    module_name, cls_name = spec.split(":")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except ImportError as e:
        raise TargetError(f"target {t}: its adapter cannot be loaded here: {e}") from e
    adapter = cls(t)
    _CACHE[str(t)] = adapter
    return adapter


def detect() -> str:
    """The best target available on this machine, as a target string (``platform="auto"``)."""
    return "llvm-cpu"


def list_devices(remeasure: bool = False) -> list[str]:
    """One line per target kind: its chip facts where it is usable here, or why it is not.

    Peak and bandwidth are measured once per machine and target (about 2 s) and cached
    (:mod:`.chip_facts`); ``remeasure`` measures again.
    """
    from .chip_facts import measured_info

    lines = []
    for kind in ADAPTERS:
        try:
            info = measured_info(get_adapter(kind), remeasure=remeasure)
        except Exception as e:  # a missing driver or package is a fact to report, not a crash
            lines.append(f"{kind:10s} unavailable: {e}")
            continue
        how = info.extra.get("facts", "estimated")
        bandwidth = f", {info.bandwidth_gbs:.0f} GB/s memory" if info.bandwidth_gbs else ""
        lines.append(
            f"{kind:10s} {info.name} ({info.arch}), {info.cores} cores, {info.vector_bits}-bit vectors, "
            f"L1 {info.l1_bytes // 1024} KiB, L2 {info.l2_bytes // 1024} KiB, "
            f"L3 {info.l3_bytes // 1024} KiB, "
            f"{info.peak_gflops:.0f} GFLOP/s fp32 peak{bandwidth} ({how})"
        )
    return lines
