"""A device kernel's crash, hang or refused compile costs one result, as a CPU kernel's does (issue 13,
item 3): an adapter without linkable objects (installed from outside, by entry point) is measured by
the same builder and runner, its kernels compiled, run and timed in the runner's worker process."""

import numpy as np
import pytest

from autosched import te
from autosched.hai import registry
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import LocalMeasurer
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.search_space.default import default_schedule

# A device that runs loop IR in numpy (autosched's interpreter) and fails as its target asks.
ADAPTER = '''
"""autosched-faulty: a device whose kernels crash, hang or are refused on request."""

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched.chip import ChipInfo
from autosched.errors import CompileError
from autosched.hai.reference import run_loops
from autosched.hai.spec import AdapterSpec
from autosched.hai.timing import TimingPolicy, time_calls
from autosched.target import parse_target


@dataclass
class Kernel:
    name: str
    func: Any


class FaultyAdapter:
    spec = AdapterSpec("faulty", options=("fault",), style="cpu", description="numpy, failing on request")

    def __init__(self, target="faulty"):
        self.target = parse_target(target)
        self.fault = self.target.get("fault") or "none"

    def info(self):
        return ChipInfo(name="faulty-1", kind="cpu", arch="numpy", cores=1, peak_gflops=1.0)

    def render(self, func):
        return func.name

    def compile(self, func):
        if self.fault == "compile":
            raise CompileError("faulty: this device refuses every kernel")
        return Kernel(func.name, func)

    def alloc(self, shape, dtype):
        return np.empty(shape, dtype)

    def copy_in(self, array):
        return np.array(array)

    def copy_out(self, handle, out):
        out[...] = handle

    def launch(self, kernel, args):
        if self.fault == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.fault == "hang":
            time.sleep(3600)
        run_loops(kernel.func, list(args))

    def time(self, kernel, args, repeat=5, warmup=1):
        return time_calls(lambda: self.launch(kernel, args), TimingPolicy(repeat, warmup, min_repeat_s=0.0))
'''


@pytest.fixture
def faulty(install_adapter):
    """autosched-faulty installed: a site folder on sys.path and on the worker processes' PYTHONPATH."""
    site = install_adapter("faulty", "FaultyAdapter", ADAPTER)
    assert "faulty" in registry.kinds()
    return site


def test_a_device_kernel_that_crashes_hangs_or_is_refused_costs_one_result(faulty):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    trace = default_schedule(B, cores=1).trace
    results = {}
    with LocalMeasurer(LocalBuilder(n_workers=1), LocalRunner(timeout_s=3.0, repeat=2)) as m:
        for fault in ("crash", "hang", "compile", "none"):
            task = MeasureTask.create("double", [A, B], f"faulty -fault={fault}")
            (results[fault],) = m.measure(task, [trace])
        assert m.runner._host is False  # a device worker: no address-space limit for its driver
    assert results["crash"].error == "crash" and "SIGSEGV" in results["crash"].error_msg
    assert results["hang"].error == "timeout" and "killed" in results["hang"].error_msg
    assert results["compile"].error == "compile" and "refuses every kernel" in results["compile"].error_msg
    ok = results["none"]  # a fresh worker after each failure; the interpreter computes 2 * A
    assert ok.ok and len(ok.costs) == 2, str(ok)
    assert ok.timing == {"repeat": 2, "warmup": 1, "min_repeat_s": 1e-3, "flush_cache": False}


def test_a_wrong_device_kernel_is_caught_before_it_is_timed(faulty):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    task = MeasureTask.create("double", [A, B], "faulty")
    wrong = MeasureTask(**{**task.__dict__, "expected": (np.zeros(8, "float32"),)})
    with LocalMeasurer(LocalBuilder(n_workers=1), LocalRunner(timeout_s=10.0, repeat=2)) as m:
        (r,) = m.measure(wrong, [default_schedule(B, cores=1).trace])
    assert r.error == "wrong_result" and "elements differ" in r.error_msg, str(r)
