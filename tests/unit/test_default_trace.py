"""One default schedule per target style: the op library, ``compile_model``, ``autosched build`` and
model tuning's first candidate all run :func:`default_trace` of their target."""

import pytest

import autosched
from autosched.hai.registry import get_adapter
from autosched.runtime import export
from autosched.search_space.default import default_schedule, default_trace
from autosched.search_space.gpu_sketch import default_gpu_schedule
from autosched.target import parse_target
from tests.graph.builders import resnet_like
from tests.unit.test_schedule_primitives import matmul


def _has_bind(trace):
    return any(st.primitive == "bind" for st in trace)


@pytest.mark.parametrize("target", ["null", parse_target("null"), get_adapter(parse_target("null"))])
def test_gpu_style_targets_get_the_gpu_default(target):
    C = matmul(16, 16, 16)[-1]
    assert default_trace([C], target) == default_gpu_schedule([C]).trace


def test_cpu_style_targets_get_the_cpu_default():
    C = matmul(16, 16, 16)[-1]
    assert default_trace([C], "llvm-cpu", cores=2) == default_schedule([C], cores=2).trace
    assert not _has_bind(default_trace([C], get_adapter(parse_target("llvm-cpu")), cores=2))


def test_compile_model_builds_the_gpu_default_on_a_gpu_style_target(monkeypatch):
    seen = []
    choose = export.choose_schedules
    monkeypatch.setattr(export, "choose_schedules", lambda *a, **k: seen.extend(choose(*a, **k)) or seen)
    with pytest.warns(UserWarning, match="no tuned record"):
        autosched.compile_model(resnet_like(blocks=1, channels=4, size=4), "null")
    assert seen and all(fn.record is None for fn in seen)
    assert all(fn.trace == default_gpu_schedule(list(fn.instance.outputs)).trace for fn in seen)
    assert all(_has_bind(fn.trace) for fn in seen)


def test_choose_schedules_default_follows_the_target():
    C = matmul(16, 16, 16)
    from autosched.te.workload import WorkloadInstance

    inst = WorkloadInstance("mm", {}, tuple(C))
    for target, gpu in (("null", True), ("llvm-cpu", False)):
        [fn] = export.choose_schedules([inst], None, "fp", target=target, cores=2, allow_default=True)
        assert _has_bind(fn.trace) == gpu


def test_model_tuning_measures_the_gpu_default_first_on_opencl(tmp_path):
    from tests.codegen.test_opencl import _why

    if _why is not None:
        pytest.skip(_why)
    from autosched.graph.tune_model import ModelTuner

    tuner = ModelTuner(resnet_like(blocks=1, channels=4, size=4), "opencl", tmp_path / "m.jsonl")
    for task in tuner.states:
        assert task.strategy.default == default_gpu_schedule(list(task.inst.outputs)).trace
