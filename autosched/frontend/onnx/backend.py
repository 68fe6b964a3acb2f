"""An ``onnx.backend.base.Backend`` so ``onnx.backend.test`` runs our importer and generated kernels.

``prepare`` imports the model and, by default, compiles the whole Graph as ONE te program (every
output, the default schedule, ``autosched.build`` on llvm-cpu): real generated code, no numpy
fallback. ``engine="graph"`` runs autosched.graph's fused, memory-planned compiled model instead.
A node whose inputs are all constant folds at import (the te reference evaluator computes it), so a
model bound entirely to constants runs no kernel: ``AutoschedRep.folded`` says when the last ``run``
returned only such folded outputs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ...build import build
from ...errors import OnnxImportError
from ...graph.compiled import ModelInputError
from ...graph.ir import Graph
from ...search_space.default import default_schedule
from ...te.graph import topo_order
from ...te.tensor import PlaceholderOp, Tensor
from .context import NotConstantError, identifier
from .importer import from_onnx

EMPTY_INPUT = "has size 0"  # an empty input: only a bound constant can hold it


class CompiledGraph:
    """A Graph built as one kernel; ``run`` takes and returns arrays as the ONNX model names them."""

    def __init__(self, graph: Graph, target: str = "llvm-cpu"):
        self.graph = graph
        computed: list[Tensor] = []
        for out in graph.outputs:  # Tensors compare by identity: find repeats by their op
            if not isinstance(out.tensor.op, PlaceholderOp) and out.tensor.op not in [t.op for t in computed]:
                computed.append(out.tensor)
        self.computed = computed
        # Only the placeholders the kernel reads are its parameters (a model may ignore an input).
        read = set(topo_order(computed))
        self.used_inputs = [i for i, spec in enumerate(graph.inputs) if spec.tensor.op in read]
        self.used_weights = [Tensor(op) for op in graph.weights if op in read]
        leaves = [graph.inputs[i].tensor for i in self.used_inputs] + self.used_weights
        self.kernel = None
        if computed:
            self.kernel = build(default_schedule(computed), [*leaves, *computed], target, name=_name(graph))

    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
        given = self._bind(inputs)
        leaf_arrays = {t.op: a for t, a in zip([i.tensor for i in self.graph.inputs], given, strict=True)}
        leaf_arrays.update(self.graph.weights)
        buffers = [np.empty(t.shape, t.dtype) for t in self.computed]
        if self.kernel is not None:
            weights = (self.graph.weights[t.op] for t in self.used_weights)
            self.kernel(*(given[i] for i in self.used_inputs), *weights, *buffers)
        results = []
        for out in self.graph.outputs:
            if isinstance(out.tensor.op, PlaceholderOp):
                array = np.array(leaf_arrays[out.tensor.op])
            else:
                array = buffers[[t.op for t in self.computed].index(out.tensor.op)]
            if out.shape is not None:
                array = array.reshape(out.shape)
            results.append(array.astype(out.dtype) if array.dtype != np.dtype(out.dtype) else array)
        return results

    def _bind(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
        names = [i.name for i in self.graph.inputs]
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - set(names))
            missing = [n for n in names if n not in inputs]
            if unknown or missing:
                raise ModelInputError(
                    f"model {self.graph.name!r}: inputs {unknown} are unknown and {missing} missing "
                    f"(its inputs: {names})"
                )
            arrays = [inputs[n] for n in names]
        else:
            arrays = list(inputs)
            if len(arrays) != len(names):
                raise ModelInputError(
                    f"model {self.graph.name!r}: got {len(arrays)} inputs, expected {names}"
                )
        out = []
        for spec, array in zip(self.graph.inputs, arrays, strict=True):
            a = np.asarray(array)
            want = spec.shape if spec.shape is not None else spec.tensor.shape
            if tuple(a.shape) != tuple(want) or a.dtype != np.dtype(spec.dtype):
                raise ModelInputError(
                    f"input {spec.name!r}: expected {spec.dtype}{list(want)}, got {a.dtype}{list(a.shape)}"
                )
            out.append(np.ascontiguousarray(a.astype(spec.tensor.dtype).reshape(spec.tensor.shape)))
        return out


class GraphModelRunner:
    """autosched.graph's fused, memory-planned compiled model behind CompiledGraph's ``run``."""

    def __init__(self, graph: Graph, target: str = "llvm-cpu"):
        from ...graph.compiled import compile_model

        self.graph = graph
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "N tasks use the default schedule": expected here
            self.model = compile_model(graph, target)

    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
        names = [i.name for i in self.graph.inputs]
        given = dict(inputs) if isinstance(inputs, Mapping) else dict(zip(names, inputs, strict=True))
        outputs = self.model.run(given)
        return [outputs[o.name] for o in self.graph.outputs]


ENGINES = {"one-kernel": CompiledGraph, "graph": GraphModelRunner}


def folded_at_import(graph: Graph) -> bool:
    """True when no kernel computes any output of ``graph`` and some output is a constant folded
    at import (numpy's result, not generated code); outputs that only pass an input through are not."""
    outs = [o.tensor.op for o in graph.outputs]
    return all(isinstance(op, PlaceholderOp) for op in outs) and any(op in graph.weights for op in outs)


def _name(graph: Graph) -> str:
    return identifier(graph.name) or "model"


class AutoschedRep(BackendRep):
    """A prepared model. One whose shapes depend on its inputs (a Reshape fed its shape as an input,
    as node tests do) is compiled at ``run``, with those inputs bound as constants."""

    def __init__(self, model: onnx.ModelProto, target: str, engine: str = "one-kernel"):
        if engine not in ENGINES:
            raise OnnxImportError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
        self.model, self.target, self.compile = model, target, ENGINES[engine]
        self.inputs = [vi.name for vi in model.graph.input if vi.name not in _initializers(model)]
        self.compiled: Any = None
        self.bound: dict[bytes, Any] = {}
        self.folded = False  # whether the last run's outputs were all folded at import (no kernel ran)
        try:
            self.compiled = self.compile(from_onnx(model), target)
        except NotConstantError as e:
            if e.value not in self.inputs:
                raise
        except OnnxImportError as e:
            if EMPTY_INPUT not in str(e):
                raise

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        arrays = [inputs] if isinstance(inputs, np.ndarray) else [np.asarray(a) for a in inputs]
        if self.compiled is not None:
            self.folded = folded_at_import(self.compiled.graph)
            return tuple(self.compiled.run(arrays))
        given = dict(zip(self.inputs, arrays, strict=True))
        fixed = {n: a for n, a in given.items() if a.size == 0}
        while True:  # bind, one at a time, each input that a shape-like position needs
            key = b"".join(n.encode() + a.tobytes() + str(a.shape).encode() for n, a in sorted(fixed.items()))
            if key in self.bound:
                break
            try:
                self.bound[key] = self.compile(from_onnx(self.model, constants=fixed), self.target)
                break
            except NotConstantError as e:
                if e.value not in given or e.value in fixed:
                    raise
                fixed[e.value] = given[e.value]
        compiled = self.bound[key]
        self.folded = folded_at_import(compiled.graph)
        return tuple(compiled.run({i.name: given[i.name] for i in compiled.graph.inputs}))


def _initializers(model: onnx.ModelProto) -> set[str]:
    return {i.name for i in model.graph.initializer}


class AutoschedBackend(Backend):
    """``onnx.backend.test.BackendTest(AutoschedBackend, __name__)`` runs the node tests on llvm-cpu.

    ``prepare(model, engine="graph")`` runs autosched.graph's compiled model instead of one kernel.
    """

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> AutoschedRep:
        return AutoschedRep(model, kwargs.get("target", "llvm-cpu"), kwargs.get("engine", "one-kernel"))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = AutoschedBackend.prepare
run_model = AutoschedBackend.run_model
supports_device = AutoschedBackend.supports_device
