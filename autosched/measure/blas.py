"""Which BLAS kernel numpy runs, and whether the environment forces one older than the CPU.

Ratios against numpy are only honest when OpenBLAS runs its best kernel for the chip. Some machines set
``OPENBLAS_CORETYPE=Haswell`` (older OpenBLAS builds crashed on newer cores); a current numpy then runs
an AVX2 kernel on an AVX-512 CPU at about half speed, and "2x numpy" means parity. Benchmarks and the tune
summary print :func:`describe` and :func:`forced_warning`.
"""

from __future__ import annotations

import os
from typing import Any

# OpenBLAS kernel names (threadpoolctl's "architecture", OPENBLAS_CORETYPE values) by the widest ISA used.
_AVX512_KERNELS = {"skylakex", "cooperlake", "sapphirerapids", "zen4", "zen5"}
_AVX2_KERNELS = {"haswell", "zen", "skylake", "excavator"}


def blas_info() -> list[dict[str, Any]]:
    """threadpoolctl's records of the BLAS libraries numpy has loaded (empty without threadpoolctl)."""
    try:
        import numpy  # noqa: F401  (loads its BLAS, so threadpoolctl sees it)
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [i for i in threadpool_info() if i.get("user_api") == "blas"]


def describe() -> str:
    """One line, e.g. ``numpy BLAS: openblas 0.3.31 (SkylakeX kernel, 2 threads)``."""
    libs = blas_info()
    if not libs:
        return "numpy BLAS: unknown (threadpoolctl not installed or no BLAS loaded)"
    parts = []
    for lib in libs:
        arch = f"{lib['architecture']} kernel, " if lib.get("architecture") else ""
        name, version = lib.get("internal_api", "?"), lib.get("version", "?")
        parts.append(f"{name} {version} ({arch}{lib.get('num_threads')} threads)")
    forced = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    env = f"; set: {', '.join(f'{k}={v}' for k, v in forced.items())}" if forced else ""
    return "numpy BLAS: " + "; ".join(parts) + env


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def forced_warning(flags: set[str] | None = None) -> str | None:
    """A warning when OpenBLAS runs a kernel narrower than the CPU's vectors, else None."""
    flags = _cpu_flags() if flags is None else flags
    kernels = [str(lib.get("architecture", "")).lower() for lib in blas_info()]
    coretype = os.environ.get("OPENBLAS_CORETYPE", "").lower()
    if coretype:
        kernels.append(coretype)
    if "avx512f" in flags and any(k in _AVX2_KERNELS for k in kernels):
        coretype = os.environ.get("OPENBLAS_CORETYPE", "unset")
        return (
            f"numpy's OpenBLAS runs an AVX2 kernel on this AVX-512 CPU (OPENBLAS_CORETYPE={coretype}): it is "
            "slower than it can be, so ratios against numpy flatter autosched; unset OPENBLAS_CORETYPE and "
            "OPENBLAS_L2_SIZE for this command to compare fairly"
        )
    return None
