"""``autosched profile DIR``: where a built library's or compiled model's time goes, kernel by kernel.

Each function of the library (``autosched build ... -o DIR``, opened with :func:`autosched.load`) runs on
fresh random inputs (never zeros), its output is checked against the numpy reference where its workload
is registered here, and it is timed with the project's shared timer for fair comparisons
(:func:`autosched.measure.compare.interleaved_medians`: all kernels in alternating blocks, median of
each). Printed per kernel, sorted by share of the total: median time, share, GFLOP/s and the fraction
of the roofline bound from the chip facts in the manifest.

A compiled model's directory (``autosched build model.onnx``) is profiled through its kernel library:
each task's kernel is timed once per call and counted as often as the model calls it (its weight), so
the shares say where one run of the model goes. Its tasks are te programs of the model, not registered
workloads, so their outputs are not checked here (the model's own tests compare it with the reference).

Example::

    prof = profile_directory("build/matmul", repeat=10)
    print(format_profile(prof))
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..measure.compare import interleaved_medians
from ..records.show import format_seconds
from ..runtime.load import LibraryFunction, load
from ..te.reference import random_inputs, reference_for
from ..testing import tolerance
from .resolve import ChipRoof, chip_roof, compulsory_bytes, load_workloads, resolve_workload


@dataclass(frozen=True)
class KernelProfile:
    """One kernel's row; ``None`` where a number cannot be known (no FLOP count, no roofline facts)."""

    name: str
    workload: str
    median_s: float  # one call
    calls: int  # per run: 1 for a library's function, the task's weight in a model
    share: float  # of calls x median_s, summed over kernels
    flops: float | None
    gflops: float | None
    bound_gflops: float | None
    check: str  # "ok", "MISMATCH ...", or why it was not checked

    @property
    def fraction_of_bound(self) -> float | None:
        if self.gflops is None or not self.bound_gflops:
            return None
        return self.gflops / self.bound_gflops


@dataclass(frozen=True)
class Profile:
    directory: str
    target: str
    roof: ChipRoof
    kernels: tuple[KernelProfile, ...]  # by share, largest first
    notes: tuple[str, ...]
    log: str | None  # the tuning log the library was built from, as the manifest names it

    @property
    def total_s(self) -> float:
        """One run: every kernel as many times as it is called."""
        return sum(k.calls * k.median_s for k in self.kernels)

    @property
    def mismatches(self) -> list[str]:
        """The kernels whose output differs from the numpy reference."""
        return [k.name for k in self.kernels if k.check.startswith("MISMATCH")]


def profile_directory(
    directory: str | Path,
    *,
    repeat: int = 20,
    op_files: Sequence[str] = (),
    pause_s: float = 0.3,
    warmup_s: float = 0.3,
    seed: int = 0,
) -> Profile:
    """Check and time every function of the library in ``directory``; raises LoadError for a bad one."""
    notes = load_workloads(op_files)
    loaded: Any = load(directory)  # a Library, or a CompiledModel for a model directory
    lib = getattr(loaded, "library", None) or loaded  # a CompiledModel holds its kernel library
    model_tasks = {t["function"]: t for t in loaded.plan["tasks"]} if lib is not loaded else {}
    chip = dict(lib.manifest["target"].get("chip") or {})
    roof = chip_roof(chip)
    if roof.bandwidth_gbs <= 0:
        notes.append("bandwidth not measured for this chip: the bound is the peak alone")
    busy = _busy_note()
    if busy:
        notes.append(busy)
    prepared = []
    for fn in lib.functions.values():
        task = model_tasks.get(fn.name)
        if task is not None:
            arrays, flops, check = _prepare_task(fn, task, seed)
        else:
            arrays, flops, check = _prepare(fn, seed)
        if arrays is None:
            notes.append(f"{fn.name}: not run: {check}")
            continue
        prepared.append((fn, arrays, flops, check))
    timed = [_caller(fn, arrays) for fn, arrays, _, _ in prepared]
    medians = interleaved_medians(
        timed, repeat=repeat, block=min(5, repeat), pause_s=pause_s, warmup_s=warmup_s
    )
    counts = [int(model_tasks.get(fn.name, {}).get("weight", 1)) for fn, _, _, _ in prepared]
    total = sum(n * m for n, m in zip(counts, medians)) or 1.0
    rows = []
    for (fn, _arrays, flops, check), median, n in zip(prepared, medians, counts):
        gflops = flops / median / 1e9 if flops and median > 0 else None
        bound = None
        if flops:
            bound = roof.bound(flops / _manifest_bytes(fn)) or None
        rows.append(
            KernelProfile(
                fn.name, fn.entry["workload"], median, n, n * median / total, flops, gflops, bound, check
            )
        )
        if check.startswith("MISMATCH"):
            notes.append(f"{fn.name}: output differs from the numpy reference: {check}")
    rows.sort(key=lambda k: -k.share)
    return Profile(
        str(directory),
        str(lib.manifest["target"].get("name")),
        roof,
        tuple(rows),
        tuple(notes),
        lib.manifest.get("log"),
    )


