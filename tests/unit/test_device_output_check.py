"""The device measurer checks outputs as the CPU runner does: the same garbage fill and comparison."""

import numpy as np
import pytest

from autosched.measure import device_measurer, output_check, runner


class _SkipsLastElement:
    """A stand-in adapter whose kernel writes every output element but the last."""

    def __init__(self, values):
        self.values = values

    def launch(self, kernel, arrays):
        out = arrays[-1].reshape(-1)
        out[:-1] = self.values.reshape(-1)[:-1]

    def time(self, kernel, arrays, repeat, warmup):
        return [1e-6]


def _worker(expected, adapter):
    w = device_measurer._DeviceWorker("opencl")
    w.adapter = adapter
    w.kernel = object()
    a = np.ones(4, "float32")

    class T:  # the output's shape and dtype, as a te.Tensor gives them
        shape, dtype = expected.shape, expected.dtype

    w.args, w.n_in, w.inputs = [None, T], 1, [a]
    w.expected, w.tolerances, w.samples = [expected], [(1e-5, 1e-5)], [None]
    return w


def test_the_device_measurer_uses_the_runners_fill_and_comparison():
    assert device_measurer.fill_garbage is runner._fill_garbage is output_check.fill_garbage
    assert device_measurer.outputs_match is runner.outputs_match is output_check.outputs_match


def test_a_device_kernel_that_skips_an_element_is_a_wrong_result():
    expected = np.full(6, 7, "float32")  # before, outputs started as 7: the skipped element passed
    w = _worker(expected, _SkipsLastElement(expected))
    with pytest.raises(device_measurer._Wrong):
        w.handle(("run", 1, 0))
    ints = np.full(6, 7, "int32")
    with pytest.raises(device_measurer._Wrong):
        _worker(ints, _SkipsLastElement(ints)).handle(("run", 1, 0))


def test_a_device_kernel_matching_a_nan_reference_passes():
    expected = np.array([np.nan, 1.0, 2.0, 0.0], "float32")  # the last is skipped: 0 must be written

    class Full(_SkipsLastElement):
        def launch(self, kernel, arrays):
            arrays[-1][...] = self.values

    assert _worker(expected, Full(expected)).handle(("run", 1, 0)) == ("ok", [1e-6])
