"""Streaming stores (codegen/llvm_stream.py, the sketch's ``/stream`` decision): a row loop marked
``stream_stores`` stores its aligned vectors non-temporally after a scalar head that reaches the first
vector boundary, known only at run time. Outputs at every offset from a boundary, rows shorter than
the head, other dtypes and a loop the pragma cannot apply to all match numpy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autosched import te
from autosched.build import build
from autosched.codegen.llvm import render_llvm
from autosched.lower.pipeline import lower
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy


def stencil(h: int, w: int, dtype: str = "float32") -> list[te.Tensor]:
    x = te.placeholder((h, w), dtype=dtype, name="x")

    def body(i, j):
        near = x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]
        return x[i + 1, j + 1] * 2 + near

    return [x, te.compute((h - 2, w - 2), body, name="out")]


def streamed(args: list[te.Tensor], axis: int = -1, parallel: bool = True):
    s = create_schedule(args[-1:])
    st = s[args[-1].op.name]
    rows, cols = st.op.axis
    if axis != -1:  # the row axis innermost: its stores are a row apart, not one stream
        st.reorder(cols, rows)
        rows, cols = cols, rows
    if parallel:
        st.parallel(rows)
    st.vectorize(cols)
    st.pragma(cols, "stream_stores", 1)
    return s


def at_offset(shape: tuple[int, ...], dtype: str, offset: int) -> np.ndarray:
    """An array of ``shape`` whose first element lies ``offset`` items past a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.empty(int(np.prod(shape)) * item + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset * item
    return raw[start : start + int(np.prod(shape)) * item].view(dtype).reshape(shape)


def _reference(x: np.ndarray) -> np.ndarray:
    near = x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:]
    return x[1:-1, 1:-1] * 2 + near


@pytest.mark.parametrize("width", [5, 19, 77])
def test_streamed_rows_match_numpy_at_every_offset_from_a_vector_boundary(width: int) -> None:
    args = stencil(9, width)
    f = build(streamed(args), args, "llvm-cpu", "k")
    rng = np.random.default_rng(width)
    x = rng.standard_normal((9, width)).astype(np.float32)
    for offset in range(16):
        out = at_offset((7, width - 2), "float32", offset)
        out[...] = np.nan  # an element the kernel skips stays NaN
        f(x, out)
        np.testing.assert_allclose(out, _reference(x), rtol=1e-5, atol=1e-5, err_msg=f"offset {offset}")


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_streamed_rows_of_other_item_sizes_match_numpy(dtype: str) -> None:
    args = stencil(6, 45, dtype)
    f = build(streamed(args, parallel=False), args, "llvm-cpu", "k")
    x = np.random.default_rng(1).integers(-50, 50, (6, 45)).astype(dtype)
    for offset in (0, 1, 3, 7):
        out = at_offset((4, 43), dtype, offset)
        f(x, out)
        np.testing.assert_array_equal(out, _reference(x), err_msg=f"{dtype} offset {offset}")


def _ir(args: list[te.Tensor], sch) -> str:
    func = lower(sch, args, "k")
    return render_llvm(func, triple="x86_64-unknown-linux-gnu", cpu="skylake-avx512", avx512=True)


def test_the_row_loop_stores_non_temporally_and_fences_once_per_thread() -> None:
    args = stencil(40, 200)
    text = _ir(args, streamed(args))
    assert "!nontemporal" in text
    # only whole aligned vectors stream (the store's other metadata, its alias scopes, in between)
    assert all("align 64," in line for line in text.splitlines() if "!nontemporal" in line)
    assert text.count('call void @"llvm.x86.sse.sfence"()') == 1  # the parallel body's end, not per row
    plain = create_schedule(args[-1:])
    st = plain[args[-1].op.name]
    st.vectorize(st.op.axis[-1])
    assert "nontemporal" not in _ir(args, plain) and "sfence" not in _ir(args, plain)


def test_a_marked_loop_whose_stores_are_not_one_stream_stays_plain_and_correct() -> None:
    args = stencil(20, 12)
    sch = streamed(args, axis=0)  # lanes one row apart
    assert "nontemporal" not in _ir(args, sch)
    assert_matches_numpy(sch, args, seed=3)


def test_the_sketch_offers_streaming_for_large_outputs_only_and_its_samples_match_numpy() -> None:
    big = stencil(514, 514)  # 512 x 512 outputs: 1 MiB
    small = stencil(66, 66)
    assert "out/stream" not in SketchPolicy([small[-1]], cores=2, lanes=16).sample(random.Random(0))[1]
    policy = SketchPolicy([big[-1]], cores=2, lanes=16)
    seen = set()
    for seed in range(8):
        sch, decisions = policy.sample(random.Random(seed))
        seen.add(decisions["out/stream"])
        if decisions["out/stream"]:
            assert "nontemporal" in _ir(big, sch)
        assert_matches_numpy(sch, big, seed=seed)
    assert seen == {False, True}


def test_no_streaming_where_the_output_is_the_next_kernels_input() -> None:
    big = stencil(514, 514)
    policy = SketchPolicy([big[-1]], cores=2, lanes=16, stream_outputs=False)
    assert all("out/stream" not in policy.sample(random.Random(seed))[1] for seed in range(6))


def test_model_tuning_turns_streaming_off_for_its_tasks(tmp_path) -> None:
    from autosched.graph.tune_model import ModelTuner
    from autosched.tune import TuneOptions
    from tests.graph.builders import resnet_like

    mt = ModelTuner(
        resnet_like(blocks=1, channels=4, size=4), "llvm-cpu", tmp_path / "m.jsonl", TuneOptions()
    )
    assert mt.options.stream_outputs is False
    assert all(t.strategy.policy.stream_outputs is False for t in mt.states)
    assert TuneOptions().stream_outputs is True  # a single op's own tuning may stream
