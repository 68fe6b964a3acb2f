"""A logged record shown by the report, or compiled by compile_model, is lowered and
rendered first in the compile worker with its limits; the report lowers for the record's target."""

import time
from pathlib import Path

import numpy as np
import pytest

import autosched
from tests.onnx_files import matmul_weight, save_model

pytest.importorskip("llvmlite")

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"
HOSTILE = {"M": 96, "N": 128, "K": 112}  # fully unrolled: 1.4 M statements, minutes of codegen


def _matmul(**shape):
    from autosched.te.workload import load_op_file

    [wl] = load_op_file(MATMUL)
    return wl.instantiate(**shape)


def _record(inst, target, unroll=None):
    from autosched.hai.registry import get_adapter
    from autosched.records.record import make_record
    from autosched.search_space.default import default_schedule
    from autosched.search_space.gpu_sketch import default_gpu_schedule
    from autosched.target import parse_target

    t = parse_target(target)
    adapter = get_adapter(t)
    C = inst.outputs[0]
    if unroll is not None:  # the hostile trace of tests/unit/test_runtime_hardening.py
        s = autosched.create_schedule(C)
        s[C].pragma(s[C].op.axis[0], "auto_unroll_max_step", unroll)
    elif adapter.spec.style == "gpu":
        s = default_gpu_schedule([C])
    else:
        s = default_schedule([C], cores=2)
    return make_record(inst, t, adapter.info(), s.trace, [1e-6])


def test_the_report_stops_a_hostile_record_that_passes_validation_at_the_compile_limit(monkeypatch):
    """Its render is 12 MB of LLVM IR, seconds of lowering: before, done in the report's process with no
    limit (and the LLVM compile of such a trace takes minutes); now it ends at the worker's time limit."""
    from autosched.records import validate
    from autosched.report.code import code_view

    monkeypatch.setenv("AUTOSCHED_COMPILE_TIMEOUT", "0.3")
    monkeypatch.setattr(validate, "validate_record", lambda *a, **k: None)  # as if it were valid
    inst = _matmul(**HOSTILE)
    t0 = time.monotonic()
    view = code_view(_record(inst, "llvm-cpu", unroll=10**12), inst)
    assert time.monotonic() - t0 < 30
    assert "took over 0.3 s" in view.note and not view.loop_ir and not view.generated
    assert "auto_unroll_max_step" in view.schedule


def test_the_report_shows_a_normal_record_for_its_target():
    from autosched.report.code import code_view

    inst = _matmul(M=16, N=16, K=16)
    view = code_view(_record(inst, "llvm-cpu"), inst)
    assert view.loop_ir and "define" in view.generated and view.generated_label == "LLVM IR"


def test_the_report_lowers_an_opencl_record_for_opencl(opencl):
    from autosched.report.code import code_view

    inst = _matmul(M=16, N=16, K=16)
    view = code_view(_record(inst, "opencl"), inst)
    assert "__kernel" in view.generated and view.loop_ir, view.note


def _tiny_matmul_onnx(path):
    pytest.importorskip("onnx")
    weight = matmul_weight()
    save_model(path, [("MatMul", ["x", "w"], ["y"])], {"x": [4, 12]}, {"y": [4, 8]}, {"w": weight}, "mm")
    return path, weight


def _as_logged(monkeypatch):
    """compile_model's schedules, each as if a log held it (the record passed validation)."""
    from autosched.runtime import export

    real = export.choose_schedules

    def choose(instances, *a, **k):
        out = real(instances, *a, **k)  # the default schedules, each given a record
        return [
            export.ExportedFunction(f.name, f.instance, f.trace, _record(f.instance, "opencl")) for f in out
        ]

    monkeypatch.setattr(export, "choose_schedules", choose)


def test_compile_model_renders_logged_records_of_a_non_exporting_target_in_the_worker(
    opencl, tmp_path, monkeypatch
):
    """On opencl the kernel lives in this process; a logged record is first lowered and rendered in
    the compile worker, so its limits apply (here a limit no job can meet), then built here."""
    from autosched.errors import CompileError
    from autosched.graph.compiled import compile_model

    path, weight = _tiny_matmul_onnx(tmp_path / "mm.onnx")
    _as_logged(monkeypatch)
    model = compile_model(path, "opencl")  # within the limits: built and right
    assert model.sources == ["log"]
    x = np.random.default_rng(1).standard_normal((4, 12)).astype("float32")
    np.testing.assert_allclose(model.run({"x": x})["y"], x @ weight, rtol=1e-4, atol=1e-4)
    # Which path it took, without racing a clock: the logged record goes through the worker's render.
    from autosched.measure import isolated

    seen = []
    real = isolated.compile_isolated

    def spy(*args, **kwargs):
        seen.append(kwargs.get("build_fn"))
        return real(*args, **kwargs)

    monkeypatch.setattr(isolated, "compile_isolated", spy)
    compile_model(path, "opencl")
    assert seen == [isolated.render_source_job]  # before: built in this process, no limit applied

    def refuse(*args, **kwargs):
        raise CompileError("the compile worker refused it")

    monkeypatch.setattr(isolated, "compile_isolated", refuse)
    with pytest.raises(CompileError, match="refused"):  # the worker's verdict stops the build
        compile_model(path, "opencl")
