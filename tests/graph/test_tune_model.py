"""Whole-model tuning (issue 12): tasks and their weights, trial allocation, reuse, resume, correctness.

The fake measurer stands in where timing is not the point; one test tunes a tiny ONNX model with real
trials and checks it against onnxruntime. The exported torch models are skipped without torch.
"""

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from autosched.graph.tasks import extract_tasks
from autosched.graph.tune_model import ModelTuner, compare_with_onnxruntime, random_model_inputs
from autosched.measure.fake import FakeMeasurer
from autosched.measure.result import MeasureResult
from autosched.records.log import load_records, trace_key
from autosched.search.task_scheduler import RoundGradientScheduler, TaskProgress
from autosched.search_space.default import default_schedule
from autosched.tune import TuneOptions
from tests.onnx_files import save_model

from .builders import reference_outputs, resnet_like
from .model_exporter import load_exporter, missing


def _has(*modules: str) -> bool:
    return missing(*modules) is None


def spread_cost(trace) -> float:
    """Seconds from a hash of the trace: more trials find lower costs, the same way for every task."""
    h = int(hashlib.sha256(trace_key(trace).encode()).hexdigest()[:8], 16)
    return 1e-3 * (1 + (h % 1000) / 100)


def options(trials: int, **kw) -> TuneOptions:
    """The fake measurer's times do not move: no finalists round, but where a test asks for one."""
    kw.setdefault("finalists", 0)
    return TuneOptions(trials=trials, batch_size=8, strategy="random", baseline=False, seed=0, **kw)


# Tasks of the exported models ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory):
    if not _has("torch", "torchvision", "transformers", "onnx"):
        pytest.skip("torch, torchvision, transformers or onnx is not installed")
    module = load_exporter()
    out = tmp_path_factory.mktemp("onnx")
    return {name: module.export_model(name, out, small=True) for name in ("resnet18", "resnet50", "bert")}


def test_small_resnet_and_encoder_tasks_are_deduplicated_with_weights(onnx_models):
    from autosched.frontend.onnx import from_onnx

    resnet = extract_tasks(from_onnx(onnx_models["resnet18"]))
    # 23 fused groups; the repeated 3x3 convs of a stage's blocks are one task each
    assert (len(resnet.calls), len(resnet.tasks)) == (23, 18)
    assert sorted(t.weight for t in resnet.tasks) == [1] * 13 + [2] * 5
    encoder = extract_tasks(from_onnx(onnx_models["bert"]))  # 2 layers: each layer's tasks twice
    # each layer's attention (scores, scale, mask, softmax, product with v) is one flash task
    assert (len(encoder.calls), len(encoder.tasks)) == (20, 8)
    assert sorted(t.weight for t in encoder.tasks) == [1, 1, 2, 2, 2, 2, 4, 6]
    assert sum(t.weight for t in encoder.tasks) == len(encoder.calls)


def test_identical_tasks_of_two_models_have_one_key(onnx_models):
    from autosched.frontend.onnx import from_onnx

    r18 = {t.key: t for t in extract_tasks(from_onnx(onnx_models["resnet18"])).tasks}
    r50 = {t.key: t for t in extract_tasks(from_onnx(onnx_models["resnet50"])).tasks}
    shared = set(r18) & set(r50)
    assert len(shared) == 6  # the stem, its pool, and the 3x3 convs both nets have at these shapes
    assert all(r18[k].instance.flop_count() == r50[k].instance.flop_count() for k in shared)


# The round gradient scheduler ----------------------------------------------------------------------


def _simulate(weights, rounds_total, failing=()):
    """Give ``rounds_total`` batches; a task's best cost falls as 1 + 1/rounds (None: never valid)."""
    sched = RoundGradientScheduler(seed=0)
    rounds = [[] for _ in weights]
    order = []
    for _ in range(rounds_total):
        views = [
            TaskProgress(r[-1] if r else math.inf, 8 * len(r), weight=w, rounds=r)
            for r, w in zip(rounds, weights)
        ]
        i = sched.next_task(views)
        if i is None:
            break
        order.append(i)
        n = len(rounds[i]) + 1
        rounds[i].append(math.inf if i in failing else 1e-3 * (1 + 1 / n))
    return order


