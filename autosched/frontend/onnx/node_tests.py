"""The ONNX backend node tests, run through :class:`AutoschedBackend`, one case at a time.

The installed ``onnx`` package generates the cases in memory (no download). A case belongs to the op
of its single node; ``*_expanded`` cases (an op's function body, several other ops) are left out.
Outputs are compared as ``onnx.backend.test`` compares them (shape, dtype, ``rtol``/``atol``).
A case whose outputs all folded at import (every input bound as a constant, e.g. Range's or a
window's size: the te reference evaluator computed them, no kernel ran) is :data:`FOLDED`, not a pass.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import onnx
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

from ...errors import AutoschedError
from .backend import AutoschedBackend

FOLDED = "folded at import: no kernel runs"


def load_cases(ops: Iterable[str] | None = None) -> dict[str, list[Any]]:
    """Node test cases by op type, for ``ops`` (all ops when None)."""
    from onnx.backend.test.loader import load_node_model_tests

    wanted = set(ops) if ops is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        cases = load_node_model_tests()
    by_op: dict[str, list[Any]] = {}
    for case in cases:
        if case.model is None:
            continue  # a case by url (the model zoo's); node cases carry their model
        nodes = case.model.graph.node
        if "_expanded" in case.name or len(nodes) != 1:
            continue
        op = nodes[0].op_type
        if wanted is None or op in wanted:
            by_op.setdefault(op, []).append(case)
    return by_op


def run_case(case: Any, engine: str = "one-kernel") -> str | None:
    """None when the case passes (a generated kernel computed its outputs), :data:`FOLDED` when it
    matches but some data set's outputs were all folded at import, else a one-line reason (an import
    error, a crash, a mismatch)."""
    folded = False
    try:
        rep = AutoschedBackend.prepare(case.model, engine=engine)
        for inputs, expected in case.data_sets:
            outputs = rep.run([as_array(a) for a in inputs])
            folded = folded or rep.folded
            expected = [as_array(a) for a in expected]
            Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
    except AutoschedError as e:
        return f"{type(e).__name__}: {first_line(e)}"
    except AssertionError as e:
        return f"mismatch: {first_line(e)}"
    except Exception as e:  # a crash is a failure of this case, never of the whole run
        return f"{type(e).__name__}: {first_line(e)}"
    return FOLDED if folded else None


def as_array(item: Any) -> Any:
    return numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[:3])[:300] if lines else type(e).__name__
