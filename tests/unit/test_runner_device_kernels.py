"""Device kernels go through the runner's one worker loop (issue 13): the adapter compiles, launches and
times; the worker fills outputs with the same garbage and compares as for CPU kernels."""

import numpy as np
import pytest

from autosched.errors import CompileError
from autosched.measure import worker


class _SkipsLastElement:
    """A stand-in adapter whose kernel writes every output element but the last."""

    def __init__(self, values):
        self.values = values
        self.timed = []

    def compile(self, func):
        if func == "refused":
            raise CompileError("stand-in: refused")
        return ("kernel", func)

    def launch(self, kernel, arrays):
        out = arrays[-1].reshape(-1)
        out[:-1] = self.values.reshape(-1)[:-1]

    def time(self, kernel, arrays, repeat, warmup):
        self.timed.append((repeat, warmup))
        return [1e-6] * repeat


def _worker(expected, adapter):
    w = worker._WorkerState()
    a = np.ones(4, "float32")
    task = ("task", "opencl", [a], [expected], [(1e-5, 1e-5)], ["A", "B"], [expected.shape], [None])
    assert w.handle(task) == ("ok",)
    w.adapters["opencl"] = adapter
    assert w.handle(("load", None, "func", "k", 2)) == ("ok",)
    assert w.kernel == (adapter, ("kernel", "func"))
    return w


RUN = ("run", 3, 0.0, 1, 10.0)  # repeat, min_repeat_s, warmup, budget_s


def _host_worker(expected, values):
    """The same task with a host kernel: a callable on the buffers' addresses, as a loaded .so is."""
    w = worker._WorkerState()
    a = np.ones(4, "float32")
    assert w.handle(
        ("task", "llvm-cpu", [a], [expected], [(1e-5, 1e-5)], ["A", "B"], [expected.shape], [None])
    )
    w.kernel = lambda *ptrs: np.copyto(w.arrays[-1], values)
    return w


class _Writes(_SkipsLastElement):
    def launch(self, kernel, arrays):
        arrays[-1][...] = self.values


def test_device_and_host_kernels_are_checked_alike():
    expected = np.arange(1, 7, dtype="float32")
    wrong = expected.copy()
    wrong[3] = 99.0  # one wrong value, every element written
    errors = []
    for w in (_worker(expected, _Writes(wrong)), _host_worker(expected, wrong)):
        with pytest.raises(worker._WrongResult) as caught:
            w.handle(RUN)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]  # one comparison, one message
    assert "1 of 6 elements differ" in errors[0] and "at (3,): got 99.0, expected 4.0" in errors[0]
    close = expected * np.float32(1 + 1e-6)  # within rtol 1e-5: passes on both paths
    assert _worker(expected, _Writes(close)).handle(RUN) == ("ok", [1e-6] * 3)
    assert _host_worker(expected, close).handle(RUN)[0] == "ok"


def test_a_device_kernel_that_skips_an_element_is_a_wrong_result():
    expected = np.full(6, 7, "float32")  # were outputs to start as 7, the skipped element would pass
    w = _worker(expected, _SkipsLastElement(expected))
    with pytest.raises(worker._WrongResult, match="1 of 6 elements differ"):
        w.handle(RUN)
    ints = np.full(6, 7, "int32")
    with pytest.raises(worker._WrongResult):
        _worker(ints, _SkipsLastElement(ints)).handle(RUN)


def test_a_device_kernel_matching_a_nan_reference_is_timed_by_its_adapter():
    expected = np.array([np.nan, 1.0, 2.0, 0.0], "float32")  # the last is skipped: 0 must be written
    adapter = _Writes(expected)
    assert _worker(expected, adapter).handle(RUN) == ("ok", [1e-6] * 3)
    assert adapter.timed == [(3, 1)]


def test_a_refused_device_kernel_is_a_compile_error_and_unloads_the_last():
    expected = np.zeros(2, "float32")
    w = _worker(expected, _SkipsLastElement(expected))
    with pytest.raises(CompileError):
        w.handle(("load", None, "refused", "k", 2))
    assert w.kernel is None
    with pytest.raises(worker.RunError, match="no candidate loaded"):
        w.handle(RUN)