def test_round_robin_first_then_the_heavier_task_gets_more_batches():
    order = _simulate([10, 1], 30)
    assert order[:2] == [0, 1]  # one round-robin pass
    assert order.count(0) > 3 * order.count(1) and order.count(1) >= 1


def test_a_task_without_valid_results_is_given_up_after_three_rounds():
    order = _simulate([1, 5, 1], 20, failing={1})
    assert order.count(1) == 3 and len(order) == 20
    sched = RoundGradientScheduler()
    assert sched.next_task([TaskProgress(math.inf, 24, rounds=[math.inf] * 3)]) is None


def test_gradient_is_metaschedules_formula():
    sched = RoundGradientScheduler(alpha=0.2, window=3)
    t = TaskProgress(2.0, 40, weight=3, rounds=[8.0, 6.0, 4.0, 3.0, 2.0])
    # g = (alpha * (h[n-1-w] - best) / w + (1 - alpha) * best / n) * weight, n = 5, h[1] = 6
    assert sched.gradient(t) == pytest.approx((0.2 * (6.0 - 2.0) / 3 + 0.8 * 2.0 / 5) * 3)
    assert sched.gradient(TaskProgress(2.0, 8, rounds=[2.0])) == pytest.approx(0.8 * 2.0)  # no window yet


# ModelTuner with the fake measurer -------------------------------------------------------------------


def test_model_tuner_spends_the_model_budget_heavier_task_first(tmp_path):
    graph = resnet_like(blocks=9, channels=4, size=4)  # conv weight 10, residual conv 9, softmax 1
    fake = FakeMeasurer(spread_cost)
    mt = ModelTuner(graph, "llvm-cpu", tmp_path / "m.jsonl", options(160, finalists=4), measurer=fake)
    mt.load_previous()
    states = mt.run()
    assert [w for w in mt.weights] == [10, 9, 1]
    # the budget goes to the search; then each task's finalists round times its best 4 three times, and
    # the default schedule beside them where the search ranked it below
    assert all(t.finalists is not None and t.finalists.retimed in (4, 5) for t in states)
    assert sum(t.trials for t in states) == 160
    assert fake.calls == 160 + 3 * 2 * sum(t.finalists.retimed for t in states)  # rounds x passes
    conv, _residual, softmax = states
    assert conv.trials > 2 * softmax.trials and softmax.trials >= 8
    total, missing = mt.latency()
    assert missing == 0 and total == pytest.approx(sum(w * t.best_cost for t, w in zip(states, mt.weights)))
    # each task's first record is its default schedule, the one the compiled model runs untuned
    first = {}
    retimed = [r for r in load_records(tmp_path / "m.jsonl").records if r.retimed is not None]
    assert len(retimed) == sum(t.finalists.retimed for t in states)
    for rec in load_records(tmp_path / "m.jsonl").records:
        first.setdefault(rec.workload_key, trace_key(rec.trace))
    for task in states:
        default = default_schedule(list(task.inst.outputs), cores=mt.tuner.chip.cores).trace
        assert first[task.inst.key] == trace_key(default)


def test_a_budget_short_of_one_batch_per_task_still_reaches_every_task(tmp_path):
    graph = resnet_like(blocks=9, channels=4, size=4)  # three tasks, batches of 8, 12 trials in all
    fake = FakeMeasurer(spread_cost)
    mt = ModelTuner(graph, "llvm-cpu", tmp_path / "m.jsonl", options(12), measurer=fake)
    mt.load_previous()
    states = mt.run()
    assert [t.trials for t in states] == [4, 4, 4] and fake.calls == 12
    assert mt.untried() == [] and mt.latency()[1] == 0


