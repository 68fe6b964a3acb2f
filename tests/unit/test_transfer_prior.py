"""Issue 20: foreign records are a prior, not an anchor; pretrained cost models are versioned data."""

import json
import math

import numpy as np
import pytest

from autosched.chip import ChipInfo
from autosched.cost_model.pretrained import CostModelError, PretrainedModel, feature_set, train_from_logs
from autosched.measure.fake import FakeMeasurer
from autosched.records.log import trace_key
from autosched.search.transfer import GuidedModel, chip_similarity, rank_correlation
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul
from autosched.tune import TuneOptions, Tuner

CHIP_A = "llvm-cpu"
CHIP_B = "llvm-cpu -mcpu=haswell"


def matmul(n=32):
    return WorkloadInstance("matmul", {"M": n, "N": n, "K": n}, tuple(make_matmul(n, n, n)))


def cost_b(trace):
    """B's seconds: from the split factors of the accumulator tile (best near 4, 8)."""
    c = 1e-3
    for step in trace:
        j = step.to_json()
        if j[0] == "split" and j[1] == "matmul.local":
            f = [x for x in j[2][1:] if isinstance(x, int) and x > 0] or [1]
            c *= (1 + 0.3 * abs(math.log2(f[0]) - 2)) * (1 + 0.2 * abs(math.log2(f[-1]) - 3))
    return c


def cost_adversarial(trace):
    """A chip whose best schedules are B's worst: the inverse ranking."""
    return 1e-6 / cost_b(trace)


