"""Export tuned kernels as a library for applications: ``libNAME.so`` + ``manifest.json`` + ``NAME.h``.

For each workload, the best record of the log for the target's chip fingerprint is replayed, lowered
and compiled to a position-independent object, in a worker with a time and memory limit (a record is
untrusted input: :mod:`autosched.measure.isolated`); the objects are linked with the system C compiler
(``-lgomp`` for parallel loops). Every kernel's symbol is ``autosched_<name>``, and the library embeds
its ABI. The manifest says what the library holds and for which CPU, so :func:`autosched.load` can
check calls and refuse a library built for another machine or edited since (:mod:`.manifest`).

Example::

    [wl] = load_op_file("examples/matmul.py")
    res = export_library([wl.instantiate(M=64, N=64, K=64)], "out", log="tuning_logs/matmul.jsonl")
    lib = autosched.load(res.directory)
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AutoschedError
from ..te.workload import WorkloadInstance
from ..version import __version__
from .manifest import (
    C_TYPES,
    MANIFEST,
    MANIFEST_FORMAT,
    SYMBOL_PREFIX,
    abi_c_source,
    library_digest,
    validate_manifest,
)


class ExportError(AutoschedError):
    """A library that cannot be built as asked: no record for a workload, a bad name, a stale trace."""


@dataclass(frozen=True)
class ExportedFunction:
    """One function of a built library and the schedule it was built from."""

    name: str  # the name in Python (lib.<name>); the C symbol is :attr:`symbol`
    instance: WorkloadInstance
    trace: Any  # Trace
    record: Any = None  # the TuningRecord used, or None for the default schedule

    @property
    def source(self) -> str:
        return "default" if self.record is None else "log"

    @property
    def symbol(self) -> str:
        return SYMBOL_PREFIX + self.name


@dataclass(frozen=True)
class ExportResult:
    directory: Path
    library: Path
    header: Path
    manifest: Path
    functions: tuple[ExportedFunction, ...]


def c_identifier(name: str, what: str = "name") -> str:
    """``name`` as a C identifier: other characters become ``_``; a leading digit gets a ``_``."""
    ident = re.sub(r"\W", "_", name, flags=re.ASCII)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or ident in _C_KEYWORDS:
        ident += "_"
    return ident


_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while".split()
)


def _unique(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        cand, i = n, 1
        while cand.lower() in {o.lower() for o in out}:  # macros upper-case them: keep them distinct
            cand, i = f"{n}_{i}", i + 1
        out.append(cand)
    return out


def choose_schedules(
    instances: Sequence[WorkloadInstance],
    log: str | Path | None,
    fingerprint: str,
    *,
    target: Any,
    cores: int,
    allow_default: bool = False,
) -> list[ExportedFunction]:
    """The trace for each instance: the log's best for this chip, or (``allow_default``) the default
    schedule of ``target``'s style, an adapter's or a target's
    (:func:`~autosched.search_space.default.default_trace`). The log is read once."""
    from ..records.log import best_valid_record, scan_log
    from ..search_space.default import default_trace

    records: list[Any] = []
    lines: list[Any] = []
    if log is not None:
        if Path(log).is_dir():
            raise ExportError(f"tuning log {log} is a directory; pass a log file (a .jsonl of records)")
        if not Path(log).is_file():
            if not allow_default:
                raise ExportError(f"tuning log {log} not found (tune first, or pass --allow-default)")
        else:
            lines = scan_log(log)
            records = [x.record for x in lines if x.record]
    elif not allow_default:
        raise ExportError("no tuning log given: pass --log LOG, or --allow-default for default schedules")
    names = _unique([c_identifier(inst.name) for inst in instances])
    chosen = []
    for name, inst in zip(names, instances):
        # validated: a record that does not fit the workload is never compiled (issue 19)
        rec = None
        if log is not None and records:  # records come only from a log
            rec = best_valid_record([log], inst, fingerprint, scanned={str(log): lines})[0]
        if rec is not None:
            chosen.append(ExportedFunction(name, inst, rec.trace, rec))
            continue
        if not allow_default:
            raise ExportError(_no_record_message(inst, log, fingerprint, records))
        trace = default_trace(list(inst.outputs), target, cores=cores)
        chosen.append(ExportedFunction(name, inst, trace, None))
    return chosen


def _no_record_message(inst: WorkloadInstance, log: Any, fingerprint: str, records: list[Any]) -> str:
    mine = [r for r in records if r.workload_key == inst.key]
    others = sorted({r.fingerprint for r in mine if r.fingerprint != fingerprint})
    failed = sum(1 for r in mine if r.fingerprint == fingerprint and not r.ok)
    args = ", ".join(f"{k}={v!r}" for k, v in inst.args.items())
    msg = f"no tuned record for workload {inst.name}({args}) on {fingerprint} in {log}"
    if failed:
        msg += f"; its {failed} record(s) for this chip all failed"
    if others:
        msg += f"; it has records for other chips only: {', '.join(others)}"
    return msg + ". Tune it (autosched tune ... --log LOG) or pass --allow-default for the default schedule"


def export_library(
    instances: Sequence[WorkloadInstance],
    out_dir: str | Path,
    *,
    log: str | Path | None = None,
    target: str = "llvm-cpu",
    name: str = "autosched",
    allow_default: bool = False,
    compile_timeout_s: float | None = None,
) -> ExportResult:
    """Build ``out_dir/lib<name>.so``, ``out_dir/<name>.h`` and ``out_dir/manifest.json``.

    Each function compiles in a worker within ``compile_timeout_s`` (default: ``$AUTOSCHED_COMPILE_TIMEOUT``
    or 300 s) and a memory limit. Example: ``export_library([inst], "build", log="m.jsonl", name="mm")``.
    """
    from ..hai.registry import get_adapter
    from ..measure.isolated import compile_isolated
    from ..records.record import fingerprint_of
    from ..target import parse_target
    from .cpufeatures import checkable
    from .link import link_shared

    if not instances:
        raise ExportError("export_library: no workloads to build")
    lib_name = c_identifier(name)
    t = parse_target(target)
    adapter = get_adapter(t)
    if not adapter.spec.can_export:
        from ..hai.registry import kinds, spec_of

        able = ", ".join(k for k in kinds() if spec_of(k).can_export)
        raise ExportError(f"target {t}: its adapter cannot emit object files; libraries need one of: {able}")
    chip = adapter.info()
    fingerprint = fingerprint_of(t, chip)
    functions = choose_schedules(
        instances, log, fingerprint, target=adapter, cores=chip.cores, allow_default=allow_default
    )
    objects = []
    for fn in functions:
        inst = fn.instance
        try:
            obj = compile_isolated(
                inst.tensors, len(inst.inputs), str(t), fn.trace, fn.symbol,
                link=False, timeout_s=compile_timeout_s,
            )  # fmt: skip
            objects.append(obj)
        except AutoschedError as e:
            whose = f"the record from {log}" if fn.record is not None else "the default schedule"
            raise ExportError(f"workload {inst.name}: {whose} does not build: {e}") from e
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a half-rebuilt directory must not look complete
    so_path = out / f"lib{lib_name}.so"
    header = out / f"{lib_name}.h"
    manifest = {
        "format": MANIFEST_FORMAT,
        "autosched": __version__,
        "name": lib_name,
        "library": so_path.name,
        "header": header.name,
        "target": {
            "name": str(t),
            "fingerprint": fingerprint,
            "triple": getattr(adapter, "triple", ""),
            "cpu": getattr(adapter, "cpu", chip.arch),
            "cpu_features": checkable(chip.features) if _is_host(adapter) else sorted(chip.features),
            "chip": chip.to_json(),
        },
        "log": None if log is None else str(log),
        "functions": [_function_entry(fn) for fn in functions],
    }
    # As load will read it back: tuples as lists, numpy scalars as numbers (the digest must match).
    manifest = json.loads(json.dumps(manifest, default=_json_default))
    so = link_shared(objects, so_path, openmp=True, c_sources=[abi_c_source(manifest)])
    header.write_text(render_header(lib_name, functions))
    manifest["sha256"] = library_digest(so.read_bytes(), manifest)
    path = out / MANIFEST
    validate_manifest(manifest, str(path))  # what load will demand; a failure here is a bug
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return ExportResult(out, so, header, path, tuple(functions))


def _is_host(adapter: Any) -> bool:
    return getattr(adapter, "cpu", None) == getattr(adapter, "host_cpu", None)


def _json_default(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"manifest: {type(v).__name__} is not JSON")


def _function_entry(fn: ExportedFunction) -> dict[str, Any]:
    from ..records.alignment import manifest_fields
    from ..search_space.trace import trace_to_json

    inst = fn.instance
    n_in = len(inst.inputs)
    args = [
        {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "role": "input" if i < n_in else "output"}
        for i, t in enumerate(inst.tensors)
    ]
    rec = fn.record
    record = {
        "source": fn.source,
        "trace": trace_to_json(fn.trace),
        "costs_s": [] if rec is None else list(rec.costs),
        "median_s": None if rec is None else rec.mean_cost,
        "gflops": None if rec is None else rec.gflops,
        "timestamp": None if rec is None else rec.timestamp,
        # optional (older manifests lack them): the alignment timed on, and the misaligned case's time
        **({} if rec is None else manifest_fields(rec.timing)),
    }
    return {
        "name": fn.name,
        "workload": inst.name,
        "workload_key": inst.key,
        "workload_args": dict(inst.args),
        "args": args,
        "record": record,
    }


def render_header(lib_name: str, functions: Sequence[ExportedFunction]) -> str:
    """A C header declaring ``void autosched_f(const float* A, ..., float* C);`` per function, with
    shape macros.

    Each argument's dims are macros too, e.g. ``MATMUL_A_DIM0``, so a C program follows a rebuild.
    """
    guard = f"AUTOSCHED_{lib_name.upper()}_H"
    lines = [
        f"/* lib{lib_name}.so: generated by autosched {__version__}; do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
    ]
    for fn in functions:
        tensors = fn.instance.tensors
        n_in = len(fn.instance.inputs)
        idents = _unique([c_identifier(t.name) for t in tensors])
        params = []
        for i, (t, ident) in enumerate(zip(tensors, idents)):
            ctype = C_TYPES.get(t.dtype)
            if ctype is None:
                raise ExportError(f"{fn.name}: argument {t.name!r} has dtype {t.dtype}, which has no C type")
            params.append(f"{'const ' if i < n_in else ''}{ctype}* {ident}")
            prefix = f"{fn.name}_{ident}".upper()
            lines.append(f"#define {prefix}_NDIM {len(t.shape)}")
            lines += [f"#define {prefix}_DIM{d} {n}" for d, n in enumerate(t.shape)]
        shapes = ", ".join(f"{t.name}{list(t.shape)}" for t in tensors)
        lines.append(f"/* {fn.instance.name}: {shapes}; schedule: {fn.source}. Row-major, dense. */")
        lines.append(f"void {fn.symbol}({', '.join(params)});")
        lines.append("")
    lines += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)
