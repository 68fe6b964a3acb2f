"""Model directories: build, load, run; the weights file round trip; corrupted files refused."""

import json
import shutil
import warnings

import numpy as np
import pytest

import autosched
from autosched.graph.export import export_model
from autosched.graph.weights import WeightsError, read_weights, write_weights
from autosched.runtime.load import LoadError

from .builders import random_inputs, reference_outputs, resnet_like


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    graph = resnet_like(blocks=2)
    out = tmp_path_factory.mktemp("model")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = export_model(graph, out)
    assert len(caught) == 1 and "3 of 3 tasks" in str(caught[0].message)
    return graph, res


def _copy(built, tmp_path):
    return shutil.copytree(built[1].directory, tmp_path / "copy")


def test_loaded_model_matches_the_reference(built):
    graph, res = built
    model = autosched.load(res.directory)
    inputs = random_inputs(graph, 5)
    expected = reference_outputs(graph, inputs)
    np.testing.assert_allclose(model.run(inputs)["probs"], expected["probs"], rtol=2e-4, atol=2e-5)
    manifest = model.manifest
    assert manifest["kind"] == "model" and len(manifest["plan"]["tasks"]) == res.tasks == 3
    assert [t["weight"] for t in manifest["plan"]["tasks"]] == [3, 2, 1]
    assert all(t["source"] == "default" and t["record"] is None for t in manifest["plan"]["tasks"])
    assert manifest["plan"]["memory"]["arena_bytes"] < manifest["plan"]["memory"]["total_bytes"]


def test_weights_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    arrays = [
        ("w", rng.standard_normal((3, 5)).astype("float32")),
        ("idx", rng.integers(-9, 9, (7,)).astype("int64")),
        ("d", rng.standard_normal((2, 2, 2))),
    ]
    write_weights(tmp_path, arrays)
    back = read_weights(tmp_path)
    for (_, a), b in zip(arrays, back, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    index = json.loads((tmp_path / "weights.json").read_text())
    assert all(e["offset"] % 64 == 0 for e in index["arrays"])


def test_truncated_weights_are_refused(built, tmp_path):
    d = _copy(built, tmp_path)
    data = (d / "weights.bin").read_bytes()
    (d / "weights.bin").write_bytes(data[:-8])
    with pytest.raises(WeightsError, match=r"weights\.bin: .* bytes, the index says .*truncated"):
        autosched.load(d)


def test_changed_weights_are_refused(built, tmp_path):
    d = _copy(built, tmp_path)
    data = bytearray((d / "weights.bin").read_bytes())
    data[100] ^= 0xFF
    (d / "weights.bin").write_bytes(bytes(data))
    with pytest.raises(WeightsError, match="checksum mismatch"):
        autosched.load(d)


def test_bad_weight_entries_are_named(tmp_path):
    write_weights(tmp_path, [("w", np.ones((2, 3), "float32"))])
    path = tmp_path / "weights.json"
    index = json.loads(path.read_text())
    index["arrays"][0]["shape"] = [3, 3]
    path.write_text(json.dumps(index))
    with pytest.raises(
        WeightsError, match=r"array 0 \('w'\): float32\[3, 3\] takes 36 bytes, the index says 24"
    ):
        read_weights(tmp_path)
    index["arrays"][0].update(shape=[2, 3], dtype="object")
    path.write_text(json.dumps(index))
    with pytest.raises(WeightsError, match="dtype 'object'"):
        read_weights(tmp_path)
    path.write_text("{not json")
    with pytest.raises(WeightsError, match="not a readable weights index"):
        read_weights(tmp_path)


def test_edited_manifest_or_library_is_refused(built, tmp_path):
    d = _copy(built, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["plan"]["steps"] = manifest["plan"]["steps"][:-1]
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LoadError, match="checksum mismatch"):
        autosched.load(d)
    shutil.rmtree(d)
    d = _copy(built, tmp_path)
    so = d / "kernels" / built[1].library.name
    so.write_bytes(so.read_bytes() + b"\0")
    with pytest.raises(LoadError, match="checksum mismatch"):
        autosched.load(d)


def test_paths_outside_the_directory_are_refused(built, tmp_path):
    d = _copy(built, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["kernels"]["directory"] = "../elsewhere"
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LoadError, match=r"kernels\.directory '\.\./elsewhere'"):
        autosched.load(d)


def test_unknown_model_format_is_refused(built, tmp_path):
    d = _copy(built, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["format"] = 99
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LoadError, match="model format 99"):
        autosched.load(d)


APP = r"""
#include <stdio.h>
#include <stdlib.h>
#include "resnet_like_model.h"

static void* read_file(const char* path, size_t n) {
    void* p = aligned_alloc(64, (n + 63) / 64 * 64);
    FILE* f = fopen(path, "rb");
    if (!f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
    fclose(f);
    return p;
}

int main(int argc, char** argv) {  /* weights.bin input.bin output.bin */
    size_t in_bytes = 4 * RESNET_LIKE_INPUT0_DIM0 * RESNET_LIKE_INPUT0_DIM1 * RESNET_LIKE_INPUT0_DIM2
                      * RESNET_LIKE_INPUT0_DIM3;
    size_t out_bytes = 4 * RESNET_LIKE_OUTPUT0_DIM0 * RESNET_LIKE_OUTPUT0_DIM1;
    const void* inputs[1] = {read_file(argv[2], in_bytes)};
    void* outputs[1] = {aligned_alloc(64, (out_bytes + 63) / 64 * 64)};
    void* weights = read_file(argv[1], RESNET_LIKE_WEIGHTS_BYTES);
    void* workspace = aligned_alloc(64, RESNET_LIKE_WORKSPACE_BYTES + 64);
    if (model_run(inputs, outputs, weights, workspace) != 0) return 1;
    FILE* f = fopen(argv[3], "wb");
    fwrite(outputs[0], 1, out_bytes, f);
    fclose(f);
    return 0;
}
"""


def test_c_entry_point_matches_python(built, tmp_path):
    import subprocess

    from autosched.runtime.link import c_compiler

    graph, res = built
    d = res.directory
    app = tmp_path / "app.c"
    app.write_text(APP)
    exe = tmp_path / "app"
    cmd = [*c_compiler(), "-O1", "-o", str(exe), str(app), f"-I{d}", f"-L{d}", "-lresnet_like_model"]
    subprocess.run([*cmd, f"-Wl,-rpath,{d}"], check=True, capture_output=True, timeout=60)
    x = random_inputs(graph, 9)["input"]
    x.tofile(tmp_path / "in.bin")
    subprocess.run([str(exe), str(d / "weights.bin"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(8, 64)
    expected = reference_outputs(graph, {"input": x})["probs"]
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)
    assert autosched.load(d).manifest["c_api"]["function"] == "model_run"


def test_input_shape_arguments():
    from autosched.errors import AutoschedError
    from autosched.graph.export import parse_input_shapes

    assert parse_input_shapes(["input=1x3x64x64", "ids=1X16"]) == {"input": [1, 3, 64, 64], "ids": [1, 16]}
    assert parse_input_shapes(None) == {}
    for bad in ("input", "input=", "=1x3", "input=1x0", "input=1xa"):
        with pytest.raises(AutoschedError, match=f"expected NAME=1x3x224x224, got '{bad}'"):
            parse_input_shapes([bad])
