"""autosched.build: a callable that checks what it is given and says what does not match."""

import numpy as np
import pytest

import autosched
from autosched.errors import TargetError
from tests.unit.test_schedule_primitives import matmul


@pytest.fixture(scope="module")
def mm():
    A, B, C = matmul(4, 5, 3)
    return autosched.build(autosched.default_schedule(C), [A, B, C], "llvm-cpu", name="mm")


def test_runs(mm):
    a = np.random.rand(4, 3).astype("float32")
    b = np.random.rand(3, 5).astype("float32")
    c = np.empty((4, 5), "float32")
    mm(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_wrong_count(mm):
    with pytest.raises(TypeError, match=r"mm: expected 3 arrays \(A: float32\[4, 3\], B: float32\[3, 5\]"):
        mm(np.zeros((4, 3), "float32"))


def test_wrong_shape_and_dtype(mm):
    a, b = np.ones((4, 3), "float32"), np.ones((3, 5), "float32")
    with pytest.raises(ValueError, match=r"argument 2 \('C'\) expects float32\[4, 5\], got float32\[5, 4\]"):
        mm(a, b, np.empty((5, 4), "float32"))
    with pytest.raises(ValueError, match=r"argument 0 \('A'\) expects float32\[4, 3\], got float64\[4, 3\]"):
        mm(np.ones((4, 3)), b, np.empty((4, 5), "float32"))


def test_non_contiguous_and_non_array(mm):
    a = np.ones((3, 4), "float32").T
    with pytest.raises(ValueError, match="must be C-contiguous"):
        mm(a, np.ones((3, 5), "float32"), np.empty((4, 5), "float32"))
    with pytest.raises(TypeError, match="must be a numpy array, got list"):
        mm([[1.0]], np.ones((3, 5), "float32"), np.empty((4, 5), "float32"))


def test_unknown_target():
    A, B, C = matmul(4, 5, 3)
    with pytest.raises(TargetError, match="unknown target kind 'gpu9'"):
        autosched.build(autosched.create_schedule(C), [A, B, C], "gpu9")
