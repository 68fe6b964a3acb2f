"""autosched report: the page's sections on real and fake logs, and bad input said on page and terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from autosched.records.log import read_log
from autosched.report.data import read_logs, summarize
from autosched.report.page import build_report, write_report
from autosched.report.resolve import ChipRoof, chip_roof

from .conftest import SHIPPED, fake_tune

pytest.importorskip("matplotlib", reason="figures need the report extra (matplotlib)")


def _embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="autosched-data">(.*?)</script>', html, re.S)
    assert m, "the page embeds its data"
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_report_of_two_chips_has_every_section(two_chip_logs, tmp_path):
    report = write_report(two_chip_logs, tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    for section in ("overview", "stats", "curves", "roofline", "cross-chip", "code"):
        assert f'<section id="{section}">' in html
    assert html.count('<div class="figures tuning-curve">') == 1  # one workload...
    assert html.count("<svg") >= 2 + 2  # ...two curves (trials, wall time), a roofline per chip
    assert 'id="cross-chip-table"' in html  # the same key on two chips, side by side
    assert "llvm-cpu -mcpu=haswell" in html
    assert "<summary>LLVM IR</summary>" in html and "<summary>loop IR</summary>" in html
    assert "bandwidth not measured" in html  # estimates only in tests (AUTOSCHED_MEASURE_CHIP=0)
    tasks = _embedded(html)["tasks"]
    assert len(tasks) == 2 and {t["target"] for t in tasks} == {"llvm-cpu", "llvm-cpu -mcpu=haswell"}
    native = next(t for t in tasks if t["target"] == "llvm-cpu")
    assert native["trials"] == 12 and native["failures"].get("timeout", 0) >= 1
    # the numbers are the log's: best GFLOP/s is the pick's, as `build` makes it (a re-timed schedule)
    recs = [r for r in read_log(two_chip_logs[0])[0] if r.ok and r.target == "llvm-cpu"]
    retimed = [r for r in recs if r.retimed is not None]
    assert retimed and native["best_gflops"] == pytest.approx(max(r.gflops for r in retimed))
    assert not report.notes


def test_curves_are_the_running_best_in_log_order(two_chip_logs):
    data = summarize(read_logs(two_chip_logs[:1]))
    (curves,) = data.curves.values()
    (curve,) = curves
    records = [r for r in read_log(two_chip_logs[0])[0] if r.retimed is None]  # the search's trials
    best, expected = 0.0, []
    for rec in records:
        best = max(best, rec.gflops)
        if best > 0:
            expected.append(best)
    assert list(curve.best_gflops) == expected
    assert list(curve.best_gflops) == sorted(curve.best_gflops)
    assert curve.trials[-1] == len(records)


@pytest.mark.skipif(not SHIPPED, reason="no shipped logs in tuning_logs/")
def test_report_of_the_shipped_logs(tmp_path):
    out = tmp_path / "shipped.html"
    r = subprocess.run(
        [sys.executable, "-m", "autosched.cli", "report", *map(str, SHIPPED), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    html = out.read_text()
    n = sum(len(read_log(p)[0]) for p in SHIPPED)
    assert f"{n} record(s) in {len(SHIPPED)} log(s)" in html
    assert 'class="figures roofline"' in html and "<svg" in html
    assert "ops_matmul" in html and "<summary>schedule (as code)</summary>" in html


@pytest.mark.parametrize(
    "content, says",
    [
        (b"", "no tuning records in this log (empty file)"),
        (b'{"hello": "world"}\n', "1 line(s) skipped, not tuning records"),  # foreign JSON
        (b'\x00\xff garbage\n{"version": 1, "work', "2 line(s) skipped"),  # corrupt, cut off
    ],
)
def test_bad_logs_are_said_on_the_page_and_in_the_terminal(tmp_path, content, says):
    log = tmp_path / "bad.jsonl"
    log.write_bytes(content)
    out = tmp_path / "r.html"
    r = subprocess.run(
        [sys.executable, "-m", "autosched.cli", "report", str(log), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert says in r.stderr and says in out.read_text()
    assert "nothing to show: no tuning records were read" in out.read_text()


def test_a_missing_log_is_a_note_and_the_others_still_show(two_chip_logs, tmp_path):
    report = build_report([tmp_path / "nope.jsonl", two_chip_logs[1]])
    assert any("nope.jsonl: not read" in n and "not found" in n for n in report.notes)
    assert len(report.data.tasks) == 1


def test_a_log_of_only_failures(tmp_path):
    log = fake_tune(tmp_path / "fail.jsonl", "llvm-cpu", trials=4, errors={"compile": 0.5, "crash": 0.5})
    report = build_report([log])
    (line,) = [n for n in report.notes if "no successful measurement" in n]
    assert "in 4 trial(s)" in line and "ops_matmul" in line
    assert "no tuning curve: no workload has a successful measurement" in report.html
    assert "no best schedule" in report.html


def test_unregistered_workloads_show_schedule_code_only(tmp_path):
    src = read_log(SHIPPED[0])[0][0] if SHIPPED else None
    if src is None:
        pytest.skip("no shipped logs")
    line = src.to_json_line().replace('"name":"ops_matmul"', '"name":"someone_elses_matmul"')
    log = tmp_path / "foreign_op.jsonl"
    log.write_text(line + "\n")
    report = build_report([log])
    assert "not placed: someone_elses_matmul" in report.html
    assert "pass --op FILE" in report.html
    assert "<summary>schedule (as code)</summary>" in report.html
    assert "<summary>loop IR</summary>" not in report.html


def test_chip_roof_reads_measured_and_old_facts():
    old = chip_roof({"peak_gflops": 268.8, "bandwidth_gbs": 0.0, "extra": {}})
    assert old == ChipRoof(268.8, 0.0, 0.0, measured=False)
    assert old.bound(1.0) == 268.8 and "bandwidth not measured" in old.describe()
    new = chip_roof({"peak_gflops": 500.0, "bandwidth_gbs": 20.0,
                     "extra": {"facts": "measured", "l2_bandwidth_gbs": 200.0}})  # fmt: skip
    assert new.measured and new.bound(2.0) == 40.0 and new.bound(100.0) == 500.0
    assert chip_roof({}).bound(5.0) == 0.0


def test_a_directory_given_as_log_is_a_note(tmp_path):
    report = build_report([tmp_path])
    assert any(n.startswith(f"{tmp_path}: not read") for n in report.notes)
    assert "not read" in report.html


def test_opencl_records_show_opencl_c(tmp_path):
    pytest.importorskip("pyopencl", reason="the opencl extra (pyopencl) is not installed")
    from autosched.errors import AutoschedError

    try:
        log = fake_tune(tmp_path / "cl.jsonl", "opencl", trials=4)
    except AutoschedError as e:  # no OpenCL platform or device here
        pytest.skip(f"no OpenCL device: {e}")
    html = build_report([log]).html
    assert "<summary>OpenCL C</summary>" in html and "__kernel" in html


def test_records_without_flop_count_and_bad_op_files_are_notes(tmp_path):
    if not SHIPPED:
        pytest.skip("no shipped logs")
    src = read_log(SHIPPED[0])[0][0]
    log = tmp_path / "noflops.jsonl"
    log.write_text(src.to_json_line().replace(f'"flops":{src.flops}', '"flops":0.0') + "\n")
    bad_op = tmp_path / "broken_op.py"
    bad_op.write_text("this is not python\n")
    report = build_report([log], op_files=[str(bad_op)])
    assert "its records give no FLOP count" in report.html
    assert any(n.startswith(f"--op {bad_op}: not loaded") for n in report.notes)


def test_without_matplotlib_the_tables_still_show(two_chip_logs, monkeypatch):
    from autosched.report import figures

    def no_matplotlib(*args, **kwargs):
        raise figures.ReportDependencyError("figures need matplotlib: pip install 'autosched[report]'")

    monkeypatch.setattr(figures, "_figure", no_matplotlib)
    report = build_report(two_chip_logs)
    assert "<svg" not in report.html and 'id="task-table"' in report.html
    assert "figure not drawn: figures need matplotlib" in report.html
    assert any("pip install 'autosched[report]'" in n for n in report.notes)
