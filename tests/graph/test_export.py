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
