"""The schedule primitive cases of tests/unit, compiled through LLVM and run natively."""

import pytest

from autosched.search_space.schedule import create_schedule
from autosched.testing import assert_matches_numpy
from tests.unit.test_schedule_primitives import MATMUL_CASES, OTHER_CASES, matmul


@pytest.mark.parametrize("case", sorted(MATMUL_CASES))
def test_matmul_primitive_compiled(case):
    args = matmul()
    s = create_schedule(args[-1])
    MATMUL_CASES[case](s, args[-1])
    assert_matches_numpy(s, args, "llvm-cpu")


@pytest.mark.parametrize("case", sorted(OTHER_CASES))
def test_composed_schedules_compiled(case):
    OTHER_CASES[case]("llvm-cpu")


def test_bind_is_refused_on_cpu():
    from autosched.errors import CompileError
    from tests.unit.test_schedule_primitives import _mm_bind

    args = matmul()
    s = create_schedule(args[-1])
    _mm_bind(s, args[-1])
    with pytest.raises(CompileError, match="thread binding needs a GPU target"):
        assert_matches_numpy(s, args, "llvm-cpu")
