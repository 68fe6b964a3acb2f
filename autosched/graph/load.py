"""Loading a model directory written by ``autosched build model.onnx`` (see ``graph/export.py``).

Nothing is compiled: the manifest's checksum is verified over itself, the kernel library and the
weights index; the kernel library is opened by ``runtime.load`` (its own checksum and CPU checks);
the weights are read and validated; the plan then runs as in :class:`CompiledModel`.

Example: ``model = autosched.load("build/resnet18"); model.run({"input": x})``.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..runtime.load import LoadError
from ..runtime.manifest import ITEM_BYTES, MAX_ARRAY_BYTES, MAX_DIM, _Fields
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
    if not isinstance(manifest, dict):
        raise LoadError(f"{path}: the manifest must be a JSON object, got {type(manifest).__name__}")
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
    validate_plan(plan, str(path))
    library = load(directory / kernels["directory"])
    try:
        functions = [library.functions[t["function"]] for t in plan["tasks"]]
    except KeyError as e:
        raise LoadError(f"{path}: task function {e} is not in {library.directory}") from None
    for n, step in enumerate(plan["steps"]):
        fn = functions[step["task"]]
        if len(step["args"]) != len(fn.args):
            raise LoadError(
                f"{path}: field plan.steps[{n}].args has {len(step['args'])} values, "
                f"its function {fn.name} takes {len(fn.args)}"
            )
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


_KINDS = ("input", "weight", "intermediate", "output")


def validate_plan(plan: dict[str, Any], where: str) -> None:
    """Raise a LoadError naming the field when ``plan`` is not one :class:`CompiledModel` can run.

    The manifest's checksum only proves the files agree with each other, not that an autosched wrote
    them: every field the run reads is checked for type and range, and every value id and offset
    against what it points into.
    """
    field = _Fields(where)
    field.text(plan, "graph", "plan.")
    memory = field.get(plan, "memory", dict, "plan.")
    arena = _count(field, memory, "arena_bytes", "plan.memory.", MAX_ARRAY_BYTES)
    values = field.get(plan, "values", list, "plan.")
    sizes = []
    for i, v in enumerate(values):
        at = f"plan.values[{i}]"
        if not isinstance(v, dict):
            field.fail(at, "an object", v)
        field.text(v, "name", f"{at}.")
        if v.get("kind") not in _KINDS:
            field.fail(f"{at}.kind", f"one of {', '.join(_KINDS)}", v.get("kind"))
        nbytes = _array_bytes(field, v, at)
        sizes.append(nbytes)
        if v["kind"] == "intermediate":
            offset = _count(field, v, "offset", f"{at}.", MAX_ARRAY_BYTES)
            if offset + nbytes > arena:
                field.fail(f"{at}.offset", f"at most arena_bytes {arena} - {nbytes}", offset)

    def value_id(vid: Any, at: str, kinds: tuple[str, ...]) -> int:
        if type(vid) is not int or not 0 <= vid < len(values):
            field.fail(at, f"a value id in [0, {len(values)})", vid)
        if values[vid]["kind"] not in kinds:
            field.fail(at, f"the id of a value of kind {' or '.join(kinds)}", vid)
        return int(vid)

    for role, kinds in (("inputs", ("input",)), ("outputs", _KINDS)):
        for i, item in enumerate(field.get(plan, role, list, "plan.")):
            at = f"plan.{role}[{i}]"
            if not isinstance(item, dict):
                field.fail(at, "an object", item)
            field.text(item, "name", f"{at}.")
            vid = value_id(item.get("value"), f"{at}.value", kinds)
            held = values[vid]
            nbytes = _array_bytes(field, item, at)
            count = nbytes // ITEM_BYTES[item["dtype"]]
            if count != sizes[vid] // ITEM_BYTES[held["dtype"]]:
                field.fail(f"{at}.shape", f"as many elements as value {vid} {held['shape']}", item["shape"])
    for i, vid in enumerate(field.get(plan, "weights", list, "plan.")):
        value_id(vid, f"plan.weights[{i}]", ("weight",))
    tasks = field.get(plan, "tasks", list, "plan.")
    for i, t in enumerate(tasks):
        at = f"plan.tasks[{i}]"
        if not isinstance(t, dict):
            field.fail(at, "an object", t)
        field.text(t, "function", f"{at}.")
        field.optional_text(t, "source", f"{at}.")
        if "weight" in t:
            _count(field, t, "weight", f"{at}.", MAX_DIM)
    for i, step in enumerate(field.get(plan, "steps", list, "plan.")):
        at = f"plan.steps[{i}]"
        if not isinstance(step, dict):
            field.fail(at, "an object", step)
        task = step.get("task")
        if type(task) is not int or not 0 <= task < len(tasks):
            field.fail(f"{at}.task", f"a task index in [0, {len(tasks)})", task)
        args = field.get(step, "args", list, f"{at}.")
        if not args:
            field.fail(f"{at}.args", "a non-empty list", args)
        for j, vid in enumerate(args):  # the last one is the value the step writes
            writes: tuple[str, ...] = ("intermediate", "output")
            value_id(vid, f"{at}.args[{j}]", _KINDS if j < len(args) - 1 else writes)


def _count(field: _Fields, obj: dict[str, Any], key: str, at: str, most: int) -> int:
    n = obj.get(key)
    if type(n) is not int or not 0 <= n <= most:
        field.fail(f"{at}{key}", f"an integer in [0, {most}]", n)
    return int(n)


def _array_bytes(field: _Fields, obj: dict[str, Any], at: str) -> int:
    """The bytes of ``obj``'s ``dtype`` and ``shape``, both checked (as a library manifest's are)."""
    dtype = obj.get("dtype")
    if not isinstance(dtype, str) or dtype not in ITEM_BYTES:
        field.fail(f"{at}.dtype", f"one of {', '.join(ITEM_BYTES)}", dtype)
    shape = field.get(obj, "shape", list, f"{at}.")
    for d, n in enumerate(shape):
        if type(n) is not int or not 0 <= n <= MAX_DIM:
            field.fail(f"{at}.shape[{d}]", f"an integer in [0, {MAX_DIM}]", n)
    nbytes = math.prod(shape) * ITEM_BYTES[dtype]
    if nbytes > MAX_ARRAY_BYTES:
        field.fail(f"{at}.shape", f"an array of at most {MAX_ARRAY_BYTES} bytes", shape)
    return nbytes
