"""Building a model directory: kernels library, graph manifest and weights, for ``autosched.load``.

Layout of ``DIR``::

    manifest.json       kind "model": the execution plan (order, buffers, memory), the tasks and the
                        records they came from, and a sha256 over itself, the libraries and the index
    kernels/            one shared library with every task's kernel (``runtime.export``), its header
                        and its own manifest (checked again when loaded)
    weights.json/.bin   the weights: raw little-endian arrays and their index (``graph.weights``)
    lib<name>_model.so  ``model_run``, the C entry point, and its header ``<name>_model.h`` (``graph.c_api``)

Example::

    res = export_model("resnet18.onnx", "build/resnet18", log="tuning_logs/resnet18.jsonl")
    model = autosched.load("build/resnet18"); model.run({"input": x})
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..version import __version__
from .c_api import MODEL_RUN, build_c_api
from .compiled import as_graph, warn_untuned
from .weights import INDEX, write_weights

MANIFEST = "manifest.json"
MODEL_FORMAT = 1
KERNELS_DIR = "kernels"


@dataclass(frozen=True)
class ModelExportResult:
    directory: Path
    manifest: Path
    library: Path
    header: Path
    tasks: int
    untuned: int
    memory: dict[str, int]


def manifest_checksum(manifest: dict[str, Any], directory: Path) -> str:
    """sha256 over the manifest (without its ``checksum`` field), the kernel library and the weights index."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    h = hashlib.sha256(json.dumps(body, sort_keys=True).encode())
    h.update((directory / KERNELS_DIR / manifest["kernels"]["library"]).read_bytes())
    h.update((directory / INDEX).read_bytes())
    if "c_api" in manifest:
        h.update((directory / manifest["c_api"]["library"]).read_bytes())
    return h.hexdigest()


def export_model(
    model: Any,
    out_dir: str | Path,
    *,
    log: str | Path | None = None,
    target: str = "llvm-cpu",
    name: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> ModelExportResult:
    """Build ``model`` (a Graph, an .onnx path or a ModelProto) into ``out_dir``; untuned tasks warn once."""
    from ..runtime.export import c_identifier, export_library
    from .plan import build_plan, used_weights
    from .tasks import extract_tasks

    if log is not None and not Path(log).is_file():
        from ..runtime.export import ExportError

        raise ExportError(f"tuning log {log} not found (tune first, or build without --log)")
    graph = as_graph(model, input_shapes)
    lib_name = c_identifier(name or graph.name or "model")
    tg = extract_tasks(graph)
    plan = build_plan(tg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a half-rebuilt directory must not look complete
    res = export_library(
        [t.instance for t in tg.tasks],
        out / KERNELS_DIR,
        log=log,
        target=target,
        name=lib_name,
        allow_default=True,
    )
    untuned = [fn.name for fn in res.functions if fn.record is None]
    warn_untuned(untuned, len(res.functions), log)
    weight_ops = used_weights(graph)
    index = json.loads(write_weights(out, [(op.name, graph.weights[op]) for op in weight_ops]).read_text())
    symbols = [getattr(fn, "symbol", fn.name) for fn in res.functions]
    c_so, c_header = build_c_api(out, lib_name, plan, symbols, res.library, index)
    tasks = []
    for fn, task in zip(res.functions, plan["tasks"], strict=True):
        rec = fn.record
        tasks.append(
            {
                **task,
                "function": fn.name,
                "source": fn.source,
                "record": None
                if rec is None
                else {"costs_s": list(rec.costs), "timestamp": rec.timestamp, "log": str(log)},
            }
        )
    manifest: dict[str, Any] = {
        "format": MODEL_FORMAT,
        "kind": "model",
        "autosched": __version__,
        "name": lib_name,
        "target": str(target),
        "kernels": {"directory": KERNELS_DIR, "library": res.library.name, "header": res.header.name},
        "weights": INDEX,
        "c_api": {"library": c_so.name, "header": c_header.name, "function": MODEL_RUN},
        "plan": {**plan, "tasks": tasks},
    }
    manifest["checksum"] = manifest_checksum(manifest, out)
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return ModelExportResult(out, path, res.library, c_header, len(tasks), len(untuned), plan["memory"])


def parse_input_shapes(items: Sequence[str] | None) -> dict[str, list[int]]:
    """``["input=1x3x224x224"]`` -> ``{"input": [1, 3, 224, 224]}`` (for ``--input-shape``)."""
    from ..errors import AutoschedError

    shapes: dict[str, list[int]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            shape = [int(d) for d in dims.lower().split("x")]
        except ValueError:
            shape = []
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise AutoschedError(f"--input-shape: expected NAME=1x3x224x224, got {item!r}")
        shapes[name] = shape
    return shapes


def cmd_build_model(ns: Any) -> int:
    """``autosched build model.onnx --log L -o DIR``: the model directory, and what went into it."""
    res = export_model(
        ns.op_file,
        ns.output,
        log=ns.log,
        target=ns.target,
        name=ns.name or Path(ns.op_file).stem,
        input_shapes=parse_input_shapes(getattr(ns, "input_shape", None)),
    )
    mib = {k: v / 2**20 for k, v in res.memory.items()}
    print(
        f"built model {res.directory}: {res.tasks} tasks ({res.untuned} on the default schedule), "
        f"intermediates {mib['arena_bytes']:.2f} MiB (peak live {mib['peak_live_bytes']:.2f}, "
        f"without reuse {mib['total_bytes']:.2f})"
    )
    print(f"      {res.library}\n      {res.header} (model_run)\n      {res.manifest}")
    return 0
