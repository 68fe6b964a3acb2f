"""Chip facts measured once and cached: the probes run real loops; a keyed cache that survives bad files."""

import json

import pytest

from autosched.hai import chip_facts
from autosched.hai.cpu_facts import (
    STORE_STEPS,
    l3_probe_bytes,
    measure_copy_gbs,
    measure_peak_gflops,
    measure_store_ns,
)
from autosched.hai.registry import get_adapter, list_devices


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AUTOSCHED_MEASURE_CHIP", raising=False)
    calls = []

    def fake_measure(adapter, info):
        calls.append(str(adapter.target))
        return {"peak_gflops": 400.0, "peak_gflops_core": 200.0, "bandwidth_gbs": 30.0,
                "l2_bandwidth_gbs": 150.0, "l3_bandwidth_gbs": 90.0, "masked_store_ns": 4.347}  # fmt: skip

    monkeypatch.setattr(chip_facts, "measure", fake_measure)
    return tmp_path / "chip_facts.json", calls


def test_probes_run_on_the_native_and_a_variant_target():
    for target in ("llvm-cpu", "llvm-cpu -mcpu=haswell"):
        adapter = get_adapter(target)
        assert measure_peak_gflops(adapter, threads=1, seconds=0.01) > 0
        assert measure_copy_gbs(adapter, 1 << 20, threads=2, seconds=0.01) > 0  # checks the copy inside


def test_the_store_probe_runs_each_kind_of_store():
    adapter = get_adapter("llvm-cpu -mcpu=haswell")  # AVX2: vmaskmovps, the store the probe is for
    for step in STORE_STEPS:
        assert measure_store_ns(adapter, step, n=20_000, repeat=1) > 0  # checks the slots were written


def test_the_l3_probe_copies_past_the_l2_and_within_a_share_of_the_l3():
    mib = 1 << 20
    assert l3_probe_bytes(mib // 2, 32 * mib, cores=2) == mib  # source and destination 4x the L2
    assert l3_probe_bytes(2 * mib, 32 * mib, cores=2) == 2 * mib  # a quarter of the L3 for both cores
    assert l3_probe_bytes(2 * mib, 8 * mib, cores=2) == 0  # an L3 too small to tell from the L2
    assert l3_probe_bytes(mib, 0, cores=2) == 0  # no L3


def test_measured_once_then_cached_per_target(cache):
    path, calls = cache
    info = chip_facts.measured_info(get_adapter("llvm-cpu"))
    assert (info.peak_gflops, info.bandwidth_gbs, info.extra["facts"]) == (400.0, 30.0, "measured")
    assert info.extra["l2_bandwidth_gbs"] == 150.0 and info.extra["peak_gflops_core"] == 200.0
    assert info.extra["l3_bandwidth_gbs"] == 90.0 and info.extra["masked_store_ns"] == 4.35
    chip_facts.measured_info(get_adapter("llvm-cpu"))
    assert calls == ["llvm-cpu"]
    chip_facts.measured_info(get_adapter("llvm-cpu -mcpu=haswell"))  # another chip: its own entry
    assert calls == ["llvm-cpu", "llvm-cpu -mcpu=haswell"]
    assert len(json.loads(path.read_text())["chips"]) == 2
    chip_facts.measured_info(get_adapter("llvm-cpu"), remeasure=True)
    assert calls[-1] == "llvm-cpu" and len(calls) == 3


BAD_CACHES = ["{not json", '{"version": 99}', '{"version": 1, "chips": {"x": 5}}', "[]"]


@pytest.mark.parametrize("content", BAD_CACHES)
def test_a_bad_cache_file_is_measured_again_and_rewritten(cache, content):
    path, calls = cache
    path.write_text(content)
    assert chip_facts.measured_info(get_adapter("llvm-cpu")).extra["facts"] == "measured"
    assert calls == ["llvm-cpu"]
    assert json.loads(path.read_text())["version"] == chip_facts.FACTS_VERSION


def test_estimates_when_told_not_to_measure(cache, monkeypatch):
    _, calls = cache
    monkeypatch.setenv("AUTOSCHED_MEASURE_CHIP", "0")
    info = chip_facts.measured_info(get_adapter("llvm-cpu"))
    assert info.extra["facts"] == "estimated" and calls == []
    assert chip_facts.measured_info(get_adapter("llvm-cpu"), measure_now=False).extra["facts"] == "estimated"


def test_devices_show_measured_peak_and_bandwidth(cache):
    line = next(x for x in list_devices() if x.startswith("llvm-cpu"))
    assert "400 GFLOP/s fp32 peak, 30 GB/s memory (measured)" in line


def test_devices_remeasure_flag(cache, capsys):
    from autosched.cli import main

    _, calls = cache
    assert main(["devices"]) == 0 and main(["devices"]) == 0
    assert calls.count("llvm-cpu") == 1  # measured once, then cached
    assert main(["devices", "--remeasure"]) == 0
    assert calls.count("llvm-cpu") == 2
    assert "(measured)" in capsys.readouterr().out
