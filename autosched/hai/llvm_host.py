"""What LLVM and the host say about CPUs: the CPU names and ISA features LLVM knows, the features a
``-mcpu`` name implies, checks of ``-mcpu``/``-mattr``, and the host's caches and clock.

The ``llvm-cpu`` adapter (and any adapter built on LLVM) reads its chip facts from here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import functools
import os
import sys
import tempfile
from typing import Any

from ..errors import TargetError

# ISA features implied by common -mcpu names, for chip facts (LLVM itself knows the full lists).
_X86_V2 = ("sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16")
_X86_V3 = (*_X86_V2, "avx", "avx2", "fma", "bmi", "bmi2", "f16c", "lzcnt", "movbe")
_X86_V4 = (*_X86_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
CPU_FEATURES = {
    "x86-64": ("sse", "sse2"), "x86-64-v2": _X86_V2, "x86-64-v3": _X86_V3, "x86-64-v4": _X86_V4,
    "nehalem": _X86_V2, "sandybridge": (*_X86_V2, "avx"), "ivybridge": (*_X86_V2, "avx", "f16c"),
    "haswell": _X86_V3, "broadwell": _X86_V3, "skylake": _X86_V3, "alderlake": _X86_V3,
    "znver1": _X86_V3, "znver2": _X86_V3, "znver3": _X86_V3,
    "skylake-avx512": _X86_V4, "cascadelake": _X86_V4, "cooperlake": _X86_V4,
    "icelake-server": _X86_V4, "sapphirerapids": _X86_V4, "emeraldrapids": _X86_V4,
    "znver4": _X86_V4, "znver5": _X86_V4,
}  # fmt: skip

_llvm_ready = False


def llvm_binding() -> Any:
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
    llvm = llvm_binding()
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
            f"-mcpu={mcpu}: LLVM knows no such CPU; {hint}the host is {llvm_binding().get_host_cpu_name()}. "
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


def sys_caches() -> dict[int, int]:
    """Cache sizes in bytes by level (data or unified caches) from sysfs, where readable."""
    return {level: size for level, size, _ in _sys_cache_entries()}


def sys_cache_ways() -> dict[int, int]:
    """Associativity by level (data or unified caches) from sysfs, where the kernel reports it."""
    return {level: ways for level, _, ways in _sys_cache_entries() if ways > 0}


def _sys_cache_entries() -> list[tuple[int, int, int]]:
    """(level, size in bytes, ways or 0) of cpu0's data and unified caches."""
    out: list[tuple[int, int, int]] = []
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
        try:
            with open(f"{root}/{entry}/ways_of_associativity") as f:
                ways = int(f.read())
        except (OSError, ValueError):
            ways = 0
        mult = {"K": 1024, "M": 1024 * 1024, "G": 1024**3}.get(size[-1:], 1)
        out.append((level, int(size.rstrip("KMG")) * mult, ways))
    return out


def cpu_ghz() -> float:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) / 1000.0
    except (OSError, ValueError):
        pass
    return 3.0
