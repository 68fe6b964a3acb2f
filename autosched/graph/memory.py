"""A static memory plan: intermediate buffers share one arena wherever their lifetimes do not overlap.

Greedy by size (as TFLite's and TVM's static planners do): the largest buffer is placed first, each at
the lowest aligned offset that no buffer alive at the same time occupies. A buffer lives from the step
that writes it to the last step that reads it, both included, so a kernel never writes over its own
inputs.

Example::

    plan = plan_memory([Buffer("a", 4096, 0, 1), Buffer("b", 4096, 1, 2), Buffer("c", 4096, 2, 3)])
    plan.offsets   # {"a": 0, "b": 4096, "c": 0}: c reuses a's memory
    plan.arena_bytes, plan.peak_live_bytes, plan.total_bytes     # 8192, 8192, 12288
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALIGNMENT = 64  # bytes: a cache line, and the widest vector load


@dataclass(frozen=True)
class Buffer:
    name: str
    nbytes: int
    first: int  # step that writes it
    last: int  # last step that reads it (>= first)


@dataclass(frozen=True)
class MemoryPlan:
    offsets: Mapping[str, int]  # buffer name -> byte offset in the arena
    arena_bytes: int  # the arena's size: what the model allocates for intermediates
    peak_live_bytes: int  # the most bytes alive at one step (a lower bound for any plan)
    total_bytes: int  # every intermediate in its own buffer, without reuse

    def to_json(self) -> dict[str, object]:
        return {
            "arena_bytes": self.arena_bytes,
            "peak_live_bytes": self.peak_live_bytes,
            "total_bytes": self.total_bytes,
            "offsets": dict(self.offsets),
        }


def _aligned(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def plan_memory(buffers: Sequence[Buffer], alignment: int = ALIGNMENT) -> MemoryPlan:
    """Offsets for ``buffers`` in one arena; buffers alive at the same step never overlap."""
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ValueError("plan_memory: buffer names must be distinct")
    for b in buffers:
        if b.nbytes < 0 or b.last < b.first:
            raise ValueError(f"plan_memory: buffer {b.name!r} has size {b.nbytes}, life {b.first}..{b.last}")
    placed: list[tuple[Buffer, int]] = []
    for buf in sorted(buffers, key=lambda b: (-b.nbytes, b.first, b.name)):
        size = _aligned(max(buf.nbytes, 1), alignment)
        busy = sorted(
            (off, off + _aligned(max(o.nbytes, 1), alignment))
            for o, off in placed
            if o.first <= buf.last and buf.first <= o.last
        )
        offset = 0
        for start, end in busy:  # first gap from the bottom that fits
            if offset + size <= start:
                break
            offset = max(offset, end)
        placed.append((buf, offset))
    offsets = {b.name: off for b, off in placed}
    arena = max((off + _aligned(max(b.nbytes, 1), alignment) for b, off in placed), default=0)
    steps = {s for b in buffers for s in (b.first, b.last)}
    peak = max(
        (sum(b.nbytes for b in buffers if b.first <= s <= b.last) for s in steps),
        default=0,
    )
    return MemoryPlan(offsets, arena, peak, sum(b.nbytes for b in buffers))
