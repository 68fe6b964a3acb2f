"""One tuning record: a measured schedule as one versioned JSON line. Logs are data, never code.

Example::

    rec = make_record(inst, target, chip, trace, costs=(1.2e-3, 1.1e-3, 1.3e-3))
    line = rec.to_json_line()          # '{"autosched":"0.1.0","costs":[...],...,"version":1,...}'
    TuningRecord.from_json_line(line) == rec

Optional fields (format version 1 still; readers accept lines with or without them):

- ``"decisions"``: the sketch decisions that produced the trace (a JSON object, see
  :mod:`autosched.search_space.sketch`), so a search on another chip can seed its population and
  mutate from them (``--transfer-from``). Older lines lack it; their trace alone still replays.
- ``"timing"``: how the costs were timed (the runner's policy and ``alignment_bytes``), with
  ``"misaligned"`` for a host kernel that was a new best (:mod:`.alignment`). Older lines lack either.
- ``"retimed"``: ``{"rounds": R, "finalists": K, "passes": P}`` on a record of a finalists round: at
  the end of a tuning run the K best distinct schedules were timed again in turns, in R fresh runner
  processes, P passes in each (older lines lack ``"passes"``: one), and this record's costs are
  all of those repeats. It stands for its trace in place of the trace's earlier
  records (:func:`autosched.records.log.standing`): one sample's luck no longer picks the best.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..chip import fingerprint_of as fingerprint_of  # chip identity lives with the chip facts
from ..errors import AutoschedError, ScheduleError
from ..search_space.trace import Trace, trace_from_json, trace_to_json
from ..version import __version__
from .alignment import MISALIGNED, misaligned_problem

if TYPE_CHECKING:  # only types: loading a log must not need the compiler stack
    from ..chip import ChipInfo
    from ..target import Target
    from ..te.workload import WorkloadInstance

LOG_VERSION = 1  # bump on any change to the line format; older readers then refuse, not misread

# Error kinds: what went wrong with a candidate, as data the cost model and `logs show` group by.
ERROR_BUILD = "build"  # lowering or code generation failed
ERROR_COMPILE = "compile"  # the backend compiler refused the generated code
ERROR_RUN = "run"  # the kernel raised or the device reported an error
ERROR_TIMEOUT = "timeout"  # compiling or running took longer than allowed
ERROR_CRASH = "crash"  # the worker process died
ERROR_WRONG_RESULT = "wrong_result"  # output differs from the numpy reference
ERROR_MEMORY = "memory"  # out of device or host memory
ERROR_SCHEDULE = "schedule"  # the trace could not be applied (ScheduleError)
ERROR_KINDS = (
    ERROR_BUILD,
    ERROR_COMPILE,
    ERROR_RUN,
    ERROR_TIMEOUT,
    ERROR_CRASH,
    ERROR_WRONG_RESULT,
    ERROR_MEMORY,
    ERROR_SCHEDULE,
)
MAX_ERROR_MSG = 500  # messages are for humans skimming a log; tracebacks belong elsewhere


class RecordError(AutoschedError):
    """A line that is not a valid tuning record; the message says which field and why."""


_Scalar = (str, int, float, bool, type(None))


def now_utc() -> str:
    """The current time as ISO 8601 UTC, e.g. ``2024-05-01T12:00:00+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _arg_value(name: str, v: Any) -> Any:
    """A workload argument as a JSON-able value: scalars, and tuples of them for shapes such as ``(4, 16)``.

    Lists become tuples so that a record read back equals the one written.
    """
    if hasattr(v, "item") and not isinstance(v, (list, tuple)):
        v = v.item()  # numpy scalars
    if isinstance(v, float) and not math.isfinite(v):
        raise RecordError(f"workload argument {name!r}: {v} cannot be written to JSON")
    if isinstance(v, _Scalar):
        return v
    if isinstance(v, (list, tuple)):
        return tuple(_arg_value(name, x) for x in v)
    raise RecordError(f"workload argument {name!r}: {type(v).__name__} {v!r:.80} is not a JSON scalar")


def _json_arg(v: Any) -> Any:
    return [_json_arg(x) for x in v] if isinstance(v, tuple) else v


_CHECK = re.compile(r"full|numpy|sampled:[0-9]{1,9}")


