"""The dataflow graph of a te program: operations in dependency order."""

from __future__ import annotations

from collections.abc import Iterable

from .tensor import Operation, Tensor


def topo_order(outputs: Iterable[Tensor]) -> list[Operation]:
    """Every operation the outputs depend on, producers before consumers, in a stable order."""
    order: list[Operation] = []
    state: dict[Operation, int] = {}  # 1 = visiting, 2 = done
    for out in outputs:
        stack: list[tuple[Operation, bool]] = [(out.op, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                state[op] = 2
                order.append(op)
                continue
            if state.get(op) == 2:
                continue
            state[op] = 1
            stack.append((op, True))
            for t in reversed(op.input_tensors):
                if state.get(t.op) is None:
                    stack.append((t.op, False))
    return order


def consumers(ops: list[Operation]) -> dict[Operation, list[Operation]]:
    """For each operation, the operations that read it, in dependency order."""
    readers: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            readers[t.op].append(op)
    return readers


def unique_names(ops: list[Operation]) -> dict[Operation, str]:
    """A name per operation: its own, suffixed ``_1``, ``_2``... where two share one."""
    names: dict[Operation, str] = {}
    taken: set[str] = set()
    for op in ops:
        name, n = op.name, 0
        while name in taken:
            n += 1
            name = f"{op.name}_{n}"
        taken.add(name)
        names[op] = name
    return names
