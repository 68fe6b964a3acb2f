"""`Tuner` on ``opencl``: GPU sketches (CPU ones on a CPU device, PoCL), measured by the builder/runner
pair, logged under the chip."""

from pathlib import Path

import pytest

from autosched.records.log import load_records
from autosched.te.workload import load_op_file
from autosched.tune import TuneOptions, Tuner

from .test_opencl import _why

pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")
MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"


def test_tune_matmul_on_opencl(tmp_path):
    from autosched.measure.measure import LocalMeasurer
    from autosched.search_space.gpu_sketch import GPUSketchPolicy
    from autosched.search_space.sketch import SketchPolicy

    (wl,) = load_op_file(MATMUL)
    inst = wl.instantiate(M=16, N=16, K=16)
    log = tmp_path / "ocl.jsonl"
    tuner = Tuner([inst], "opencl", log, TuneOptions(trials=6, batch_size=3, baseline=False, repeat=2))
    assert isinstance(tuner.measurer, LocalMeasurer)
    rules = SketchPolicy if tuner.chip.kind == "cpu" else GPUSketchPolicy
    assert isinstance(tuner.tasks[0].strategy.policy, rules)
    (task,) = tuner.run()
    assert task.trials == 6 and task.best_cost < float("inf")
    records = [r for r in load_records(log).records if r.retimed is None]  # the finalists' come after
    assert len(records) == 6 and all(r.target.startswith("opencl") for r in records)
    assert sum(r.ok for r in records) >= 3  # errors, if any, are data (e.g. too much local memory)