@dataclass(frozen=True)
class TuningRecord:
    """One measured candidate: workload, target and chip, the trace, and its costs or error."""

    workload_key: str
    workload_name: str
    workload_args: dict[str, Any]
    target: str  # canonical: str(parse_target(...))
    fingerprint: str  # see fingerprint_of
    chip: dict[str, Any]  # ChipInfo.to_json()
    trace: Trace
    costs: tuple[float, ...] = ()  # seconds per repeat; empty on error
    error: str | None = None  # one of ERROR_KINDS
    error_msg: str = ""
    timestamp: str = field(default_factory=now_utc)
    autosched_version: str = __version__
    flops: float = 0.0  # arithmetic ops of one run, for GFLOP/s
    decisions: dict[str, Any] | None = None  # optional: the sketch decisions behind ``trace``
    check: str | None = None  # optional: how the outputs were checked ("full", "numpy", "sampled:4096")
    timing: dict[str, Any] | None = None  # optional: how the costs were timed (hai.timing.TimingPolicy)
    retimed: dict[str, int] | None = None  # optional: a finalists round's {"rounds", "finalists", "passes"}

    def __post_init__(self) -> None:
        args = {str(k): _arg_value(str(k), v) for k, v in self.workload_args.items()}
        object.__setattr__(self, "workload_args", args)
        object.__setattr__(self, "trace", tuple(self.trace))
        try:
            costs = tuple(float(c) for c in self.costs)
        except (OverflowError, TypeError, ValueError):
            raise RecordError(f"costs: expected finite seconds >= 0, got {self.costs!r:.80}") from None
        if any(not math.isfinite(c) or c < 0 for c in costs):
            raise RecordError(f"costs: expected finite seconds >= 0, got {list(costs)}")
        object.__setattr__(self, "costs", costs)
        if self.error is not None and self.error not in ERROR_KINDS:
            raise RecordError(f"error: unknown kind {self.error!r}; expected one of {', '.join(ERROR_KINDS)}")
        if not math.isfinite(self.flops) or self.flops < 0:
            raise RecordError(f"flops: expected a finite number >= 0, got {self.flops}")
        object.__setattr__(self, "error_msg", str(self.error_msg)[:MAX_ERROR_MSG])
        if self.decisions is not None:  # as JSON reads it back (tuples become lists), so lines round-trip
            try:
                decisions = json.loads(json.dumps(dict(self.decisions), allow_nan=False))
            except (TypeError, ValueError) as e:
                raise RecordError(f"decisions: not JSON-able ({e})") from None
            object.__setattr__(self, "decisions", decisions)
        if self.check is not None and not _CHECK.fullmatch(str(self.check)):
            raise RecordError(f"check: expected 'full', 'numpy' or 'sampled:N', got {self.check!r:.40}")
        if self.timing is not None and MISALIGNED in self.timing:  # optional: a new best, misaligned
            problem = misaligned_problem(self.timing[MISALIGNED])
            if problem is not None:
                raise RecordError(f"field 'timing.misaligned': {problem}")
        if self.retimed is not None:
            _check_retimed(self.retimed)
            object.__setattr__(self, "retimed", dict(self.retimed))

    @property
    def ok(self) -> bool:
        """Measured without error (and with at least one timing)."""
        return self.error is None and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Median seconds per run (robust to one slow repeat); ``inf`` for a failed candidate."""
        return statistics.median(self.costs) if self.ok else math.inf

    @property
    def gflops(self) -> float:
        """Throughput from ``flops`` and the median cost; 0.0 when failed or unknown."""
        cost = self.mean_cost
        return self.flops / cost / 1e9 if self.ok and cost > 0 else 0.0

    def to_json_line(self) -> str:
        """One line of JSON (no newline), keys sorted, so equal records give equal lines."""
        data = {
            "version": LOG_VERSION,
            "autosched": self.autosched_version,
            "workload": {
                "key": self.workload_key,
                "name": self.workload_name,
                "args": {k: _json_arg(v) for k, v in self.workload_args.items()},
            },
            "target": {"name": self.target, "fingerprint": self.fingerprint, "chip": self.chip},
            "trace": trace_to_json(self.trace),
            "costs": list(self.costs),
            "error": None if self.error is None else {"kind": self.error, "message": self.error_msg},
            "timestamp": self.timestamp,
            "flops": self.flops,
        }
        if self.decisions is not None:  # optional field: absent, the line is exactly the old format
            data["decisions"] = self.decisions
        if self.check is not None:  # optional too
            data["check"] = self.check
        if self.timing is not None:  # optional too: repeats, warm-up, cache flush
            data["timing"] = self.timing
        if self.retimed is not None:  # optional too: a finalists round's record
            data["retimed"] = self.retimed
        return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @staticmethod
    def from_json_line(line: str) -> TuningRecord:
        """Parse one line; anything malformed is a :class:`RecordError` naming the field."""
        try:
            data = json.loads(line, parse_constant=_reject_constant)
        except ValueError as e:  # JSONDecodeError, and NaN/Infinity
            raise RecordError(
                f"invalid JSON ({e}); a cut-off last line means the writer was killed"
            ) from None
        if not isinstance(data, dict):
            raise RecordError(f"expected a JSON object, got {type(data).__name__}")
        _check_version(data)
        workload = _field(data, "workload", dict)
        target = _field(data, "target", dict)
        error = _field(data, "error", (dict, type(None)))
        costs = _field(data, "costs", list)
        if not all(_is_number(c) for c in costs):
            raise RecordError(f"field 'costs': expected a list of numbers, got {costs!r:.120}")
        try:
            trace = trace_from_json(_field(data, "trace", list))
        except ScheduleError as e:
            raise RecordError(f"field 'trace': {e}") from None
        flops = _field(data, "flops", (int, float))
        if not _is_number(flops):
            raise RecordError(f"field 'flops': expected a finite number, got {flops!r:.40}")
        timestamp = _field(data, "timestamp", str)
        _check_timestamp(timestamp)
        decisions = _field(data, "decisions", dict) if "decisions" in data else None  # optional
        check = _field(data, "check", str) if "check" in data else None  # optional
        timing = _field(data, "timing", dict) if "timing" in data else None  # optional
        retimed = _field(data, "retimed", dict) if "retimed" in data else None  # optional
        return TuningRecord(
            workload_key=_field(workload, "key", str, "workload."),
            workload_name=_field(workload, "name", str, "workload."),
            workload_args=_field(workload, "args", dict, "workload."),
            target=_field(target, "name", str, "target."),
            fingerprint=_field(target, "fingerprint", str, "target."),
            chip=_field(target, "chip", dict, "target."),
            trace=trace,
            costs=tuple(costs),
            error=None if error is None else _field(error, "kind", str, "error."),
            error_msg="" if error is None else _field(error, "message", str, "error."),
            timestamp=timestamp,
            autosched_version=_field(data, "autosched", str),
            flops=float(flops),
            decisions=decisions,
            check=check,
            timing=timing,
            retimed=retimed,
        )


_RETIMED_KEYS = {"rounds", "finalists", "passes"}


def _check_retimed(retimed: Any) -> None:
    """``retimed`` must be ``{"rounds": R, "finalists": K}``, with ``"passes": P`` or not, each a whole
    number 1..1000 (no other keys)."""
    if not isinstance(retimed, dict) or not {"rounds", "finalists"} <= set(retimed) <= _RETIMED_KEYS:
        shape = '{"rounds": R, "finalists": K, "passes": P}'
        raise RecordError(f"field 'retimed': expected {shape}, got {retimed!r:.80}")
    for name, v in retimed.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1000:
            raise RecordError(f"field 'retimed.{name}': expected a whole number 1..1000, got {v!r:.40}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _is_number(v: Any) -> bool:
    """A JSON number that is a finite float (an integer of 400 digits is not)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _field(obj: dict[str, Any], name: str, types: type | tuple[type, ...], prefix: str = "") -> Any:
    if name not in obj:
        raise RecordError(f"missing field '{prefix}{name}'")
    value = obj[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        expected = " or ".join(dict.fromkeys(_json_type(t) for t in _as_tuple(types)))
        raise RecordError(
            f"field '{prefix}{name}': expected {expected}, got {_json_type(type(value))} {value!r:.80}"
        )
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _json_type(t: type) -> str:
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(t, "null" if t is type(None) else t.__name__)


def _check_version(data: dict[str, Any]) -> None:
    version = _field(data, "version", int)
    if version > LOG_VERSION:
        raise RecordError(
            f"written by a newer autosched (format {version}); this autosched {__version__} reads "
            f"format {LOG_VERSION}: upgrade autosched to use this record"
        )
    if version != LOG_VERSION:
        raise RecordError(f"unknown format version {version}; expected {LOG_VERSION}")


def _check_timestamp(text: str) -> None:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))  # 3.10's fromisoformat rejects "Z"
    except ValueError:
        raise RecordError(f"field 'timestamp': {text!r:.40} is not an ISO 8601 time") from None


