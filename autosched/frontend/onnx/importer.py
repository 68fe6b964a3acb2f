"""ONNX ModelProto (or .onnx path) -> :class:`autosched.graph.ir.Graph`.

The order of work, each step failing with one clear :class:`OnnxImportError`: parse the model, check
its opset, list *every* op without a converter at once, read weights and static input shapes, fold
batch norms into the convs before them, then convert node by node. A node whose inputs are all
constants is converted and evaluated at once by the te reference evaluator, so shape subgraphs
(Shape -> Gather -> Concat -> Reshape) reach their consumers as constants.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import OnnxImportError
from ...graph.ir import Graph, Input, Output
from ...te import Tensor
from ...te.graph import topo_order
from ...te.reference import evaluate
from ...te.tensor import Operation, PlaceholderOp
from . import fold
from .context import SUPPORTED_DTYPES, Node, Out, Value, make_placeholder, onnx_dtype, te_dtype, te_shape
from .registry import MAX_OPSET, canonical_domain, lookup, versions

ModelLike = onnx.ModelProto | str | os.PathLike[str] | bytes


def load_model(model: ModelLike) -> onnx.ModelProto:
    """The ModelProto of ``model``; a missing, corrupt or truncated file is an OnnxImportError."""
    if isinstance(model, onnx.ModelProto):
        return model
    where = "the given bytes"
    try:
        if isinstance(model, bytes):
            proto = onnx.load_model_from_string(model)
        else:
            where = os.fspath(model)
            if not os.path.isfile(where):
                raise OnnxImportError(f"{where}: no such ONNX file")
            proto = onnx.load(where)
    except OnnxImportError:
        raise
    except Exception as e:  # protobuf raises DecodeError (and others) on corrupt bytes
        raise OnnxImportError(
            f"{where}: not a readable ONNX model ({type(e).__name__}: {e}); the file may be truncated "
            "or corrupt, export it again"
        ) from None
    if not proto.graph.output:
        raise OnnxImportError(
            f"{where}: the ONNX model has no graph outputs; the file may be truncated or corrupt"
        )
    return proto


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    found = {canonical_domain(o.domain): o.version for o in model.opset_import}
    if found.get("", 0) > MAX_OPSET:
        raise OnnxImportError(
            f"model {model.graph.name!r} uses default-domain opset {found['']}, newer than any converter "
            f"(autosched knows opsets up to {MAX_OPSET}); export it with opset_version={MAX_OPSET} or lower"
        )
    return found


def check_supported(model: onnx.ModelProto, domains: Mapping[str, int]) -> None:
    """Raise one error listing every op of the model that has no converter at its opset."""
    missing: dict[tuple[str, str], list[str]] = {}
    for i, node in enumerate(model.graph.node):
        dom = canonical_domain(node.domain)
        if lookup(node.op_type, dom, domains.get(dom, 1)) is None:
            missing.setdefault((dom, node.op_type), []).append(node.name or f"#{i}")
    if not missing:
        return
    lines = []
    for (dom, op), names in sorted(missing.items()):
        have = versions(op, dom)
        why = f"converters exist from opset {have[0]}" if have else "no converter"
        shown = ", ".join(repr(n) for n in names[:5]) + (
            f" and {len(names) - 5} more" if len(names) > 5 else ""
        )
        lines.append(f"  {op} (domain {dom or 'ai.onnx'}, opset {domains.get(dom, 1)}; {why}): {shown}")
    raise OnnxImportError(
        f"model {model.graph.name!r}: {len(missing)} op type(s) cannot be converted:\n" + "\n".join(lines)
    )


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        out[a.name] = v
    return out


class Importer:
    def __init__(
        self,
        model: onnx.ModelProto,
        input_shapes: Mapping[str, Sequence[int]] | None,
        constants: Mapping[str, np.ndarray] | None = None,
    ):
        self.model = model
        self.constants = dict(constants or {})
        self.graph = model.graph
        self.domains = opsets(model)
        self.input_shapes = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
        self.values: dict[str, Value] = {}
        # id(array) -> its weight placeholder: one per constant, however many Values pass it on.
        self.placeholders: dict[int, Tensor] = {}
        self.weights: dict[Operation, np.ndarray] = {}  # placeholder op -> value as te holds it

    # Leaves --------------------------------------------------------------------------------------
    def materialize(self, value: Value) -> Tensor:
        """The placeholder of a constant Value (one per array), recording its te-held array."""
        assert value.const is not None
        if id(value.const) in self.placeholders:  # the Values keep every array alive, so ids are unique
            return self.placeholders[id(value.const)]
        if value.const.size == 0:
            raise OnnxImportError(
                f"constant {value.name!r} has shape {list(value.shape)} with no elements; te tensors "
                "need every dim >= 1"
            )
        t = make_placeholder(value)
        self.weights[t.op] = np.ascontiguousarray(value.const.astype(te_dtype(value.dtype)).reshape(t.shape))
        self.placeholders[id(value.const)] = t
        return t

    def read_inputs(self) -> list[Input]:
        graph_inputs = {i.name for i in self.graph.input}
        for what, given in (("input_shapes", self.input_shapes), ("constants", self.constants)):
            unknown = sorted(set(given) - graph_inputs)
            if unknown:
                raise OnnxImportError(
                    f"{what} names {unknown}, which are not inputs of the model (its inputs: "
                    f"{sorted(graph_inputs)})"
                )
        for init in self.graph.initializer:
            # An initializer listed as a graph input is a default value that a caller may override:
            # it stays a weight unless the caller gives that input a shape.
            if init.name in self.input_shapes:
                continue
            dtype = onnx_dtype(init.data_type, f"initializer {init.name!r}")
            array = numpy_helper.to_array(init)
            self.values[init.name] = Value(init.name, tuple(array.shape), dtype, const=array)
        inputs = []
        for vi in self.graph.input:
            if vi.name in self.values:
                continue
            if vi.name in self.constants:  # bound by the caller: a weight like any initializer
                array = np.asarray(self.constants[vi.name])
                dtype = onnx_dtype(
                    helper.np_dtype_to_tensor_dtype(array.dtype), f"constant input {vi.name!r}"
                )
                self.values[vi.name] = Value(vi.name, tuple(array.shape), dtype, const=array)
                continue
            ttype = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                raise OnnxImportError(
                    f"input {vi.name!r} is not a tensor; autosched imports tensor inputs only"
                )
            dtype = onnx_dtype(ttype.elem_type, f"input {vi.name!r}")
            shape = self.input_shape(vi.name, ttype)
            t = make_placeholder(Value(vi.name, shape, dtype))
            self.values[vi.name] = Value(vi.name, shape, dtype, tensor=t)
            inputs.append(Input(vi.name, t, dtype, None if te_shape(shape) == shape else shape))
        return inputs

    def input_shape(self, name: str, ttype: Any) -> tuple[int, ...]:
        given = self.input_shapes.get(name)
        dims = list(ttype.shape.dim) if ttype.HasField("shape") else None
        if given is not None:
            if dims is not None and len(dims) != len(given):
                raise OnnxImportError(
                    f"input {name!r}: input_shapes gives {len(given)} dims {given}, the model declares "
                    f"{len(dims)}"
                )
            for d, (size, dim) in enumerate(zip(given, dims or [None] * len(given), strict=True)):
                if size < 1:
                    raise OnnxImportError(
                        f"input {name!r}: dimension {d} of input_shapes is {size}, must be >= 1"
                    )
                if dim is not None and dim.HasField("dim_value") and dim.dim_value not in (0, size):
                    raise OnnxImportError(
                        f"input {name!r}: input_shapes gives dimension {d} as {size}, the model fixes it at "
                        f"{dim.dim_value}"
                    )
            return given
        if dims is None:
            raise OnnxImportError(
                f"input {name!r} has no declared shape; give it with input_shapes={{{name!r}: (...)}}"
            )
        shape = []
        for d, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(dim.dim_value)
                continue
            if dim.HasField("dim_value"):
                raise OnnxImportError(
                    f"input {name!r}: dimension {d} has size 0; te tensors need every dim >= 1 (an empty "
                    "input can only be bound as a constant)"
                )
            symbol = f"symbolic ({dim.dim_param!r})" if dim.dim_param else "of unknown size"
            example = "x".join(str(x.dim_value) if x.dim_value > 0 else "N" for x in dims)
            raise OnnxImportError(
                f"input {name!r}: dimension {d} is {symbol}; give its size with input_shapes="
                f"{{{name!r}: (...)}} (CLI: --input-shape {name}={example}, N a number)"
            )
        return tuple(shape)

    # Nodes ---------------------------------------------------------------------------------------
    def convert(self, proto: onnx.NodeProto) -> None:
        inputs: list[Value | None] = []
        for name in proto.input:
            if not name:
                inputs.append(None)
            elif name not in self.values:
                raise OnnxImportError(
                    f"node {proto.name or proto.op_type!r} ({proto.op_type}) reads {name!r}, which no "
                    "earlier node, input or initializer produces (nodes must be in topological order)"
                )
            else:
                inputs.append(self.values[name])
        dom = canonical_domain(proto.domain)
        opset = self.domains.get(dom, 1)
        conv = lookup(proto.op_type, dom, opset)
        assert conv is not None  # check_supported ran first
        node = Node(proto, inputs, opset, attributes(proto), self.materialize)
        try:
            outs = conv.fn(node)
        except (ValueError, TypeError) as e:  # topi/te argument checks: say which node
            raise node.error(str(e)) from None
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        fold_now = all(v is None or v.is_const for v in inputs)
        for i, name in enumerate(proto.output):
            if not name:
                continue
            if i >= len(outs) or outs[i] is None:
                raise node.error(f"output {i} ({name!r}) is not supported (only the first {len(outs)})")
            self.values[name] = self.to_value(name, outs[i], fold_now, node)

    def to_value(self, name: str, out: Any, fold_now: bool, node: Node) -> Value:
        if isinstance(out, np.ndarray):
            if out.dtype.name not in SUPPORTED_DTYPES:
                raise node.error(f"output {name!r} would be {out.dtype}, which autosched does not support")
            return Value(name, tuple(out.shape), out.dtype.name, const=out)
        if isinstance(out, Value):  # passed through unchanged (Identity, Dropout, a no-op Reshape)
            return Value(name, out.shape, out.dtype, out.tensor, out.const)
        tensor, shape, dtype = (
            (out.tensor, out.shape, out.dtype) if isinstance(out, Out) else (out, out.shape, out.dtype)
        )
        if fold_now:
            array = self.evaluate(tensor).reshape(shape)
            return Value(name, shape, dtype, const=array != 0 if dtype == "bool" else array)
        return Value(name, shape, dtype, tensor=tensor)

    def evaluate(self, tensor: Tensor) -> np.ndarray:
        leaves: dict[Tensor | str, np.ndarray] = {
            Tensor(op): self.weights[op] for op in topo_order([tensor]) if isinstance(op, PlaceholderOp)
        }
        return evaluate([tensor], leaves)[0]

    # The whole model -----------------------------------------------------------------------------
    def run(self) -> Graph:
        check_supported(self.model, self.domains)
        inputs = self.read_inputs()
        nodes = fold.fold_batch_norms(self.graph, self.values)
        for proto in nodes:
            self.convert(proto)
        outputs = []
        for vi in self.graph.output:
            if vi.name not in self.values:
                raise OnnxImportError(
                    f"graph output {vi.name!r} is produced by no node, input or initializer"
                )
            v = self.values[vi.name]
            t = v.tensor if v.tensor is not None else self.materialize(v)
            outputs.append(Output(vi.name, t, v.dtype, None if te_shape(v.shape) == v.shape else v.shape))
        used = set(topo_order([o.tensor for o in outputs]))
        weights = {op: a for op, a in self.weights.items() if op in used}
        return Graph(
            self.graph.name or "model", tuple(inputs), tuple(outputs), weights, self.domains.get("", 0)
        )


def from_onnx(
    model_or_path: ModelLike,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
) -> Graph:
    """An ONNX model (ModelProto, path or bytes) as one te program from inputs and weights to outputs.

    ``input_shapes`` sizes inputs whose shapes are symbolic (and overrides an initializer that is also
    a graph input, making it an input). ``constants`` binds inputs to fixed values, which then fold
    like weights (e.g. a shape fed as an input). Example: ``from_onnx("bert.onnx", {"ids": (1, 128)})``.
    """
    return Importer(load_model(model_or_path), input_shapes, constants).run()