def _prepare(fn: LibraryFunction, seed: int) -> tuple[list[np.ndarray] | None, float | None, str]:
    """Random inputs and output buffers, the FLOP count, and the result of one checked run."""
    entry = fn.entry
    inst = resolve_workload(entry["workload"], dict(entry.get("workload_args") or {}), entry["workload_key"])
    if isinstance(inst, str):  # not registered here: shapes from the manifest, nothing to check against
        arrays = _random_arguments(fn, seed)
        if arrays is None:
            return None, None, f"integer inputs (indices?) need the workload to draw safe values: {inst}"
        fn(*arrays)
        return arrays, _logged_flops(fn), f"not checked: {inst}"
    inputs = random_inputs(list(inst.inputs), seed=seed)
    outputs = _outputs(fn)
    fn(*inputs, *outputs)
    expected = reference_for(inst.tensors, inputs)
    for got, exp in zip(outputs, expected):
        rtol, atol = tolerance(str(got.dtype), exp)
        if not np.allclose(got, exp, rtol=rtol, atol=atol, equal_nan=True):
            worst = float(np.max(np.abs(got.astype(np.float64) - exp)))
            return [*inputs, *outputs], float(inst.flop_count()), f"MISMATCH (max abs error {worst:.3g})"
    return [*inputs, *outputs], float(inst.flop_count()), "ok"


def _prepare_task(
    fn: LibraryFunction, task: dict[str, Any], seed: int
) -> tuple[list[np.ndarray] | None, float | None, str]:
    """Random inputs for a model's task kernel (float inputs only: integer ones may be indices)."""
    arrays = _random_arguments(fn, seed)
    if arrays is None:
        return None, None, "integer inputs (indices?) cannot be drawn safely without the model's graph"
    fn(*arrays)
    flops = task.get("flops")
    return arrays, float(flops) if flops else None, "not checked: a task of the model (see the model's tests)"


def _random_arguments(fn: LibraryFunction, seed: int) -> list[np.ndarray] | None:
    """Random inputs from the manifest's shapes and garbage-filled outputs; None for integer inputs."""
    from .. import te

    args = fn.args[: fn.n_inputs]
    placeholders = [te.placeholder(tuple(a["shape"]), a["dtype"], name=a["name"]) for a in args]
    if any(not np.issubdtype(np.dtype(p.dtype), np.floating) for p in placeholders):
        return None
    return [*random_inputs(placeholders, seed=seed), *_outputs(fn)]


def _outputs(fn: LibraryFunction) -> list[np.ndarray]:
    return [np.full(tuple(a["shape"]), 7, dtype=a["dtype"]) for a in fn.args[fn.n_inputs :]]  # garbage


def _logged_flops(fn: LibraryFunction) -> float | None:
    rec = fn.record
    if rec.get("gflops") and rec.get("median_s"):
        return float(rec["gflops"]) * 1e9 * float(rec["median_s"])
    return None


def _manifest_bytes(fn: LibraryFunction) -> int:
    class _Arg:  # compulsory_bytes reads .shape and .dtype
        def __init__(self, a: dict[str, Any]):
            self.shape, self.dtype = tuple(a["shape"]), a["dtype"]

    return compulsory_bytes([_Arg(a) for a in fn.args])


def _busy_note() -> str:
    """A warning when other processes keep the cores busy: parallel kernels then wait at barriers."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return ""
    if load <= cores - 0.5:
        return ""
    return (
        f"the machine is busy (load average {load:.1f} on {cores} cores): times of parallel kernels "
        "are unreliable; profile on a quiet machine"
    )


def _caller(fn: LibraryFunction, arrays: list[np.ndarray]) -> Any:
    """A call without per-call argument checks (already done once): they would dominate tiny kernels."""
    cfunc = getattr(fn, "_cfunc", None)
    if cfunc is None:
        return lambda: fn(*arrays)
    ptrs = [a.ctypes.data for a in arrays]
    return lambda: cfunc(*ptrs)


def format_profile(prof: Profile) -> str:
    """A text table, largest share first, and the notes."""
    facts = prof.roof.describe()
    lines = [f"{prof.directory}: {len(prof.kernels)} kernel(s) on {prof.target} ({facts})", ""]
    w = max([len("total (one run)"), *(len(k.name) for k in prof.kernels)])
    header = f"{'kernel':<{w}} {'median':>10} {'calls':>5} {'share':>7} {'GFLOP/s':>9} {'of bound':>9}  check"
    lines.append(header)
    for k in prof.kernels:
        gf = "-" if k.gflops is None else f"{k.gflops:.2f}"
        frac = "-" if k.fraction_of_bound is None else f"{100 * k.fraction_of_bound:.1f}%"
        share = f"{100 * k.share:.1f}%"
        median = format_seconds(k.median_s)
        lines.append(f"{k.name:<{w}} {median:>10} {k.calls:>5} {share:>7} {gf:>9} {frac:>9}  {k.check}")
    lines.append(f"{'total (one run)':<{w}} {format_seconds(prof.total_s):>10}")
    lines += [f"note: {n}" for n in prof.notes]
    return "\n".join(lines)


def profile_section(prof: Profile) -> str:
    """The profile as a report section (for ``--html``)."""
    from .html import Cell, esc, note, section, table

    rows = []
    for k in prof.kernels:
        frac = k.fraction_of_bound
        rows.append(
            [
                Cell(k.name),
                Cell(k.workload),
                Cell(format_seconds(k.median_s), k.median_s),
                Cell(str(k.calls), k.calls),
                Cell(f"{100 * k.share:.1f}%", k.share),
                Cell("-" if k.gflops is None else f"{k.gflops:.2f}", k.gflops or 0.0),
                Cell("-" if frac is None else f"{100 * frac:.1f}%", frac or 0.0),
                Cell(k.check),
            ]
        )
    headers = ["kernel", "workload", "median", "calls", "share", "GFLOP/s", "of roofline bound", "check"]
    total = format_seconds(prof.total_s)
    head = (
        f"<p>{esc(prof.directory)} on {esc(prof.target)}: {esc(total)} for one run "
        "(every kernel as often as it is called).</p>"
    )
    return section(
        "Profile",
        head,
        table(headers, rows, "profile-table"),
        *[note(n) for n in prof.notes],
        css_id="profile",
    )
