"""Targets, timeouts and interrupts that used to crash or be ignored (issue 19)."""

import os
import signal
import time
from pathlib import Path

import pytest

from autosched import te
from autosched.errors import TargetError
from autosched.hai.llvm_cpu import llvm_cpu_names
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import LocalMeasurer
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.search_space.default import default_schedule
from autosched.search_space.gpu_sketch import default_gpu_schedule
from autosched.target import parse_target

from .test_opencl import _why as _opencl_why


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llvm-cpu -mcpu=nonsense", r"-mcpu=nonsense: LLVM knows no such CPU.*llc -mcpu=help"),
        ("llvm-cpu -mcpu=haswel", r"did you mean haswell"),
        ("llvm-cpu -mattr=+avx3", r"LLVM knows no feature 'avx3' \(did you mean .*\+avx2"),
        ("llvm-cpu -mattr=avx2", r"'avx2' needs a sign: \+avx2 enables it"),
    ],
)
def test_unknown_cpu_or_feature_is_refused_at_parse_time(text, expected):
    with pytest.raises(TargetError, match=expected):
        parse_target(text)


def test_known_cpu_and_features_parse():
    cpus, features = llvm_cpu_names()
    assert {"haswell", "x86-64", "generic"} <= cpus and {"avx2", "avx512f", "fma"} <= features
    assert str(parse_target("llvm-cpu -mcpu=haswell -mattr=+avx2,-avx512f")) == (
        "llvm-cpu -mattr=+avx2,-avx512f -mcpu=haswell"
    )


def _sigint_ignored(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("SigIgn:")]
    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
def test_workers_ignore_ctrl_c_from_their_first_instruction():
    # Ignored at spawn (inherited across exec), not only once the worker's code runs: a Ctrl-C while
    # a worker still imports used to print its KeyboardInterrupt traceback.
    # The tests' own process may have been started with Ctrl-C ignored (a `cmd &` in a script): give it
    # Python's usual handler, which the spawn must then restore.
    launched_with = signal.signal(signal.SIGINT, signal.default_int_handler)
    runner = LocalRunner(timeout_s=30)
    try:
        runner._start()
        assert _sigint_ignored(runner._proc.pid)
        os.kill(runner._proc.pid, signal.SIGINT)
        time.sleep(0.2)
        assert runner._proc.is_alive()
        runner.close()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's is restored
    finally:
        runner.close()
        signal.signal(signal.SIGINT, launched_with)
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    task = MeasureTask.create("double", [A, B])
    with LocalBuilder(n_workers=1) as builder:
        (built,) = builder.build(task, [default_schedule(B, cores=1).trace])
        assert built.ok, built.error_msg
        pids = list(builder._pool._processes)
        assert pids and all(_sigint_ignored(pid) for pid in pids)


@pytest.mark.skipif(_opencl_why is not None, reason=_opencl_why or "")
def test_opencl_candidate_past_the_timeout_is_killed_and_recorded():
    M = 512  # about 0.3 GFLOP: tens of ms a run on PoCL even once its kernel is cached, far past 5 ms
    A, B = te.placeholder((M, M), name="A"), te.placeholder((M, M), name="B")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((M, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    task = MeasureTask.create("mm", [A, B, C], "opencl")
    trace = default_gpu_schedule(C).trace
    with LocalMeasurer(LocalBuilder(n_workers=1), LocalRunner(timeout_s=0.005, repeat=2)) as m:
        (late,) = m.measure(task, [trace])
        assert late.error == "timeout" and "killed" in late.error_msg, str(late)
        assert m.runner._proc is None  # the worker running it is gone
        m.runner.timeout_s = 60.0
        (ok,) = m.measure(task, [trace])  # a fresh worker takes the next candidate
    assert ok.error is None and len(ok.costs) == 2, str(ok)
