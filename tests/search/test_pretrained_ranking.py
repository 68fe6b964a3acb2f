"""The shipped pretrained cost model ranks random schedules of workloads it has never seen (issue 20).

The candidates are the simulator store's from an Intel Emerald Rapids machine (in the repository), of
shapes that no training log holds (``benchmarks/pretrain.py``), timed there on ``-mcpu=haswell``. The
model shipped before the random-schedule corpus, trained on tuned records alone, ranked them no
better than chance: Spearman +0.11 for depthwise and -0.17 for softmax.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("xgboost")

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "benchmarks" / "stores" / "simulator_emeraldrapids_2c.jsonl"


def test_the_shipped_model_ranks_unseen_workloads_random_schedules():
    from autosched.cost_model.pretrained import SHIPPED, PretrainedModel

    spec = importlib.util.spec_from_file_location("pretrain_bench", ROOT / "benchmarks" / "pretrain.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    shapes = [*bench.TRAINING.values(), *bench.CORPUS.values()]  # the store's shapes are none of them
    assert ("softmax", {"shape": (4096, 1024)}) not in shapes
    assert not any(m == "depthwise_conv2d" and (a["C"], a["H"]) == (128, 56) for m, a in shapes)
    model = PretrainedModel.load(SHIPPED)
    got = bench.ranking(model, STORE, ["llvm-cpu -mcpu=haswell"], ["depthwise", "softmax"])
    for (_, name), (n, rho) in got.items():
        assert n >= 100 and not math.isnan(rho), name
        assert rho > 0.5, (name, rho)
