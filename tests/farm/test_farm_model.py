"""A model tuned on a farm (issue 15): as on one machine, for several targets at once, resumed, and from
the command line with its end-of-run check where the kernels ran."""

import dataclasses
import io

import pytest
from rich.console import Console

from autosched.farm_cli import tune_model_on_farm
from autosched.graph.tune_model import ModelTuner
from autosched.measure.fake import FakeMeasurer
from autosched.measure.farm_worker import FakeBackend
from autosched.records.log import trace_key
from autosched.search_space.default import default_schedule
from autosched.tune import TuneOptions
from tests.onnx_files import matmul_relu

from ..graph.builders import resnet_like
from .common import cost, records

TARGETS = ["llvm-cpu", "llvm-cpu -mcpu=haswell"]


def _graph():
    return resnet_like(blocks=1, channels=4, size=4)  # 3 tasks: conv, residual conv, softmax


def _outcomes(log):
    return [(r.workload_key, trace_key(r.trace), r.costs, r.error, r.fingerprint) for r in records(log)]


def test_a_farm_tunes_a_model_as_one_machine_does_with_the_same_seed(farm2, tmp_path):
    options = TuneOptions(trials=24, batch_size=4, strategy="random", baseline=False, seed=2)
    local = ModelTuner(_graph(), "llvm-cpu", tmp_path / "local.jsonl", options,
                       measurer=FakeMeasurer(cost, errors={"timeout": 0.1}, seed=2))  # fmt: skip
    local.load_previous()
    local.run()
    backend = FakeBackend(cost, errors={"timeout": 0.1}, seed=2)
    (farm,) = tune_model_on_farm(farm2, _graph(), ["llvm-cpu"], tmp_path / "farm.jsonl", options,
                                 backend=backend).values()  # fmt: skip
    assert _outcomes(tmp_path / "farm.jsonl") == _outcomes(tmp_path / "local.jsonl")
    assert [t.best_cost for t in farm.states] == [t.best_cost for t in local.states]
    assert sum(t.trials for t in farm.states) == 24 and farm.latency() == local.latency()


def test_a_model_is_tuned_for_two_chips_at_once_per_target_records_then_resumed(farm2, tmp_path):
    log = tmp_path / "model.jsonl"
    options = TuneOptions(trials=24, batch_size=4, strategy="random", baseline=False)
    done = tune_model_on_farm(farm2, _graph(), TARGETS, log, options, backend=FakeBackend(cost))
    assert sorted(done) == sorted(TARGETS)
    fingerprints = {t: mt.tuner.fingerprint for t, mt in done.items()}
    assert len(set(fingerprints.values())) == 2  # two chips, a model each
    for target, mt in done.items():
        mine = [r for r in records(log) if r.target == target]
        assert len(mine) == 24 == sum(t.trials for t in mt.states)
        assert {r.fingerprint for r in mine} == {fingerprints[target]}  # keyed by the workers' chip
        assert len({(r.workload_key, trace_key(r.trace)) for r in mine}) == 24
        first = {}
        for rec in mine:
            first.setdefault(rec.workload_key, trace_key(rec.trace))
        for task in mt.states:  # each task's first record is the default schedule, as on one machine
            default = default_schedule(list(task.inst.outputs), cores=mt.tuner.chip.cores).trace
            assert first[task.inst.key] == trace_key(default)
    _assert_live_tables_name_each_target(list(done.values()))

    resumed = dataclasses.replace(options, trials=32, resume=True)
    again = tune_model_on_farm(farm2, _graph(), TARGETS, log, resumed, backend=FakeBackend(cost))
    for target, mt in again.items():
        assert mt.reuse.records == 24 and sum(t.trials for t in mt.states) == 8
        mine = [(r.workload_key, trace_key(r.trace)) for r in records(log) if r.target == target]
        assert len(mine) == 32 == len(set(mine))  # nothing measured twice


def _assert_live_tables_name_each_target(mts):
    from autosched.progress import ModelProgress

    progress = ModelProgress(Console(file=io.StringIO(), force_terminal=True, width=200))
    for mt in mts:
        progress.attach(mt)
    out = Console(file=io.StringIO(), width=200)
    out.print(progress._tables())  # what a terminal redraws above the bars
    text = out.file.getvalue()
    assert "llvm-cpu -mcpu=haswell" in text and text.count("llvm-cpu") >= 2  # a table titled by each target
    for task in mts[0].states:
        assert text.count(task.inst.name) >= 2


