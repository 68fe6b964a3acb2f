"""--transfer-from (review finding 7): a simulated chip's modeled times are never a prior for another chip."""

from __future__ import annotations

from autosched.hai.registry import get_adapter
from autosched.records.log import append_records
from autosched.records.record import fingerprint_of, make_record
from autosched.search.transfer import load_transfer
from autosched.search_space.default import default_schedule
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul


def test_simulated_records_are_no_transfer_source(tmp_path):
    inst = WorkloadInstance("matmul", {}, tuple(make_matmul(16, 16, 16)))
    trace = default_schedule(inst.outputs[0], cores=1).trace
    log = tmp_path / "mixed.jsonl"
    fingerprints = {}
    for target in ("sim -chip=avx2-desktop", "llvm-cpu -mcpu=haswell", "llvm-cpu"):
        adapter = get_adapter(target)
        chip = adapter.info()
        fingerprints[target] = fingerprint_of(adapter.target, chip)
        append_records(log, [make_record(inst, adapter.target, chip, trace, costs=(1e-3,))])
    real = load_transfer([log], workload_key=inst.key, fingerprint=fingerprints["llvm-cpu"])
    assert [r.fingerprint for r in real.foreign] == [fingerprints["llvm-cpu -mcpu=haswell"]]
    assert [r.fingerprint for r in real.same_chip] == [fingerprints["llvm-cpu"]]
    own = load_transfer([log], workload_key=inst.key, fingerprint=fingerprints["sim -chip=avx2-desktop"])
    assert len(own.same_chip) == 1  # the simulated chip's own records are still its own
