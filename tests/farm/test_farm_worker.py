"""The worker side: which device a timing holds, and that the host lock excludes other processes."""

import subprocess
import sys
import threading
import time

import pytest

from autosched.hai.registry import get_adapter
from autosched.measure.farm_worker import Built, build_task, device_lock, device_of
from autosched.measure.result import BuildResult

TRY_LOCK = """
import fcntl, os, sys, tempfile
name = f"autosched-device-{os.getuid()}-{sys.argv[1]}.lock"
with open(os.path.join(tempfile.gettempdir(), name), "a") as f:
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
"""


def test_every_cpu_target_times_on_the_same_cores():
    assert device_of("llvm-cpu") == device_of("llvm-cpu -mcpu=haswell") == "cpu"
    assert device_of("cuda") == "cuda"  # no CUDA here: still its own device, not the CPU


def test_opencl_on_a_cpu_device_holds_the_cpu_lock():
    try:
        kind = get_adapter("opencl").info().kind
    except Exception as e:
        pytest.skip(f"no OpenCL device here: {e}")
    assert device_of("opencl") == ("cpu" if kind == "cpu" else "opencl")  # PoCL: the same cores as llvm-cpu


class _Recording:
    """A backend whose build notes when it ran (module-level names pickle; this one runs in-process)."""

    def __init__(self):
        self.built_at = None

    def build(self, task, trace):
        self.built_at = time.monotonic()
        return Built(BuildResult(None, "f"))


def test_a_held_device_lock_keeps_another_process_off_the_device():
    def other_process_gets(device):
        return subprocess.run([sys.executable, "-c", TRY_LOCK, device]).returncode == 0

    with device_lock("llvm-cpu -mcpu=haswell"):
        assert not other_process_gets("cpu")  # the haswell variant holds the CPU ...
        assert other_process_gets("opencl")  # ... not the other devices
    assert other_process_gets("cpu")


def test_a_build_waits_for_a_cpu_timing_and_builds_share_the_lock():
    def other_process_gets(device, shared):
        mode = "fcntl.LOCK_SH" if shared else "fcntl.LOCK_EX"
        code = TRY_LOCK.replace("fcntl.LOCK_EX", mode)
        return subprocess.run([sys.executable, "-c", code, device]).returncode == 0

    with device_lock("llvm-cpu", shared=True):  # a build holds the CPU ...
        assert not other_process_gets("cpu", shared=False)  # ... so no timing starts ...
        assert other_process_gets("cpu", shared=True)  # ... but another build does
    backend = _Recording()
    with device_lock("llvm-cpu -mcpu=haswell"):  # a timing in progress
        thread = threading.Thread(target=build_task, args=(backend, None, None))
        thread.start()
        time.sleep(0.5)
        assert backend.built_at is None  # the compile waits for the timing to end
        released = time.monotonic()
    thread.join(10)
    assert backend.built_at is not None and backend.built_at >= released
