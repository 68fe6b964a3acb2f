"""Issue 17, alignment: a new best is also checked and timed on misaligned buffers, and the record, the
tune summary and the library manifest say what was measured; records and manifests without it load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.chip import ChipInfo
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import LocalMeasurer
from autosched.measure.result import BuildResult
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.measure.worker import ALIGNMENT_BYTES, MISALIGNED_OFFSET_BYTES, aligned_views
from autosched.records.alignment import Alignment, alignment_of, manifest_fields
from autosched.records.record import RecordError, TuningRecord, make_record
from autosched.runtime.link import link_shared
from autosched.runtime.manifest import LoadError, validate_manifest
from autosched.search_space.default import default_schedule
from autosched.target import parse_target
from autosched.te.workload import WorkloadInstance, load_op_file
from autosched.tune import TaskState, alignment_line

ROOT = Path(__file__).resolve().parents[2]

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="needs a C compiler")

N = 256
POLICY = {"repeat": 3, "warmup": 1, "min_repeat_s": 0.001, "flush_cache": False, "alignment_bytes": 64}
MISALIGNED = {"offset_bytes": 16, "median_s": 2.5e-6, "repeat": 3}
_ADD = f"for (int i = 0; i < {N}; i++) C[i] = A[i] + B[i];"
_SUB = f"for (int i = 0; i < {N}; i++) C[i] = A[i] - B[i];"
_SPIN_5MS = (
    "struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0); do clock_gettime(CLOCK_MONOTONIC, &t);"
    " while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 5e6);"
)
KERNELS = {  # hand-written, so that each misbehaves exactly as named (independent of the codegen)
    "good": _ADD,
    # right only where C starts on a 64-byte boundary: what a kernel assuming alignment may do
    "wrong_misaligned": f"if ((size_t)C % 64) {{ {_SUB} }} else {{ {_ADD} }}",
    # faults on a misaligned input, as an aligned vector load (vmovaps) would
    "crash_misaligned": f"if ((size_t)A % 64) *(volatile float*)0 = A[0]; {_ADD}",
    "slow": _SPIN_5MS + _ADD,  # correct, and far slower than "good"
}


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuildResult]:
    d = tmp_path_factory.mktemp("kernels")
    out = {}
    for name, body in KERNELS.items():
        c = d / f"{name}.c"
        head = "#include <stddef.h>\n#include <time.h>\nvoid add(float* A, float* B, float* C)"
        c.write_text(f"{head} {{ {body} }}\n")
        subprocess.run([os.environ.get("CC", "cc"), "-O1", "-fPIC", "-c", str(c), "-o", str(d / f"{name}.o")],
                       check=True)  # fmt: skip
        so = link_shared([(d / f"{name}.o").read_bytes()], d / name / "add.so", openmp=False)
        out[name] = BuildResult(str(so), "add", 3)
    return out


def test_misaligned_views_share_the_aligned_buffer() -> None:
    aligned, shifted = aligned_views((5, 3), "float32", (0, MISALIGNED_OFFSET_BYTES))
    assert aligned.ctypes.data % ALIGNMENT_BYTES == 0
    assert shifted.ctypes.data % ALIGNMENT_BYTES == MISALIGNED_OFFSET_BYTES
    assert shifted.ctypes.data - aligned.ctypes.data == MISALIGNED_OFFSET_BYTES  # no memory of its own
    shifted[...] = 7
    assert shifted.shape == (5, 3) and (shifted == 7).all()


@needs_cc
def test_each_new_best_is_timed_misaligned_too(add_task: MeasureTask, libs: dict[str, BuildResult]) -> None:
    with LocalRunner(timeout_s=10, repeat=3, min_repeat_ms=1) as runner:
        first, faster, slower = runner.run(add_task, [libs["slow"], libs["good"], libs["slow"]])
    for r in (first, faster):  # the first, and then a faster one: new bests
        assert r.ok and r.timing is not None, str(r)
        mis = r.timing["misaligned"]
        assert mis["offset_bytes"] == MISALIGNED_OFFSET_BYTES and mis["repeat"] == 3 and mis["median_s"] > 0
        assert r.timing["alignment_bytes"] == ALIGNMENT_BYTES
    assert slower.ok and slower.timing is not None and "misaligned" not in slower.timing  # not a new best


@needs_cc
def test_a_kernel_wrong_only_when_misaligned_fails_naming_the_case(
    add_task: MeasureTask, libs: dict[str, BuildResult]
) -> None:
    with LocalRunner(timeout_s=10, repeat=3, min_repeat_ms=1) as runner:
        built = [libs["wrong_misaligned"], libs["crash_misaligned"], libs["slow"]]
        wrong, crash, after = runner.run(add_task, built)
    assert wrong.error == "wrong_result" and wrong.costs == ()
    assert "misaligned case failed" in wrong.error_msg and "16 bytes past" in wrong.error_msg
    assert "output 'C'" in wrong.error_msg  # the worker's own account follows
    assert crash.error == "crash" and "misaligned case failed" in crash.error_msg
    assert "SIGSEGV" in crash.error_msg
    # neither set the best: the next correct kernel is still a first best, checked misaligned
    assert after.ok and after.timing is not None and "misaligned" in after.timing


def test_a_generated_kernel_measured_through_local_measurer_records_the_misaligned_case() -> None:
    A = te.placeholder((37, 50), name="A")  # rows of 200 bytes: vector tails, and rows off any boundary
    B = te.compute((37, 50), lambda i, j: te.exp(A[i, j]) * 2.0, name="B")
    task = MeasureTask.create("exp2", [A, B])
    with LocalMeasurer(LocalBuilder(n_workers=1), LocalRunner(repeat=2)) as m:
        (res,) = m.measure(task, [default_schedule(B).trace])
    assert res.ok and res.timing is not None, str(res)
    assert res.timing["misaligned"]["offset_bytes"] == 16 and res.timing["misaligned"]["median_s"] > 0


def _matmul(**shape: int) -> WorkloadInstance:
    [wl] = load_op_file(ROOT / "examples" / "matmul.py")
    return wl.instantiate(**shape)


def _record(timing: dict[str, Any] | None) -> TuningRecord:
    chip = ChipInfo(name="test", kind="cpu", arch="test")
    return make_record(_matmul(M=4, N=4, K=4), parse_target("llvm-cpu"), chip, (), (2e-6,), timing=timing)


def test_records_with_and_without_the_misaligned_case_load() -> None:
    new = _record({**POLICY, "misaligned": MISALIGNED})
    assert TuningRecord.from_json_line(new.to_json_line()) == new
    old = _record(POLICY)  # a line written before the misaligned case existed
    assert '"misaligned"' not in old.to_json_line()
    assert TuningRecord.from_json_line(old.to_json_line()).timing == POLICY
    data = json.loads(new.to_json_line())
    data["timing"]["misaligned"]["median_s"] = "fast"
    with pytest.raises(RecordError, match=r"timing\.misaligned.*median_s"):
        TuningRecord.from_json_line(json.dumps(data))


def test_what_the_summary_and_the_manifest_say() -> None:
    both = alignment_of({**POLICY, "misaligned": MISALIGNED})
    assert both == Alignment(64, 16, 2.5e-6)
    assert both.describe(2e-6) == "timed on 64-byte-aligned buffers: 2 us; 16 bytes past: 2.5 us (1.25x)"
    assert alignment_of(POLICY).describe(2e-6).endswith("misaligned case not measured")
    assert "unrecorded alignment" in alignment_of(None).describe(2e-6)
    assert manifest_fields(None) == {} and manifest_fields(POLICY) == {"alignment_bytes": 64}
    assert manifest_fields({**POLICY, "misaligned": MISALIGNED}) == {
        "alignment_bytes": 64, "misaligned": {"offset_bytes": 16, "median_s": 2.5e-6}
    }  # fmt: skip
    rec = _record({**POLICY, "misaligned": MISALIGNED})
    task = TaskState(_matmul(M=4, N=4, K=4), None, None)  # type: ignore[arg-type]  # no search needed
    task.best_cost, task.best_trace, task.best_timing = rec.mean_cost, rec.trace, rec.timing
    assert alignment_line(task, host=True) == f"matmul: best {both.describe(2e-6)}"  # the tune summary's
    assert alignment_line(task, host=False) is None  # a device's buffers are its adapter's


@needs_cc
def test_manifest_round_trip_with_and_without_the_misaligned_case(tmp_path: Path) -> None:
    from autosched.hai.registry import get_adapter
    from autosched.records.log import append_records
    from autosched.runtime.export import export_library

    inst = _matmul(M=8, N=16, K=4)
    target = parse_target("llvm-cpu")
    chip = get_adapter(target).info()
    trace = autosched.create_schedule(inst.outputs[0]).trace
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 4), "float32"), rng.standard_normal((4, 16), "float32")
    entries = {}
    for case, timing in [("old", None), ("new", {**POLICY, "misaligned": MISALIGNED})]:
        log = tmp_path / f"{case}.jsonl"
        append_records(log, [make_record(inst, target, chip, trace, [2e-6], timing=timing)])
        out = tmp_path / case
        export_library([inst], out, log=log, name="mm")
        lib = autosched.load(out)  # validated and checksummed, the new fields included
        np.testing.assert_allclose(lib.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
        entries[case] = lib.matmul.record
    assert "alignment_bytes" not in entries["old"] and "misaligned" not in entries["old"]  # an old log
    assert entries["new"]["alignment_bytes"] == 64
    assert entries["new"]["misaligned"] == {"offset_bytes": 16, "median_s": 2.5e-6}
    manifest = json.loads((tmp_path / "new" / "manifest.json").read_text())
    manifest["functions"][0]["record"]["misaligned"]["median_s"] = -1.0
    with pytest.raises(LoadError, match=r"functions\[0\]\.record\.misaligned\.median_s"):
        validate_manifest(manifest, "manifest.json")
