"""``autosched report LOG...``: one self-contained HTML page about tuning logs.

Sections: notes about bad input, the tuning statistics (MetaSchedule's columns), tuning curves per
workload (one line per log and chip), a roofline per chip, the same workload on several chips side by
side, and per workload the best schedule as code, its loop IR and its generated code, folded.

Example::

    report = build_report(["tuning_logs/llvm-cpu-emeraldrapids.jsonl"])
    Path("report.html").write_text(report.html)
    for line in report.notes:
        print("note:", line)
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records.show import format_seconds
from ..te.workload import WorkloadInstance
from .code import code_view
from .data import ReportData, TaskStats, read_logs, summarize
from .figures import ReportDependencyError, RooflinePoint, roofline_figure, svg_of, tuning_curve_figure
from .html import Cell, esc, folded, note, page, section, table
from .resolve import chip_roof, compulsory_bytes, load_workloads, resolve_workload


@dataclass(frozen=True)
class Report:
    html: str
    notes: tuple[str, ...]  # bad input and what could not be shown; the CLI prints them too
    data: ReportData


def build_report(
    paths: Sequence[str | Path], *, op_files: Sequence[str] = (), extra_sections: Sequence[str] = ()
) -> Report:
    """The page for ``paths``; never raises for bad logs (they become notes on the page)."""
    notes = load_workloads(op_files)
    data = summarize(read_logs(paths))
    notes += data.notes
    instances = {id(t): resolve_workload(t.name, t.args, t.key) for t in data.tasks}
    figure_notes: list[str] = []
    body = [*extra_sections]  # a profile first: it is what `autosched profile --html` was asked for
    if paths or not extra_sections:  # a profile of a library built without a log has no log sections
        body += [
            _overview(data, notes),
            _stats_section(data.tasks),
            _curves_section(data, figure_notes),
            _roofline_section(data, instances, figure_notes),
            _cross_chip_section(data.tasks),
            _code_section(data.tasks, instances),
        ]
    notes += sorted(set(figure_notes))
    title = "autosched report: " + ", ".join(Path(p).name for p in paths) if paths else "autosched report"
    embedded = {"logs": [str(p) for p in paths], "notes": notes, "tasks": [_task_json(t) for t in data.tasks]}
    return Report(page(title, "".join(body), embedded), tuple(notes), data)


def write_report(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    op_files: Sequence[str] = (),
    extra_sections: Sequence[str] = (),
) -> Report:
    """Build the page and write it to ``out`` (its folder is created)."""
    report = build_report(paths, op_files=op_files, extra_sections=extra_sections)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.html, encoding="utf-8")
    return report


def _overview(data: ReportData, notes: list[str]) -> str:
    rows: list[list[Cell | str]] = [
        [
            log.path,
            Cell(str(len(log.records)), len(log.records)),
            Cell(str(len(log.problems)), len(log.problems)),
            log.error or "read",
        ]
        for log in data.logs
    ]
    summary = (
        f"<p>{data.n_records} record(s) in {len(data.logs)} log(s): {len(data.tasks)} workload/chip "
        f"task(s) on {len(data.chips)} chip(s).</p>"
    )
    parts = [summary, table(["log", "records", "lines skipped", "status"], rows, "logs")]
    parts += [note(n) for n in notes]
    if not data.tasks:
        parts.append(note("nothing to show: no tuning records were read"))
    return section("Logs", *parts, css_id="overview")


def _latency(s: float | None) -> Cell:
    return Cell("-", float("inf")) if s is None else Cell(format_seconds(s), s)


def _stats_section(tasks: Sequence[TaskStats]) -> str:
    headers = [
        "task",
        "target",
        "FLOP",
        "weight",
        "best GFLOP/s",
        "latency",
        "weighted latency",
        "trials",
        "failures",
    ]
    rows = []
    for t in tasks:
        failures = ", ".join(f"{k} {n}" for k, n in t.failures.most_common()) or "none"
        rows.append(
            [
                Cell(t.label),
                Cell(f"{t.target} [{t.fingerprint}]"),
                Cell(f"{t.flops:.4g}", t.flops),
                Cell(f"{t.weight:g}", t.weight),
                Cell(f"{t.best_gflops:.2f}", t.best_gflops),
                _latency(t.latency_s),
                _latency(t.weighted_latency_s),
                Cell(str(t.trials), t.trials),
                Cell(failures, sum(t.failures.values())),
            ]
        )
    totals: defaultdict[str, float] = defaultdict(float)
    for t in tasks:
        totals[t.fingerprint] += t.weighted_latency_s or 0.0
    total = "".join(f"<li>{esc(fp)}: {esc(format_seconds(s))}</li>" for fp, s in totals.items() if s > 0)
    parts = [table(headers, rows, "task-table")]
    if total:
        parts.append(f"<p>Total weighted latency per chip:</p><ul>{total}</ul>")
    return section("Tuning statistics", *parts, css_id="stats")


def _svg(make: Callable[[], Any], figure_notes: list[str]) -> str:
    """The figure ``make`` draws, as SVG; without matplotlib a note instead (the tables still show)."""
    try:
        return svg_of(make())
    except ReportDependencyError as e:
        figure_notes.append(str(e))
        return note(f"figure not drawn: {e}")


def _curves_section(data: ReportData, figure_notes: list[str]) -> str:
    parts, flat = [], []
    labels = {t.key: t.label for t in data.tasks}
    for key, curves in data.curves.items():
        title = labels.get(key, key[:12])
        if all(len(c.trials) < 2 for c in curves):
            flat.append(title)  # one success per line: no history to draw (e.g. a --keep best log)
            continue
        figs = [
            _svg(functools.partial(tuning_curve_figure, curves, x=x), figure_notes)
            for x in ("trials", "seconds")
        ]
        parts.append(f'<h3>{esc(title)}</h3><div class="figures tuning-curve">{"".join(figs)}</div>')
    if flat:
        parts.append(
            note(
                f"no curve for {len(flat)} workload(s) with a single successful record per log and chip "
                f"(a log merged with --keep best holds no tuning history): {'; '.join(flat)}"
            )
        )
    if not data.curves:
        parts.append(note("no tuning curve: no workload has a successful measurement"))
    return section("Tuning curves", *parts, css_id="curves")


def _roofline_section(
    data: ReportData, instances: dict[int, WorkloadInstance | str], figure_notes: list[str]
) -> str:
    parts = []
    for fp, chip in data.chips.items():
        roof = chip_roof(chip)
        points, unplaced = [], []
        for t in data.tasks:
            if t.fingerprint != fp or t.best is None:
                continue
            inst = instances[id(t)]
            if isinstance(inst, str):
                unplaced.append(f"{t.label}: {inst}")
                continue
            if t.flops <= 0 or t.best_gflops <= 0:  # a log axis has no place for zero
                unplaced.append(f"{t.label}: its records give no FLOP count")
                continue
            points.append(RooflinePoint(_short(t), t.flops / compulsory_bytes(inst.tensors), t.best_gflops))
        facts = roof.describe()
        title = f"{chip.get('name', fp)} [{fp}]"
        fig = _svg(functools.partial(roofline_figure, points, roof), figure_notes)
        parts.append(
            f'<h3>{esc(title)}</h3><p class="muted">{esc(facts)} (chip facts as recorded in the log)</p>'
        )
        parts.append(f'<div class="figures roofline">{fig}</div>')
        parts += [note(f"not placed: {u}") for u in unplaced]
    if not parts:
        parts.append(note("no roofline: no chip has a successful measurement"))
    return section("Roofline per chip", *parts, css_id="roofline")


def _short(t: TaskStats) -> str:
    """A point's label: the name and the shape-like arguments, e.g. ``ops_matmul 64x64x64``."""
    dims = [str(v) for v in t.args.values() if isinstance(v, (int, tuple)) and not isinstance(v, bool)]
    return f"{t.name} {'x'.join(dims)}" if dims else t.name


