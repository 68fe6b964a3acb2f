"""A tuner killed outright (SIGKILL: no cleanup runs) leaves no build worker behind (review finding 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SCRIPT = """
import sys, time
from autosched import te
from autosched.measure.builder import LocalBuilder
from autosched.measure.task import MeasureTask
from autosched.search_space.default import default_schedule

if __name__ == "__main__":
    A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    builder = LocalBuilder(1, timeout_s=120)
    (built,) = builder.build(MeasureTask.create("mm", [A, B, C]), [default_schedule(C, cores=1).trace])
    assert built.ok, built.error_msg
    print(",".join(str(p.pid) for p in builder._pool._processes.values()), flush=True)
    time.sleep(600)  # killed here, holding a live pool
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    """Every process whose parent is ``pid`` (the pool worker, the resource tracker)."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return kids


def test_a_sigkilled_tuner_takes_its_build_worker_with_it() -> None:
    pytest.importorskip("llvmlite")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip(), f"the script built nothing (exit {proc.poll()})"
        workers = [int(p) for p in line.strip().split(",")]
        helpers = set(_children(proc.pid)) | set(workers)  # with the resource tracker
        assert workers and all(_alive(p) for p in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in helpers):
            time.sleep(0.1)
        left = [p for p in helpers if _alive(p)]
        for p in left:  # not to leak them when the test fails
            os.kill(p, signal.SIGKILL)
        assert not left, f"processes of the killed tuner still running: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
