"""From an op call to a kernel: pick the device, build the te, find the record, compile once, run.

The first call of an op for a shape pays for the te, the log lookup and (unless cached on disk) the
compile; later calls are one dict lookup and the kernel call.

Example: ``run_op("matmul", "ops_matmul", {"M": 8, "N": 8, "K": 8, "dtype": "float32"}, [a, b])``.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AutoschedError
from . import kernels
from .logs import best_record, log_paths

_DLPACK_CPU = 1
# Untuned kernels smaller than this run on one thread: waking OpenMP threads costs more than it saves
# (0.5 us idle, milliseconds when the other cores are busy).
SERIAL_BELOW_FLOPS = 1 << 18


class UntunedWarning(UserWarning):
    """No tuned record was found for an op and shape on this chip: the default schedule runs."""


_memory: dict[Any, tuple[Any, Any, Any]] = {}  # call key -> (kernel, input params, output params)
_chips: dict[str, tuple[Any, Any, str, int]] = {}  # target string -> (target, adapter, fingerprint, cores)
_warned: set[Any] = set()
_lock = threading.RLock()


def as_array(op: str, name: str, x: Any) -> np.ndarray:
    """``x`` as a C-contiguous numpy array: numpy arrays as they are, anything with DLPack on the CPU."""
    if isinstance(x, np.ndarray):
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)
    if hasattr(x, "__dlpack__"):
        if hasattr(x, "__dlpack_device__") and int(x.__dlpack_device__()[0]) != _DLPACK_CPU:
            raise ValueError(
                f"autosched.ops.{op}: {name} is on DLPack device {x.__dlpack_device__()}, not the CPU"
            )
        return np.ascontiguousarray(np.from_dlpack(x))
    raise TypeError(
        f"autosched.ops.{op}: {name} must be a numpy array or support DLPack, got {type(x).__name__}"
    )


def resolve_platform(platform: str, inst: Any = None, paths: Sequence[Path] = ()) -> str:
    """``"auto"``: the best device here for ``inst`` (``hai.detect()``: the fastest tuned record in
    ``paths``, else the chip facts); ``"cpu"``: the built-in CPU target; else a target string."""
    from ..hai.registry import default_target, detect
    from ..target import parse_target

    if platform == "auto":
        return detect(inst, _tuned_seconds(inst, paths) if inst is not None and paths else None)
    if platform == "cpu":
        return default_target("cpu")
    return str(parse_target(platform))


def _tuned_seconds(inst: Any, paths: Sequence[Path]) -> Any:
    """For ``hai.detect``: (target, chip) -> seconds of the fastest fitting record for ``inst`` there."""
    from ..records.record import fingerprint_of
    from ..target import parse_target

    def seconds(target: str, chip: Any) -> float | None:
        rec = best_record(paths, inst, fingerprint_of(parse_target(target), chip))
        return None if rec is None else rec.mean_cost

    return seconds


def _chip(target_str: str) -> tuple[Any, Any, str, int]:
    hit = _chips.get(target_str)
    if hit is None:
        from ..hai.registry import get_adapter
        from ..records.record import fingerprint_of
        from ..target import parse_target

        target = parse_target(target_str)
        adapter = get_adapter(target)
        chip = adapter.info()
        hit = _chips[target_str] = (target, adapter, fingerprint_of(target, chip), chip.cores)
    return hit


def _logs_key(logs: Any) -> Any:
    if logs is None:
        return None
    if isinstance(logs, (str, os.PathLike)):
        return (str(logs),)
    return tuple(str(p) for p in logs)


def run_op(op: str, workload: str, args: dict[str, Any], inputs: Sequence[np.ndarray],
           platform: str = "auto", logs: Any = None) -> Any:  # fmt: skip
    """Run workload ``workload`` of ops/workloads.py with ``args`` on ``inputs``; returns the output(s)."""
    key = (workload, tuple(sorted(args.items())), platform, _logs_key(logs), os.environ.get("AUTOSCHED_LOGS"))
    hit = _memory.get(key)
    if hit is None:
        with _lock:
            hit = _memory.get(key) or _prepare(op, workload, args, platform, logs)
            _memory[key] = hit
    else:
        kernels.STATS["memory_hits"] += 1
    kernel, in_params, out_params = hit
    for i, (x, (shape, dtype)) in enumerate(zip(inputs, in_params)):
        if x.shape != shape or x.dtype != dtype:  # the op derived args from these arrays: a bug if hit
            raise ValueError(
                f"autosched.ops.{op}: input {i} is {x.dtype}{list(x.shape)}, expected {dtype}{list(shape)}"
            )
    outs = [np.empty(shape, dtype) for shape, dtype in out_params]
    kernel([*inputs, *outs])
    return outs[0] if len(outs) == 1 else tuple(outs)


def _prepare(op: str, workload: str, args: dict[str, Any], platform: str, logs: Any) -> Any:
    from ..te.workload import WorkloadInstance
    from . import workloads

    wl = getattr(workloads, workload).workload
    full = {**wl.defaults, **{k: str(v) if isinstance(v, np.dtype) else v for k, v in args.items()}}
    inst = WorkloadInstance(wl.name, full, tuple(wl.function(**full)))  # topi's own errors, unwrapped
    paths = log_paths(logs)
    target_str = resolve_platform(platform, inst, paths)
    target, adapter, fingerprint, cores = _chip(target_str)
    rec = best_record(paths, inst, fingerprint)  # validated against inst (issue 19)
    trace = None if rec is None else rec.trace
    if trace is not None:
        try:
            kernel = kernels.get_kernel(inst, target, adapter, fingerprint, trace)
        except AutoschedError as e:  # a stale record must not stop the application; say so and go on
            _warn_once(op, inst, fingerprint, paths, f"the tuned record failed ({e})")
            trace = None
    if trace is None:
        if rec is None:
            _warn_once(op, inst, fingerprint, paths, "no tuned record")
        from ..search_space.default import default_trace

        trace = default_trace(list(inst.outputs), adapter, cores=cores)  # GPU style: a thread per element
        if inst.flop_count() < SERIAL_BELOW_FLOPS:
            trace = tuple(st for st in trace if st.primitive != "parallel")
        kernel = kernels.get_kernel(inst, target, adapter, fingerprint, trace)
    params = [(tuple(t.shape), np.dtype(t.dtype)) for t in inst.tensors]
    n_in = len(inst.inputs)
    return kernel, tuple(params[:n_in]), tuple(params[n_in:])


def _warn_once(op: str, inst: Any, fingerprint: str, paths: Sequence[Path], why: str) -> None:
    key = (inst.key, fingerprint)
    if key in _warned:
        return
    _warned.add(key)
    shown = ", ".join(f"{k}={v!r}" for k, v in inst.args.items())
    kv = " ".join(shlex.quote(f"{k}={v}".replace(" ", "")) for k, v in inst.args.items())
    where = f"{len(paths)} log(s)" if paths else "no logs (pass logs= or set AUTOSCHED_LOGS)"
    op_file = Path(__file__).parent / "workloads.py"
    warnings.warn(
        f"autosched.ops.{op} ({inst.name}({shown})): {why} for {fingerprint} in {where}; using the "
        f"default schedule, which can be several times slower. Tune it with: autosched tune {op_file} "
        f"--workload {inst.name} --args {kv} --log tuning_logs/<chip>.jsonl",
        UntunedWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside autosched.ops."""
    here = str(Path(__file__).parent)
    frame, level = sys._getframe(1), 1  # the frame that calls warnings.warn is level 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def clear_memory_cache() -> None:
    """Forget the kernels loaded in this process (the disk cache stays; warnings stay given)."""
    with _lock:
        _memory.clear()
        _chips.clear()
