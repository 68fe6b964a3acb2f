"""The benchmarks' model exporter (benchmarks/models/export.py: torchvision and transformers models to
ONNX), loaded as a module for the graph tests, and the check that what it needs is installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPORT = Path(__file__).resolve().parents[2] / "benchmarks" / "models" / "export.py"


def missing(*modules: str) -> str | None:
    """The first of ``modules`` that is not installed, or None."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package missing
            found = False
        if not found:
            return module
    return None


def load_exporter() -> ModuleType:
    """benchmarks/models/export.py as the module ``model_export`` (registered: its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location("model_export", EXPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_export"] = module
    spec.loader.exec_module(module)
    return module
