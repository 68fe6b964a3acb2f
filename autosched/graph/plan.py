"""The execution plan of a model as plain JSON data: values, steps and the memory plan.

The same plan runs a model compiled in memory and one loaded from a built directory (its manifest
holds it), so the two cannot drift apart.

- ``values``: every tensor a step reads or writes: a model ``input``, a ``weight`` (constant), an
  ``intermediate`` (at ``offset`` in the arena) or an ``output`` (a fresh array per run).
- ``steps``: in execution order, ``{"task": i, "args": [value ids: inputs..., output]}``.
- ``tasks``: one per distinct kernel, with its key, weight and argument shapes.

Example: ``plan = build_plan(extract_tasks(graph)); plan["memory"]["arena_bytes"]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..te.tensor import Operation
from .ir import Graph
from .memory import Buffer, plan_memory
from .tasks import TaskGraph

PLAN_FORMAT = 1


def used_weights(graph: Graph) -> list[Operation]:
    """The weights the outputs read, in the graph's order (an unused initializer costs nothing)."""
    reachable = set(graph.ops())
    return [op for op in graph.weights if op in reachable]


def build_plan(tg: TaskGraph) -> dict[str, Any]:
    """The JSON-able plan of a task graph (see the module docstring for its fields)."""
    graph = tg.graph
    ids: dict[Operation, int] = {}
    values: list[dict[str, Any]] = []

    def value(op: Operation, kind: str, **extra: Any) -> int:
        if op not in ids:
            ids[op] = len(values)
            values.append(
                {"name": op.name, "kind": kind, "shape": list(op.shape), "dtype": op.dtype, **extra}
            )
        return ids[op]

    inputs = []
    for inp in graph.inputs:
        vid = value(inp.tensor.op, "input", input=inp.name)
        shape = inp.tensor.shape if inp.shape is None else inp.shape  # () for a scalar held as (1,)
        inputs.append({"name": inp.name, "value": vid, "dtype": inp.dtype, "shape": list(shape)})
    weight_ops = used_weights(graph)
    for n, op in enumerate(weight_ops):
        value(op, "weight", weight=n)
    output_ops = {o.tensor.op for o in graph.outputs}
    steps: list[dict[str, Any]] = []
    for call in tg.calls:
        args = [ids[src] for src in call.inputs]  # producers run first: their values exist
        kind = "output" if call.output in output_ops else "intermediate"
        steps.append({"task": call.task, "args": [*args, value(call.output, kind)]})
    last_use = {}
    for n, step in enumerate(steps):
        for vid in step["args"]:
            last_use[vid] = n
    first = {step["args"][-1]: n for n, step in enumerate(steps)}
    buffers = [
        Buffer(str(vid), _nbytes_of(values[vid]), first[vid], last_use[vid])
        for vid in sorted(first)
        if values[vid]["kind"] == "intermediate"
    ]
    memory = plan_memory(buffers)
    for name, offset in memory.offsets.items():
        values[int(name)]["offset"] = offset
    outputs = [
        {
            "name": o.name,
            "value": ids[o.tensor.op],
            "dtype": o.dtype,
            "shape": list(o.tensor.shape if o.shape is None else o.shape),
        }
        for o in graph.outputs
    ]
    tasks = [
        {
            "name": t.name,
            "key": t.key,
            "weight": t.weight,
            "pattern": t.pattern.name.lower(),
            "flops": t.instance.flop_count(),
            "args": [{"shape": list(x.shape), "dtype": x.dtype} for x in t.instance.tensors],
        }
        for t in tg.tasks
    ]
    return {
        "format": PLAN_FORMAT,
        "graph": graph.name,
        "values": values,
        "inputs": inputs,
        "outputs": outputs,
        "weights": [ids[op] for op in weight_ops],
        "tasks": tasks,
        "steps": steps,
        "groups": [[op.name for op in c.group.ops] for c in tg.calls],
        "memory": {k: v for k, v in memory.to_json().items() if k != "offsets"},
    }


def _nbytes_of(value: dict[str, Any]) -> int:
    return int(np.prod(value["shape"], dtype=np.int64)) * np.dtype(value["dtype"]).itemsize