def _cross_chip_section(tasks: Sequence[TaskStats]) -> str:
    by_key: dict[str, list[TaskStats]] = defaultdict(list)
    for t in tasks:
        if t.best is not None:
            by_key[t.key].append(t)
    shared = {k: ts for k, ts in by_key.items() if len(ts) > 1}
    if not shared:
        return section(
            "Across chips", note("no workload was tuned on more than one chip"), css_id="cross-chip"
        )
    chips = sorted({t.fingerprint for ts in shared.values() for t in ts})
    rows = []
    for ts in shared.values():
        best = {t.fingerprint: t for t in ts}
        fastest = min(t.latency_s or float("inf") for t in ts)
        row = [Cell(ts[0].label)]
        for fp in chips:
            hit = best.get(fp)
            if hit is None or hit.latency_s is None:
                row.append(Cell("-", float("inf")))
            else:
                ratio = hit.latency_s / fastest
                text = f"{hit.best_gflops:.1f} GFLOP/s, {format_seconds(hit.latency_s)} ({ratio:.2f}x)"
                row.append(Cell(text, hit.latency_s))
        rows.append(row)
    explain = "<p>Best of each chip; in brackets, latency relative to the fastest chip.</p>"
    return section(
        "Across chips", explain, table(["workload", *chips], rows, "cross-chip-table"), css_id="cross-chip"
    )


def _code_section(tasks: Sequence[TaskStats], instances: dict[int, WorkloadInstance | str]) -> str:
    parts = []
    for t in tasks:
        if t.best is None:
            continue
        inst = instances[id(t)]
        view = code_view(t.best, None if isinstance(inst, str) else inst)
        head = f"{t.label} on {t.target}: {t.best_gflops:.2f} GFLOP/s, {format_seconds(t.best.mean_cost)}"
        inner = [folded("schedule (as code)", view.schedule)]
        if view.loop_ir:
            inner.append(folded("loop IR", view.loop_ir))
        if view.generated:
            inner.append(folded(view.generated_label, view.generated))
        if view.note:
            inner.append(f'<p class="muted">{esc(view.note)}</p>')
        parts.append(f'<div class="best-code"><h3>{esc(head)}</h3>{"".join(inner)}</div>')
    if not parts:
        parts.append(note("no best schedule: nothing was measured successfully"))
    return section("Best schedules", *parts, css_id="code")


def _task_json(t: TaskStats) -> dict[str, object]:
    return {
        "workload": t.name,
        "args": t.args,
        "key": t.key,
        "fingerprint": t.fingerprint,
        "target": t.target,
        "flops": t.flops,
        "weight": t.weight,
        "best_gflops": t.best_gflops,
        "latency_s": t.latency_s,
        "trials": t.trials,
        "failures": dict(t.failures),
    }
