"""Device kernels go through the runner's one worker loop (issue 13): the adapter compiles, launches and
times; the worker fills outputs with the same garbage and compares as for CPU kernels."""

import numpy as np
import pytest

from autosched.errors import CompileError
from autosched.measure import output_check, worker


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


def test_the_worker_fills_and_compares_through_one_module():
    assert worker._fill_garbage is output_check.fill_garbage
    assert worker.outputs_match is output_check.outputs_match


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

    class Full(_SkipsLastElement):
        def launch(self, kernel, arrays):
            arrays[-1][...] = self.values

    adapter = Full(expected)
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