def make_record(
    inst: WorkloadInstance,
    target: Target,
    chip: ChipInfo,
    trace: Trace,
    costs: tuple[float, ...] | list[float] = (),
    error: str | None = None,
    error_msg: str = "",
    decisions: dict[str, Any] | None = None,
    check: str | None = None,
    timing: dict[str, Any] | None = None,
    retimed: dict[str, int] | None = None,
) -> TuningRecord:
    """A record for a candidate just measured; fills key, name, args, flops, fingerprint and time.

    Example: ``make_record(inst, target, adapter.info(), trace, error=ERROR_TIMEOUT, error_msg="> 10 s")``.
    ``decisions``: the sketch decisions that made ``trace``, when known (written to the log); ``check``:
    how its outputs were compared with the reference (``MeasureResult.check``); ``retimed``: the
    finalists round that timed it again (kept on a failure too: a finalist that fails there is out).
    """
    return TuningRecord(
        workload_key=inst.key,
        workload_name=inst.name,
        workload_args=dict(inst.args),
        target=str(target),
        fingerprint=fingerprint_of(target, chip),
        chip=chip.to_json(),
        trace=tuple(trace),
        costs=() if error is not None else tuple(costs),
        error=error,
        error_msg=error_msg,
        flops=float(inst.flop_count()),
        decisions=decisions or None,
        check=check if error is None else None,
        timing=timing if error is None else None,
        retimed=retimed,
    )
