"""Tuned autosched kernels against the vendor libraries (numpy/OpenBLAS, and torch where installed).

For matmul 1024^3, a ResNet 3x3 conv2d (56x56x64), softmax 4096x1024 and dense+bias+relu
(512x1024x1024), the best kernel of a tuning log (or of a fresh ``--trials`` run) is rebuilt in
this process and timed against each library in alternating blocks
(:func:`autosched.measure.compare.race`); the ratios are library time / ours (> 1: autosched is
faster), taken round by round between neighbouring blocks, and their median printed. numpy has no
conv2d; torch is skipped when it is not installed.

    python benchmarks/vs_libraries.py --trials 300                      # tune each, then compare
    python benchmarks/vs_libraries.py --log matmul.jsonl --workloads matmul   # compare a log's best
    python benchmarks/vs_libraries.py --quick                           # tiny sizes: a smoke test
    python benchmarks/vs_libraries.py --workloads matmul --trials 300 --seeds 3   # median of 3 seeds

With ``--seeds N`` each seed tunes and times in a fresh process of its own (search seed 0..N-1), so one
process's warm caches, allocator state or thread placement cannot favour a contender; the table shows every
seed's row and then the median over seeds of each time and ratio.

Run it alone on the machine: anything else running makes the times meaningless.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from search_efficiency import FULL, QUICK  # the same workloads and sizes (this directory)

from autosched.build import build
from autosched.hai.registry import get_adapter
from autosched.measure import blas
from autosched.measure.compare import race
from autosched.records.log import best_valid_record, load_records, trace_key
from autosched.records.record import fingerprint_of
from autosched.search_space.schedule import replay
from autosched.target import parse_target
from autosched.te.workload import WorkloadInstance
from autosched.testing import split_args
from autosched.tune import TuneOptions, Tuner


def numpy_fn(name: str) -> Callable[..., Any] | None:
    if name == "matmul":
        return lambda a, b: a @ b
    if name == "softmax":

        def softmax(x: np.ndarray) -> np.ndarray:
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        return softmax
    if name == "dense":
        return lambda x, w, b: np.maximum(x @ w.T + b, 0)
    return None  # numpy has no convolution


def torch_fn(name: str, threads: int) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """(convert numpy inputs to tensors, the op) or None without torch."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.set_num_threads(threads)
    ops = {
        "matmul": torch.mm,
        "conv2d": lambda x, w: F.conv2d(x, w, padding=1),
        "softmax": lambda x: torch.softmax(x, dim=1),
        "dense": lambda x, w, b: torch.relu(F.linear(x, w, b)),
    }
    op = ops[name]

    def run(*ts: Any) -> Any:
        with torch.inference_mode():
            return op(*ts)

    return torch.from_numpy, run


def best_trace(logs: list[Path], inst: WorkloadInstance, fingerprint: str) -> tuple[Any, int] | None:
    """The fastest trace for ``inst`` on this chip in any of ``logs`` (a schedule of a finalists round by
    its re-timing), and how many distinct schedules they hold."""
    records = [
        r
        for log in logs
        for r in load_records(log, target_fingerprint=fingerprint, workload_key=inst.key).records
    ]
    trials = len({trace_key(r.trace) for r in records})
    # build's pick: a re-timed schedule first (the lowest search timing alone is a lucky draw: on the
    # Emerald Rapids VM it raced 1.04x numpy where the pick raced 1.13x)
    best, _ = best_valid_record(logs, inst, fingerprint)
    return (best.trace, trials) if best is not None else None


