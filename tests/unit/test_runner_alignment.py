"""The runner's worker times every kernel on 64-byte-aligned buffers (inputs and outputs)."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.measure.worker import ALIGNMENT_BYTES, _WorkerState, aligned_empty


@pytest.mark.parametrize(
    "shape,dtype", [((3, 5), "float32"), ((0,), "float32"), ((), "float64"), ((7,), "int32"), ((5,), "bool")]
)
def test_aligned_empty(shape, dtype) -> None:
    a = aligned_empty(shape, dtype)
    assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % ALIGNMENT_BYTES == 0
    a[...] = 1  # the whole array is usable memory
    assert (a == 1).all()


def test_worker_buffers_are_aligned_whatever_numpy_gave() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal(40).astype("float32")
    offset_input = base[1:33].reshape(4, 8)  # 4 bytes past numpy's own alignment
    state = _WorkerState()
    expected = [np.zeros((4, 8), "float32")]
    state.handle(("task", "llvm-cpu", [offset_input], expected, [(1e-5, 1e-6)], ["A", "B"], [(4, 8)], [None]))
    assert all(a.ctypes.data % ALIGNMENT_BYTES == 0 for a in state.arrays)
    assert [a.shape for a in state.arrays] == [(4, 8), (4, 8)]
