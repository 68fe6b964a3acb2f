"""CPU features, by LLVM's names, checked against what this machine's kernel reports (/proc/cpuinfo).

A built library records the ISA features its code may use (``avx512f``, ``fma``, ...); loading it on a
machine without one of them would crash with SIGILL somewhere in the middle of a call, so the loader
checks first. LLVM and Linux name most features alike; this table holds the exceptions.

Example::

    missing_features(["avx2", "fma", "avx512fp16"])   # [] on Sapphire Rapids, ["avx512fp16"] on Zen 4
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from pathlib import Path

# LLVM feature name -> /proc/cpuinfo flag, where they differ. Everything else: "." and "-" become "_".
LLVM_TO_CPUINFO = {
    "64bit": "lm",
    "sse3": "pni",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "crc32": "sse4_2",  # crc32 instructions are part of SSE4.2
    "bmi": "bmi1",
    "lzcnt": "abm",
    "pclmul": "pclmulqdq",
    "prfchw": "3dnowprefetch",
    "rdrnd": "rdrand",
    "sahf": "lahf_lm",
    "sha": "sha_ni",
    "avxvnni": "avx_vnni",
    "avx512bf16": "avx512_bf16",
    "avx512bitalg": "avx512_bitalg",
    "avx512fp16": "avx512_fp16",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512vp2intersect": "avx512_vp2intersect",
    "evex512": "avx512f",
}
CPUINFO = Path("/proc/cpuinfo")


def cpuinfo_flag(feature: str) -> str:
    """The /proc/cpuinfo flag of an LLVM feature name. Example: ``cpuinfo_flag("sse4.1") == "sse4_1"``."""
    return LLVM_TO_CPUINFO.get(feature, feature.replace(".", "_").replace("-", "_"))


def host_flags(path: Path = CPUINFO) -> frozenset[str] | None:
    """The CPU flags of this machine (x86 ``flags``, Arm ``Features``), or None where unreadable."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def checkable(features: Iterable[str], flags: frozenset[str] | None = None) -> list[str]:
    """The features whose flag this machine reports: what a manifest written here should list.

    LLVM sometimes enables a feature the kernel hides (``shstk``); listing it would make a library
    refuse to load on the very machine that built it.
    """
    flags = host_flags() if flags is None else flags
    if flags is None:
        return sorted(set(features))
    return sorted({f for f in features if cpuinfo_flag(f) in flags})


def missing_features(features: Iterable[str], flags: frozenset[str] | None = None) -> list[str]:
    """The features this machine lacks (empty when it has them all, or cannot tell)."""
    flags = host_flags() if flags is None else flags
    if flags is None:
        return []
    return sorted(f for f in set(features) if cpuinfo_flag(f) not in flags)


def host_machine() -> str:
    """This machine's architecture as the first part of an LLVM triple (``x86_64``, ``aarch64``)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)
