"""Logs across chips (``--transfer-from``), against fake measurements: what is learnt, measured, written."""

import json

import numpy as np
import pytest

from autosched.cost_model.features import FEATURE_NAMES, chip_features
from autosched.measure.fake import FakeMeasurer
from autosched.records.log import load_records, read_log, trace_key
from autosched.records.record import TuningRecord
from autosched.search.transfer import best_foreign, chip_from_json
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul
from autosched.tune import TuneOptions, Tuner

CHIP_A = "llvm-cpu -mcpu=skylake-avx512"  # 512-bit vectors, whatever the host (nothing runs)
CHIP_B = "llvm-cpu -mcpu=haswell"  # AVX2 only: another fingerprint


def matmul(n=32):
    return WorkloadInstance("matmul", {"M": n}, tuple(make_matmul(n, n, n)))


def fake_cost(trace):
    """Seconds from the accumulator tile's inner split factors: the same ranking on every chip."""
    c = 1e-3
    for step in trace:
        j = step.to_json()
        if j[0] == "split" and j[1] == "matmul.local":
            c *= 1 + 0.3 * abs(j[2][1] - 4)
    return c


class OrderedFake(FakeMeasurer):
    """Remembers every trace measured, in order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.traces = []

    def measure(self, task, traces):
        self.traces.extend(traces)
        return super().measure(task, traces)


def tune_a(log, trials=32):
    opts = TuneOptions(trials=trials, batch_size=8, baseline=False, seed=0, finalists=0)
    tuner = Tuner([matmul()], CHIP_A, log, opts, measurer=FakeMeasurer(fake_cost, errors={"crash": 0.1}))
    tuner.run()
    return tuner.fingerprint


def strip_decisions(log):
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for d in lines:
        d.pop("decisions", None)
    log.write_text("".join(json.dumps(d) + "\n" for d in lines))


@pytest.mark.parametrize("with_decisions", [True, False])
def test_transfer_trains_on_foreign_records_and_measures_their_best_first(tmp_path, with_decisions):
    log_a, log_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    fp_a = tune_a(log_a)
    records_a = load_records(log_a).records
    assert all((r.decisions is not None) for r in records_a)  # the tuner writes decisions
    if not with_decisions:
        strip_decisions(log_a)  # a log written before decisions were recorded
        assert all(r.decisions is None for r in load_records(log_a).records)

    fake = OrderedFake(fake_cost)
    # seed 1: B's first batch ranks A's probes among its fastest (the trust is a rank
    # correlation within one batch of 8, so some seeds give a low one and the chunks are rightly not queued)
    opts = TuneOptions(trials=16, batch_size=8, baseline=False, seed=1, finalists=0,
                       transfer_from=(str(log_a),), transfer_top=4)  # fmt: skip
    tuner = Tuner([matmul()], CHIP_B, log_b, opts, measurer=fake)
    assert tuner.fingerprint != fp_a
    (task,) = tuner.tasks
    notes = tuner.load_previous(task)

    # counted and reported: how many, from which chip
    assert task.foreign == 32 and task.previous == 0
    assert notes[0].startswith("transfer: matmul: 32 record(s)") and f"{fp_a} (32)" in notes[0]
    assert tuner.fingerprint in notes[0] and "up to 4 foreign best schedule(s)" in notes[1]
    # the model learnt from them before anything was measured on B, with A's chip facts as features
    # (issue 20: into the prior of a GuidedModel, which guides nothing until B has results of its own)
    guide = task.strategy.model
    model = guide.prior
    assert fake.calls == 0 and model.trained and model.n_samples == 32 and not guide.trained
    (group,) = model._X
    assert group.endswith("@" + fp_a)
    lanes = FEATURE_NAMES.index("chip_lanes")
    chip_a = chip_from_json(records_a[0].chip)
    rows = np.concatenate(model._X[group])
    assert np.all(rows[:, lanes] == chip_features(chip_a)[lanes - len(FEATURE_NAMES)])
    assert chip_a.vector_bits != tuner.chip.vector_bits  # so A's facts, not B's, are in those rows
    assert task.best_cost == float("inf")  # A's costs are never B's results

    assert not task.strategy._foreign_seeds  # held back until B's first results confirm A's ranking
    default_key = trace_key(task.strategy.default)  # the schedule B runs untuned
    tuner.run()
    expected = [trace_key(r.trace) for r in best_foreign(records_a, 4)]
    # issue 20: B's default first, then A's best two (probes); B's first batch judges them (here:
    # among B's fastest, so trusted) and the rest of the best 4 lead the next batch
    assert trace_key(fake.traces[0]) == default_key
    assert [trace_key(t) for t in fake.traces[1:3]] == expected[:2]
    assert not set(expected) & {trace_key(t) for t in [fake.traces[0], *fake.traces[3:10]]}
    assert [trace_key(t) for t in fake.traces[10:12]] == expected[2:]
    assert guide.probe_trust is not None and guide.probe_trust >= 0.3
    out = read_log(log_b)[0]
    assert len(out) == 16 and {r.fingerprint for r in out} == {tuner.fingerprint}
    assert all(r.target == CHIP_B for r in out)
    assert fp_a not in log_b.read_text()
    assert len(read_log(log_a)[0]) == 32  # A's log is only read
    if with_decisions:  # the decisions of A's best seed B's starting populations
        assert task.strategy._foreign_seeds


def test_log_without_other_chips_says_so_and_is_not_measured_again(tmp_path):
    log_a = tmp_path / "a.jsonl"
    tune_a(log_a, trials=16)
    fake = OrderedFake(fake_cost)
    opts = TuneOptions(
        trials=8, batch_size=8, baseline=False, seed=1, finalists=0, transfer_from=(str(log_a),)
    )
    tuner = Tuner([matmul()], CHIP_A, tmp_path / "new.jsonl", opts, measurer=fake)
    (task,) = tuner.tasks
    notes = tuner.load_previous(task)
    assert "has no records of matmul for chips other than" in notes[0] and "nothing to transfer" in notes[0]
    assert "16 for this chip" in notes[0]
    assert task.foreign == 0 and task.previous == 16  # like a resumed log
    tuner.run()
    seen = {trace_key(r.trace) for r in load_records(log_a).records}
    assert not seen & {trace_key(t) for t in fake.traces}


def test_other_workloads_do_not_transfer(tmp_path):
    log_a = tmp_path / "a.jsonl"
    tune_a(log_a, trials=8)
    opts = TuneOptions(trials=8, baseline=False, finalists=0, transfer_from=(str(log_a),))
    tuner = Tuner([matmul(16)], CHIP_B, tmp_path / "b.jsonl", opts, measurer=FakeMeasurer(fake_cost))
    (note,) = tuner.load_previous(tuner.tasks[0])
    assert "nothing to transfer" in note and "8 of other workloads" in note
    assert not tuner.tasks[0].strategy.model.trained


def test_old_lines_without_decisions_still_load(tmp_path):
    log_a = tmp_path / "a.jsonl"
    tune_a(log_a, trials=4)
    rec = load_records(log_a).records[0]
    line = rec.to_json_line()
    assert json.loads(line)["decisions"] == rec.decisions and TuningRecord.from_json_line(line) == rec
    old = json.loads(line)
    del old["decisions"]
    back = TuningRecord.from_json_line(json.dumps(old))
    assert back.decisions is None and back.trace == rec.trace and back.costs == rec.costs
    assert "decisions" not in back.to_json_line()  # an old record is written back in the old form
    old["decisions"] = [1, 2]
    with pytest.raises(Exception, match="field 'decisions': expected object"):
        TuningRecord.from_json_line(json.dumps(old))


def test_chip_from_json_tolerates_other_versions():
    chip = chip_from_json({"name": "x", "kind": "cpu", "arch": "haswell", "vector_bits": 256,
                           "features": ["avx2"], "new_field": 1})  # fmt: skip
    assert chip.vector_bits == 256 and chip.features == ("avx2",)
    assert chip_from_json({}).arch == "unknown"
