"""Logs across chips: trials chip B needs from scratch, with chip A's log, and with the pretrained model.

Six workloads where search is hard, three seeds each. Chip A is this machine's ``llvm-cpu``; chip B is
``llvm-cpu -mcpu=haswell`` (AVX2 only) and the OpenCL device (PoCL). For every workload, seed and B:

- *scratch*: B tuned with no log and no model (``--cost-model none``);
- *transfer*: B tuned with A's log (``--transfer-from``), A tuned first with the same seed;
- *pretrained*: B tuned with the shipped pretrained model and no log of the workload at all.

Printed per workload and B: the best GFLOP/s found on B (by any of the runs of a seed), the median over
seeds of the trials each run needs to reach 90% of it, the best at 32 and 64 trials, and the ratios
(done when: transfer >= 3x fewer on four of six workloads, none worse than scratch by more than 10%;
pretrained >= 2x).

    python benchmarks/transfer.py                          # the full run (see the estimate it prints)
    python benchmarks/transfer.py --quick                  # tiny shapes, 8 trials: a smoke run
    python benchmarks/transfer.py --workloads matmul softmax --seeds 0 --targets opencl
    python benchmarks/transfer.py --source-log A.jsonl     # reuse chip A's records instead of tuning A

Resumable and chunkable: every finished run is appended to ``--results`` (JSON lines) and skipped when
the script is run again, so the full run can be done a few workloads or seeds at a time; the table is
printed from all results so far. Timing on a machine shared with other work is meaningless: run it alone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from autosched.cost_model.pretrained import topi_instance
from autosched.tune import TuneOptions, Tuner

TARGET_A = "llvm-cpu"
TARGETS_B = ("llvm-cpu -mcpu=haswell", "opencl")
MODES = ("scratch", "transfer", "pretrained")
FULL: dict[str, tuple[str, dict[str, Any]]] = {
    "matmul": ("matmul", {"M": 1024, "N": 1024, "K": 1024}),
    "conv2d": ("conv2d", {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "stride": 1}),  # ResNet 3x3
    "dense": ("dense", {"M": 128, "N": 1024, "K": 1024}),
    "depthwise": ("depthwise_conv2d", {"N": 1, "C": 128, "H": 56, "W": 56}),
    "softmax": ("softmax", {"shape": (512, 1024)}),
    "layer_norm": ("layer_norm", {"shape": (256, 768)}),
}
QUICK: dict[str, tuple[str, dict[str, Any]]] = {
    "matmul": ("matmul", {"M": 64, "N": 64, "K": 64}),
    "conv2d": ("conv2d", {"N": 1, "C": 8, "H": 14, "W": 14, "K": 8, "stride": 1}),
    "dense": ("dense", {"M": 16, "N": 64, "K": 64}),
    "depthwise": ("depthwise_conv2d", {"N": 1, "C": 16, "H": 14, "W": 14}),
    "softmax": ("softmax", {"shape": (16, 128)}),
    "layer_norm": ("layer_norm", {"shape": (16, 96)}),
}
SECONDS_PER_TRIAL = 2.5  # a rough full-size figure on two cores (compile + check + time), for the estimate


def run_key(workload: str, target: str, seed: int, mode: str) -> str:
    return f"{workload}|{target}|{seed}|{mode}"


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
                out[r["key"]] = r
            except (ValueError, KeyError):
                continue  # a line cut short by an interrupted run
    return out


def tune(inst: Any, target: str, log: Path, args: argparse.Namespace, seed: int, **kw: Any) -> dict[str, Any]:
    opts = TuneOptions(trials=args.trials, batch_size=args.batch_size, seed=seed, baseline=False,
                       num_threads=args.threads, timeout_s=args.timeout, **kw)  # fmt: skip
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    tuner = Tuner([inst], target, log, opts)
    (task,) = tuner.tasks
    notes = tuner.load_previous(task)
    for note in notes:
        print(f"    note: {note}", flush=True)
    tuner.run()
    wall = time.perf_counter() - start
    hist = [c if math.isfinite(c) else None for c in task.history]
    print(
        f"    {target}: {task.trials} trials in {wall:.0f} s, best {task.best_gflops:.1f} GFLOP/s", flush=True
    )
    return {"flops": inst.flop_count(), "history": hist, "seconds": wall, "fingerprint": tuner.fingerprint,
            "errors": dict(task.errors), "notes": notes}  # fmt: skip


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
              trials: int) -> list[list[str]]:  # fmt: skip
    rows = []
    for wl in names:
        for target in targets:
            per_mode: dict[str, list[float]] = {m: [] for m in MODES}
            at32: dict[str, list[float]] = {m: [] for m in MODES}
            at64: dict[str, list[float]] = {m: [] for m in MODES}
            bests = []
            for seed in seeds:
                runs = {m: results.get(run_key(wl, target, seed, m)) for m in MODES}
                got = {m: r for m, r in runs.items() if r}
                if "scratch" not in got:
                    continue
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

            rows.append([wl, target, str(len(bests)), f"{statistics.median(bests):.1f}",
                         *(_fmt(med[m], trials) for m in MODES),
                         _ratio(med, "transfer"), _ratio(med, "pretrained"),
                         *(f"{_med(at32[m])}/{_med(at64[m])}" for m in MODES)])  # fmt: skip
    return rows


def print_table(rows: list[list[str]]) -> None:
    head = ["workload", "chip B", "seeds", "best GF/s", "scratch", "transfer", "pretrained", "fewer (>=3x)",
            "pretrained (>=2x)", "scratch @32/@64", "transfer @32/@64", "pretrained @32/@64"]  # fmt: skip
    print("median over seeds of the trials B needs to reach 90% of the best GFLOP/s found on B; "
          "best GFLOP/s at 32 and 64 trials")  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for line in [head, *rows]:
        print("  ".join([line[0].ljust(widths[0]), line[1].ljust(widths[1])]
                        + [x.rjust(w) for x, w in zip(line[2:], widths[2:])]))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", choices=list(FULL), default=list(FULL))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--targets", nargs="+", default=list(TARGETS_B), help="the chips B")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--trials", type=int, help="trials per run (default 64; quick 8)")
    p.add_argument("--batch-size", type=int, help="candidates per round (default 8; quick 4)")
    p.add_argument("--quick", action="store_true", help="tiny shapes, 8 trials: a smoke run")
    p.add_argument("--source-log", help="chip A's log to transfer from (default: tune A here, per seed)")
    p.add_argument("--cost-model", default="auto", help="the pretrained model (default: the shipped one)")
    p.add_argument("--threads", type=int, help="threads per kernel (default: all cores)")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--out", help="logs and results here (default ~/.cache/autosched/transfer_bench[_quick])")
    p.add_argument("--results", help="the results file (default OUT/results.jsonl)")
    p.add_argument("--estimate", action="store_true", help="print the time estimate and stop")
    args = p.parse_args(argv)
    args.trials = args.trials or (8 if args.quick else 64)
    args.batch_size = args.batch_size or (4 if args.quick else 8)
    sizes = QUICK if args.quick else FULL
    cache = Path.home() / ".cache" / "autosched"
    out = Path(args.out or cache / ("transfer_bench_quick" if args.quick else "transfer_bench"))
    out.mkdir(parents=True, exist_ok=True)
    res_path = Path(args.results or out / "results.jsonl")
    results = load_results(res_path)

    todo = [(wl, t, s, m) for wl in args.workloads for s in args.seeds for t in args.targets
            for m in args.modes if run_key(wl, t, s, m) not in results]  # fmt: skip
    a_runs = 0 if args.source_log else len({(wl, s) for wl, t, s, m in todo if m == "transfer"})
    est = (len(todo) + a_runs) * args.trials * (0.3 if args.quick else SECONDS_PER_TRIAL)
    print(
        f"chip A {TARGET_A!r}, chips B {args.targets}; {args.trials} trials a run; {len(todo)} B run(s) "
        f"and {a_runs} A run(s) to do, about {est / 60:.0f} min; results in {res_path}",
        flush=True,
    )
    if args.estimate:
        return 0
    for wl, target, seed, mode in todo:
        inst = topi_instance(*sizes[wl])
        print(f"# {wl} on {target}, seed {seed}, {mode}", flush=True)
        kw: dict[str, Any] = {"cost_model": "none"}
        if mode == "transfer":
            log_a = Path(args.source_log) if args.source_log else out / f"{wl}_A_seed{seed}.jsonl"
            if not args.source_log and not log_a.exists():
                print(f"  chip A {TARGET_A}:", flush=True)
                tune(inst, TARGET_A, log_a.with_suffix(".part"), args, seed, cost_model="none")
                log_a.with_suffix(".part").rename(log_a)  # only a finished A log is reused
            kw["transfer_from"] = (str(log_a),)
        elif mode == "pretrained":
            kw["cost_model"] = args.cost_model
        r = tune(
            inst, target, out / f"{wl}_{target.replace(' ', '_')}_s{seed}_{mode}.jsonl", args, seed, **kw
        )
        r.update(key=run_key(wl, target, seed, mode), workload=wl, target=target, seed=seed, mode=mode,
                 trials=args.trials, quick=args.quick)  # fmt: skip
        results[r["key"]] = r
        with res_path.open("a") as f:
            f.write(json.dumps(r) + "\n")
    print()
    print_table(summarize(results, args.workloads, args.targets, args.seeds, args.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
