"""``autosched tune model.onnx`` checks the tuned model's outputs against onnxruntime (on
this CPU) on every target; only the timing race is left out on non-CPU targets."""

from types import SimpleNamespace

import pytest

from autosched.graph import compiled, tune_model
from tests.onnx_files import matmul_relu

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


class _Progress:
    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):  # attach, note, begin, report, stop
        return lambda *a, **k: None


def _run_cmd(tmp_path, monkeypatch, target, style):
    """cmd_tune_model with tuning stubbed out (no trials): what follows the tuning is real."""
    from autosched import progress

    path = matmul_relu(tmp_path / "mm.onnx")
    graph = compiled.as_graph(path)
    summaries = []

    class Tuner:
        def __init__(self, *a, **k):
            self.graph = graph
            self.tuner = SimpleNamespace(
                target=target, adapter=SimpleNamespace(spec=SimpleNamespace(style=style))
            )

        def load_previous(self):
            return []

        def budget(self):
            return 0

        def run(self):
            return []

    monkeypatch.setattr(tune_model, "ModelTuner", Tuner)
    monkeypatch.setattr(progress, "ModelProgress", _Progress)
    monkeypatch.setattr(progress, "print_model_summary", lambda mt, race: summaries.append(race))
    ns = SimpleNamespace(op_file=str(path), log=str(tmp_path / "mm.jsonl"), target=target, input_shape=None)
    return tune_model.cmd_tune_model(ns, None), summaries


def test_a_wrong_model_on_a_gpu_target_is_caught(tmp_path, monkeypatch):
    real = compiled.compile_model

    def wrong(*a, **k):
        model = real(a[0], "llvm-cpu", *a[2:], **k)  # the model itself: no device needed
        run = model.run
        monkeypatch.setattr(model, "run", lambda inputs: {n: v + 1 for n, v in run(inputs).items()})
        return model

    monkeypatch.setattr(compiled, "compile_model", wrong)
    with pytest.raises(tune_model.ModelMismatchError, match="off onnxruntime's"):
        _run_cmd(tmp_path, monkeypatch, "opencl", "gpu")  # before: no check at all off the CPU


def test_opencl_model_outputs_are_checked_without_a_race(opencl, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        tune_model, "compare_with_onnxruntime", lambda *a, **k: pytest.fail("no timing race off the CPU")
    )
    rc, summaries = _run_cmd(tmp_path, monkeypatch, "opencl", "gpu")
    assert rc == 0 and summaries == [None]
    assert "outputs match onnxruntime's on this CPU" in capsys.readouterr().out
    err = tune_model.check_with_onnxruntime(
        tmp_path / "mm.onnx", graph=compiled.as_graph(tmp_path / "mm.onnx"), log=None, target="opencl"
    )
    assert err is not None and err < 1e-4
