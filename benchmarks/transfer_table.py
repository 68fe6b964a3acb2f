"""The table and the done-when verdict of ``benchmarks/transfer.py``, from its stored runs.

Per workload and chip B, every mode's median over seeds of the trials to 90% of the seed's best (the
best any of the seed's runs found, re-timed where a re-timing line is stored), the best at 32 and 64
trials, and the ratios the issue's done-when reads.
"""

from __future__ import annotations

import statistics
from typing import Any

MODES = ("scratch", "transfer", "pretrained", "log_alone")
FROM_A = ("transfer", "log_alone")  # the modes that tune chip B with chip A's log
RETIME = "retime"  # a results line of re-timed histories per seed (transfer_retime.py), not a run
Medians = tuple[str, str, dict[str, float | None]]  # workload, chip B, median trials to 90% per mode


def run_key(workload: str, target: str, seed: int, mode: str, trials: int) -> str:
    return f"{workload}|{target}|{seed}|{mode}|{trials}"


def trials_to(history: list[float | None], flops: float, goal_gflops: float) -> int | None:
    for i, c in enumerate(history, start=1):
        if c and flops / c / 1e9 >= goal_gflops * (1 - 1e-9):
            return i
    return None


def gflops_at(history: list[float | None], flops: float, n: int) -> float:
    h = [c for c in history[:n] if c]
    return flops / min(h) / 1e9 if h else 0.0


def _ratio(med: dict[str, float | None], m: str) -> str:
    a, b = med["scratch"], med[m]
    return "-" if a is None or b is None else f"{a / b:.1f}x"


def _fmt(v: float | None, trials: int) -> str:
    return "-" if v is None else (f">{trials}" if v > trials else f"{v:g}")


def _med(v: list[float]) -> str:
    return f"{statistics.median(v):.1f}" if v else "-"


def summarize(results: dict[str, dict[str, Any]], names: list[str], targets: list[str], seeds: list[int],
              trials: int) -> tuple[list[list[str]], list[Medians]]:  # fmt: skip
    """The table's rows, and per workload and chip B the median trials to 90% of each mode."""
    rows, meds = [], []
    for wl in names:
        for target in targets:
            per_mode: dict[str, list[float]] = {m: [] for m in MODES}
            at32: dict[str, list[float]] = {m: [] for m in MODES}
            at64: dict[str, list[float]] = {m: [] for m in MODES}
            bests, retimed = [], 0
            for seed in seeds:
                runs = {m: results.get(run_key(wl, target, seed, m, trials)) for m in MODES}
                got = {m: r for m, r in runs.items() if r}
                if "scratch" not in got:
                    continue
                again = results.get(run_key(wl, target, seed, RETIME, trials))
                if again is not None:  # the re-timed histories (transfer_retime.py) where stored
                    got = {
                        m: {**r, "history": again["histories"].get(m, r["history"])} for m, r in got.items()
                    }
                    retimed += 1
                flops = got["scratch"]["flops"]
                best = max(gflops_at(r["history"], flops, trials) for r in got.values())
                bests.append(best)
                for m, r in got.items():
                    n = trials_to(r["history"], flops, 0.9 * best)
                    per_mode[m].append(n if n else trials + 1)  # not reached: counted as budget + 1
                    at32[m].append(gflops_at(r["history"], flops, 32))
                    at64[m].append(gflops_at(r["history"], flops, 64))
            if not bests:
                continue
            med = {m: statistics.median(v) if v else None for m, v in per_mode.items()}
            meds.append((wl, target, med))

            rows.append([wl, target, str(len(bests)), str(retimed), f"{statistics.median(bests):.1f}",
                         *(_fmt(med[m], trials) for m in MODES),
                         _ratio(med, "transfer"), _ratio(med, "pretrained"),
                         *(f"{_med(at32[m])}/{_med(at64[m])}" for m in MODES)])  # fmt: skip
    return rows, meds


def verdict(meds: list[Medians], targets: list[str], n_workloads: int) -> list[str]:
    """The issue's done-when, per chip B: transfer >= 3x fewer trials on four of six workloads and none
    worse than scratch by more than 10%; the pretrained model >= 2x on four of six."""
    lines = []
    need = min(4, n_workloads)
    for target in targets:
        cells = [m for _, t, m in meds if t == target]
        if not cells:
            continue
        ratios = {mode: [a / b for a, b in ((m["scratch"], m[mode]) for m in cells) if a and b]
                  for mode in ("transfer", "pretrained")}  # fmt: skip
        worse = [wl for wl, t, m in meds if t == target and (a := m["scratch"]) and (b := m["transfer"])
                 and b > 1.1 * a]  # fmt: skip
        fast, good = sum(r >= 3 for r in ratios["transfer"]), sum(r >= 2 for r in ratios["pretrained"])
        ok_t = fast >= need and not worse and len(cells) == n_workloads
        ok_p = good >= need and len(cells) == n_workloads
        lines.append(f"{target}: transfer >= 3x on {fast} of {len(cells)} workload(s) (goal {need} of "
                     f"{n_workloads}), worse than scratch by > 10% on {', '.join(worse) or 'none'}: "
                     f"{'met' if ok_t else 'not met'}; pretrained >= 2x on {good}: "
                     f"{'met' if ok_p else 'not met'}")  # fmt: skip
    return lines


def print_table(rows: list[list[str]]) -> None:
    head = ["workload", "chip B", "seeds", "re-timed", "best GF/s", "scratch", "transfer", "pretrained",
            "log alone", "fewer (>=3x)", "pretrained (>=2x)", "scratch @32/@64", "transfer @32/@64",
            "pretrained @32/@64", "log alone @32/@64"]  # fmt: skip
    print("median over seeds of the trials on chip B to reach 90% of the best GFLOP/s found on B; "
          "best GFLOP/s at 32 and 64 trials")  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for line in [head, *rows]:
        print("  ".join([line[0].ljust(widths[0]), line[1].ljust(widths[1])]
                        + [x.rjust(w) for x, w in zip(line[2:], widths[2:])]))  # fmt: skip
