"""Fusion decisions and task extraction on hand-built graphs."""

import pytest

from autosched import te, topi
from autosched.graph.fuse import fuse
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.pattern import OpPattern, classify
from autosched.graph.tasks import extract_tasks

from .builders import Weights, bert_like, resnet_like

P = OpPattern


def _names(group):
    return [op.name for op in group.ops]


def test_patterns_follow_structure():
    x = te.placeholder((2, 8, 6, 6), name="x")
    w = te.placeholder((4, 8, 3, 3), name="w")
    b = te.placeholder((8,), name="b")
    m = te.placeholder((6, 8), name="m")
    assert classify(topi.conv2d(x, w).op) == P.OUT_ELEMWISE_FUSABLE
    assert classify(topi.relu(x).op) == P.ELEMWISE
    assert classify(topi.add(m, b).op) == P.BROADCAST
    assert classify(topi.transpose(m).op) == P.INJECTIVE
    assert classify(topi.reshape(m, (48,)).op) == P.INJECTIVE
    assert classify(topi.pad(x, (0, 0, 1, 1)).op) == P.INJECTIVE
    assert classify(topi.sum(m, axis=1).op) == P.COMM_REDUCE
    assert classify(topi.matmul(m, te.placeholder((8, 3), name="n")).op) == P.OUT_ELEMWISE_FUSABLE
    # A variance multiplies two differences, not two reads: a reduction, not a contraction.
    ops = {t.op.name: t.op for t in topi.layer_norm(m, b, b).op.input_tensors}
    varsum = ops["layer_norm_varsum"]
    assert varsum.name.endswith("varsum") and classify(varsum) == P.COMM_REDUCE


def test_tag_overrides_structure():
    x = te.placeholder((4, 4), name="x")
    assert classify(te.compute((4, 4), lambda i, j: x[i, j] * 2.0, tag="opaque").op) == P.OPAQUE
    assert classify(te.compute((4, 4), lambda i, j: x[j, i], tag="elemwise").op) == P.ELEMWISE
    assert classify(te.compute((4, 4), lambda i, j: x[i, j], tag="conv2d_nchw").op) == P.OUT_ELEMWISE_FUSABLE


def test_conv_bn_relu_is_one_group_with_its_pad():
    graph = resnet_like(blocks=1)
    groups = fuse(graph.ops(), [o.tensor for o in graph.outputs])
    assert _names(groups[0]) == ["pad", "stem/Conv", "stem/BatchNormalization", "stem/Relu"]
    assert groups[0].pattern == P.OUT_ELEMWISE_FUSABLE
    # The residual add joins the second conv of the block; flatten joins the softmax after it.
    assert _names(groups[2])[-2:] == ["layer0/conv2/Add", "layer0/conv2/Relu"]
    assert _names(groups[3])[0] == "Flatten" and len(groups) == 4


def test_identical_blocks_are_one_task_with_weight():
    tg = extract_tasks(resnet_like(blocks=3))
    weights = sorted(t.weight for t in tg.tasks)
    assert weights == [1, 3, 4]  # softmax; three conv2+add blocks; stem + three conv1s share a key
    assert len(tg.calls) == 8 and sum(t.weight for t in tg.tasks) == len(tg.calls)


def test_bert_layers_dedup_and_fuse_attention():
    one, three = extract_tasks(bert_like(layers=1)), extract_tasks(bert_like(layers=3))
    assert [t.key for t in one.tasks] == [t.key for t in three.tasks]
    assert [t.weight * 3 for t in one.tasks] == [t.weight for t in three.tasks]
    names = [_names(c.group) for c in one.calls]
    # q, k and v projections (dense + bias) are one task run three times.
    assert one.tasks[0].weight == 3 and names[0] == ["layer.0/query/MatMul", "bias_add"]
    # head split (reshape + transpose) folds into the attention product as its prologue
    scores = next(n for n in names if "layer.0/scores/MatMul" in n)
    assert scores[:2] == ["layer.0/query/Reshape", "layer.0/query/Transpose"]
    # the whole attention is one task (graph/attention.py): scale, softmax and the product with v
    assert scores[-1] == "layer.0/context/MatMul"
    assert {"layer.0/scores/Mul", "layer.0/Softmax_maxelem", "layer.0/value/Transpose"} <= set(scores)
    assert not [n for n in names if "layer.0/Softmax_maxelem" in n and n is not scores]
    ln = [n for n in names if "layer_norm_sum" in n]
    assert len(ln) == 2 and all(len(n) == 4 for n in ln)  # both layer norms: shift, sum, varsum, normalize
    gelu = next(n for n in names if "bias_gelu" in n)
    assert gelu == ["layer.0/intermediate/MatMul", "bias_gelu"]


def test_task_inputs_are_canonical_placeholders():
    tg = extract_tasks(resnet_like(blocks=2))
    call = tg.calls[2]  # conv2 of block 0: reads conv1's output, the residual and the five weights
    inst = tg.tasks[call.task].instance
    assert [t.name for t in inst.inputs] == [f"p{n}" for n in range(len(inst.inputs))]
    assert [tuple(t.shape) for t in inst.inputs] == [tuple(op.shape) for op in call.inputs]
    assert all(op.name.startswith("s") for op in [t.op for t in inst.outputs])
    assert len(inst.outputs) == 1 and tuple(inst.outputs[0].shape) == tuple(call.output.shape)


def test_a_graph_output_is_never_fused_into_a_later_op():
    w = Weights()
    x = te.placeholder((4, 8), name="x")
    hidden = topi.dense(x, w((8, 8), "w"), w((8,), "b"), "relu")
    y = topi.exp(hidden)
    graph = Graph(
        "two_outputs",
        (Input("x", x, "float32"),),
        (Output("hidden", hidden, "float32"), Output("y", y, "float32")),
        w.values,
    )
    groups = fuse(graph.ops(), [o.tensor for o in graph.outputs])
    assert [_names(g) for g in groups] == [["dense", "bias_relu"], ["exp"]]


def test_opaque_ops_stay_alone():
    x = te.placeholder((4, 4), name="x")
    a = topi.relu(x)
    b = te.compute((4, 4), lambda i, j: a[i, j] + 1.0, name="opaque_op", tag="opaque")
    c = topi.relu(b, name="after")
    groups = fuse([x.op, a.op, b.op, c.op], [c])
    assert [_names(g) for g in groups] == [["relu"], ["opaque_op"], ["after"]]


@pytest.mark.parametrize("blocks", [1, 2])
def test_every_compute_is_in_exactly_one_group(blocks):
    graph = resnet_like(blocks=blocks)
    groups = fuse(graph.ops(), [o.tensor for o in graph.outputs])
    ops = [op for g in groups for op in g.ops]
    computes = [op for op in graph.ops() if hasattr(op, "body")]
    assert len(ops) == len(set(ops)) == len(computes)
