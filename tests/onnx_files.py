"""Tiny ONNX models written to disk, float32 and opset 17, for the tests that import, tune or check one.

The callers skip when onnx is not installed (``pytest.importorskip("onnx")``) before calling these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def save_model(
    path: Path,
    nodes: list[tuple[str, list[str], list[str]]],
    inputs: dict[str, list[int]],
    outputs: dict[str, list[int]],
    weights: dict[str, np.ndarray],
    name: str = "tiny",
) -> Path:
    """Write the graph of ``nodes`` (op type, input names, output names) to ``path``; ``inputs`` and
    ``outputs`` map names to shapes, ``weights`` are the initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def info(items: dict[str, list[int]]) -> list[Any]:
        return [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in items.items()]

    graph = helper.make_graph(
        [helper.make_node(op, ins, outs) for op, ins, outs in nodes],
        name,
        info(inputs),
        info(outputs),
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def matmul_weight() -> np.ndarray:
    """The (12, 8) weight of the tiny matmul models, random (never zeros) and the same on every call."""
    return np.random.default_rng(0).standard_normal((12, 8)).astype("float32")


def matmul_relu(path: Path) -> Path:
    """``y = relu(x @ w)``, x of shape (4, 12), w a (12, 8) weight."""
    nodes = [("MatMul", ["x", "w"], ["h"]), ("Relu", ["h"], ["y"])]
    return save_model(path, nodes, {"x": [4, 12]}, {"y": [4, 8]}, {"w": matmul_weight()}, name="mm")
