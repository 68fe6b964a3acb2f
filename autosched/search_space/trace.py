"""A schedule as data: the ordered steps that built it, replayable on a fresh schedule.

Steps name stages and axes (``"C"``, ``"i.outer"``), never internal indices, so a trace stays
meaningful in a tuning log read by another process, another machine or another version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import ScheduleError

# primitive -> names of its arguments, in order (the stage comes first and is not listed).
PRIMITIVES: dict[str, tuple[str, ...]] = {
    "split": ("axis", "factor", "nparts"),
    "fuse": ("axes",),
    "reorder": ("axes",),
    "tile": ("x", "y", "x_factor", "y_factor"),
    "parallel": ("axis",),
    "vectorize": ("axis",),
    "unroll": ("axis",),
    "bind": ("axis", "thread"),
    "pragma": ("axis", "key", "value"),
    "compute_at": ("parent", "axis"),
    "compute_inline": (),
    "compute_root": (),
    "cache_read": ("scope", "readers", "layout"),
    "cache_write": ("scope", "layout"),
    "rfactor": ("axis", "factor_axis"),
    "flash_attention": ("block_q", "block_k", "rows", "cols", "pv_rows", "pv_cols"),
}
# Trailing arguments a step may leave out (written only when set, so older traces keep their keys).
OPTIONAL: dict[str, int] = {"cache_read": 1, "cache_write": 1}

# What each argument may hold when a step is read from JSON (a log line is untrusted input): a name,
# a list of names, a loop factor (None allowed where marked "?"), a small index, a pragma value, a
# layout (a list of dimension indices, or None).
ARG_KINDS: dict[str, tuple[str, ...]] = {
    "split": ("name", "factor?", "factor?"),
    "fuse": ("names",),
    "reorder": ("names",),
    "tile": ("name", "name", "factor", "factor"),
    "parallel": ("name",),
    "vectorize": ("name",),
    "unroll": ("name",),
    "bind": ("name", "name"),
    "pragma": ("name", "name", "pragma"),
    "compute_at": ("name", "name"),
    "compute_inline": (),
    "compute_root": (),
    "cache_read": ("name", "names", "layout"),
    "cache_write": ("name", "layout"),
    "rfactor": ("name", "index"),
    "flash_attention": ("factor",) * 6,
}
# auto_unroll_max_step: the sketch samples at most 512 (UNROLL_STEPS); 10**12 made a compile run
# without limit. Hand schedules may use any value; a trace read from a log may not exceed this.
MAX_AUTO_UNROLL_STEP = 4096
MAX_FACTOR = 2**31 - 1  # loop extents are int32
MAX_TRACE_STEPS = 10_000  # the sketch writes a few dozen
MAX_NAME_CHARS = 256


def _arg_problem(kind: str, value: Any) -> str | None:
    """Why ``value`` cannot be an argument of this kind, or None when it can."""
    if kind == "name":
        ok = isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS
        return None if ok else f"expected a name (a string of 1-{MAX_NAME_CHARS} characters)"
    if kind == "names":
        ok = isinstance(value, list) and bool(value) and all(_arg_problem("name", v) is None for v in value)
        return None if ok else "expected a non-empty list of names"
    if kind == "factor?" and value is None:
        return None
    if kind == "layout":
        ok = value is None or (isinstance(value, list) and all(_is_int(v, 0, 64) for v in value))
        return None if ok else "expected a list of dimension indices"
    bounds = {"factor": (1, MAX_FACTOR), "factor?": (1, MAX_FACTOR), "index": (0, 64)}
    low, high = bounds.get(kind, (0, MAX_AUTO_UNROLL_STEP))
    if _is_int(value, low, high):
        return None
    if kind == "pragma":
        return (
            f"expected an int in 0..{MAX_AUTO_UNROLL_STEP} (the search space samples at most 512); "
            "a larger unroll step can make the compiler run without limit"
        )
    return f"expected an int in {low}..{high}"


def _is_int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class Step:
    """One schedule primitive applied to one stage, with JSON-able arguments."""

    primitive: str
    stage: str
    args: tuple[Any, ...] = ()

    def to_json(self) -> list[Any]:
        return [self.primitive, self.stage, [list(a) if isinstance(a, tuple) else a for a in self.args]]

    @staticmethod
    def from_json(data: Any) -> Step:
        if not (isinstance(data, list) and len(data) == 3 and isinstance(data[2], list)):
            raise ScheduleError(f"trace: a step must be [primitive, stage, args], got {data!r:.120}")
        primitive, stage, args = data
        if not isinstance(primitive, str) or primitive not in PRIMITIVES:
            raise ScheduleError(f"trace: unknown primitive {primitive!r:.80}")
        if _arg_problem("name", stage) is not None:
            raise ScheduleError(f"trace: {primitive} step names stage {stage!r:.80}, expected a name")
        n = len(PRIMITIVES[primitive])
        if not n - OPTIONAL.get(primitive, 0) <= len(args) <= n:
            raise ScheduleError(
                f"trace: {primitive} takes {len(PRIMITIVES[primitive])} argument(s) "
                f"({', '.join(PRIMITIVES[primitive])}), got {args!r:.120}"
            )
        for name, kind, value in zip(PRIMITIVES[primitive], ARG_KINDS[primitive], args):
            problem = _arg_problem(kind, value)
            if problem is not None:
                where = f"trace: {primitive} on stage {stage!r}"
                if primitive == "pragma" and name == "value":
                    name = str(args[1])[:MAX_NAME_CHARS]  # the pragma's key: auto_unroll_max_step = ...
                raise ScheduleError(f"{where}: {name} = {value!r:.80}: {problem}")
        return Step(primitive, stage, tuple(tuple(a) if isinstance(a, list) else a for a in args))

    def __str__(self) -> str:
        return self.to_code()

    def to_code(self) -> str:
        """The step as the schedule code a user would write."""
        a = self.args
        st = f"s[{self.stage!r}]"
        names = PRIMITIVES[self.primitive]
        if self.primitive == "split":
            kw = f"factor={a[1]}" if a[1] is not None else f"nparts={a[2]}"
            return f"{st}.split({a[0]!r}, {kw})"
        if self.primitive in ("fuse", "reorder"):
            return f"{st}.{self.primitive}({', '.join(map(repr, a[0]))})"
        if self.primitive == "cache_read":
            layout = f", layout={a[2]!r}" if len(a) > 2 else ""
            return f"s.cache_read({self.stage!r}, {a[0]!r}, {list(a[1])!r}{layout})"
        if self.primitive == "cache_write":
            layout = f", layout={a[1]!r}" if len(a) > 1 else ""
            return f"s.cache_write({self.stage!r}, {a[0]!r}{layout})"
        if self.primitive == "rfactor":
            return f"s.rfactor({self.stage!r}, {a[0]!r}, factor_axis={a[1]})"
        if self.primitive == "compute_at":
            return f"{st}.compute_at(s[{a[0]!r}], {a[1]!r})"
        args = ", ".join(f"{n}={v!r}" if n.endswith("factor") else repr(v) for n, v in zip(names, a))
        return f"{st}.{self.primitive}({args})"


Trace = tuple[Step, ...]


def trace_to_json(trace: Trace) -> list[Any]:
    return [step.to_json() for step in trace]


def trace_from_json(data: Any) -> Trace:
    if isinstance(data, str):
        data = json.loads(data)
    if not isinstance(data, list):
        raise ScheduleError(f"trace: expected a list of steps, got {type(data).__name__}")
    if len(data) > MAX_TRACE_STEPS:
        raise ScheduleError(f"trace: {len(data)} steps, more than the {MAX_TRACE_STEPS} a trace may hold")
    return tuple(Step.from_json(d) for d in data)


def trace_key(trace: Trace) -> str:
    """Canonical JSON of a trace: equal for equal traces, usable as a set member or dict key."""
    return json.dumps(trace_to_json(trace), sort_keys=True, separators=(",", ":"))