class Recording(FakeMeasurer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.costs = []

    def measure(self, task, traces):
        res = super().measure(task, traces)
        self.costs.extend(min(r.costs) if r.costs else math.inf for r in res)
        return res


def trials_to(costs, goal):
    best = math.inf
    for i, c in enumerate(costs, start=1):
        best = min(best, c)
        if best <= goal * (1 + 1e-9):
            return i
    return None


def tune(path, target, cost_fn, trials, seed, **kw):
    fake = Recording(cost_fn)
    opts = TuneOptions(trials=trials, batch_size=8, baseline=False, seed=seed, **kw)
    tuner = Tuner([matmul()], target, path, opts, measurer=fake)
    (task,) = tuner.tasks
    notes = tuner.load_previous(task)
    tuner.run()
    return fake.costs, task, notes


def test_adversarial_source_does_not_slow_b_down(tmp_path):
    """A source chip whose best schedules are B's worst: trials to B's best within 10% of scratch."""
    log_a = tmp_path / "a.jsonl"
    tune(log_a, CHIP_A, cost_adversarial, 48, seed=0)
    for seed in (1, 2):
        scratch, _, _ = tune(tmp_path / f"s{seed}.jsonl", CHIP_B, cost_b, 48, seed)
        moved, task, notes = tune(tmp_path / f"t{seed}.jsonl", CHIP_B, cost_b, 48, seed,
                                  transfer_from=(str(log_a),))  # fmt: skip
        goal = min(min(scratch), min(moved))
        n_scratch, n_moved = trials_to(scratch, goal * 1.1), trials_to(moved, goal * 1.1)
        assert n_scratch is not None and n_moved is not None
        assert n_moved <= 1.1 * n_scratch + 4, (seed, n_scratch, n_moved)  # 4: the foreign schedules
        guide = task.strategy.model
        assert guide.trust is not None and guide.trust < 0.1 and guide.weight() == 0  # stopped trusting A
        assert "transfer: prior weight" in " ".join(notes)


def test_good_source_is_trusted_and_its_weight_falls_as_b_measures(tmp_path):
    log_a = tmp_path / "a.jsonl"
    tune(log_a, CHIP_A, cost_b, 48, seed=0)  # the same ranking as B
    costs, task, _ = tune(tmp_path / "b.jsonl", CHIP_B, cost_b, 16, seed=1, transfer_from=(str(log_a),),
                          transfer_top=12)  # fmt: skip
    guide = task.strategy.model
    assert guide.trust is not None and guide.trust > 0.3
    assert 0 < guide.weight() < guide.similarity  # trusted, but B's 16 results already have a say
    assert guide.similarity > 0.5
    w16 = guide.weight()
    guide._costs.extend([1e-3] * 200)  # as if B had measured 200 more
    assert guide.weight() < w16 / 3
    # a good source's best schedules are worth measuring: the first 4 hold one near the best B found
    assert min(costs[:4]) <= min(costs) * 1.5


def test_chip_similarity_from_facts():
    zen = ChipInfo("zen5", "cpu", "znver5", ("avx512f", "avx2"), cores=16, vector_bits=512, peak_gflops=2000)
    hsw = ChipInfo("hsw", "cpu", "haswell", ("avx2",), cores=16, vector_bits=256, peak_gflops=1000)
    gpu = ChipInfo("gpu", "gpu", "sm_90", cores=132, vector_bits=32, peak_gflops=60000)
    assert chip_similarity(zen, zen) == pytest.approx(1.0)
    assert 0.3 < chip_similarity(zen, hsw) < 0.9
    assert chip_similarity(zen, gpu) < 0.1
    assert rank_correlation(np.arange(5.0), np.arange(5.0)) == pytest.approx(1.0)
    assert rank_correlation(np.arange(5.0), -np.arange(5.0)) == pytest.approx(-1.0)


def test_guided_model_mixes_and_drops_a_bad_prior():
    class Const:
        trained = True
        n_samples = 0

        def __init__(self, sign):
            self.sign = sign

        def predict(self, X):
            return self.sign * X[:, 0]

    from autosched.cost_model.features import FEATURE_COUNT
    from autosched.cost_model.xgb import XGBModel

    rng = np.random.default_rng(0)
    X = rng.random((24, FEATURE_COUNT))
    costs = 1e-3 / (0.1 + X[:, 0])  # fast where feature 0 is large
    good = GuidedModel(XGBModel(seed=0), Const(+1.0), guide_untrained=True)
    bad = GuidedModel(XGBModel(seed=0), Const(-1.0), guide_untrained=True)
    assert good.trained and bad.trained  # a pretrained prior guides from the first round
    for g in (good, bad):
        g.update("w", X, list(costs))
    assert good.trust > 0.9 and good.weight() > 0
    assert bad.trust < -0.9 and bad.weight() == 0
    np.testing.assert_allclose(bad.predict(X), bad.own.predict(X))  # the bad prior has no say left


def test_model_train_round_trip_and_mismatch_refused(tmp_path):
    log_a, log_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    tune(log_a, CHIP_A, cost_b, 24, seed=0)
    tune(log_b, CHIP_B, cost_b, 24, seed=0)
    out = tmp_path / "m.json"
    pm = train_from_logs([log_a, log_b], out, rounds=20)
    assert pm.header["records"] == 48 and len(pm.header["chips"]) == 2
    data = json.loads(out.read_text())
    assert data["feature_set"] == feature_set() and "learner" in data["booster"]  # XGBoost's JSON inside
    back = PretrainedModel.load(out)
    X = np.random.default_rng(1).random((5, feature_set()["count"]))
    np.testing.assert_allclose(back.predict(X), pm.predict(X))

    stale = dict(data, feature_set=dict(data["feature_set"], version=0, names_sha256="0123"))
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    with pytest.raises(CostModelError) as e:
        PretrainedModel.load(tmp_path / "stale.json")
    assert "feature set v0/" in str(e.value) and f"v{feature_set()['version']}/" in str(e.value)
    (tmp_path / "pickle.json").write_text('{"booster": {}}')
    with pytest.raises(CostModelError, match="not an autosched-cost-model file"):
        PretrainedModel.load(tmp_path / "pickle.json")


def test_tune_uses_cost_model_when_no_log(tmp_path):
    log_a = tmp_path / "a.jsonl"
    tune(log_a, CHIP_A, cost_b, 32, seed=0)
    model = tmp_path / "m.json"
    train_from_logs([log_a], model, rounds=20)
    costs, task, notes = tune(tmp_path / "b.jsonl", CHIP_B, cost_b, 16, seed=1, cost_model=str(model))
    (note,) = notes
    assert note.startswith("cost model: matmul has no log on") and str(model) in note
    guide = task.strategy.model
    assert guide.prior.path == str(model) and guide.trust is not None
    # with a log on this chip, the model is not used
    _, task2, notes2 = tune(tmp_path / "b.jsonl", CHIP_B, cost_b, 8, seed=1, cost_model=str(model))
    assert not [n for n in notes2 if n.startswith("cost model")] and not isinstance(
        task2.strategy.model, GuidedModel
    )
    with pytest.raises(CostModelError, match="not found"):
        tune(tmp_path / "c.jsonl", CHIP_B, cost_b, 8, seed=1, cost_model=str(tmp_path / "missing.json"))
    assert trace_key  # imported for symmetry with test_transfer
