"""Loading a model directory written by ``autosched build model.onnx`` (see ``graph/export.py``).

Nothing is compiled: the manifest's checksum is verified over itself, the kernel library and the
weights index; the kernel library is opened by ``runtime.load`` (its own checksum and CPU checks);
the weights are read and validated; the plan then runs as in :class:`CompiledModel`.

Example: ``model = autosched.load("build/resnet18"); model.run({"input": x})``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..runtime.load import LoadError
from .compiled import CompiledModel
from .export import MANIFEST, MODEL_FORMAT, manifest_checksum
from .weights import read_weights

_PLAIN_NAME = re.compile(r"^[\w.+-]+$")  # a file name inside the directory: no separators


def is_model_directory(directory: str | os.PathLike[str]) -> bool:
    """True when ``directory``'s manifest describes a model (``"kind": "model"``), not a library."""
    try:
        manifest = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("kind") == "model"


def load_model(directory: str | os.PathLike[str]) -> CompiledModel:
    """The model in ``directory``, checked: a LoadError says what is wrong and what to do."""
    from ..runtime.load import load

    directory = Path(directory)
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise LoadError(f"{path}: not a readable model manifest: {e}") from None
    if manifest.get("format") != MODEL_FORMAT:
        raise LoadError(f"{path}: model format {manifest.get('format')!r} is not {MODEL_FORMAT}; rebuild it")
    kernels = manifest.get("kernels")
    plan = manifest.get("plan")
    if not isinstance(kernels, dict) or not isinstance(plan, dict) or "checksum" not in manifest:
        raise LoadError(f"{path}: a model manifest needs 'kernels', 'plan' and 'checksum'")
    names = {f"kernels.{k}": kernels.get(k) for k in ("directory", "library")}
    if "c_api" in manifest:
        names["c_api.library"] = (
            manifest["c_api"].get("library") if isinstance(manifest["c_api"], dict) else None
        )
    for field, value in names.items():
        if not _PLAIN_NAME.match(str(value or "")) or str(value) in (".", ".."):
            raise LoadError(f"{path}: {field} {value!r} must be a name inside {directory}")
    try:
        digest = manifest_checksum(manifest, directory)
    except OSError as e:
        raise LoadError(f"{directory}: incomplete model directory ({e}); rebuild it") from None
    if digest != manifest["checksum"]:
        raise LoadError(
            f"{path}: checksum mismatch: the manifest, the kernel library or the weights index changed "
            "after the build; rebuild the model"
        )
    library = load(directory / kernels["directory"])
    try:
        functions = [library.functions[t["function"]] for t in plan["tasks"]]
    except KeyError as e:
        raise LoadError(f"{path}: task function {e} is not in {library.directory}") from None
    weights = read_weights(directory)
    _check_weights(plan, weights, path)
    sources = [t.get("source", "default") for t in plan["tasks"]]
    return CompiledModel(plan, weights, functions, sources, manifest=manifest, library=library)


def _check_weights(plan: dict[str, Any], weights: list[Any], path: Path) -> None:
    ids = plan["weights"]
    if len(ids) != len(weights):
        raise LoadError(f"{path}: the plan has {len(ids)} weights, the weights file {len(weights)}")
    for vid, w in zip(ids, weights, strict=True):
        v = plan["values"][vid]
        if list(w.shape) != list(v["shape"]) or w.dtype.name != v["dtype"]:
            raise LoadError(
                f"{path}: weight {v['name']!r} is {w.dtype}{list(w.shape)} in the weights file, "
                f"the plan expects {v['dtype']}{v['shape']}"
            )
