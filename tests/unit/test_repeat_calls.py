"""The C timing loop: a host kernel called n times from C, counted; the Python loop where C is missing."""

import ctypes
import subprocess

import pytest

from autosched.hai.timing import TimingPolicy, time_calls
from autosched.runtime import repeat
from autosched.runtime.link import c_compiler
from autosched.runtime.repeat import HostCall


@pytest.fixture(scope="module")
def bump(tmp_path_factory):
    """``void bump(int *count, int *other)``: adds one to *count and two to *other per call."""
    d = tmp_path_factory.mktemp("bump")
    (d / "bump.c").write_text("void bump(int *count, int *other) { *count += 1; *other += 2; }\n")
    so = d / "bump.so"
    subprocess.run([*c_compiler(), "-shared", "-fPIC", "-o", str(so), str(d / "bump.c")], check=True)
    lib = ctypes.CDLL(str(so))
    fn = lib.bump
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    return fn


def _counters():
    return ctypes.c_int(0), ctypes.c_int(0)


def test_the_c_loop_calls_the_kernel_n_times_on_its_addresses(bump):
    count, other = _counters()
    call = HostCall(bump, [ctypes.addressof(count), ctypes.addressof(other)])
    assert call.in_c  # this machine links kernels, so it builds the loop too
    call.repeat_calls(1000)
    call()
    assert (count.value, other.value) == (1001, 2002)


def test_without_the_c_loop_the_same_calls_come_from_python(bump, monkeypatch):
    monkeypatch.setattr(repeat, "_loop", lambda: None)
    count, other = _counters()
    call = HostCall(bump, [ctypes.addressof(count), ctypes.addressof(other)])
    assert not call.in_c
    call.repeat_calls(7)
    assert (count.value, other.value) == (7, 14)


def test_time_calls_runs_a_host_call_through_its_loop(bump):
    count, other = _counters()
    call = HostCall(bump, [ctypes.addressof(count), ctypes.addressof(other)])
    assert call.in_c
    costs = time_calls(call, TimingPolicy(repeat=3, warmup=2, min_repeat_s=1e-4))
    assert len(costs) == 3 and all(c > 0 for c in costs)
    # one first run, two warm-ups, then each repeat's calls: all of them reached the kernel
    assert count.value >= 1 + 2 + 3 and other.value == 2 * count.value


def test_a_python_callable_is_called_from_python():
    seen = []
    HostCall(lambda *ptrs: seen.append(ptrs), [16, 32]).repeat_calls(3)
    assert seen == [(16, 32)] * 3


def test_wake_threads_runs_an_empty_parallel_region_of_libgomp(bump, monkeypatch):
    call = HostCall(bump, [0, 0])
    assert repeat._wake() is not None  # this machine links kernels with -lgomp, so it builds this too
    call.wake_threads()  # an empty region: nothing to see but that it returns
    monkeypatch.setattr(repeat, "_wake", lambda: None)
    call.wake_threads()  # without it: nothing happens
