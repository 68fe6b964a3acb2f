"""Bytes each cache level misses for one store, and the seconds they take at the next level's bandwidth.

For each level, the deepest loop level whose tile fits the level's capacity is kept; one iteration of
the loop just outside it then brings in that loop's unique lines once (LRU keeps what every iteration
touches). A buffer whose power-of-two stride crowds a few sets past their ways keeps its own tile only
down to the deepest loop level within the ways: it evicts its own lines in those sets, not the other
buffers' tiles, whose lines spread over all the sets. A set crowded a little past its ways misses only
part of the time (replacement is not strict LRU): ``conflict_slope`` x (lines - ways) / ways of the
reloads, the rest kept as capacity alone would keep them. No buffer misses more lines than its loads touch.
Lines written count twice (fetched, then written back). Kernels are timed warm: a program that fits a
level whole moves nothing from below it.

Example: ``seconds = cache_traffic(chip, accs, loops, n_exec, cores, per_core, nbytes, reloads)``
"""

from __future__ import annotations

from ..lower.ir import For
from .chip import ChipSpec
from .reuse import Access, footprint_lines, set_pressure


def _within_ways(acc: Access, loops: list[For], deepest: int, line: int, sets: int, ways: int
                 ) -> tuple[int, float]:  # fmt: skip
    """The deepest loop level (at most ``deepest``) whose tile of ``acc`` crowds no set past its ways,
    and the most lines the next level's tile maps onto one set (0 when none crowds)."""
    kept = 0
    for k in range(1, deepest + 1):
        pressure = set_pressure(acc, loops, k, line, sets)
        if pressure > ways:
            return kept, pressure
        kept = k
    return kept, 0.0


def cache_traffic(
    chip: ChipSpec,
    acc_list: list[Access],
    loops: list[For],
    n_exec: float,
    cores: int,
    per_core: float,
    total_bytes: float,
    reloads: dict[str, str],
    *,
    fill: float = 0.9,
    conflicts: bool = True,
    conflict_slope: float = 1.0,
    touches: list[tuple[float, list[For]] | None] | None = None,
) -> dict[str, float]:
    """Seconds per serving level (``"L2"``, ..., ``"DRAM"``); ``reloads`` gets, per serving level, the
    loop whose every iteration brings the tile in again. ``per_core``: the busiest core's share.
    ``touches``: per access, how often its loads run and the loops one load spans (None: no bound)."""
    caches = chip.caches
    iters = [1.0]
    for lp in reversed(loops):
        iters.append(iters[-1] * lp.extent)
    out: dict[str, float] = {}
    for c, cache in enumerate(caches):
        line = cache.line_bytes
        lines = [footprint_lines(a, loops, line) for a in acc_list]
        cap = cache.size_bytes / (cores if cache.shared else 1) * fill
        total = [sum(ls[k] for ls in lines) * line for k in range(len(loops) + 1)]
        sets = max(1, cache.size_bytes // (line * cache.ways))
        fits = max((k for k in range(len(loops) + 1) if total[k] <= cap), default=0)
        within = [_within_ways(a, loops, fits, line, sets, cache.ways) if conflicts else (fits, 0.0)
                  for a in acc_list]  # fmt: skip
        kept = [k for k, _ in within]
        kc = min(kept, default=fits)
        k_in = min(kc + 1, len(loops))
        traffic = 0.0
        for a_i, (ls, a) in enumerate(zip(lines, acc_list)):
            k_a = min(kept[a_i] + 1, len(loops))
            missed = ls[k_a] * n_exec / iters[k_a]
            pressure = within[a_i][1]
            if pressure > 0:
                # a crowded set misses only part of the time (its replacement is not strict LRU)
                share = min(1.0, conflict_slope * (pressure - cache.ways) / cache.ways)
                k_f = min(fits + 1, len(loops))
                missed = share * missed + (1 - share) * ls[k_f] * n_exec / iters[k_f]
            touched = touches[a_i] if touches is not None else None
            if touched is not None:
                runs, span = touched
                missed = min(missed, runs * footprint_lines(a, span, line)[-1])
            traffic += missed * line * (2 if a.write else 1)
        last = c == len(caches) - 1
        if kc == len(loops) and total_bytes <= cache.size_bytes * fill:
            # timed warm: the whole program stays in this level from the last run. A shared level
            # holds it whole for all cores (not a core's share: that is for tiles competing in it)
            traffic = 0.0
        served_by = "DRAM" if last else f"L{caches[c + 1].level}"
        if kc < len(loops) and traffic > 0:
            reloads[served_by] = loops[len(loops) - k_in].var.name
        if last:
            single = chip.single_core_memory_bandwidth_gbs or chip.memory_bandwidth_gbs
            out["DRAM"] = traffic / (min(chip.memory_bandwidth_gbs, single * cores) * 1e9)
        else:
            nxt = caches[c + 1]
            if nxt.shared:  # one cache for all: its bandwidth adds up over the cores that draw on it
                out[served_by] = traffic / (nxt.bandwidth_gbs * cores * 1e9)
            else:  # private: the busiest core's share at one core's bandwidth
                out[served_by] = traffic * per_core / (nxt.bandwidth_gbs * 1e9)
    return out
