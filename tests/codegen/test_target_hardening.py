"""Targets, timeouts and interrupts that used to crash or be ignored (issue 19)."""

import pytest

from autosched.errors import TargetError
from autosched.hai.llvm_cpu import llvm_cpu_names
from autosched.target import parse_target


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llvm-cpu -mcpu=nonsense", r"-mcpu=nonsense: LLVM knows no such CPU.*llc -mcpu=help"),
        ("llvm-cpu -mcpu=haswel", r"did you mean haswell"),
        ("llvm-cpu -mattr=+avx3", r"LLVM knows no feature 'avx3' \(did you mean .*\+avx2"),
        ("llvm-cpu -mattr=avx2", r"'avx2' needs a sign: \+avx2 enables it"),
    ],
)
def test_unknown_cpu_or_feature_is_refused_at_parse_time(text, expected):
    with pytest.raises(TargetError, match=expected):
        parse_target(text)


def test_known_cpu_and_features_parse():
    cpus, features = llvm_cpu_names()
    assert {"haswell", "x86-64", "generic"} <= cpus and {"avx2", "avx512f", "fma"} <= features
    assert str(parse_target("llvm-cpu -mcpu=haswell -mattr=+avx2,-avx512f")) == (
        "llvm-cpu -mattr=+avx2,-avx512f -mcpu=haswell"
    )
