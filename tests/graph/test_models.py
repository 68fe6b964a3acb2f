"""The model set, exported from torch at small sizes, imported, compiled and compared with onnxruntime.

Skipped with a reason when torch, torchvision, transformers, onnxruntime or the ONNX frontend is not
installed. Full sizes are marked slow.
"""

import os
import sys
import warnings

import numpy as np
import pytest

from .model_exporter import EXPORT, load_exporter, missing

SMALL = ["resnet18", "resnet50", "mobilenet_v2", "bert", "gpt2"]
RTOL = 1e-4  # of the output's largest magnitude: float32 sums in another order

ABSENT = missing("torch", "torchvision", "transformers", "onnx", "onnxruntime", "autosched.frontend.onnx")
pytestmark = pytest.mark.skipif(ABSENT is not None, reason=f"{ABSENT} is not installed")


@pytest.fixture(scope="module")
def exporter():
    return load_exporter()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


def _check_against_onnxruntime(exporter, path, name, small, run):
    import onnxruntime as ort

    inputs = exporter.example_inputs(name, small=small, seed=7)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs), strict=True))
    got = run(inputs)
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        assert got[key].shape == want.shape and got[key].dtype == want.dtype
        err = np.abs(got[key] - want).max() / np.abs(want).max()
        assert err < RTOL, f"{name}: output {key} max relative error {err:.2e}"


def _compile(path):
    import autosched

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned-tasks warning: every task is untuned here
        return autosched.compile_model(path)


@pytest.mark.parametrize("name", SMALL)
def test_small_model_matches_onnxruntime(exporter, model_dir, name):
    path = exporter.export_model(name, model_dir, small=True)
    model = _compile(path)
    _check_against_onnxruntime(exporter, path, name, True, model.run)


def test_bert_layers_are_deduplicated(exporter, model_dir):
    from autosched.frontend.onnx import from_onnx
    from autosched.graph.tasks import extract_tasks

    tg = extract_tasks(from_onnx(exporter.export_model("bert", model_dir, small=True)))
    assert len(tg.tasks) < len(tg.calls)
    assert max(t.weight for t in tg.tasks) >= 2 * 3  # q, k, v projections of both layers


def test_cli_build_then_load(exporter, model_dir, tmp_path, capsys):
    import autosched
    from autosched.cli import main

    path = exporter.export_model("resnet18", model_dir, small=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["build", str(path), "-o", str(tmp_path / "rn18")]) == 0
    assert "built model" in capsys.readouterr().out
    model = autosched.load(tmp_path / "rn18")
    _check_against_onnxruntime(exporter, path, "resnet18", True, model.run)


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_full_size_model_matches_onnxruntime(exporter, model_dir, name):
    path = exporter.export_model(name, model_dir, small=False)
    model = _compile(path)
    _check_against_onnxruntime(exporter, path, name, False, model.run)


def _run_models_benchmark(*args: str, timeout: int, env: dict | None = None) -> str:
    """benchmarks/models.py's standard output, after it exits 0."""
    import subprocess

    script = EXPORT.parents[1] / "models.py"
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_models_benchmark_prints_its_table():
    out = _run_models_benchmark("--untuned", "--repeat", "2", "resnet18", "gpt2", timeout=600)
    rows = [line for line in out.splitlines() if line.startswith(("resnet18", "gpt2"))]
    assert len(rows) == 2, out
    assert all(float(row.split()[-1]) < RTOL for row in rows)  # max relative error vs onnxruntime


@pytest.mark.slow
def test_models_benchmark_races_tvm_metaschedule():
    """``--tvm``: MetaSchedule tunes the ONNX file through Relax, and its checked model joins the race."""
    pytest.importorskip("tvm")
    pytest.importorskip("tvm.relax")
    out = _run_models_benchmark(
        "--trials=8", "--small", "--models=resnet18", "--tvm", "--repeat=2",
        timeout=900, env={**os.environ, "TVM_NUM_THREADS": "2"},
    )  # fmt: skip
    assert "tvm tuning" in out, out
    rows = [line for line in out.splitlines() if line.startswith("resnet18")]
    assert len(rows) == 1 and "TVM" not in out.split(rows[0])[1], out  # no failure note
    tvm_ms = float(rows[0].split()[11])  # resnet18 (small) trials tuned ours ort torch ratio wall 90% err tvm
    assert tvm_ms > 0, rows[0]
