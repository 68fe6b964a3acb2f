"""Masked flash attention: rows whose every key is masked give zeros (ONNX's reference, torch's SDPA).

topi's attention with a mask normalizes through ``zero_row_softmax``; the flash rewrite takes that
form too. Every case below has wholly masked rows, rows masked in their first key blocks only (the
online softmax's running max starts at -inf there) and lengths no block size divides; each is checked
against the te reference and against numpy's own zero-row attention, for the default schedule and
sampled ones. The generated nest guards the rescale and the final divide only where they can fire.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from autosched import te, topi
from autosched.lower.pipeline import lower
from autosched.lower.printer import format_func
from autosched.search_space.attention_pattern import find_attentions
from autosched.search_space.default import default_schedule
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.sketch_attention import flash_attention
from autosched.te.reference import evaluate
from autosched.testing import assert_matches_numpy
from autosched.topi.attention import zero_row_softmax


def make(B=1, H=2, S=19, L=45, D=16, Hkv=None, causal=False):
    q = te.placeholder((B, H, S, D), "float32", name="q")
    k = te.placeholder((B, Hkv or H, L, D), "float32", name="k")
    v = te.placeholder((B, Hkv or H, L, D), "float32", name="v")
    mask = te.placeholder((B, H, S, L), "float32", name="mask")
    return [q, k, v, mask, topi.scaled_dot_product_attention(q, k, v, causal=causal, mask=mask)]


def masked_inputs(args, seed=0):
    """Random q, k, v; a mask hiding 30% of the keys, every key of rows 0 and 5 (head 0) and the first
    40 keys of row 3 (its first key blocks wholly hidden, later ones not)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in args[:4]]
    m = np.where(rng.random(args[3].shape) < 0.3, -np.inf, rng.standard_normal(args[3].shape))
    m[:, 0, 0, :] = m[:, 0, 5 % m.shape[2], :] = -np.inf
    m[:, -1, 3 % m.shape[2], :40] = -np.inf
    arrays[3] = m.astype("float32")
    return arrays


def numpy_zero_rows(q, k, v, mask, *, causal=False):
    reps = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + mask
    if causal:
        S, L = s.shape[-2:]
        s = np.where(np.arange(L)[None, :] <= np.arange(S)[:, None] + (L - S), s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)) @ v


CASES: dict[str, dict[str, Any]] = {
    "mask_19x45": dict(S=19, L=45),
    "mask_causal_100": dict(S=100, L=100, causal=True),
    "mask_gqa": dict(H=4, Hkv=2, S=33, L=70),
    "mask_mqa_causal": dict(H=4, Hkv=1, S=17, L=40, causal=True),
    "mask_decode": dict(S=1, L=37),
}


@pytest.mark.parametrize("name", list(CASES))
def test_wholly_masked_rows_give_zeros_default_and_sampled(name):
    args = make(**CASES[name])
    arrays = masked_inputs(args)
    (ref,) = evaluate(args[-1:], dict(zip(args[:-1], arrays)))
    np.testing.assert_allclose(
        ref, numpy_zero_rows(*arrays, causal=CASES[name].get("causal", False)), atol=1e-5
    )
    assert not ref[:, 0, 0].any()  # a wholly masked row: zeros, not NaN
    s = default_schedule(args[-1:])
    assert [st.primitive for st in s.trace].count("flash_attention") == 1
    assert_matches_numpy(s, args, inputs=arrays)
    policy = SketchPolicy(args[-1:])
    rng = random.Random(name)
    for i in range(3):
        sampled, _ = policy.sample(rng)
        assert any(st.primitive == "flash_attention" for st in sampled.trace)
        assert_matches_numpy(sampled, args, inputs=masked_inputs(args, seed=i + 1))


@pytest.mark.parametrize("config", [(8, 32, 1, 1, 1, 1), (24, 64, 3, 4, 6, 1), (16, 192, 4, 4, 8, 1)])
def test_masked_blocks_that_do_not_divide(config):
    args = make(S=50, L=77, causal=True)
    s = create_schedule(args[-1:])
    flash_attention(s, "attention", *config)
    assert_matches_numpy(s, args, inputs=masked_inputs(args))


def _guards(args):
    """(the rescale guard, the zero-row divide, the exp floor) in the default nest of ``args``."""
    text = format_func(lower(default_schedule(args[-1:]), args, "att"))
    return "== -inf" in text, "== 0.0), 1.0" in text, "< -87.0" in text


def test_guards_only_where_a_row_can_be_hidden():
    q = te.placeholder((1, 2, 128, 16), "float32", name="q")
    k = te.placeholder((1, 2, 128, 16), "float32", name="k")  # 128 keys: no padded key block
    for causal in (False, True):  # no mask: no guard; causal keeps key 0 visible to every row
        out = topi.scaled_dot_product_attention(q, k, k, causal=causal)
        (pattern,) = find_attentions(create_schedule([out]))
        assert not pattern.hides_rows and not pattern.zero_rows
        assert _guards([q, k, out]) == (False, False, causal)  # causal's diagonal blocks: exp's floor
    short = te.placeholder((1, 2, 17, 16), "float32", name="k")  # a padded key block: its floor only
    out = topi.scaled_dot_product_attention(q, short, short)
    assert _guards([q, short, out]) == (False, False, True)
    args = make(S=17, L=17)
    (pattern,) = find_attentions(create_schedule(args[-1:]))
    assert pattern.zero_rows and pattern.hides_rows
    assert _guards(args) == (True, True, True)


def test_an_unguarded_softmax_under_a_mask_still_guards_the_rescale():
    """A hand-written plain softmax over masked scores: rows hidden in an early block only must not turn
    NaN (the rescale guard), while the final divide stays unguarded (the te program's own semantics)."""
    q, k, v, mask, _ = make(S=20, L=70)
    d = te.reduce_axis((0, 16), name="d")
    qk = te.compute(
        (1, 2, 20, 70), lambda b, h, i, j: te.sum(q[b, h, i, d] * k[b, h, j, d], axis=d), name="qk"
    )
    x = te.compute(qk.shape, lambda b, h, i, j: qk[b, h, i, j] * 0.25 + mask[b, h, i, j], name="x")
    p = topi.softmax(x)
    kv = te.reduce_axis((0, 70), name="kv")
    out = te.compute(
        (1, 2, 20, 16), lambda b, h, i, e: te.sum(p[b, h, i, kv] * v[b, h, kv, e], axis=kv), name="o"
    )
    args = [q, k, v, mask, out]
    (pattern,) = find_attentions(create_schedule([out]))
    assert pattern.hides_rows and not pattern.zero_rows
    arrays = masked_inputs(args)
    arrays[3][:, 0, 0, :] = arrays[3][:, 0, 5, :] = 0.0  # no wholly masked row: the plain softmax is finite
    s = create_schedule([out])
    flash_attention(s, "o", 8, 32, 4, 2, 4, 1)  # row 3's first key block is wholly masked
    assert_matches_numpy(s, args, inputs=arrays)


def test_zero_row_softmax_alone():
    x = te.placeholder((3, 5), "float32", name="x")
    y = zero_row_softmax(x)
    a = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    a[1] = -np.inf
    (got,) = evaluate([y], {x: a})
    want = np.exp(a[[0, 2]] - a[[0, 2]].max(-1, keepdims=True))
    np.testing.assert_allclose(got[[0, 2]], want / want.sum(-1, keepdims=True), rtol=1e-6)
    assert not got[1].any()
    with pytest.raises(ValueError, match="only the last axis"):
        zero_row_softmax(x, axis=0)
