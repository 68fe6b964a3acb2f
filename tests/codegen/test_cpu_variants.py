"""CPU variants are distinct chips: ``llvm-cpu -mcpu=haswell`` (AVX2) and baseline ``x86-64``."""

import random

import pytest

from autosched.hai.registry import get_adapter
from autosched.records.record import fingerprint_of
from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.target import parse_target
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import SMALL_CASES

VARIANTS = ["llvm-cpu -mcpu=haswell", "llvm-cpu -mcpu=x86-64"]
OPS = ["matmul", "conv2d", "dense_bias_gelu", "softmax", "layer_norm", "max_pool2d", "reduce_sum", "gather"]


@pytest.mark.parametrize("target", VARIANTS)
@pytest.mark.parametrize("name", OPS)
def test_ops_on_variant(target, name):
    args = SMALL_CASES[name]()
    assert_matches_numpy(default_schedule([args[-1]]), args, target)
    info = get_adapter(target).info()
    policy = SketchPolicy([args[-1]], cores=2, lanes=info.vector_bits // 32)
    rng = random.Random(name)
    for i in range(2):
        s, _ = policy.sample(rng)
        assert_matches_numpy(s, args, target, seed=i)


def test_variants_are_distinct_chips():
    infos = {t: get_adapter(t).info() for t in [*VARIANTS, "llvm-cpu"]}
    prints = {t: fingerprint_of(parse_target(t), i) for t, i in infos.items()}
    assert len(set(prints.values())) == 3
    haswell, base = infos[VARIANTS[0]], infos[VARIANTS[1]]
    assert haswell.arch == "haswell" and "avx2" in haswell.features and "avx512f" not in haswell.features
    assert haswell.vector_bits == 256
    assert base.arch == "x86-64" and "avx" not in base.features and base.vector_bits == 128