def test_second_model_reuses_the_records_of_tasks_it_shares(tmp_path):
    log = tmp_path / "shared.jsonl"
    first = ModelTuner(resnet_like(blocks=1, channels=4, size=4), "llvm-cpu", log, options(48),
                       measurer=FakeMeasurer(spread_cost))  # fmt: skip
    first.load_previous()
    first.run()
    second = ModelTuner(resnet_like(blocks=3, channels=4, size=4, seed=1), "llvm-cpu", log, options(24),
                        measurer=FakeMeasurer(spread_cost))  # fmt: skip
    assert [t.key for t in second.task_graph.tasks] == [t.key for t in first.task_graph.tasks]
    notes = second.load_previous()
    assert second.reuse.records == 48 and second.reuse.tasks == 3
    assert notes[0].startswith("reused 48 record(s) of 3 of the 3 tasks")
    assert [s.best_cost for s in second.states] == [s.best_cost for s in first.states]
    second.run()
    keys = [(r.workload_key, trace_key(r.trace)) for r in load_records(log).records]
    assert len(keys) == 72 == len(set(keys))  # nothing of the first model measured again


def test_resume_after_a_kill_measures_nothing_twice(tmp_path):
    log = tmp_path / "m.jsonl"
    graph = resnet_like(blocks=2, channels=4, size=4)
    full = ModelTuner(graph, "llvm-cpu", log, options(48), measurer=FakeMeasurer(spread_cost))
    full.load_previous()
    full.run()
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:24]) + lines[24][:40])  # killed after 3 batches, in a write
    fake = FakeMeasurer(spread_cost)
    resumed = ModelTuner(graph, "llvm-cpu", log, options(48, resume=True), measurer=fake)
    notes = resumed.load_previous()
    assert resumed.reuse.records == 24, notes
    assert resumed.budget() == 24
    resumed.run()
    assert fake.calls == 24
    keys = [(r.workload_key, trace_key(r.trace)) for r in load_records(log).records]
    assert len(keys) == 48 == len(set(keys))
    assert lines[24][:40] in log.read_text()  # the torn line is kept, as it was


class FailingFor:
    """Every candidate of the named task fails to run; the others are timed by ``inner``."""

    def __init__(self, name: str, inner):
        self.name, self.inner = name, inner

    def measure(self, task, traces):
        if task.name == self.name:
            return [MeasureResult((), "run", "injected: wrong result") for _ in traces]
        return self.inner.measure(task, traces)

    def close(self):
        pass


def test_a_task_failing_every_candidate_keeps_its_default_schedule(tmp_path):
    graph = resnet_like(blocks=1, channels=4, size=4)
    softmax = extract_tasks(graph).tasks[-1].name
    measurer = FailingFor(softmax, FakeMeasurer(spread_cost))
    mt = ModelTuner(graph, "llvm-cpu", tmp_path / "m.jsonl", options(80), measurer=measurer)
    mt.load_previous()
    states = mt.run()
    assert mt.failed() == [softmax] and states[-1].trials == 24  # given up after three rounds
    assert sum(t.trials for t in states) == 80
    again = ModelTuner(graph, "llvm-cpu", tmp_path / "m.jsonl", options(120, resume=True), measurer=measurer)
    again.load_previous()
    assert [t.trials for t in again.run()][-1] == 0  # its logged failures count: not retried on resume
    # the fake records are no schedules to run: the model on default schedules still runs and is timed
    race = compare_with_onnxruntime(None, graph=graph, log=None, repeat=2)
    assert race.onnxruntime_s is None and race.tuned_tasks == 0


# Real trials ---------------------------------------------------------------------------------------------


