"""The flash-attention rewrite: every variant against the numpy reference, default and sampled schedules."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest

from autosched import ops, te, topi
from autosched.errors import ScheduleError
from autosched.lower.ir import Allocate
from autosched.lower.pipeline import lower
from autosched.lower.printer import format_func
from autosched.search_space.attention_pattern import find_attentions
from autosched.search_space.default import default_schedule
from autosched.search_space.schedule import create_schedule, replay
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.sketch_attention import flash_attention
from autosched.search_space.trace import trace_from_json, trace_to_json
from autosched.te.reference import evaluate
from autosched.testing import assert_matches_numpy


def make(B=1, H=2, S=17, L=17, D=16, Hkv=None, causal=False, masked=False, E=None):
    Hkv = Hkv or H
    q = te.placeholder((B, H, S, D), "float32", name="q")
    k = te.placeholder((B, Hkv, L, D), "float32", name="k")
    v = te.placeholder((B, Hkv, L, E or D), "float32", name="v")
    mask = te.placeholder((B, H, S, L), "float32", name="mask") if masked else None
    out = topi.scaled_dot_product_attention(q, k, v, causal=causal, mask=mask)
    return [q, k, v, out] if mask is None else [q, k, v, mask, out]


def inputs_for(args, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in args[:-1]]
    if len(args) == 5:  # an additive mask: some keys hidden (never a whole row), the rest biased
        m = rng.standard_normal(args[3].shape).astype("float32")
        m[rng.random(m.shape) < 0.3] = -np.inf
        m[..., 0] = 0.0
        arrays[3] = m
    return arrays


VARIANTS = {
    "plain_17": dict(S=17, L=17, D=16),
    "plain_64": dict(B=2, H=2, S=64, L=64, D=64),
    "plain_100": dict(S=100, L=100, D=16),
    "cross_s_lt_l": dict(S=17, L=100, D=16),
    "causal_17": dict(S=17, L=17, D=16, causal=True),
    "causal_100": dict(S=100, L=100, D=64, causal=True),
    "causal_s_lt_l": dict(S=17, L=64, D=16, causal=True),
    "mask_64": dict(S=64, L=64, D=16, masked=True),
    "mask_100_causal": dict(S=100, L=100, D=16, masked=True, causal=True),
    "gqa": dict(H=4, Hkv=2, S=64, L=100, D=16),
    "mqa_causal": dict(H=4, Hkv=1, S=17, L=17, D=64, causal=True),
    "value_dim_24": dict(S=17, L=64, D=16, E=24),
    # more queries than keys (allowed without causal), one key block and a tail of queries
    "s_gt_l": dict(S=100, L=17, D=16),
    "s_gt_l_gqa_mask": dict(H=4, Hkv=2, S=40, L=9, D=16, masked=True),
    "decode_causal": dict(S=1, L=5, D=16, causal=True),  # query 0 sees keys 0..L-S = all of them
    "gqa_causal": dict(H=4, Hkv=2, S=64, L=100, D=16, causal=True),
    "mask_s_lt_l": dict(S=17, L=64, D=16, masked=True),
    "odd_d_e": dict(H=2, S=19, L=23, D=7, E=3, causal=True),  # head and value dims below a vector
}


def allocations(stmt):
    if isinstance(stmt, Allocate):
        yield stmt.buffer
    for child in (getattr(stmt, "body", None), getattr(stmt, "then", None), getattr(stmt, "otherwise", None)):
        if child is not None:
            yield from allocations(child)
    for child in getattr(stmt, "stmts", ()):
        yield from allocations(child)


def check(sch, args, seed=0):
    assert_matches_numpy(sch, args, inputs=inputs_for(args, seed))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_default_schedule_is_flash_and_matches_numpy(name):
    args = make(**VARIANTS[name])
    s = default_schedule(args[-1:])
    assert [st.primitive for st in s.trace].count("flash_attention") == 1
    L, D = args[1].shape[2], args[0].shape[3]
    bufs = list(allocations(lower(s, args, "att").body))
    scores = ("attention_qk", "attention_scale", "attention_soft")
    assert not [b.name for b in bufs if b.name.startswith(scores)]  # no S x L buffer
    kv_heads = args[1].shape[0] * args[1].shape[1]
    assert max(b.size for b in bufs) <= max(kv_heads * D * (L + 64), 64 * 512)  # K packed, or a block
    check(s, args)


SAMPLED = ["plain_100", "causal_100", "mask_100_causal", "gqa", "cross_s_lt_l", "s_gt_l", "s_gt_l_gqa_mask"]
SAMPLED += ["decode_causal", "gqa_causal", "mask_s_lt_l", "odd_d_e"]


@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_schedules_match_numpy(name):
    args = make(**VARIANTS[name])
    policy = SketchPolicy(args[-1:])
    rng = random.Random(name)
    seen = set()
    for i in range(4):
        s, d = policy.sample(rng)
        step = next(st for st in s.trace if st.primitive == "flash_attention")
        seen.add(step.args)
        assert policy.sample(random.Random(0), d)[1] == d  # the decisions rebuild it
        check(s, args, seed=i)
    assert len(seen) > 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_many_sampled_schedules_match_numpy(name):
    args = make(**VARIANTS[name])
    policy = SketchPolicy(args[-1:])
    rng = random.Random(7)
    for i in range(6):
        check(policy.sample(rng)[0], args, seed=i)


@pytest.mark.parametrize(
    "config",
    [(8, 32, 1, 1, 1, 1), (16, 32, 2, 2, 8, 1), (24, 64, 3, 4, 6, 1), (32, 512, 8, 1, 4, 1)],
)
def test_block_sizes_that_do_not_divide(config):
    args = make(S=100, L=100, D=16, causal=True, masked=True)
    s = create_schedule(args[-1:])
    flash_attention(s, "attention", *config)
    check(s, args)


def test_head_size_128_and_gqa():
    args = make(H=4, Hkv=1, S=33, L=40, D=128, causal=True)
    check(default_schedule(args[-1:]), args)


def test_causal_skips_blocks_above_the_diagonal():
    args = make(S=128, L=128, D=16, causal=True)
    s = create_schedule(args[-1:])
    flash_attention(s, "attention", 32, 32, 4, 2, 4, 1)
    text = format_func(lower(s, args, "att"))
    assert "if ((kb * 32) <= " in text  # the block guard
    # a block below the diagonal (for the query block's first row) takes the plain body: no causal
    # select of scores, no tile or key tests
    plain = text.split("if (((kb * 32) + 31) <= ((flash_t % 4) * 32)):")[1].split("else:")[0]
    assert "<=" not in plain and "if (" not in plain and "exp(" in plain
    check(s, args)


def test_trace_round_trips_through_a_log_record():
    from autosched.hai.base import ChipInfo
    from autosched.records.record import TuningRecord, make_record
    from autosched.target import parse_target
    from autosched.te.workload import WorkloadInstance

    args = make(S=17, L=64, D=16, causal=True)
    s = create_schedule(args[-1:])
    flash_attention(s, "attention", 16, 64, 4, 2, 4, 1)
    inst = WorkloadInstance("flash_test", {}, tuple(args))
    chip = ChipInfo(name="test", kind="cpu", arch="x86_64", features=("avx512f",), cores=2, vector_bits=512)
    rec = make_record(inst, parse_target("llvm-cpu"), chip, s.trace, costs=[1e-3])
    back = TuningRecord.from_json_line(rec.to_json_line())
    assert back.trace == s.trace
    again = replay(args[-1:], back.trace)
    assert again.flash["attention"] == s.flash["attention"]
    check(again, args)
    assert trace_from_json(trace_to_json(s.trace)) == s.trace


def test_bad_steps_are_refused_with_the_reason():
    args = make(S=17, L=17, D=16)
    s = create_schedule(args[-1:])
    with pytest.raises(ScheduleError, match="multiple of rows"):
        flash_attention(s, "attention", 10, 64, 4, 1, 4, 1)
    with pytest.raises(ScheduleError, match="does not end an attention"):
        flash_attention(s, "attention_qk", 16, 64, 4, 1, 4, 1)
    with pytest.raises(ScheduleError, match="flash_attention takes 6"):
        trace_from_json([["flash_attention", "attention", [16, 64]]])
    s2 = create_schedule(args[-1:])
    s2["attention_softmax_exp"].compute_inline()
    with pytest.raises(ScheduleError, match="already scheduled"):
        flash_attention(s2, "attention", 16, 64, 4, 1, 4, 1)


def test_plain_softmax_and_matmul_are_not_taken_for_attention():
    x = te.placeholder((2, 3, 8, 8), "float32", name="x")
    sm = topi.softmax(x)
    assert find_attentions(create_schedule([sm])) == []
    a = te.placeholder((16, 16), "float32", name="a")
    assert find_attentions(create_schedule([topi.matmul(a, a)])) == []


def test_gpu_sketch_keeps_the_unfused_stages():
    from autosched.search_space.gpu_sketch import GPUSketchPolicy

    args = make(S=17, L=17, D=16)
    s, _ = GPUSketchPolicy(args[-1:], max_threads=64).sample(random.Random(0))
    assert all(st.primitive != "flash_attention" for st in s.trace)


def _numpy_attention(q, k, v, causal=False, mask=None):
    reps = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    if causal:
        S, L = s.shape[-2:]
        s = np.where(np.arange(L)[None, :] <= np.arange(S)[:, None] + (L - S), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_ops_attention_variants(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_LOGS", str(tmp_path / "none.jsonl"))
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 4, 33, 16)).astype("float32")
    k = rng.standard_normal((1, 2, 40, 16)).astype("float32")
    v = rng.standard_normal((1, 2, 40, 16)).astype("float32")
    mask = np.where(rng.random((40,)) < 0.2, -np.inf, 0.0).astype("float32")
    mask[0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: the default schedule, with a warning
        got = ops.attention(q, k, v, causal=True, mask=mask)
    np.testing.assert_allclose(got, _numpy_attention(q, k, v, True, mask), rtol=2e-4, atol=2e-5)


def test_reference_of_gqa_and_mask_matches_numpy():
    args = make(H=4, Hkv=2, S=9, L=12, D=8, masked=True, causal=True)
    arrays = inputs_for(args)
    (ref,) = evaluate(args[-1:], dict(zip(args[:-1], arrays)))
    np.testing.assert_allclose(ref, _numpy_attention(*arrays[:3], True, arrays[3]), rtol=1e-5, atol=1e-6)


def test_attention_inside_a_larger_program():
    """Computed q and k (a scaled copy, the K stage kept a plain root stage) and a consumer of the output:
    the flash nest is lowered between the usual stages."""
    q = te.placeholder((1, 2, 40, 16), "float32", name="q")
    k = te.placeholder((1, 1, 53, 16), "float32", name="k")
    v = te.placeholder((1, 1, 53, 16), "float32", name="v")
    q2 = te.compute(q.shape, lambda *i: q[i] * 0.5, name="q_half")
    k2 = te.compute(k.shape, lambda *i: k[i] + 1.0, name="k_shift")
    att = topi.scaled_dot_product_attention(q2, k2, v, causal=True)
    out = te.compute(att.shape, lambda *i: te.max(att[i], te.const(0.0, "float32")), name="relu")
    args = [q, k, v, out]
    s = default_schedule([out])
    assert any(st.primitive == "flash_attention" for st in s.trace)
    check(s, args)
    policy = SketchPolicy([out])
    rng = random.Random(1)
    for i in range(3):
        check(policy.sample(rng)[0], args, seed=i)


def test_flash_steps_do_not_lower_for_gpu_targets():
    args = make(S=17, L=17, D=16)
    s = create_schedule(args[-1:])
    flash_attention(s, "attention", 16, 64, 4, 1, 4, 1)
    with pytest.raises(ScheduleError, match="CPU-style targets only"):
        lower(s, args, "att", target="opencl")


@pytest.mark.parametrize(
    "kw",
    [
        dict(S=1, L=37, D=16),  # one query (decoding)
        dict(S=5, L=5, D=20),  # fewer keys than a vector; a head size not a multiple of 16
        dict(S=1, L=1, D=8, causal=True),
        dict(S=3, L=200, D=16, causal=True, masked=True),
        dict(H=3, Hkv=1, S=7, L=9, D=4, E=5),  # odd value size: scalar lanes
    ],
)
def test_tiny_and_odd_shapes(kw):
    args = make(**kw)
    check(default_schedule(args[-1:]), args)
    check(SketchPolicy(args[-1:]).sample(random.Random(0))[0], args, seed=1)


def test_causal_with_more_queries_than_keys_is_refused():
    """topi refuses it (query i < S - L would see no key); ops.attention says so before compiling."""
    with pytest.raises(ValueError, match="causal needs at least as many keys as queries"):
        make(S=5, L=1, D=8, causal=True)
    q = np.ones((1, 1, 5, 8), "float32")
    kv = np.ones((1, 1, 1, 8), "float32")
    with pytest.raises(ValueError, match="L=1 < S=5"):
        ops.attention(q, kv, kv, causal=True, platform="cpu")


def test_ops_attention_options_are_keyword_only():
    """An older signature took ``scale`` fourth: a positional 4th argument must not become ``causal``."""
    q = np.ones((1, 1, 4, 8), "float32")
    with pytest.raises(TypeError, match="positional"):
        ops.attention(q, q, q, 0.125)  # type: ignore[misc]


def test_row_reductions_must_be_max_then_sum():
    """The hand-written attention is found; with its row max taken as a min it is not."""

    def program(reducer):
        q = te.placeholder((1, 2, 8, 4), "float32", name="q")
        k = te.placeholder((1, 2, 8, 4), "float32", name="k")
        v = te.placeholder((1, 2, 8, 4), "float32", name="v")
        d, j1, j2, kv = (
            te.reduce_axis((0, n), name=nm) for n, nm in ((4, "d"), (8, "j1"), (8, "j2"), (8, "kv"))
        )
        qk = te.compute(
            (1, 2, 8, 8), lambda b, h, i, j: te.sum(q[b, h, i, d] * k[b, h, j, d], axis=d), name="qk"
        )
        x = te.compute(qk.shape, lambda b, h, i, j: qk[b, h, i, j] * 0.5, name="x")
        m = te.compute((1, 2, 8), lambda b, h, i: reducer(x[b, h, i, j1], axis=j1), name="m")
        ex = te.compute(x.shape, lambda b, h, i, j: te.exp(x[b, h, i, j] - m[b, h, i]), name="ex")
        sm = te.compute((1, 2, 8), lambda b, h, i: te.sum(ex[b, h, i, j2], axis=j2), name="sm")
        p = te.compute(x.shape, lambda b, h, i, j: ex[b, h, i, j] / sm[b, h, i], name="p")
        out = te.compute(
            (1, 2, 8, 4), lambda b, h, i, e: te.sum(p[b, h, i, kv] * v[b, h, kv, e], axis=kv), name="o"
        )
        return create_schedule([out])

    (found,) = find_attentions(program(te.max))
    assert (found.row_max, found.row_sum, found.out) == ("m", "sm", "o")
    assert find_attentions(program(te.min)) == []
