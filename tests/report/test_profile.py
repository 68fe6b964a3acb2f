"""autosched profile: a built library's kernels checked against numpy, timed, sorted by share."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import autosched
from autosched.ops import workloads as ops_workloads
from autosched.report.profile import format_profile, profile_directory, profile_section
from autosched.runtime.export import export_library


@pytest.fixture(scope="module")
def library(tmp_path_factory, two_chip_logs):
    out = tmp_path_factory.mktemp("lib")
    mm = ops_workloads.ops_matmul.workload
    instances = [mm.instantiate(M=16, N=16, K=16), mm.instantiate(M=64, N=64, K=64)]
    # 16^3 from the fake-tuned log, 64^3 with the default schedule
    export_library(instances, out, log=two_chip_logs[0], name="mm", allow_default=True)
    return out


def test_profile_checks_times_and_sorts_by_share(library):
    prof = profile_directory(library, repeat=3, pause_s=0.0, warmup_s=0.0)
    assert len(prof.kernels) == 2
    assert all(k.check == "ok" for k in prof.kernels)  # both outputs match the numpy reference
    shares = [k.share for k in prof.kernels]
    assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(1.0)
    flops = {k.name: k.flops for k in prof.kernels}
    assert flops == {"ops_matmul": 2 * 16**3, "ops_matmul_1": 2 * 64**3}
    for k in prof.kernels:
        assert k.gflops == pytest.approx(k.flops / k.median_s / 1e9)
        assert k.bound_gflops == prof.roof.peak_gflops  # bandwidth not measured in tests: peak alone
        assert k.fraction_of_bound == pytest.approx(k.gflops / k.bound_gflops)
    assert any("bandwidth not measured" in n for n in prof.notes)
    text = format_profile(prof)
    assert "ops_matmul_1" in text and "share" in text and "of bound" in text
    assert 'id="profile-table"' in profile_section(prof)


def test_profile_cli_writes_the_report_with_the_profile(library, tmp_path):
    page = tmp_path / "p.html"
    cmd = ["profile", str(library), "--repeat", "2", "--html", str(page)]
    r = subprocess.run(
        [sys.executable, "-m", "autosched.cli", *cmd], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "ops_matmul" in r.stdout and "%" in r.stdout
    html = page.read_text()
    assert 'id="profile-table"' in html and 'id="stats"' in html  # with the report of the library's log


def test_profile_of_a_directory_that_is_no_library(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "autosched.cli", "profile", str(tmp_path)], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert "autosched build" in r.stderr  # the loader's message says what the directory should be


def test_profile_of_a_compiled_model_counts_each_task_as_often_as_it_runs(tmp_path):
    from autosched.graph.export import export_model

    from ..graph.builders import resnet_like

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "3 of 3 tasks untuned": default schedules
        res = export_model(resnet_like(blocks=2), tmp_path / "model")
    prof = profile_directory(res.directory, repeat=2, pause_s=0.0, warmup_s=0.0)
    manifest_tasks = {t["function"]: t for t in autosched.load(res.directory).plan["tasks"]}
    assert {k.name for k in prof.kernels} == set(manifest_tasks)
    for k in prof.kernels:
        assert k.calls == manifest_tasks[k.name]["weight"]
        assert k.flops == manifest_tasks[k.name]["flops"]
        assert k.check.startswith("not checked: a task of the model")
    assert prof.total_s == pytest.approx(sum(k.calls * k.median_s for k in prof.kernels))
    assert sum(k.share for k in prof.kernels) == pytest.approx(1.0)
    assert "calls" in format_profile(prof)


def test_a_busy_machine_is_said(monkeypatch):
    from autosched.report import profile

    monkeypatch.setattr(profile.os, "getloadavg", lambda: (99.0, 0.0, 0.0))
    assert "the machine is busy (load average 99.0" in profile._busy_note()
    monkeypatch.setattr(profile.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert profile._busy_note() == ""


def test_profile_cli_fails_when_a_kernel_mismatches(library, monkeypatch, capsys):
    import argparse
    import dataclasses

    from autosched.report import cli, profile

    real = profile.profile_directory

    def mismatching(*args, **kwargs):
        prof = real(*args, **kwargs)
        bad = dataclasses.replace(prof.kernels[0], check="MISMATCH (max abs error 1)")
        return dataclasses.replace(prof, kernels=(bad, *prof.kernels[1:]))

    monkeypatch.setattr(profile, "profile_directory", mismatching)
    ns = argparse.Namespace(directory=str(library), repeat=1, op=None, html=None)
    assert cli.cmd_profile(ns) == 1
    err = capsys.readouterr().err
    assert "1 kernel(s) differ from the numpy reference" in err
    monkeypatch.setattr(profile, "profile_directory", real)
    assert cli.cmd_profile(ns) == 0
