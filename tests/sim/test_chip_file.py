"""Chip files: the shipped ones load, and every malformed field is refused naming the file and the field."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autosched.chip import ChipInfo
from autosched.errors import TargetError
from autosched.sim.chip import ChipFileError, core_on_machine, load_chip, parse_chip, shipped_chips
from autosched.sim.from_facts import chip_from_facts
from autosched.target import parse_target


def test_the_shipped_chips_load_with_their_sources():
    names = shipped_chips()
    assert {"rocketlake", "avx2-desktop", "neon-server", "h100-sxm", "znver5", "znver3"} <= set(names)
    for name in names:
        chip = load_chip(name)
        assert chip.source and chip.sha and chip.peak_gflops > 0
    assert load_chip("rocketlake").peak_gflops_core == pytest.approx(245.5, rel=0.01)  # the measured figure
    h100 = load_chip("h100-sxm")
    assert h100.kind == "gpu" and h100.gpu is not None and h100.gpu.sms == 132 and h100.gpu.warp_size == 32
    assert load_chip("avx2-desktop").simd_bits == 256 and load_chip("neon-server").simd_bits == 128


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda d: d.pop("cores"), "cores", "missing"),
        (lambda d: d.update(cores=0), "cores", "expected 1.."),
        (lambda d: d.update(cores="two"), "cores", "whole number"),
        (lambda d: d.update(clock_ghz=-1.0), "clock_ghz", "expected"),
        (lambda d: d.update(simd_bits=100), "simd_bits", "multiple of 32"),
        (lambda d: d.update(kind="fpga"), "kind", '"cpu" or "gpu"'),
        (lambda d: d.update(colour="red"), "colour", "unknown field"),
        (lambda d: d.update(caches=[]), "caches", "non-empty list"),
        (lambda d: d["caches"][1].update(level=3), "caches[1].level", "in order"),
        (lambda d: d["caches"][1].pop("line_bytes"), "caches[1].line_bytes", "missing"),
        (lambda d: d["caches"][1].update(size_bytes=1024), "caches[1].size_bytes", "not larger"),
        (lambda d: d["caches"][0].update(ways=7), "caches[0].size_bytes", "whole number of sets"),
        (lambda d: d["caches"][0].update(ways=0), "caches[0].ways", "expected 1.."),
        (lambda d: d.update(kind="gpu"), "gpu", '"gpu" object'),
        (lambda d: d.update(source=""), "source", "non-empty"),
        (lambda d: d.update(version=7), "version", "reads version 1"),
    ],
)
def test_a_bad_field_is_named_with_the_file(tmp_path, change, field, words):
    data = load_chip("rocketlake").to_json()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ChipFileError) as e:
        load_chip(str(path))
    assert str(path) in str(e.value) and f"field {field!r}" in str(e.value) and words in str(e.value)


def test_gpu_section_fields_are_checked():
    data = load_chip("h100-sxm").to_json()
    del data["gpu"]["warp_size"]
    with pytest.raises(ChipFileError, match=r"field 'gpu.warp_size': missing"):
        parse_chip(data, "h100.json")


def test_unreadable_files_say_why(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(ChipFileError, match="not valid JSON"):
        load_chip(str(bad))
    with pytest.raises(ChipFileError, match=r"no such file, and no shipped chip.*rocketlake"):
        load_chip(str(tmp_path / "absent.json"))


def test_a_chip_file_round_trips_and_its_hash_follows_the_content(tmp_path):
    chip = load_chip("avx2-desktop")
    path = tmp_path / "copy.json"
    path.write_text(json.dumps(chip.to_json()))
    again = load_chip(str(path))
    assert again.sha == chip.sha and again.caches == chip.caches
    data = chip.to_json()
    data["cores"] = 8
    assert parse_chip(data, "x").sha != chip.sha


def test_the_target_string_checks_the_chip_file(tmp_path):
    assert parse_target("sim -chip=avx2-desktop").get("chip") == "avx2-desktop"
    with pytest.raises(TargetError, match="sim needs -chip=FILE"):
        parse_target("sim")
    path = tmp_path / "c.json"
    data = load_chip("rocketlake").to_json()
    data["fma_units"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(TargetError, match=r"fma_units"):
        parse_target(f"sim -chip={path}")


def test_a_core_on_another_machine_keeps_the_cores_isa_and_the_machines_memory():
    core, machine = load_chip("avx2-desktop"), load_chip("znver5")
    chip = core_on_machine(core, machine)
    assert (chip.simd_bits, chip.vector_registers, chip.fma_latency_cycles) == (256, 16, 5)
    assert chip.llvm_cpu == "haswell" and "avx512f" not in chip.features
    assert (chip.cores, chip.clock_ghz, chip.caches) == (machine.cores, machine.clock_ghz, machine.caches)
    assert chip.memory_bandwidth_gbs == machine.memory_bandwidth_gbs and chip.lanes == 8
    assert chip.sha not in (core.sha, machine.sha) and chip.name == "haswell-i7-4770-on-znver5"
    assert core_on_machine(core, machine).sha == chip.sha  # the same pair, the same chip
    with pytest.raises(ChipFileError, match="CPU chips"):
        core_on_machine(load_chip("h100-sxm"), machine)


def test_a_chip_from_measured_facts_takes_the_ways_the_kernel_reports():
    info = ChipInfo(
        name="znver3", kind="cpu", arch="znver3", features=("avx2", "fma"), cores=2, vector_bits=256,
        l1_bytes=32 * 1024, l2_bytes=512 * 1024, l3_bytes=32 << 20, peak_gflops=191.2, bandwidth_gbs=19.9,
        extra={"facts": "measured", "peak_gflops_core": 95.6},
    )  # fmt: skip
    chip = chip_from_facts(info, "llvm-cpu", {1: 8, 2: 8, 3: 16})
    assert [c.ways for c in chip.caches] == [8, 8, 16] and "ways read" in chip.source
    assert chip.clock_ghz == pytest.approx(95.6 / 32, abs=1e-3)
    unknown = chip_from_facts(info, "llvm-cpu")
    assert [c.ways for c in unknown.caches] == [8, 8, 8] and "8 assumed" in unknown.source
    misread = chip_from_facts(info, "llvm-cpu", {3: 12})  # 32 MiB is no whole number of 12-way sets
    assert [c.ways for c in misread.caches] == [8, 8, 8]


def test_a_chip_from_measured_facts_takes_the_l3_bandwidth_the_probe_timed():
    info = ChipInfo(
        name="znver3", kind="cpu", arch="znver3", features=("avx2", "fma"), cores=2, vector_bits=256,
        l1_bytes=32 * 1024, l2_bytes=512 * 1024, l3_bytes=32 << 20, peak_gflops=191.2, bandwidth_gbs=19.9,
        extra={"facts": "measured", "peak_gflops_core": 95.6, "l2_bandwidth_gbs": 146.6},
    )  # fmt: skip
    guessed = chip_from_facts(info, "llvm-cpu")
    assert guessed.caches[2].bandwidth_gbs == pytest.approx(146.6 / 2 / 3, abs=0.1)  # L2 / 3
    assert "L3 bandwidth a core an estimate" in guessed.source
    timed = chip_from_facts(replace(info, extra={**info.extra, "l3_bandwidth_gbs": 128.0}), "llvm-cpu")
    assert timed.caches[2].bandwidth_gbs == 64.0 and "from the L3 copy probe" in timed.source  # a core's
    assert [c.bandwidth_gbs for c in timed.caches[:2]] == [c.bandwidth_gbs for c in guessed.caches[:2]]


def test_a_chip_from_measured_facts_takes_the_masked_store_the_probe_timed():
    info = ChipInfo(
        name="znver3", kind="cpu", arch="znver3", features=("avx", "avx2", "fma"), cores=2, vector_bits=256,
        l1_bytes=32 * 1024, l2_bytes=512 * 1024, l3_bytes=32 << 20, peak_gflops=191.2, bandwidth_gbs=19.9,
        extra={"facts": "measured", "peak_gflops_core": 95.6, "masked_store_ns": 4.35},
    )  # fmt: skip
    chip = chip_from_facts(info, "llvm-cpu")
    assert (
        chip.masked_store_cycles == 13.0 and "masked store 13 cycles (4.35 ns" in chip.source
    )  # 4.35 ns x 2.99 GHz
    fast = chip_from_facts(replace(info, extra={**info.extra, "masked_store_ns": 0.2}), "llvm-cpu")
    assert fast.masked_store_cycles == 1.0  # never below a plain store's cycle
    unprobed = chip_from_facts(
        replace(info, extra={"facts": "measured", "peak_gflops_core": 95.6}), "llvm-cpu"
    )
    assert unprobed.masked_store_cycles == 1.0 and "masked_store_cycles" not in unprobed.to_json()


def test_the_masked_store_cost_is_optional_and_the_machines():
    data = load_chip("znver3").to_json()
    assert data["masked_store_cycles"] == 13.0  # measured on Zen 3: vmaskmovps is microcoded there
    for bad in (0.5, "13", float("nan")):
        with pytest.raises(ChipFileError, match="masked_store_cycles"):
            parse_chip({**data, "masked_store_cycles": bad}, "z.json")
    plain = load_chip("avx2-desktop")
    assert plain.masked_store_cycles == 1.0
    assert "masked_store_cycles" not in plain.to_json()  # unset: not written, so the sha is kept
    # haswell code on a Zen 3 machine stores through Zen 3's store unit
    assert core_on_machine(plain, load_chip("znver3")).masked_store_cycles == 13.0
