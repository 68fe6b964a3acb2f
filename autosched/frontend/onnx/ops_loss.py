"""Loss ONNX ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (inference of a loss value).

Each target picks its class's log-probability (clamped into range; an ``ignore_index`` target counts
zero and weighs nothing), scaled by the class weight; ``mean`` divides by the summed weights, as ONNX.
"""

from __future__ import annotations

from typing import Any

from ... import te, topi
from .context import Node, Out
from .ops_norm import softmax_over
from .ops_tensor import clamp
from .registry import converter


def nll(node: Node, logp: Any, target: Any, weight: Any) -> Out:
    """The reduced loss of log-probabilities ``logp`` (N, C, d...) at int targets (N, d...)."""
    classes = logp.shape[1]
    ignore = node.attr("ignore_index")
    reduction = node.attr("reduction", "mean")
    one, zero = te.const(1, logp.dtype), te.const(0, logp.dtype)

    def pick(i: tuple[Any, ...]) -> tuple[Any, Any, Any]:
        t = target[i]
        cls = clamp(te.cast("int32", t), classes)
        valid = None if ignore is None else t != ignore
        return cls, valid, (weight[cls] if weight is not None else one)

    def loss_body(*i: Any) -> Any:
        cls, valid, w = pick(i)
        loss = zero - logp[(i[0], cls, *i[1:])] * w
        return loss if valid is None else te.if_then_else(valid, loss, zero)

    tshape = target.shape
    losses = te.compute(tshape, loss_body, name="nll")
    if reduction == "none":
        return Out(losses, node.shape(1), logp.dtype)
    total = topi.sum(losses, name="nll_sum")
    if reduction == "sum":
        return Out(total, (), logp.dtype)
    if reduction != "mean":
        raise node.error(f"reduction {reduction!r} is not one of none, sum, mean")

    def weight_body(*i: Any) -> Any:
        _, valid, w = pick(i)
        return w if valid is None else te.if_then_else(valid, w, zero)

    weights = topi.sum(te.compute(tshape, weight_body, name="nll_weights"), name="nll_weight_sum")
    return Out(te.compute((1,), lambda i: total[i] / weights[i], name="nll_mean"), (), logp.dtype)


@converter("NegativeLogLikelihoodLoss", since=12)
@converter("NegativeLogLikelihoodLoss", since=13)
@converter("NegativeLogLikelihoodLoss", since=22)
def negative_log_likelihood(node: Node) -> Out:
    return nll(node, node.tensor(0), node.tensor(1), node.tensor(2) if node.has(2) else None)


@converter("SoftmaxCrossEntropyLoss", since=12)
@converter("SoftmaxCrossEntropyLoss", since=13)
def softmax_cross_entropy(node: Node) -> list[Any]:
    scores = node.tensor(0)
    logp = softmax_over(scores, (1,), log=True)
    loss = nll(node, logp, node.tensor(1), node.tensor(2) if node.has(2) else None)
    return [loss, Out(logp, node.shape(0), node.dtype(0))]