def _tiny_onnx(path: Path) -> Path:
    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.standard_normal((16, 32)).astype("float32"),
        "b1": rng.standard_normal(32).astype("float32"),
        "w2": rng.standard_normal((32, 8)).astype("float32"),
    }
    nodes = [
        ("MatMul", ["x", "w1"], ["h"]),
        ("Add", ["h", "b1"], ["hb"]),
        ("Relu", ["hb"], ["r"]),
        ("MatMul", ["r", "w2"], ["y"]),
    ]
    return save_model(path, nodes, {"x": [4, 16]}, {"y": [4, 8]}, weights, name="tiny_mlp")


@pytest.mark.skipif(not _has("onnx", "onnxruntime"), reason="onnx or onnxruntime is not installed")
def test_tuned_tiny_model_matches_onnxruntime(tmp_path):
    path = _tiny_onnx(tmp_path / "tiny.onnx")
    log = tmp_path / "tiny.jsonl"
    opts = TuneOptions(trials=8, batch_size=4, strategy="random", baseline=False, seed=0)
    mt = ModelTuner(path, "llvm-cpu", log, opts)  # real builds and runs: one batch per task
    mt.load_previous()
    states = mt.run()
    assert [t.trials for t in states] == [4, 4]
    assert all(math.isfinite(t.best_cost) for t in states)
    race = compare_with_onnxruntime(path, graph=mt.graph, log=log, repeat=2)
    assert race.tuned_tasks >= 1 and race.max_rel_err is not None and race.max_rel_err < 1e-4
    assert race.speedup is not None and race.speedup > 0


def test_random_model_inputs_are_fresh_and_non_zero():
    graph = resnet_like(blocks=1, channels=4, size=4)
    a, b = random_model_inputs(graph, 1)["input"], random_model_inputs(graph, 2)["input"]
    assert a.shape == (1, 4, 4, 4) and np.all(a != 0) and not np.array_equal(a, b)
    assert reference_outputs(graph, {"input": a})["probs"].shape == (4, 16)


@pytest.mark.slow  # real trials twice, and the race against onnxruntime at its default length
@pytest.mark.skipif(not _has("onnx", "onnxruntime"), reason="onnx or onnxruntime is not installed")
def test_cli_tunes_a_model_then_resumes_it(tmp_path, capsys):
    from autosched.cli import main

    path = _tiny_onnx(tmp_path / "tiny.onnx")
    log = tmp_path / "tiny.jsonl"
    args = ["tune", str(path), "--trials", "8", "--batch-size", "4", "--strategy", "random"]
    args += ["--log", str(log)]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "estimated model latency" in out.out and "outputs match onnxruntime's" in out.out
    assert "no records of this model's 2 tasks" in out.err
    assert main([*args[:3], "12", *args[4:], "--resume"]) == 0
    out = capsys.readouterr()
    assert "reused 8 record(s) of 2 of the 2 tasks" in out.err
    searched = [r for r in load_records(log).records if r.retimed is None]  # and the finalists' records
    assert len(searched) == 12 and len({(r.workload_key, trace_key(r.trace)) for r in searched}) == 12


def test_live_progress_on_a_terminal_shows_the_task_table(tmp_path):
    import io

    from rich.console import Console

    from autosched.progress import ModelProgress, print_model_summary

    live, summary = io.StringIO(), io.StringIO()
    with ModelProgress(Console(file=live, force_terminal=True, width=160)) as progress:
        graph = resnet_like(blocks=1, channels=4, size=4)
        fake = FakeMeasurer(spread_cost)
        mt = ModelTuner(
            graph, "llvm-cpu", tmp_path / "m.jsonl", options(24), measurer=fake, reporter=progress.report
        )
        progress.attach(mt)
        mt.load_previous()
        progress.begin(mt.budget())
        mt.run()
    assert "weighted latency" in live.getvalue() and "24/24" in live.getvalue()
    print_model_summary(mt, None, Console(file=summary, width=160))
    text = summary.getvalue()
    assert "estimated model latency" in text and "largest shares of the estimated latency" in text