@pytest.mark.slow
def test_the_chips_tuning_one_model_learn_from_each_others_batches(farm2, tmp_path):
    options = TuneOptions(trials=24, batch_size=4, baseline=False)  # evolutionary: a cost model each
    done = tune_model_on_farm(farm2, _graph(), TARGETS, tmp_path / "t.jsonl", options,
                              backend=FakeBackend(cost, delay_s=0.01))  # fmt: skip
    (a, b) = done.values()
    assert a.tuner.model is not b.tuner.model
    for mt in done.values():
        assert sum(t.foreign for t in mt.states) > 0  # the other chip's batches taught its search


def test_with_several_targets_every_bar_and_note_names_its_target():
    from types import SimpleNamespace

    from autosched.progress import ModelProgress, TuneProgress

    def task(name, target):
        return SimpleNamespace(inst=SimpleNamespace(name=name), measure_task=SimpleNamespace(target=target),
                               budget=8, trials=0, previous=4, best_cost=float("inf"), errors={})  # fmt: skip

    out = io.StringIO()
    progress = TuneProgress(8, Console(file=out, width=200))
    chip, options = SimpleNamespace(name="cpu", cores=2, vector_bits=256), SimpleNamespace(strategy="random")
    for target in TARGETS:
        progress.header(SimpleNamespace(target=target, chip=chip, log_path="l", options=options))
        progress.report("start", task("matmul", target))
    assert [t.description for t in progress.progress.tasks] == [f"matmul ({t})" for t in TARGETS]
    assert "matmul (llvm-cpu -mcpu=haswell): 4 record(s) already in the log" in out.getvalue()
    progress.stop()

    single = TuneProgress(8, Console(file=io.StringIO()))
    single.header(SimpleNamespace(target="llvm-cpu", chip=chip, log_path="l", options=options))
    single.report("start", task("matmul", "llvm-cpu"))
    assert [t.description for t in single.progress.tasks] == ["matmul"]  # one target: the name alone
    single.stop()

    out = io.StringIO()
    models = ModelProgress(Console(file=out, width=200))
    states = {t: [task("conv", t)] for t in TARGETS}
    graph = SimpleNamespace(tasks=[1], calls=[1], graph=SimpleNamespace(name="m"))
    for target in TARGETS:
        tuner = SimpleNamespace(target=target, chip=chip, log_path="l", options=options)
        mt = SimpleNamespace(states=states[target], latency=lambda: (1e-3, 0), task_graph=graph, tuner=tuner)
        models.attach(mt)
        models.begin(8, mt, label=target)
    models.report("batch", states[TARGETS[1]][0])
    models.stop()
    assert [t.description for t in models.progress.tasks] == TARGETS
    assert "llvm-cpu -mcpu=haswell: trials 0: conv best -" in out.getvalue()


# The command line: real kernels on the workers, a tiny ONNX model ------------------------------------


def _tiny_onnx(path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    return matmul_relu(path)


def _tune(path, log, *extra):
    from autosched.cli import main

    return main(["tune", str(path), "--trials", "4", "--batch-size", "2", "--strategy", "random",
                 "--log", str(log), *extra])  # fmt: skip


def test_a_model_on_a_remote_farm_is_tuned_there_for_two_targets_and_not_raced_here(farm2, tmp_path, capsys):
    path, log = _tiny_onnx(tmp_path / "mm.onnx"), tmp_path / "mm.jsonl"
    address = farm2.client.scheduler.address  # a scheduler this process did not start: a remote farm
    assert _tune(path, log, "--cluster", address, "--target", ",".join(TARGETS)) == 0
    out = capsys.readouterr().out
    got = records(log)
    for target in TARGETS:
        mine = [r for r in got if r.target == target]
        assert len(mine) == 4 and all(r.ok and r.check == "full" for r in mine), [r.error_msg for r in mine]
        assert f"{target}: the kernels ran on the farm's machines" in out
    assert "end to end" not in out  # no race here


@pytest.mark.slow
def test_a_model_on_local_workers_is_tuned_resumed_and_raced_against_onnxruntime(tmp_path, capsys):
    path, log = _tiny_onnx(tmp_path / "mm.onnx"), tmp_path / "mm.jsonl"
    assert _tune(path, log, "--cluster", "local:2") == 0
    assert _tune(path, log, "--cluster", "local:2", "--trials", "8", "--resume") == 0
    out = capsys.readouterr().out
    got = records(log)
    assert len(got) == 8 and len({trace_key(r.trace) for r in got}) == 8
    assert out.count("outputs match onnxruntime's") == 2 and "end to end" in out