def time_contenders(
    name: str, inst: WorkloadInstance, trace: Any, target: Any, threads: int, repeat: int
) -> dict[str, float]:
    """Median seconds per call of the tuned kernel and each library, timed in turns, and each library's
    ratio to the kernel (the median of the ratios round by round: :meth:`Race.ratio`)."""
    ins, outs = split_args(list(inst.tensors))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(t.shape).astype(t.dtype) for t in ins]
    out_arrays = [np.empty(t.shape, t.dtype) for t in outs]
    fn = build(replay(outs, trace), list(inst.tensors), target, name="tuned")
    contenders: list[tuple[str, Callable[[], Any]]] = [("autosched", lambda: fn(*inputs, *out_arrays))]
    ref = numpy_fn(name)
    if ref is not None:
        contenders.append(("numpy", lambda: ref(*inputs)))
    th = torch_fn(name, threads)
    if th is not None:
        to_tensor, op = th
        tensors = [to_tensor(a) for a in inputs]
        contenders.append(("torch", lambda: op(*tensors)))
    done = race([c[1] for c in contenders], repeat)
    times = {name: done.median(i) for i, (name, _) in enumerate(contenders)}
    times.update({f"{name} ratio": done.ratio(i, 0) for i, (name, _) in enumerate(contenders) if i})
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 16 trials")
    p.add_argument("--workloads", default=",".join(FULL))
    p.add_argument("--log", action="append", default=[], help="a tuning log to take best kernels from")
    p.add_argument("--trials", type=int, help="tune workloads no --log covers (default 300; quick 16)")
    p.add_argument("--repeat", type=int, default=150, help="timed calls of each contender (5 a round)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0, help="the search's seed")
    p.add_argument("--seeds", type=int, help="run seeds 0..N-1, each in a fresh process, and print medians")
    p.add_argument("--rows-out", type=Path, help=argparse.SUPPRESS)  # a child's rows, as JSON, for --seeds
    args = p.parse_args(argv)
    if args.seeds:
        return run_seeds(args, argv if argv is not None else sys.argv[1:])
    sizes = QUICK if args.quick else FULL
    trials = args.trials or (16 if args.quick else 300)
    target = parse_target("llvm-cpu")
    fingerprint = fingerprint_of(target, get_adapter(target).info())
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    work = Path(tempfile.mkdtemp(prefix="autosched_vs_libraries_"))
    rows: list[list[str]] = []
    raw: list[dict[str, Any]] = []
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        if name not in sizes:
            p.error(f"unknown workload {name!r}; known: {', '.join(sizes)}")
        inst = WorkloadInstance(name, {}, tuple(sizes[name]()))
        found = best_trace([Path(x) for x in args.log], inst, fingerprint)
        if found is None:
            log = work / f"{name}.jsonl"
            options = TuneOptions(trials=trials, baseline=False, num_threads=args.threads, seed=args.seed)
            Tuner([inst], target, log, options).run()
            found = best_trace([log], inst, fingerprint)
        if found is None:
            print(f"# {name}: no successful kernel to compare")
            continue
        trace, n_records = found
        times = time_contenders(name, inst, trace, target, args.threads, args.repeat)
        times["gflop"] = inst.flop_count() / 1e9
        times["trials"] = n_records
        rows.append(format_row(name, times))
        print("# " + " ".join(rows[-1]), flush=True)
        raw.append({"workload": name, **times})
    if args.rows_out:
        args.rows_out.write_text(json.dumps(raw))
    print_table(rows, f"{args.threads} threads each, timed in alternating blocks in this process")
    return 0


def format_row(name: str, times: dict[str, Any], label: str = "") -> list[str]:
    ours = times["autosched"]
    row = [name, label or str(times["trials"]), f"{ours * 1e3:.3f}", f"{times['gflop'] / ours:.1f}"]
    for lib in ("numpy", "torch"):
        t = times.get(lib)
        ratio = times.get(f"{lib} ratio", t / ours if t else None)
        row += [f"{t * 1e3:.3f}", f"{ratio:.2f}x"] if t else ["-", "-"]
    return row


def print_table(rows: list[list[str]], how: str) -> None:
    head = ["workload", "trials", "autosched ms", "GFLOP/s", "numpy ms", "vs numpy", "torch ms", "vs torch"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print()
    for line in [head, *rows]:
        print("  ".join(x.rjust(w) for x, w in zip(line, widths)))
    print(
        "vs X = X's time / autosched's time (> 1: autosched is faster), median of the round-by-round ratios"
    )
    print(how)
    print(blas.describe())
    warning = blas.forced_warning()
    if warning:
        print(f"warning: {warning}")


def run_seeds(args: argparse.Namespace, argv: list[str]) -> int:
    """Each seed in a fresh child process; then every seed's row and the median over seeds."""
    passed = [a for i, a in enumerate(argv) if not a.startswith("--seeds") and argv[i - 1 : i] != ["--seeds"]]
    per_workload: dict[str, list[dict[str, Any]]] = {}
    rows: list[list[str]] = []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.json"
            cmd = [sys.executable, __file__, *passed, "--seed", str(seed), "--rows-out", str(out)]
            print(f"# seed {seed}: {' '.join(cmd[1:])}", flush=True)
            if subprocess.run(cmd).returncode != 0 or not out.exists():
                print(f"# seed {seed}: the child process failed")
                return 1
            for r in json.loads(out.read_text()):
                per_workload.setdefault(r["workload"], []).append(r)
                rows.append(format_row(r["workload"], r, f"{r['trials']} s{seed}"))
    for name, runs in per_workload.items():
        med: dict[str, Any] = {"gflop": runs[0]["gflop"]}
        med["autosched"] = statistics.median(r["autosched"] for r in runs)
        for lib in ("numpy", "torch"):
            if all(lib in r for r in runs):
                med[lib] = statistics.median(r[lib] for r in runs)
                ratios = [r.get(f"{lib} ratio", r[lib] / r["autosched"]) for r in runs]
                med[f"{lib} ratio"] = statistics.median(ratios)
        rows.append(format_row(name, med, f"median of {len(runs)}"))
    how = "each seed tuned and timed in a fresh process, contenders in alternating blocks; the median row:"
    print_table(rows, f"{args.threads} threads each; {how} each time's and ratio's median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
