"""Fixtures shared by the unit tests of the runner."""

import pytest

from autosched import te
from autosched.measure.task import MeasureTask

ADD_N = 256  # the length of add_task's vectors; the tests' hand-written kernels use the same


@pytest.fixture(scope="module")
def add_task() -> MeasureTask:
    """C = A + B over ADD_N floats: the task the runner tests feed their hand-written kernels."""
    A = te.placeholder((ADD_N,), name="A")
    B = te.placeholder((ADD_N,), name="B")
    C = te.compute((ADD_N,), lambda i: A[i] + B[i], name="C")
    return MeasureTask.create("add", [A, B, C])
