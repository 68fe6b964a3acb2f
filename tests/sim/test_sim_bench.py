"""benchmarks/simulator.py resumes: candidates measured once are kept in the store and a rerun measures
only the new ones (a model change re-predicts them, timing nothing); ``--estimate`` lists the pieces
still to run with their minutes, ``--report`` measures nothing; lines cut short or of another version
are skipped."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from autosched.measure.result import MeasureResult

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("simulator_bench", ROOT / "benchmarks" / "simulator.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeMeasurer:
    """Times each candidate as its position in the batch (no kernel runs); counts what it was asked."""

    asked: ClassVar[list[int]] = []

    def __enter__(self) -> FakeMeasurer:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def measure(self, task: Any, traces: list) -> list[MeasureResult]:
        FakeMeasurer.asked.append(len(traces))
        return [MeasureResult(costs=(1e-6 * (i + 1),)) for i in range(len(traces))]


def _args(bench: ModuleType, store: Path, *extra: str) -> list[str]:
    return ["--quick", "--workloads", "layer_norm", "--targets", "llvm-cpu", "--sections", "correlation",
            "--candidates", "5", "--threads", "1", "--store", str(store),
            "--passes", "1", *extra]  # fmt: skip


def test_a_rerun_measures_only_what_is_not_stored(tmp_path, bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    store = tmp_path / "store.jsonl"
    FakeMeasurer.asked = []
    assert bench.main(_args(bench, store, "--estimate")) == 0
    assert "correlation llvm-cpu" in capsys.readouterr().out and FakeMeasurer.asked == []
    bench.main(_args(bench, store))
    assert sum(FakeMeasurer.asked) == 5
    lines = [json.loads(x) for x in store.read_text().splitlines()]
    assert len(lines) == 5 and all(x["v"] == 1 and x["kind"] == "measured" for x in lines)
    capsys.readouterr()
    bench.main(_args(bench, store))  # all stored: nothing measured, the figure printed again
    out = capsys.readouterr().out
    assert sum(FakeMeasurer.asked) == 5 and "0 measured now" in out and "nothing to run" in out
    bench.main(_args(bench, store, "--candidates", "7"))  # two more: only those
    assert sum(FakeMeasurer.asked) == 7


def test_measured_again_a_candidate_keeps_its_least_time(tmp_path, bench):
    store = bench.Store(tmp_path / "s.jsonl")
    store.add_measured("k", "a", 3e-6, 0.5)
    store.add_measured("k", "a", 2e-6, 0.5)
    store.add_measured("k", "a", 4e-6, 0.5)
    store.add_measured("k", "b", None, 0.5, "wrong_result: max abs error 1")
    store.add_measured("k", "b", 5e-6, 0.5)
    store.add_measured("k", "c", None, 0.5, "crash: build worker died while building this candidate")
    store.add_measured("k", "d", None, 0.5, "wrong_result: max abs error 1")
    again = bench.Store(tmp_path / "s.jsonl")
    assert again.measured("k")["a"]["cost"] == 2e-6 and again.measured("k")["b"]["cost"] == 5e-6
    assert "c" not in again.measured("k")  # the machine's failure: measured again next time
    assert again.measured("k")["d"]["cost"] is None  # the kernel's own: not measured again


def test_two_passes_by_default_each_kept_and_their_retest_correlation(tmp_path, bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    path = tmp_path / "s.jsonl"
    FakeMeasurer.asked = []
    bench.main(_args(bench, path))  # --passes 1
    assert "retest    n/a" in capsys.readouterr().out and FakeMeasurer.asked == [5]
    default = _args(bench, path)[:-2]  # without --passes 1: two passes, so only the second one runs
    assert bench.main([*default, "--estimate"]) == 0 and "1 piece(s) to run" in capsys.readouterr().out
    bench.main(default)
    assert FakeMeasurer.asked == [5, 5] and "retest  1.000" in capsys.readouterr().out  # the fake agrees
    bench.main([*default, "--again"])  # one pass more
    assert FakeMeasurer.asked == [5, 5, 5]
    store = bench.Store(path)
    (key,) = {json.loads(x)["key"] for x in path.read_text().splitlines()}
    assert len(store.passes(key)) == 5 and all(len(costs) == 3 for costs in store.passes(key).values())
    assert store.passes("another piece") == {}
    assert bench.main([*default, "--estimate"]) == 0 and "nothing to run" in capsys.readouterr().out


def test_candidates_of_an_earlier_sketch_do_not_count_as_done(tmp_path, bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    path = tmp_path / "s.jsonl"
    bench.main(_args(bench, path))  # the 5 candidates sampled now, one pass each
    (key,) = {json.loads(x)["key"] for x in path.read_text().splitlines()}
    store = bench.Store(path)
    for i in range(20):  # kernels the sketch no longer samples, measured twice over
        store.add_measured(key, f"old{i}", 1e-6, 0.5)
        store.add_measured(key, f"old{i}", 1e-6, 0.5)
    capsys.readouterr()
    default = _args(bench, path)[:-2]  # two passes: the 5 lack their second, whatever else is stored
    assert bench.main([*default, "--estimate"]) == 0 and "1 piece(s) to run" in capsys.readouterr().out
    FakeMeasurer.asked = []
    bench.main(default)
    assert FakeMeasurer.asked == [5] and "(5 candidates, " in capsys.readouterr().out


def test_report_measures_nothing_and_says_what_is_missing(tmp_path, bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    FakeMeasurer.asked = []
    bench.main(_args(bench, tmp_path / "s.jsonl", "--report"))
    out = capsys.readouterr().out
    assert FakeMeasurer.asked == [] and "5 missing" in out and "1 piece(s) to run" in out


def test_the_store_skips_lines_cut_short_or_of_another_version(tmp_path, bench):
    path = tmp_path / "s.jsonl"
    good = {"v": 1, "kind": "measured", "key": "k", "ir": "a", "cost": 2e-6, "seconds": 0.5}
    other = {**good, "v": 99, "ir": "b"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(other) + "\n" + json.dumps(good)[:20] + "\n")
    store = bench.Store(path)
    assert set(store.measured("k")) == {"a"} and store.seconds_per_candidate("k") == 0.5
    store.add_tuning("t", {"trials": 8, "seconds": 32.0, "ratio": 0.9})
    again = bench.Store(path)
    assert again.tuning("t")["ratio"] == 0.9 and again.seconds_per_trial("w", "x", "quick") is None


def test_the_default_store_and_chip_are_this_hosts(bench, monkeypatch):
    import os

    from llvmlite import binding

    monkeypatch.setattr(binding, "get_host_cpu_name", lambda: "znver5")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    # kept in the repository per kind of machine: a later session on a Zen 5 with 2 cores adds to it
    assert bench.default_store(False) == ROOT / "benchmarks" / "stores" / "simulator_znver5_2c.jsonl"
    assert bench.default_store(True).name == "simulator_znver5_2c_quick.jsonl"
    assert bench.native_chip() == "znver5"  # the shipped chip file of the host CPU
    monkeypatch.setattr(binding, "get_host_cpu_name", lambda: "no-such-cpu")
    assert bench.native_chip() == "rocketlake"


def test_haswell_is_modeled_as_the_avx2_core_on_this_machine_and_the_data_sheet_printed_beside(
    tmp_path, bench, monkeypatch, capsys
):
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    monkeypatch.setattr(bench, "native_chip", lambda: "znver5")
    FakeMeasurer.asked = []
    args = _args(bench, tmp_path / "s.jsonl", "--chip", "znver5")
    args[args.index("llvm-cpu")] = "llvm-cpu -mcpu=haswell"
    bench.main(args)
    out = capsys.readouterr().out
    assert FakeMeasurer.asked == [5]
    assert "haswell-i7-4770-on-znver5-1core" in out  # --threads 1: one core of it
    assert "[avx2-desktop as a whole chip:" in out and "those rows from the data sheets' whole chips" in out
    bench.main([*args, "--avx2-chip", "avx2-desktop"])  # a whole chip named: modeled as it is
    out = capsys.readouterr().out
    assert FakeMeasurer.asked == [5] and "as a whole chip" not in out and "avx2-desktop-1core" in out


def test_a_codegen_change_measures_again_and_the_report_labels_older_pieces(
    tmp_path, bench, monkeypatch, capsys
):
    """Measurements and tuning pieces are keyed by the generated code's version: kernels of the same
    loop IR are timed again after codegen changes, and ``--report`` prints an older tuning piece
    labeled as such until it is run again."""
    monkeypatch.setattr(bench, "_measurer", lambda target, args: FakeMeasurer())
    picks = {"sim_pick_s": 2e-3, "real_pick_s": 1e-3, "ratio": 0.5, "seconds": 1.0, "trials": 16}
    monkeypatch.setattr(bench, "sim_vs_real", lambda *a: {"workload": a[0], "target": a[2], **picks})
    path = tmp_path / "s.jsonl"
    both = _args(bench, path, "--sections", "correlation,tuning")  # the later --sections counts
    bench.main(both)
    text = path.read_text()
    assert f"|g{bench.CODEGEN}" in text and bench.CODEGEN >= 2
    path.write_text(text.replace(f"|g{bench.CODEGEN}", ""))  # as the first codegen's bench stored them
    capsys.readouterr()
    assert bench.main([*both, "--estimate"]) == 0
    assert "2 piece(s) to run" in capsys.readouterr().out  # both measured again
    bench.main([*both, "--report"])
    assert f"0.50  (kernels of codegen 1, before {bench.CODEGEN})" in capsys.readouterr().out
