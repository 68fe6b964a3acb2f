"""The sim adapter: tune works on a chip file's chip, its records are marked simulated and keyed by the
chip file, and they are never taken for measurements of a real chip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autosched.cli import main
from autosched.errors import TargetError
from autosched.hai import sim as sim_adapter
from autosched.hai.chip_facts import measured_info
from autosched.hai.registry import get_adapter
from autosched.hai.sim import SimAdapter
from autosched.lower.pipeline import lower
from autosched.records.log import best_valid_record, load_records
from autosched.records.record import fingerprint_of
from autosched.search_space.schedule import replay
from autosched.sim.chip import load_chip
from autosched.sim.model import SIM_MODEL_VERSION
from autosched.target import Target, parse_target
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul
from autosched.tune import TuneOptions, Tuner

SIM = "sim -chip=avx2-desktop"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    log = tmp_path_factory.mktemp("sim") / "sim.jsonl"
    inst = WorkloadInstance("matmul", {}, tuple(make_matmul(32, 32, 32)))
    options = TuneOptions(trials=6, batch_size=3, strategy="random", baseline=False, timeout_s=20.0)
    (task,) = Tuner([inst], SIM, log, options).run()
    return inst, task, log


def test_tune_on_a_simulated_chip_logs_modeled_times(tuned):
    inst, task, log = tuned
    assert task.trials == 6 and task.best_trace is not None
    records = load_records(log).records
    assert len(records) == 6 and all(r.ok for r in records), [r.error_msg for r in records]
    adapter = get_adapter(SIM)
    for rec in records:  # the logged cost is the model's time for that schedule, not a measurement
        func = lower(replay(list(inst.outputs), rec.trace), list(inst.tensors), inst.name, adapter.target)
        assert rec.mean_cost == pytest.approx(adapter.predict(func).seconds)


def test_records_are_marked_simulated_and_keyed_by_the_chip_file(tuned):
    _, _, log = tuned
    rec = load_records(log).records[0]
    chip = load_chip("avx2-desktop")
    assert rec.fingerprint.startswith(f"sim:{chip.name}-{chip.sha[:8]}-m{SIM_MODEL_VERSION}:")
    assert rec.chip["extra"]["simulated"] is True and rec.chip["extra"]["chip_sha"] == chip.sha
    assert rec.chip["extra"]["sim_model_version"] == SIM_MODEL_VERSION


def _fingerprint(target: str) -> str:
    adapter = get_adapter(target)
    return fingerprint_of(adapter.target, adapter.info())


def test_the_fingerprint_names_the_chip_by_content_and_the_model_version(monkeypatch, tmp_path):
    shipped = load_chip("avx2-desktop")
    copy = tmp_path / "mine.json"
    copy.write_bytes(open(shipped.path, "rb").read())
    assert _fingerprint(SIM) == _fingerprint(f"sim -chip={shipped.path}") == _fingerprint(f"sim -chip={copy}")
    assert _fingerprint(SIM) != _fingerprint("sim -chip=rocketlake")
    before = _fingerprint(SIM)
    monkeypatch.setattr(sim_adapter, "SIM_MODEL_VERSION", SIM_MODEL_VERSION + 1)  # a new model
    assert _fingerprint(SIM) != before  # its records do not mix with the old model's on resume
    assert _fingerprint("llvm-cpu -mcpu=haswell") != _fingerprint("llvm-cpu")  # real options still count


def test_a_gpu_chip_file_is_refused_until_there_is_a_gpu_model():
    with pytest.raises(TargetError, match=r"h100-sxm.json\) is a gpu chip; the sim model covers CPU"):
        parse_target("sim -chip=h100-sxm")
    with pytest.raises(TargetError, match="covers CPU chips only"):
        SimAdapter(Target("sim", (("chip", "h100-sxm"),)))  # built by hand: still checked
    assert load_chip("h100-sxm").gpu is not None  # the chip file itself stays valid data


def test_buffers_are_the_host_adapters():
    adapter = get_adapter(SIM)
    a = np.arange(6, dtype="float32").reshape(2, 3)
    handle = adapter.copy_in(a)
    out = adapter.alloc((2, 3), "float32")
    adapter.copy_out(handle, out)
    assert np.array_equal(out, a) and handle is not a


def test_simulated_records_are_never_used_for_a_real_chip(tuned):
    inst, _, log = tuned
    for target in ("llvm-cpu", "llvm-cpu -mcpu=haswell"):  # haswell: the very ISA the chip file names
        adapter = get_adapter(target)
        real = fingerprint_of(adapter.target, measured_info(adapter))
        res = load_records(log, target_fingerprint=real, workload=inst)
        assert res.records == [] and res.foreign == 6
        assert best_valid_record([log], inst, real)[0] is None


def test_the_host_runs_the_chips_isa_for_the_check():
    assert str(get_adapter(SIM).host.target) == "llvm-cpu -mcpu=haswell"
    assert "x86-64-v2" in str(get_adapter("sim -chip=neon-server").host.target)  # 128-bit vectors here
    info = get_adapter("sim -chip=neon-server").info()
    assert info.cores == 64 and info.vector_bits == 128 and info.extra["simulated"]


def test_sim_explain_and_devices_chip_file(tmp_path, capsys):
    op = tmp_path / "op.py"
    op.write_text(
        "import autosched\nfrom autosched.topi.workloads import make_matmul\n\n"
        "@autosched.workload\ndef mm(M=64, N=64, K=64):\n    return make_matmul(M, N, K)\n"
    )
    assert main(["sim", "explain", str(op), "--chip", "rocketlake"]) == 0
    out = capsys.readouterr().out
    assert "the default schedule" in out and "bound by" in out and "modeled" in out
    chip_file = tmp_path / "here.json"
    assert main(["devices", "--chip-file", str(chip_file)]) == 0
    here = load_chip(str(chip_file))  # what it wrote is a valid chip file
    assert here.cores >= 1 and here.source and json.loads(chip_file.read_text())["format"] == "autosched-chip"
    assert main(["sim", "explain", str(op), "--chip", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
