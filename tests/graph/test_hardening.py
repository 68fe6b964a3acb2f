"""Untrusted names and manifests: no C injection in the model header, LoadError for a crafted plan."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import autosched
from autosched.graph.c_api import render_header
from autosched.graph.export import export_model, manifest_checksum
from autosched.graph.weights import WeightsError, read_weights, write_weights
from autosched.runtime.export import ExportError
from autosched.runtime.load import LoadError

from .builders import random_inputs, resnet_like

EVIL = [
    'x */ _Static_assert(0, "injected"); /*',
    "y */\n#define EVIL 1\n/*",
    "z /* */ int evil_global; /* \u00e9 ??/",
]


def _plan(graph: str, inputs: list[str], outputs: list[str]) -> dict:
    names = inputs + outputs
    values = [{"name": n, "kind": "input", "shape": [2, 3], "dtype": "float32"} for n in names]
    return {
        "graph": graph,
        "values": values,
        "inputs": [{"name": n, "value": i} for i, n in enumerate(inputs)],
        "outputs": [{"name": n, "value": len(inputs) + i} for i, n in enumerate(outputs)],
        "memory": {"arena_bytes": 64},
    }


def test_model_header_names_cannot_inject_c(tmp_path):
    from autosched.runtime.link import c_compiler

    plan = _plan(EVIL[0], EVIL, [EVIL[1] + "*/", EVIL[2]])
    text = render_header("m", plan, 128)
    assert "*/ _Static" not in text and "*/ int" not in text
    (tmp_path / "m_model.h").write_text(text)
    app = tmp_path / "app.c"
    app.write_text(
        '#include "m_model.h"\n#ifdef EVIL\n#error injected\n#endif\n'
        "int evil_global_check[M_INPUT2_DIM1 == 3 ? 1 : -1];\nint main(void) { return M_NUM_INPUTS - 3; }\n"
    )
    cmd = [*c_compiler(), "-fsyntax-only", "-Werror", f"-I{tmp_path}", str(app)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + text


def test_c_api_refuses_names_that_are_no_identifiers():
    plan = _plan("g", ["x"], ["y"])
    with pytest.raises(ExportError, match="model name"):
        render_header("m; int x", plan, 0)
    plan["values"][0]["dtype"] = "float */ int"
    with pytest.raises(ExportError, match="dtype"):
        render_header("m", plan, 0)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks
        export_model(resnet_like(blocks=1, channels=4, size=4), out)
    return out


def _delete(obj, key):
    del obj[key]


# (field, mutation of the plan, what the LoadError names); the checksum is recomputed after each, as a
# crafted manifest's would be: only the field checks stand between it and the kernels.
MUTATIONS = [
    ("plan.tasks", lambda p: p.update(tasks="x"), r"plan\.tasks must be a JSON list"),
    ("plan.tasks[0]", lambda p: p["tasks"].__setitem__(0, 5), r"plan\.tasks\[0\] must be an object"),
    ("no function", lambda p: _delete(p["tasks"][0], "function"), r"no field plan\.tasks\[0\]\.function"),
    ("function", lambda p: p["tasks"][0].update(function=3), r"plan\.tasks\[0\]\.function"),
    ("step task", lambda p: p["steps"][0].update(task=99), r"plan\.steps\[0\]\.task"),
    ("step arg", lambda p: p["steps"][0]["args"].__setitem__(0, -1), r"plan\.steps\[0\]\.args\[0\]"),
    ("writes input", lambda p: p["steps"][0]["args"].__setitem__(-1, 0), r"kind intermediate or output"),
    ("no args", lambda p: p["steps"][0].update(args=[]), r"plan\.steps\[0\]\.args must be a non-empty"),
    ("arg count", lambda p: p["steps"][0]["args"].pop(0), r"plan\.steps\[0\]\.args has \d+ values"),
    ("offset", lambda p: p["values"][-2].update(offset=2**40), r"plan\.values\[\d+\]\.offset"),
    ("offset type", lambda p: p["values"][-2].update(offset="0"), r"plan\.values\[\d+\]\.offset"),
    ("huge shape", lambda p: p["values"][0].update(shape=[2**31 - 1] * 3), r"plan\.values\[0\]\.shape"),
    ("dim", lambda p: p["values"][0].update(shape=[True, 4]), r"plan\.values\[0\]\.shape\[0\]"),
    ("dtype", lambda p: p["values"][0].update(dtype="object"), r"plan\.values\[0\]\.dtype"),
    ("kind", lambda p: p["values"][0].update(kind="evil"), r"plan\.values\[0\]\.kind"),
    ("input id", lambda p: p["inputs"][0].update(value=10**6), r"plan\.inputs\[0\]\.value"),
    ("output shape", lambda p: p["outputs"][0].update(shape=[7]), r"plan\.outputs\[0\]\.shape"),
    ("weight id", lambda p: p["weights"].__setitem__(0, 0), r"plan\.weights\[0\]"),
    ("arena", lambda p: p["memory"].update(arena_bytes=-1), r"plan\.memory\.arena_bytes"),
    ("values", lambda p: p.update(values={}), r"plan\.values must be a JSON list"),
    ("graph", lambda p: p.update(graph=None), r"plan\.graph"),
]


@pytest.mark.parametrize("mutate, names", [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_crafted_plans_are_a_load_error_naming_the_field(model_dir, tmp_path, mutate, names):
    d = shutil.copytree(model_dir, tmp_path / "m")
    manifest = json.loads((d / "manifest.json").read_text())
    mutate(manifest["plan"])
    manifest["checksum"] = manifest_checksum(manifest, d)
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LoadError, match=names):
        autosched.load(d)


def test_the_unmutated_model_loads_and_runs(model_dir):
    model = autosched.load(model_dir)
    graph = resnet_like(blocks=1, channels=4, size=4)
    out = model.run(random_inputs(graph))
    assert all(np.isfinite(v).all() for v in out.values())


def test_a_manifest_that_is_no_object_is_a_load_error(model_dir, tmp_path):
    d = shutil.copytree(model_dir, tmp_path / "m")
    (d / "manifest.json").write_text("[1, 2]")
    with pytest.raises(LoadError, match="must be a JSON object"):
        autosched.load(d)


@pytest.mark.parametrize("shape", [[2**32, 2**32], [2**31 - 1] * 3, [True, 6]])
def test_weight_sizes_do_not_wrap(tmp_path, shape):
    write_weights(tmp_path, [("w", np.ones((2, 3), "float32"))])
    path = tmp_path / "weights.json"
    index = json.loads(path.read_text())
    index["arrays"][0]["shape"] = shape
    index["arrays"][0]["nbytes"] = 0 if shape[0] == 2**32 else 24  # 2**64 elements wrap to 0 in int64
    path.write_text(json.dumps(index))
    with pytest.raises(WeightsError, match=r"array 0 \('w'\)"):
        read_weights(tmp_path)


def test_model_inputs_on_another_dlpack_device_are_refused(model_dir):
    from autosched.graph.compiled import ModelInputError

    class OnGPU:  # the runtime's as_numpy checks the device before numpy reads the memory
        def __dlpack__(self, **kw):
            raise AssertionError("read before the device check")

        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    with pytest.raises(ModelInputError, match=r"input 'input' lives on DLPack device \(2, 0\)"):
        autosched.load(model_dir).run({"input": OnGPU()})
