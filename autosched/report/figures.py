"""The report's figures with matplotlib: tuning curves and a roofline, as Figures or inline SVG.

matplotlib is an optional extra (``pip install autosched[report]``), imported only here and only when a
figure is drawn. Figures are made with ``matplotlib.figure.Figure`` directly, not pyplot, so drawing one
changes no global backend or state (the effect of ``matplotlib.use("Agg")`` without touching it): a
notebook shows the returned Figure inline, and :func:`svg_of` turns it into text for the page.

Example::

    fig = tuning_curve_figure(data.curves[key], title="matmul 64^3")
    html_fragment = svg_of(fig)
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import AutoschedError
from .data import Curve
from .resolve import ChipRoof

# Text stays text; stable ids. Keys typed Any: matplotlib's rc_context takes only its literal key names.
SVG_STYLE: dict[Any, str] = {"svg.fonttype": "none", "svg.hashsalt": "autosched"}


class ReportDependencyError(AutoschedError):
    """matplotlib is missing; the message says how to install it."""


@dataclass(frozen=True)
class RooflinePoint:
    """A kernel placed by arithmetic intensity (FLOP/byte) and its best GFLOP/s."""

    label: str
    intensity: float
    gflops: float


def _figure(width: float = 6.0, height: float = 3.2) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportDependencyError(
            "figures need matplotlib: pip install 'autosched[report]' (or pip install 'matplotlib>=3.7')"
        ) from None
    return Figure(figsize=(width, height), layout="constrained")


def tuning_curve_figure(
    curves: Sequence[Curve], x: Literal["trials", "seconds"] = "trials", title: str = ""
) -> Any:
    """Best GFLOP/s against trials (or wall seconds), one line per curve. Example:
    ``tuning_curve_figure(data.curves[key], x="seconds")``."""
    if x not in ("trials", "seconds"):
        raise ValueError(f"tuning_curve_figure: x must be 'trials' or 'seconds', got {x!r}")
    fig = _figure()
    ax = fig.add_subplot()
    for curve in curves:
        xs = curve.trials if x == "trials" else curve.seconds
        ax.step(xs, curve.best_gflops, where="post", marker="." if len(xs) < 30 else None, label=curve.label)
    if x == "trials":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trials" if x == "trials" else "wall time (s)")
    ax.set_ylabel("best GFLOP/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    if curves:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def roofline_figure(points: Sequence[RooflinePoint], roof: ChipRoof, title: str = "") -> Any:
    """Log-log roofline: the peak, the bandwidth slopes where measured, and each kernel as a point.

    A limit that was not measured is not drawn, and the figure says so; an estimated peak is labelled so.
    """
    peak, bw = roof.peak_gflops, roof.bandwidth_gbs
    fig = _figure(6.0, 3.6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p.intensity for p in points] or [1.0]
    lo, hi = min(xs) / 4, max(xs) * 4
    if bw > 0 and peak > 0:
        lo, hi = min(lo, peak / bw / 4), max(hi, peak / bw * 4)
    grid = [lo * (hi / lo) ** (i / 64) for i in range(65)]
    missing = []
    for slope, style, name in ((bw, "-", "DRAM"), (roof.l2_bandwidth_gbs, ":", "L2")):
        if slope > 0:
            line = [min(peak, ai * slope) if peak > 0 else ai * slope for ai in grid]
            ax.plot(grid, line, color="black", ls=style, lw=1.2, label=f"{name} bandwidth {slope:.3g} GB/s")
    if bw <= 0:
        missing.append("bandwidth not measured")
    if peak > 0:
        how = "measured" if roof.measured else "estimated, not measured"
        ax.axhline(peak, color="gray", ls="--", lw=1, label=f"peak {peak:.4g} GFLOP/s ({how})")
    else:
        missing.append("peak not measured")
    for p in points:
        ax.scatter([p.intensity], [p.gflops], s=18, zorder=3)
        ax.annotate(p.label, (p.intensity, p.gflops), fontsize=6, xytext=(3, 3), textcoords="offset points")
    if missing:
        ax.text(0.02, 0.96, "; ".join(missing), transform=ax.transAxes, va="top", fontsize=8, color="darkred")
    if not points:
        ax.text(0.5, 0.5, "no kernel could be placed", transform=ax.transAxes, ha="center", color="darkred")
    ys = [p.gflops for p in points] + ([peak] if peak > 0 else [])
    if ys:
        ax.set_ylim(min(ys) / 2, max(ys) * 2)
    from matplotlib.ticker import NullFormatter

    ax.set_xlim(lo, hi)
    ax.xaxis.set_minor_formatter(NullFormatter())  # labelled decades only: minor labels overlapped
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved, compulsory)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(alpha=0.3, which="both")
    if title:
        ax.set_title(title)
    if bw > 0 or peak > 0:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def svg_of(fig: Any) -> str:
    """The figure as an ``<svg>`` element (no XML prologue), ready to inline in HTML."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(SVG_STYLE):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]
