"""Bytes each cache level misses for one store, and the seconds they take at the next level's bandwidth.

For each level, the deepest loop level whose tile fits (its lines within the level's capacity, and no
buffer's power-of-two stride crowding a few sets past their ways) is kept; one iteration of the loop
just outside it then brings in that loop's unique lines once (LRU keeps what every iteration touches).
Lines written count twice (fetched, then written back). Kernels are timed warm: a program that fits a
level whole moves nothing from below it.

Example: ``seconds = cache_traffic(chip, accs, loops, n_exec, cores, per_core, nbytes, reloads)``
"""

from __future__ import annotations

from ..lower.ir import For
from .chip import ChipSpec
from .reuse import Access, footprint_lines, set_pressure


def _fits(total: list[float], lines: list[list[float]], acc_list: list[Access], loops: list[For], k: int,
          cap: float, line: int, sets: int, ways: int, conflicts: bool) -> bool:  # fmt: skip
    if total[k] > cap:
        return False
    if not conflicts:
        return True
    return all(set_pressure(a, loops, k, line, sets) <= ways for a in acc_list)


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
) -> dict[str, float]:
    """Seconds per serving level (``"L2"``, ..., ``"DRAM"``); ``reloads`` gets, per serving level, the
    loop whose every iteration brings the tile in again. ``per_core``: the busiest core's share."""
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
        kc = max(
            (k for k in range(len(loops) + 1)
             if _fits(total, lines, acc_list, loops, k, cap, line, sets, cache.ways, conflicts)),
            default=0,
        )  # fmt: skip
        k_in = min(kc + 1, len(loops))
        traffic = sum(ls[k_in] * line * (2 if a.write else 1) for ls, a in zip(lines, acc_list))
        traffic *= n_exec / iters[k_in]
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
