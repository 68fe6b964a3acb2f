"""Review fixes: compile-only conformance checks are not counted as passed; compare.raw_call has only
the C entry point path (the kernels it is given, IsolatedFunction's, always have one)."""

from types import SimpleNamespace

import pytest

from autosched.hai.conformance import Check, format_table
from autosched.measure import compare


def test_compile_only_checks_are_reported_apart_from_passes():
    checks = [Check("gelu", "default", "compiled"), Check("gelu", "sketch 1", "ok")]
    out = format_table("null", checks)
    assert "1 of 2 checks passed, 1 compiled (not run)" in out  # before: "2 of 2 checks passed"
    assert "gelu  compiled (not run)  ok" in out
    assert "compiled (not run)" not in format_table("llvm-cpu", [Check("gelu", "default", "ok")])


def test_raw_call_needs_a_c_entry_point():
    calls = []
    fn = SimpleNamespace(kernel=SimpleNamespace(cfunc=lambda *ptrs: calls.append(len(ptrs))))
    compare.raw_call(fn, [])()
    assert calls == [0]
    with pytest.raises(AttributeError):  # before: a deferred launch through an adapter it never has
        compare.raw_call(SimpleNamespace(kernel=object()), [])
