"""The worker side: which device a timing holds, and that the host lock excludes other processes."""

import subprocess
import sys

from autosched.measure.farm_worker import device_lock, device_of

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
    assert device_of("opencl") == "opencl"


def test_a_held_device_lock_keeps_another_process_off_the_device():
    def other_process_gets(device):
        return subprocess.run([sys.executable, "-c", TRY_LOCK, device]).returncode == 0

    with device_lock("llvm-cpu -mcpu=haswell"):
        assert not other_process_gets("cpu")  # the haswell variant holds the CPU ...
        assert other_process_gets("opencl")  # ... not the other devices
    assert other_process_gets("cpu")
