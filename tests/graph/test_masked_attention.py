"""ONNX Attention with a mask is one flash-attention task and matches ONNX's reference and onnxruntime.

Bool and additive masks, a mask shorter than the keys (padded: masked), grouped-query heads, causal
with a mask, 3-d inputs and padding lengths (opset 24's nonpad_kv_seqlen), at lengths no block size
divides, with rows whose every key is masked (ONNX gives zeros there). The task's default schedule
and sampled schedules are checked against the te reference on inputs with such rows.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import pytest

from autosched.graph.compiled import compile_model
from autosched.graph.pattern import OpPattern
from autosched.graph.tasks import extract_tasks
from autosched.search_space.attention_pattern import find_attentions
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy

from .test_attention_fusion import flash_tasks

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

B, S, L, D = 2, 19, 23, 16

CASES: dict[str, dict[str, Any]] = {
    "bool": dict(mask=(S, L), bool_mask=True),
    "additive_4d": dict(mask=(B, 4, S, L)),
    "bool_padded": dict(mask=(S, 17), bool_mask=True),  # keys 17..22 masked by padding
    "additive_padded_gqa": dict(mask=(1, 1, S, 20), kv_heads=2),
    "bool_gqa_causal": dict(mask=(S, L), bool_mask=True, kv_heads=1, is_causal=1),
    "additive_causal": dict(mask=(B, 1, S, L), is_causal=1),
    "bool_3d": dict(mask=(S, L), bool_mask=True, three_d=True, kv_heads=2),
    "nonpad_lengths": dict(mask=None, nonpad=True, opset=24),
}


def build(mask=None, bool_mask=False, kv_heads=4, is_causal=0, three_d=False, nonpad=False, opset=23):
    heads = 4
    shapes: dict[str, tuple[int, ...]] = {
        "Q": (B, heads, S, D),
        "K": (B, kv_heads, L, D),
        "V": (B, kv_heads, L, D),
    }
    attrs: dict = {"is_causal": is_causal}
    if three_d:
        shapes = {n: (B, s[2], s[1] * D) for n, s in shapes.items()}
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    names = ["Q", "K", "V"]
    types = dict.fromkeys(names, TensorProto.FLOAT)
    if mask is not None:
        names.append("M")
        shapes["M"], types["M"] = mask, TensorProto.BOOL if bool_mask else TensorProto.FLOAT
    if nonpad:  # input 6; 3 (the mask) to 5 (the past) may be empty
        names += [""] * (6 - len(names)) + ["N"]
        shapes["N"], types["N"] = (B,), TensorProto.INT64
    node = helper.make_node("Attention", names, ["Y"], **attrs)
    inputs = [helper.make_tensor_value_info(n, types[n], shapes[n]) for n in names if n]
    y_shape = (B, S, heads * D) if three_d else (B, heads, S, D)
    graph = helper.make_graph(
        [node], "attention", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)]
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m, shapes


def feeds_for(shapes, seed=0):
    """Random inputs; the mask hides about 30% of the keys and every key of rows 2 and 7 (and, causal,
    row 0's only key when it hides key 0); lengths: the second batch has no key at all."""
    rng = np.random.default_rng(seed)
    feeds = {n: rng.standard_normal(shapes[n]).astype("float32") for n in ("Q", "K", "V")}
    if "M" in shapes:
        hidden = rng.random(shapes["M"]) < 0.3
        hidden[..., 2, :] = hidden[..., 7, :] = True
        hidden[..., 0, 0] = True
        feeds["M"] = hidden  # bool masks: True attends; the caller flips and casts
    if "N" in shapes:
        feeds["N"] = np.array([13, 0], np.int64)
    return feeds


def onnx_feeds(m, shapes, seed=0):
    feeds = feeds_for(shapes, seed)
    if "M" in feeds:
        is_bool = m.graph.input[3].type.tensor_type.elem_type == TensorProto.BOOL
        hidden = feeds["M"]
        noise = np.random.default_rng(seed + 9).standard_normal(hidden.shape).astype("float32")
        feeds["M"] = ~hidden if is_bool else np.where(hidden, -np.inf, noise).astype("float32")
    return feeds


@pytest.mark.parametrize("name", list(CASES))
def test_masked_onnx_attention_is_one_flash_task_and_matches(name):
    m, shapes = build(**CASES[name])
    feeds = onnx_feeds(m, shapes)
    want = np.asarray(ReferenceEvaluator(m).run(None, feeds)[0])  # type: ignore[index]
    assert not np.isnan(want).any()
    from autosched.frontend.onnx import from_onnx

    tg = extract_tasks(from_onnx(m))
    flash = flash_tasks(tg)
    assert len(flash) == 1, [t.name for t in tg.tasks]
    others = [t for n, t in enumerate(tg.tasks) if n != flash[0]]
    assert all(t.pattern == OpPattern.INJECTIVE for t in others)  # 3-d: the head merge, after it
    (pattern,) = find_attentions(create_schedule(list(tg.tasks[flash[0]].instance.outputs)))
    assert pattern.zero_rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned
        got = compile_model(from_onnx(m)).run(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    rows = got if got.ndim == 3 else np.swapaxes(got, 1, 2)  # (batch, query, ...)
    hidden = rows[1] if "N" in shapes else rows[:, [2, 7]]  # lengths: batch 1 has no key
    assert not hidden.any() and rows[0, 1].any()  # wholly masked rows are zeros, others are not
    theirs = onnxruntime_output(m, feeds)
    if theirs is not None:
        np.testing.assert_allclose(got, theirs, rtol=1e-4, atol=1e-5)


def onnxruntime_output(m, feeds):
    """onnxruntime's Y, or None where it cannot run this Attention (not installed, an older one without
    the opset, or one refusing a mask shorter than the keys, as 1.32 does)."""
    try:
        import onnxruntime as ort

        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)[0]
    except Exception:
        return None


@pytest.mark.parametrize("name", ["bool_gqa_causal", "additive_padded_gqa", "nonpad_lengths"])
def test_sampled_schedules_of_the_masked_task_match(name):
    from autosched.frontend.onnx import from_onnx

    m, shapes = build(**CASES[name])
    (task,) = extract_tasks(from_onnx(m)).tasks
    inst = task.instance
    feeds = feeds_for(shapes, seed=3)
    inputs = []
    rng = np.random.default_rng(4)
    for t in inst.tensors[: -len(inst.outputs)]:  # the mask by its shape; q, k, v random
        if "M" in feeds and t.shape == feeds["M"].shape:
            hidden = feeds["M"]
            noise = rng.standard_normal(t.shape)
            value = (~hidden).astype(t.dtype) if "int" in t.dtype else np.where(hidden, -np.inf, noise)
            inputs.append(np.asarray(value, t.dtype))
        elif "N" in feeds and t.shape == (B,):
            inputs.append(feeds["N"].astype(t.dtype))
        else:
            inputs.append(rng.standard_normal(t.shape).astype(t.dtype))
    policy = SketchPolicy(list(inst.outputs))
    rng_s = random.Random(name)
    for _ in range(3):
        sch, _ = policy.sample(rng_s)
        assert any(st.primitive == "flash_attention" for st in sch.trace)
        assert_matches_numpy(sch, list(inst.tensors), inputs=inputs)
