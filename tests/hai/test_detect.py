"""platform="auto" decides per workload: the fastest tuned record, else a roofline over chip facts."""

import logging

import pytest

from autosched.hai import auto as detect
from autosched.hai.base import ChipInfo
from autosched.hai.registry import get_adapter
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import SMALL_CASES, make_matmul

FAST_COMPUTE = ChipInfo("big-alu", "gpu", "x", peak_gflops=1000.0, bandwidth_gbs=10.0)
FAST_MEMORY = ChipInfo("wide-bus", "cpu", "y", peak_gflops=100.0, bandwidth_gbs=500.0)


@pytest.fixture
def two_chips(monkeypatch):
    monkeypatch.setattr(detect, "available", lambda: [("alu", FAST_COMPUTE), ("bus", FAST_MEMORY)])


def _inst(case):
    tensors = make_matmul(M=1024, N=1024, K=1024) if case == "matmul" else SMALL_CASES[case]()
    return WorkloadInstance(case, {}, tuple(tensors))


def test_compute_bound_work_goes_to_the_higher_peak(two_chips, caplog):
    with caplog.at_level(logging.DEBUG, logger="autosched.hai"):
        assert detect.choose_target(_inst("matmul")) == "alu"
    assert "matmul on alu, no tuned record; compute-bound" in caplog.text


def test_memory_bound_work_goes_to_the_higher_bandwidth(two_chips, caplog):
    with caplog.at_level(logging.DEBUG, logger="autosched.hai"):
        assert detect.choose_target(_inst("gelu")) == "bus"
    assert "gelu on bus, no tuned record; memory-bound" in caplog.text


def test_a_tuned_record_beats_the_chip_facts(two_chips, caplog):
    tuned = {"bus": 2e-3}  # only the slower-peak chip has a record: it wins even for matmul
    with caplog.at_level(logging.DEBUG, logger="autosched.hai"):
        assert detect.choose_target(_inst("matmul"), lambda t, chip: tuned.get(t)) == "bus"
    assert "on bus, its fastest tuned record (0.002 s)" in caplog.text
    tuned = {"bus": 2e-3, "alu": 1e-3}
    assert detect.choose_target(_inst("matmul"), lambda t, chip: tuned.get(t)) == "alu"


def test_no_workload_means_the_highest_peak(two_chips):
    assert detect.choose_target() == "alu"


def test_compile_only_devices_never_run_auto_work():
    found = [t for t, _ in detect.available()]
    assert "llvm-cpu" in found and "null" not in found
    assert get_adapter(detect.choose_target(_inst("matmul"))).spec.can_run
