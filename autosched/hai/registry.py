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
}


def get_adapter(target: str | Target) -> Any:
    """The adapter for ``target``.

    Example::

        adapter = get_adapter("llvm-cpu -mcpu=haswell")
    """
    t = parse_target(target)
    spec = ADAPTERS.get(t.kind)
    if spec is None:
        known = ", ".join(k for k in KINDS if k in ADAPTERS)
        raise TargetError(f"no adapter for target kind {t.kind!r} ({t}); available: {known}")
    module_name, cls_name = spec.split(":")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except ImportError as e:
        raise TargetError(f"target {t}: its adapter cannot be loaded here: {e}") from e
    return cls(t)


def detect() -> str:
    """The best target available on this machine, as a target string (``platform="auto"``)."""
    return "llvm-cpu"
