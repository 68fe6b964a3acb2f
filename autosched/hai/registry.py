"""Adapters found by target kind: the built-in ones, and any package's through the entry point group
``autosched.adapters`` (``mychip = "autosched_mychip:MyChipAdapter"``), so ``pip install autosched-mychip``
makes ``--target mychip`` work with no change to autosched.

An adapter class carries its :class:`~.spec.AdapterSpec` as ``spec``; its module is imported only when
its kind is asked for, so listing kinds costs nothing and a broken third-party adapter spoils only
its own kind.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from typing import Any

from ..errors import TargetError
from ..target import AdapterSpec, Target, parse_target, register_kinds
from ..target import style_of as style_of  # where the adapters' declared style is read

ENTRY_POINT_GROUP = "autosched.adapters"

# The adapters shipped with autosched: target kind -> "module:Class".
BUILTIN = {
    "llvm-cpu": "autosched.hai.llvm_cpu:LLVMCPUAdapter",
    "opencl": "autosched.hai.opencl:OpenCLAdapter",
    "cuda": "autosched.hai.cuda:CUDAAdapter",
    "null": "autosched.hai.null:NullAdapter",
    "sim": "autosched.hai.sim:SimAdapter",  # a chip file's chip, timed by autosched.sim's model
}
ADAPTERS = dict(BUILTIN)  # tests narrow this; entry points are added by adapter_paths()

_CACHE: dict[str, Any] = {}
_CLASSES: dict[tuple[str, str], Any] = {}
_ENTRY_POINTS: dict[tuple[str, ...], dict[str, str]] = {}


def _entry_points() -> dict[str, str]:
    """Installed third-party adapters (kind -> "module:Class"), read again when ``sys.path`` changes."""
    key = tuple(sys.path)
    found = _ENTRY_POINTS.get(key)
    if found is None:
        found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
        _ENTRY_POINTS.clear()
        _ENTRY_POINTS[key] = found
    return found


def adapter_paths() -> dict[str, str]:
    """Every registered kind -> "module:Class"; a built-in kind is never replaced by an entry point."""
    return {**_entry_points(), **ADAPTERS}


def kinds() -> list[str]:
    """The registered target kinds, built-in first."""
    return list(adapter_paths())


def adapter_class(kind: str) -> Any:
    """The adapter class of ``kind`` (its module imported now); a TargetError if none or if it is broken."""
    path = adapter_paths().get(kind)
    if path is None:
        raise TargetError(
            f"no adapter for target kind {kind!r}; available: {', '.join(kinds())}. "
            f"A third-party adapter registers in the entry point group {ENTRY_POINT_GROUP!r}"
        )
    cached = _CLASSES.get((kind, path))
    if cached is not None:
        return cached
    module_name, _, cls_name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as e:
        raise TargetError(f"target kind {kind!r}: its adapter {path} cannot be loaded here: {e}") from e
    spec = getattr(cls, "spec", None)
    if not isinstance(spec, AdapterSpec) or spec.kind != kind:
        raise TargetError(
            f"target kind {kind!r}: adapter {path} must declare spec = AdapterSpec({kind!r}, ...) "
            f"(autosched.hai.spec), got {spec!r}"
        )
    _CLASSES[(kind, path)] = cls
    return cls


def spec_of(kind: str) -> AdapterSpec:
    """The declaration of ``kind``'s adapter (what ``parse_target`` validates against)."""
    return adapter_class(kind).spec


def resolve_kind(word: str) -> str | None:
    """The registered kind ``word`` names (itself or an alias), or None."""
    paths = adapter_paths()
    if word in paths:
        return word
    for kind in paths:
        try:
            if word in spec_of(kind).aliases:
                return kind
        except TargetError:
            continue  # a broken adapter has no aliases to offer
    return None


def get_adapter(target: str | Target) -> Any:
    """The adapter for ``target`` (one per target string and process).

    Example::

        adapter = get_adapter("llvm-cpu -mcpu=haswell")
    """
    t = parse_target(target)
    cached = _CACHE.get(str(t))
    if cached is not None:
        return cached
    adapter = adapter_class(t.kind)(t)
    _CACHE[str(t)] = adapter
    return adapter


def default_target(style: str = "cpu") -> str:
    """The first built-in kind of ``style`` (``platform="cpu"`` means this one)."""
    for kind in BUILTIN:
        if spec_of(kind).style == style and spec_of(kind).can_run:
            return kind
    raise TargetError(f"no built-in adapter of style {style!r}")


def detect(workload: Any = None, tuned_seconds: Any = None) -> str:
    """The best target available here for ``workload`` (``platform="auto"``), as a target string:
    the fastest tuned record (``tuned_seconds(target, chip)``), else the chip facts; see :mod:`.auto`."""
    from .auto import choose_target

    return choose_target(workload, tuned_seconds)


def list_devices(remeasure: bool = False) -> list[str]:
    """One line per target kind: its chip facts where it is usable here, or why it is not.

    Peak and bandwidth are measured once per machine and target (about 2 s) and cached
    (:mod:`.chip_facts`); ``remeasure`` measures again.
    """
    from .chip_facts import measured_info

    lines = []
    for kind in kinds():
        try:
            adapter = get_adapter(kind)
            info = measured_info(adapter, remeasure=remeasure)
        except Exception as e:  # a missing driver or package is a fact to report, not a crash
            lines.append(f"{kind:10s} unavailable: {e}")
            continue
        how = info.extra.get("facts", "estimated")
        bandwidth = f", {info.bandwidth_gbs:.0f} GB/s memory" if info.bandwidth_gbs else ""
        runs = "" if adapter.spec.can_run else ", compile-only: launch does nothing, time returns zeros"
        lines.append(
            f"{kind:10s} {info.name} ({info.arch}), {info.cores} cores, {info.vector_bits}-bit vectors, "
            f"L1 {info.l1_bytes // 1024} KiB, L2 {info.l2_bytes // 1024} KiB, "
            f"L3 {info.l3_bytes // 1024} KiB, "
            f"{info.peak_gflops:.0f} GFLOP/s fp32 peak{bandwidth} ({how}){runs}"
        )
    return lines


register_kinds(sys.modules[__name__])  # target parsing (a lower layer) asks this module for the kinds
