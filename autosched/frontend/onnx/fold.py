"""Batch norm after a conv, folded into the conv's weights and bias at import (inference only).

``BN(conv(x, W) + B) = conv(x, W * s) + (B - mean) * s + beta`` with ``s = scale / sqrt(var + eps)``
per output channel. It applies when W, B and the four BN parameters are constants, the conv's output
feeds only the BN, and the BN is in inference mode; otherwise the BN converts on its own.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import helper

from .context import Value


def _attr(node: onnx.NodeProto, name: str, default: float) -> float:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)  # type: ignore[no-any-return]
    return default


def _consts(values: dict[str, Value], names: list[str]) -> list[np.ndarray] | None:
    found = [values.get(n) for n in names]
    if any(v is None or v.const is None or v.dtype not in ("float32", "float64") for v in found):
        return None
    return [v.const for v in found]  # type: ignore[union-attr,misc]


def fold_batch_norms(graph: onnx.GraphProto, values: dict[str, Value]) -> list[onnx.NodeProto]:
    """The graph's nodes with each foldable Conv -> BatchNormalization pair made one Conv.

    The folded weight and bias are added to ``values`` as constants named after the BN node.
    """
    nodes = list(graph.node)
    readers = Counter(name for n in nodes for name in n.input if name)
    readers.update(o.name for o in graph.output)
    producer = {out: i for i, n in enumerate(nodes) for out in n.output}
    drop: set[int] = set()
    for i, bn in enumerate(nodes):
        if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
            continue
        if len(bn.input) < 5 or any(o for o in bn.output[1:]) or _attr(bn, "training_mode", 0):
            continue
        j = producer.get(bn.input[0])
        if j is None or nodes[j].op_type != "Conv" or readers[bn.input[0]] != 1:
            continue
        conv = nodes[j]
        params = _consts(values, list(bn.input[1:5]))
        weight = _consts(values, [conv.input[1]])
        has_bias = len(conv.input) > 2 and conv.input[2]
        bias = _consts(values, [conv.input[2]]) if has_bias else None
        if params is None or weight is None or (has_bias and bias is None):
            continue
        scale, beta, mean, var = params
        (w,) = weight
        if w.dtype != scale.dtype or scale.shape != (w.shape[0],):
            continue
        s = scale / np.sqrt(var + np.asarray(_attr(bn, "epsilon", 1e-5), dtype=var.dtype))
        b = bias[0] if bias is not None else np.zeros_like(mean)
        base = bn.name or bn.output[0]
        new_w = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        new_b = ((b - mean) * s + beta).astype(w.dtype)
        names = (f"{base}/folded_weight", f"{base}/folded_bias")
        for name, array in zip(names, (new_w, new_b), strict=True):
            values[name] = Value(name, tuple(array.shape), array.dtype.name, const=array)
        folded = onnx.NodeProto()
        folded.CopyFrom(conv)
        del folded.input[:], folded.output[:]
        folded.input.extend([conv.input[0], *names])
        folded.output.append(bn.output[0])
        folded.name = f"{conv.name or conv.output[0]}+{bn.name or 'BatchNormalization'}"
        nodes[i] = folded
        drop.add(j)
    return [n for k, n in enumerate(nodes) if k not in drop]
