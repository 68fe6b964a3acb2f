"""Small tuning logs made with the fake measurer (no timing), on two chips, for the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from autosched.measure.fake import FakeMeasurer
from autosched.ops import workloads as ops_workloads
from autosched.tune import TuneOptions, Tuner

SHIPPED = sorted((Path(__file__).parents[2] / "tuning_logs").glob("*.jsonl"))


def fake_tune(log: Path, target: str, trials: int = 12, errors: dict[str, float] | None = None) -> Path:
    """``trials`` random-search trials of a 16^3 ops_matmul on ``target``, costs from the trace length."""
    inst = ops_workloads.ops_matmul.workload.instantiate(M=16, N=16, K=16)
    fake = FakeMeasurer(lambda trace: 1e-5 * (1 + len(trace) % 7), errors=errors or {}, seed=1)
    options = TuneOptions(trials=trials, batch_size=4, strategy="random", baseline=False)
    Tuner([inst], target, log, options, measurer=fake).run()
    return log


@pytest.fixture(scope="session")
def two_chip_logs(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("logs")
    return [
        fake_tune(d / "native.jsonl", "llvm-cpu", errors={"timeout": 0.2}),
        fake_tune(d / "haswell.jsonl", "llvm-cpu -mcpu=haswell"),
    ]
