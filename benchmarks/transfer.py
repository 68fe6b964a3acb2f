"""Logs across chips: trials needed on chip B with and without the tuning log of chip A.

For matmul and conv2d, in one run: tune on chip A (the native CPU, ``llvm-cpu``) for N trials, then
on chip B (``llvm-cpu -mcpu=haswell``, AVX2 only) for N trials twice, from scratch and with
``--transfer-from`` A's log (A's records train the cost model with A's chip facts, and A's best
schedules are measured anew on B first). Prints the trials each B run needs to reach 90% of the best
GFLOP/s found on B by either run, and their ratio (the goal: at least 3x fewer with transfer).

    python benchmarks/transfer.py                      # the full run: a few minutes on two cores
    python benchmarks/transfer.py --quick              # tiny sizes, a few trials: a smoke test
    python benchmarks/transfer.py --trials 128 --matmul 512,512,512 --conv2d 1,64,28,28,64,3

Timing on a machine shared with other work is meaningless: run it alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_conv2d, make_matmul
from autosched.tune import TuneOptions, Tuner

FULL = {"matmul": "256,256,256", "conv2d": "1,32,28,28,32,3"}  # M,N,K and N,C,H,W,F,kernel
QUICK = {"matmul": "32,32,32", "conv2d": "1,4,8,8,8,3"}


def make(name: str, size: str) -> tuple[str, list]:
    dims = [int(x) for x in size.split(",")]
    if name == "matmul" and len(dims) == 3:
        return f"matmul {'x'.join(map(str, dims))}", make_matmul(*dims)
    if name == "conv2d" and len(dims) == 6:
        n, c, h, w, f, k = dims
        tensors = make_conv2d(n, c, h, w, f, k, k, stride=1, padding=k // 2)
        return f"conv2d n{n} c{c} {h}x{w} f{f} k{k}", tensors
    expected = "M,N,K" if name == "matmul" else "N,C,H,W,F,KERNEL"
    raise SystemExit(f"--{name}: expected {expected}, got {size!r}")


def trials_to(history: list[float], flops: float, target_gflops: float) -> int | None:
    """The first trial (1-based) whose best-so-far reaches ``target_gflops``."""
    for i, cost in enumerate(history, start=1):
        if math.isfinite(cost) and flops / cost / 1e9 >= target_gflops * (1 - 1e-9):
            return i
    return None


def best_gflops(history: list[float], flops: float) -> float:
    return flops / history[-1] / 1e9 if history and math.isfinite(history[-1]) else 0.0


def tune(name: str, tensors: list, target: str, log: Path, args: argparse.Namespace, transfer: tuple = ()):
    inst = WorkloadInstance(name, {}, tuple(tensors))
    options = TuneOptions(
        trials=args.trials, batch_size=args.batch_size, seed=args.seed, baseline=False,
        num_threads=args.threads, timeout_s=args.timeout, transfer_from=tuple(str(p) for p in transfer),
        transfer_top=args.top,
    )  # fmt: skip
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    tuner = Tuner([inst], target, log, options)
    (task,) = tuner.tasks
    for note in tuner.load_previous(task):  # as `autosched tune` does: prints the transfer line
        print(f"  note: {note}", flush=True)
    tuner.run()
    wall = time.perf_counter() - start
    gf = best_gflops(task.history, inst.flop_count())
    print(f"  {target}{' (transfer)' if transfer else ''}: {task.trials} trials in {wall:.1f} s, "
          f"best {gf:.1f} GFLOP/s", flush=True)  # fmt: skip
    return {"target": target, "transfer": bool(transfer), "flops": inst.flop_count(), "history": task.history,
            "seconds": wall, "errors": dict(task.errors), "fingerprint": tuner.fingerprint}  # fmt: skip


def report(name: str, scratch: dict, transfer: dict, trials: int) -> list[str]:
    """One table row: B's best over both runs, trials to 90% of it from scratch and with transfer."""
    flops = scratch["flops"]
    best = max(best_gflops(scratch["history"], flops), best_gflops(transfer["history"], flops))
    t0 = trials_to(scratch["history"], flops, 0.9 * best) if best else None
    t1 = trials_to(transfer["history"], flops, 0.9 * best) if best else None
    if t0 and t1:
        ratio = f"{t0 / t1:.1f}x"
    elif t1:  # from scratch did not get there within the budget: the ratio is at least this
        ratio = f">= {(trials + 1) / t1:.1f}x"
    elif t0:
        ratio = f"<= {t0 / (trials + 1):.2f}x"
    else:
        ratio = "-"
    return [name, f"{best:.1f}", str(t0 or f"> {trials}"), str(t1 or f"> {trials}"), ratio]


def print_table(rows: list[list[str]]) -> None:
    head = ["workload", "best GFLOP/s on B", "from scratch", "with transfer", "fewer (goal >= 3x)"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print("trials on chip B to reach 90% of the best GFLOP/s found on B by either run")
    for line in [head, *rows]:
        print("  ".join([line[0].ljust(widths[0])] + [x.rjust(w) for x, w in zip(line[1:], widths[1:])]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and few trials: checks the script runs")
    p.add_argument("--workloads", default="matmul,conv2d", help="comma-separated, from matmul, conv2d")
    p.add_argument("--matmul", help=f"M,N,K (default {FULL['matmul']}; quick {QUICK['matmul']})")
    p.add_argument("--conv2d", help=f"N,C,H,W,F,KERNEL (default {FULL['conv2d']}; quick {QUICK['conv2d']})")
    p.add_argument("--trials", type=int, help="trials per chip and run (default 64; quick 8)")
    p.add_argument("--batch-size", type=int, help="candidates measured per round (default 8; quick 4)")
    p.add_argument("--top", type=int, help="A's best schedules measured first on B (default 8; quick 4)")
    p.add_argument("--target-a", default="llvm-cpu")
    p.add_argument("--target-b", default="llvm-cpu -mcpu=haswell")
    p.add_argument("--threads", type=int, help="threads per kernel (default: all cores)")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", help="keep the tuning logs here (default: a temporary directory)")
    p.add_argument("--json", help="also write the results (histories included) to this file")
    args = p.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    sizes.update({k: v for k in sizes if (v := getattr(args, k))})
    args.trials = args.trials or (8 if args.quick else 64)
    args.batch_size = args.batch_size or (4 if args.quick else 8)
    args.top = args.top if args.top is not None else (4 if args.quick else 8)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in sizes]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(sizes)}")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="autosched_transfer_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"chip A {args.target_a!r}, chip B {args.target_b!r}; {args.trials} trials a run, batches of "
          f"{args.batch_size}, A's best {args.top} first with transfer; logs in {log_dir}")  # fmt: skip
    results, summary = [], []
    for wl in names:
        title, tensors = make(wl, sizes[wl])
        print(f"# {title}", flush=True)
        log_a = log_dir / f"{wl}_A.jsonl"
        a = tune(wl, tensors, args.target_a, log_a, args)
        b0 = tune(wl, tensors, args.target_b, log_dir / f"{wl}_B_scratch.jsonl", args)
        b1 = tune(wl, tensors, args.target_b, log_dir / f"{wl}_B_transfer.jsonl", args, transfer=(log_a,))
        if a["fingerprint"] == b0["fingerprint"]:
            print(f"  warning: A and B are the same chip ({a['fingerprint']}): nothing will transfer")
        results.append({"workload": title, "runs": [a, b0, b1]})
        summary.append((title, b0, b1))
    print()
    rows = [report(title, b0, b1, args.trials) for title, b0, b1 in summary]
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": rows, "results": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
