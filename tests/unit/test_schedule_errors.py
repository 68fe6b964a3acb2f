"""Illegal schedules and bad arguments: each gets a ScheduleError that names the primitive."""

import json

import pytest

from autosched import te
from autosched.errors import ScheduleError
from autosched.lower.pipeline import lower
from autosched.search_space.schedule import create_schedule, replay
from autosched.search_space.trace import trace_from_json, trace_to_json
from tests.unit.test_schedule_primitives import conv_padded, matmul, softmax


@pytest.fixture
def mm():
    args = matmul()
    return args, create_schedule(args[-1]), args[-1]


def raises(match):
    return pytest.raises(ScheduleError, match=match)


def test_split_arguments(mm):
    _, s, C = mm
    with raises("split: give exactly one of factor= and nparts="):
        s[C].split(C.op.axis[0], factor=2, nparts=2)
    with raises("split: factor must be a positive int, got 0"):
        s[C].split(C.op.axis[0], factor=0)
    with raises("split: factor must be a positive int"):
        s[C].split(C.op.axis[0], factor=2.5)
    with raises("split: axis 'nope' is not an axis of stage 'C'"):
        s[C].split("nope", factor=2)


def test_split_of_a_split_axis(mm):
    _, s, C = mm
    s[C].split(C.op.axis[0], factor=2)
    with raises("split: axis 'i' of stage 'C' was already split or fused"):
        s[C].split(C.op.axis[0], factor=2)


def test_axis_of_another_stage(mm):
    args, s, C = mm
    A = args[0]
    with raises("split: stage 'A' is an input placeholder"):
        s[A].split(C.op.axis[0], factor=2)


def test_fuse_rules(mm):
    _, s, C = mm
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    with raises("fuse: cannot fuse spatial and reduction axes"):
        s[C].fuse(j, k)
    with raises("fuse: axes i, k of stage 'C' must be adjacent"):
        s[C].fuse(i, k)
    with raises("fuse: needs at least two axes"):
        s[C].fuse(i)


def test_annotations(mm):
    _, s, C = mm
    (k,) = C.op.reduce_axis
    with raises("parallel: axis 'k' of stage 'C' is a reduction axis"):
        s[C].parallel(k)
    s[C].vectorize(C.op.axis[1])
    with raises("unroll: axis 'j' of stage 'C' is already vectorized"):
        s[C].unroll(C.op.axis[1])
    with raises("bind: unknown thread axis 'warp.x'"):
        s[C].bind(C.op.axis[0], "warp.x")
    with raises("pragma: unknown pragma 'fast'"):
        s[C].pragma(C.op.axis[0], "fast", 1)


def test_reorder_twice(mm):
    _, s, C = mm
    with raises("reorder: an axis is named twice"):
        s[C].reorder(C.op.axis[0], C.op.axis[0])


def test_inline_rules(mm):
    args, s, C = mm
    with raises("compute_inline: stage 'C' is a reduction"):
        s[C].compute_inline()
    (X, out), (mx, ex, sm) = softmax()
    s2 = create_schedule(out)
    with raises("compute_inline: stage 'softmax' is an output"):
        s2[out].compute_inline()


def test_compute_at_into_producer():
    (X, out), (mx, ex, sm) = softmax()
    s = create_schedule(out)
    with raises("compute_at: stage 'sum' is a producer of 'softmax'"):
        s[out].compute_at(s[sm], sm.op.axis[0])


def test_compute_at_outside_consumer_scope():
    (X, out), (mx, ex, sm) = softmax()
    s = create_schedule(out)
    # exp is read by both sum and softmax; attaching it inside sum leaves softmax's reads outside.
    s[ex].compute_at(s[sm], sm.op.axis[0])
    with raises("stage 'softmax' reads it outside that loop"):
        lower(s, [X, out])


def test_cache_write_after_split(mm):
    _, s, C = mm
    s[C].split(C.op.axis[0], factor=2)
    with raises("cache_write: stage 'C' has already been scheduled"):
        s.cache_write(C, "local")
    with raises("cache_write: unknown scope 'l2'"):
        s.cache_write(C, "l2")


def test_cache_read_non_reader(mm):
    args, s, C = mm
    with raises("cache_read: stage 'A' does not read 'B'"):
        s.cache_read(args[1], "local", [args[0]])


def test_cache_read_layout(mm):
    args, s, C = mm
    with raises(r"cache_read: layout \(0, 0\) is not a permutation of \(0, 1\)"):
        s.cache_read(args[1], "local", [C], layout=(0, 0))
    with raises("is not a permutation"):
        s.cache_read(args[1], "local", [C], layout=(1, 0, 2))
    s.cache_read(args[1], "local", [C], layout=(1, 0))
    data = trace_to_json(s.trace)
    assert data == [["cache_read", "B", ["local", ["C"], [1, 0]]]]
    assert "layout=(1, 0)" in s.trace[0].to_code()
    assert replay([C], data).trace == s.trace
    # The identity layout is not written: traces of older versions keep their keys.
    s2 = create_schedule(C)
    s2.cache_read(args[1], "local", [C], layout=(0, 1))
    assert trace_to_json(s2.trace) == [["cache_read", "B", ["local", ["C"]]]]
    with raises("cache_read takes 3 argument"):
        trace_from_json([["cache_read", "B", ["local"]]])


def test_rfactor_rules(mm):
    _, s, C = mm
    with raises("rfactor: axis 'i' of stage 'C' is not a reduction axis"):
        s.rfactor(C, C.op.axis[0])
    args, _ = conv_padded()
    s2 = create_schedule(args[-1])
    with raises("rfactor: stage 'pad' is not a reduction"):
        s2.rfactor("pad", "h")


def test_unknown_stage(mm):
    _, s, _ = mm
    with raises("schedule has no stage 'Z'"):
        s["Z"]


def test_inputs_missing_from_arguments(mm):
    args, s, C = mm
    with raises("input 'B' is read but not among the arguments"):
        lower(s, [args[0], C])


def test_trace_json_round_trip_and_bad_steps(mm):
    args, s, C = mm
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(io)
    data = json.loads(json.dumps(trace_to_json(s.trace)))
    assert trace_from_json(data) == s.trace
    with raises("trace: unknown primitive 'explode'"):
        trace_from_json([["explode", "C", []]])
    with raises("trace: split takes 3 argument"):
        trace_from_json([["split", "C", ["i"]]])
    with raises(r"trace step 0 \(s\['C'\].split\('q', factor=4\)\): split: axis 'q' is not an axis"):
        replay([C], [["split", "C", ["q", 4, None]]])


def test_steps_print_as_code(mm):
    _, s, C = mm
    s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    assert s.trace[0].to_code() == "s['C'].tile('i', 'j', x_factor=4, y_factor=8)"


def test_te_index_error_names_tensor():
    A = te.placeholder((3, 4), name="A")
    with pytest.raises(IndexError, match="tensor 'A' has 2 dimension"):
        A[1]
