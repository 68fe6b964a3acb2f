"""The farm from the command line: a scheduler, `autosched worker`, `autosched tune --cluster` (issue 15)."""

import os
import signal
import socket
import subprocess
import sys

import pytest

from autosched.measure.farm import Farm, FarmError
from autosched.records.log import trace_key

from .common import ROOT, records, wait_for_records


def test_cluster_addresses_that_cannot_work_are_refused_clearly():
    with pytest.raises(FarmError, match="local:N with N >= 1"):
        Farm.connect("local:0")
    with pytest.raises(FarmError, match=r"tcp://HOST:PORT \(a Dask scheduler\) or local:N"):
        Farm.connect("127.0.0.1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOSCHED_MEASURE_CHIP": "0"}
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _scheduler(port):
    return _start("-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                  "--no-dashboard")  # fmt: skip


def _wait_for_worker(address):
    import distributed

    with distributed.Client(address, timeout=60, set_as_default=False) as client:
        client.wait_for_workers(1, timeout=120)


def _stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


@pytest.mark.slow
def test_the_cli_farm_survives_its_scheduler_and_resume_finishes_the_run(tmp_path):
    port, log = _free_port(), tmp_path / "cli.jsonl"
    address = f"tcp://127.0.0.1:{port}"
    tune = ["-m", "autosched.cli", "tune", "examples/matmul.py", "--args", "M=32", "N=32", "K=32",
            "--trials", "40", "--batch-size", "4", "--strategy", "random", "--cluster", address,
            "--log", str(log), "--target", "llvm-cpu"]  # fmt: skip
    scheduler = _scheduler(port)
    worker = _start("-m", "autosched.cli", "worker", "--scheduler", address, "--target", "llvm-cpu", "--wait")
    try:
        _wait_for_worker(address)
        run = _start(*tune)
        wait_for_records(log, 8, timeout_s=120)
        scheduler.send_signal(signal.SIGINT)  # the scheduler goes away mid-run
        _, err = run.communicate(timeout=120)
        assert run.returncode == 2, err
        assert "went away" in err and "--resume" in err
        kept = len(records(log))
        assert kept % 4 == 0 and 8 <= kept < 40  # whole batches only
        scheduler.wait(30)
        scheduler = _scheduler(port)  # a new scheduler at the same address: the worker rejoins it
        _wait_for_worker(address)
        again = subprocess.run([sys.executable, *tune, "--resume"], cwd=ROOT, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "AUTOSCHED_MEASURE_CHIP": "0"},
                               timeout=300)  # fmt: skip
        assert again.returncode == 0, again.stderr
        got = records(log)
        assert len(got) == 40 and len({trace_key(r.trace) for r in got}) == 40
        assert {r.target for r in got} == {"llvm-cpu"} and all(r.ok for r in got)
    finally:
        for proc in (worker, scheduler):
            _stop(proc)


def test_without_cluster_dask_is_not_imported():
    code = (
        "import sys; from autosched.cli import build_parser; import autosched.tune, autosched.farm_cli; "
        "ns = build_parser().parse_args(['tune', 'op.py']); assert ns.cluster is None; "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')], 'dask imported'"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_target_lists_split_at_commas_before_a_target_kind_only():
    from autosched.farm_cli import requested_targets

    assert requested_targets("all") is None
    assert requested_targets("llvm-cpu,opencl") == ["llvm-cpu", "opencl"]
    assert requested_targets("llvm-cpu -mattr=+avx2,+fma, opencl") == ["llvm-cpu -mattr=+avx2,+fma", "opencl"]


@pytest.mark.slow
def test_the_farm_benchmark_quick_mode_prints_its_table():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "farm.py"), "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    for mode in ("local", "local:1", "local:2"):
        assert f" {mode} " in run.stdout
    assert "trials/min" in run.stdout and "best GFLOP/s" in run.stdout


def test_both_farm_commands_stop_the_display_then_name_the_log_when_lost_or_interrupted(capsys):
    from autosched.farm_cli import _stopped_cleanly
    from autosched.measure.farm import FarmLostError

    class Progress:
        stopped = 0

        def stop(self):
            self.stopped += 1

    def lose():
        raise FarmLostError("the farm went away")

    def interrupt():
        raise KeyboardInterrupt

    progress = Progress()
    assert _stopped_cleanly(progress, "run.jsonl", lambda: 7) == 7 and progress.stopped == 0
    with pytest.raises(FarmLostError, match=r"the farm went away \(log run\.jsonl\)"):
        _stopped_cleanly(progress, "run.jsonl", lose)
    assert _stopped_cleanly(progress, "run.jsonl", interrupt) is None and progress.stopped == 2
    assert "every finished batch is in run.jsonl; continue with --resume" in capsys.readouterr().err
