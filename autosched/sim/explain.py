"""Why a kernel takes its time: the modeled bounds of each store, the one that dominates, and where.

Example::

    print(explain(predict(func, chip), flops=2 * 256**3))
"""

from __future__ import annotations

from .model import Prediction

BOUND_HELP = {
    "compute": "vector instructions on the FMA, load and store ports",
    "chain": "the accumulators' dependency chains against the FMA latency",
    "DRAM": "lines missing the last cache level, at memory bandwidth",
}


def _ms(s: float) -> str:
    return f"{s * 1e3:.4f} ms" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def _what(bound: str) -> str:
    if bound in BOUND_HELP:
        return BOUND_HELP[bound]
    level = int(bound[1:]) if bound[1:].isdigit() else 0
    return f"lines missing L{level - 1}, at the bandwidth of {bound}"


def explain(pred: Prediction, flops: float = 0.0, top: int = 12) -> str:
    """Lines of text: the total, then the ``top`` stores by time with each bound and the dominant one."""
    chip = pred.chip
    rate = f", {flops / pred.seconds / 1e9:.1f} GFLOP/s of {chip.peak_gflops:.0f} peak" if flops else ""
    lines = [
        f"{pred.name} on {chip.name} (chip file {chip.path}, {chip.sha}): {_ms(pred.seconds)} modeled{rate}",
        f"  fixed costs {_ms(pred.fixed_s)} (kernel call, parallel regions, heap allocations)",
    ]
    if chip.kind == "gpu":
        lines.append("  note: a GPU chip is modeled in a CPU-style view (an SM a core, its lanes a vector)")
    stores = sorted(pred.stores, key=lambda st: -st.seconds)
    for st in stores[:top]:
        share = st.seconds / pred.seconds if pred.seconds else 0.0
        dom = st.dominant
        lines.append(f"  {st.buffer}: {_ms(st.seconds)} ({share:.0%}), bound by {dom}: {_what(dom)}")
        lines.append(f"    loops: {' > '.join(st.loops) or '(none)'}")
        lines.append("    bounds: " + ", ".join(f"{k} {_ms(v)}" for k, v in st.bounds.items()))
        if dom in st.reloads:
            loop = st.reloads[dom]
            lines.append(f"    the tile is fetched from {dom} again at every iteration of loop {loop}")
        for note in st.notes:
            lines.append(f"    note: {note}")
    if len(stores) > top:
        rest = sum(st.seconds for st in stores[top:])
        lines.append(f"  ... {len(stores) - top} more stores, {_ms(rest)} together")
    return "\n".join(lines)
