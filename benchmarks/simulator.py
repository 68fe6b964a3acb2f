"""How well the simulator (autosched/sim) ranks and picks schedules, against real measurements here.

For the four workloads of search_efficiency.py plus a depthwise conv, a max pool and a layer norm:

1. Rank correlation (Spearman) between modeled and measured times over ``--candidates`` distinct
   schedules sampled from the sketch rules, on this machine (``llvm-cpu`` modeled from
   ``--chip``, default the shipped ``rocketlake``) and for ``llvm-cpu -mcpu=haswell`` modeled from the
   AVX2 chip file (``avx2-desktop``; another chip, its code measured here). Goal: >= 0.8.
2. Tuning on the simulator: the best schedule found by ``--trials`` trials on ``sim -chip=...``, timed
   for real, relative to the best found by the same trials on the real target (``real best time / time
   of the simulator's pick``). Goal: >= 0.8.

    python benchmarks/simulator.py                          # the full run: hours, alone on the machine
    python benchmarks/simulator.py --quick                  # tiny sizes, 24 candidates, 16 trials
    python benchmarks/simulator.py --workloads matmul,pool --candidates 60 --trials 32 --threads 1

``--threads 1`` measures one thread and models a one-core chip (steadier on a busy machine).
Timing on a machine shared with other work is noisy: the full figures need it alone.

Calibration (``autosched.sim.model.Calibration``): 30-50 candidates per workload sampled as here at
mid sizes (matmul 256^3, conv2d 32x28x28 -> 32, softmax 512x256, dense 128x256x256, depthwise 64x56x56,
max pool 64x56x56, layer norm 256x512), one thread, min of 3-5 repeats; each constant was set by
re-predicting those saved traces and keeping the value with the best rank correlation (``--json`` keeps
the traces for the same loop). The chip facts themselves are data sheet or measured figures, not fitted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from autosched.lower.pipeline import lower
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import LocalMeasurer
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.records.log import trace_key
from autosched.search_space.schedule import replay
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.trace import trace_to_json
from autosched.sim.chip import load_chip, write_chip
from autosched.sim.model import predict
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import (
    make_conv2d,
    make_dense,
    make_depthwise_conv2d,
    make_layer_norm,
    make_matmul,
    make_max_pool2d,
    make_softmax,
)
from autosched.tune import TuneOptions, Tuner

FULL = {
    "matmul": lambda: make_matmul(1024, 1024, 1024),
    "conv2d": lambda: make_conv2d(1, 64, 56, 56, 64, 3, 3, stride=1, padding=1),
    "softmax": lambda: make_softmax((4096, 1024)),
    "dense": lambda: make_dense(512, 1024, 1024, bias=True, activation="relu"),
    "depthwise": lambda: make_depthwise_conv2d(1, 128, 56, 56, 1, 3, 3, stride=1, padding=1),
    "pool": lambda: make_max_pool2d(1, 64, 112, 112, 3, 2, 1),
    "layer_norm": lambda: make_layer_norm((512, 768), axis=-1),
}
QUICK = {
    "matmul": lambda: make_matmul(128, 128, 128),
    "conv2d": lambda: make_conv2d(1, 16, 14, 14, 16, 3, 3, stride=1, padding=1),
    "softmax": lambda: make_softmax((256, 256)),
    "dense": lambda: make_dense(64, 128, 128, bias=True, activation="relu"),
    "depthwise": lambda: make_depthwise_conv2d(1, 32, 28, 28, 1, 3, 3, stride=1, padding=1),
    "pool": lambda: make_max_pool2d(1, 16, 56, 56, 3, 2, 1),
    "layer_norm": lambda: make_layer_norm((128, 256), axis=-1),
}
CHIPS = {"llvm-cpu": "rocketlake", "llvm-cpu -mcpu=haswell": "avx2-desktop"}


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); nan for fewer than 3 points."""
    if len(a) < 3:
        return float("nan")

    def ranks(x: list[float]) -> np.ndarray:
        v = np.asarray(x, dtype=np.float64)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=np.float64)
        for value in np.unique(v):  # ties share their mean rank
            tie = v == value
            if tie.sum() > 1:
                r[tie] = r[tie].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _chip_for(args: argparse.Namespace, target: str, tmp: Path) -> str:
    """The chip file for ``target``; with --threads, a copy with that many cores (as the runner runs)."""
    name = args.chip if target == "llvm-cpu" and args.chip else CHIPS[target]
    if not args.threads:
        return name
    chip = dataclasses.replace(load_chip(name), cores=args.threads)
    path = tmp / f"{Path(name).stem}-{args.threads}core.json"
    write_chip(chip, path)
    return str(path)


def _measurer(target: str, args: argparse.Namespace) -> LocalMeasurer:
    runner = LocalRunner(timeout_s=args.timeout, repeat=args.repeat, num_threads=args.threads)
    return LocalMeasurer(LocalBuilder(n_workers=1), runner)


def correlation(name: str, tensors: list, target: str, chip_file: str, args: argparse.Namespace) -> dict:
    """Sample distinct candidates, measure them on ``target``, model them on ``chip_file``."""
    chip = load_chip(chip_file)  # the sketch sizes tiles for the chip's cores and lanes, as tune does
    policy = SketchPolicy([tensors[-1]], cores=chip.cores, lanes=chip.lanes)
    rng = random.Random(args.seed)
    traces, seen = [], set()
    for _ in range(50 * args.candidates):
        if len(traces) == args.candidates:
            break
        sch, _ = policy.sample(rng)
        key = trace_key(sch.trace)
        if key not in seen:
            seen.add(key)
            traces.append(sch.trace)
    inst = WorkloadInstance(name, {}, tuple(tensors))
    task = MeasureTask.create(name, tensors, target, flops=inst.flop_count())
    start = time.perf_counter()
    measured, modeled, kept = [], [], []
    with _measurer(target, args) as m:
        for i in range(0, len(traces), 16):
            batch = traces[i : i + 16]
            for trace, res in zip(batch, m.measure(task, batch)):
                if not res.ok:
                    continue
                func = lower(replay(list(inst.outputs), trace), list(tensors), name, "llvm-cpu")
                measured.append(min(res.costs))  # another process can only make a run slower
                modeled.append(predict(func, chip).seconds)
                kept.append(trace_to_json(trace))  # in --json: what to look at where the model is wrong
    rho = spearman(measured, modeled)
    ratio = statistics.median(p / t for p, t in zip(modeled, measured)) if measured else float("nan")
    return {"workload": name, "target": target, "chip": chip_file, "candidates": len(traces),
            "ok": len(measured), "spearman": rho, "modeled_over_measured": ratio,
            "seconds": time.perf_counter() - start, "measured": measured, "modeled": modeled,
            "traces": kept}  # fmt: skip


def tune_best(name: str, tensors: list, target: str, args: argparse.Namespace, log: Path) -> Any:
    inst = WorkloadInstance(name, {}, tuple(tensors))
    options = TuneOptions(trials=args.trials, batch_size=args.batch_size, seed=args.seed, baseline=False,
                          num_threads=args.threads, timeout_s=args.timeout)  # fmt: skip
    (task,) = Tuner([inst], target, log, options).run()
    return task.best_trace


def sim_vs_real(name: str, tensors: list, target: str, chip_file: str, args: argparse.Namespace,
                log_dir: Path) -> dict:  # fmt: skip
    """Tune on the simulated chip and on the real target; time both picks on the real target in turns."""
    picks = {}
    for label, tgt in (("sim", f"sim -chip={chip_file}"), ("real", target)):
        log = log_dir / f"{name}_{label}_{tgt.replace(' ', '_').replace('/', '_')}.jsonl"
        log.unlink(missing_ok=True)
        picks[label] = tune_best(name, tensors, tgt, args, log)
    inst = WorkloadInstance(name, {}, tuple(tensors))
    task = MeasureTask.create(name, tensors, target, flops=inst.flop_count())
    times: dict[str, list[float]] = {"sim": [], "real": []}
    with _measurer(target, args) as m:
        for _ in range(3):  # in turns, so a busy moment costs both
            for label in ("sim", "real"):
                if picks[label] is None:
                    continue
                (res,) = m.measure(task, [picks[label]])
                if res.ok:
                    times[label].append(min(res.costs))
    best = {k: min(v) if v else float("nan") for k, v in times.items()}
    return {"workload": name, "target": target, "chip": chip_file, "trials": args.trials,
            "sim_pick_s": best["sim"], "real_pick_s": best["real"],
            "ratio": best["real"] / best["sim"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 24 candidates, 16 trials: a smoke test")
    p.add_argument("--workloads", default=",".join(FULL), help=f"comma-separated, from {', '.join(FULL)}")
    p.add_argument("--targets", default=",".join(CHIPS), help="real targets, from: " + "; ".join(CHIPS))
    p.add_argument("--chip", help="chip file for the native llvm-cpu (default: the shipped rocketlake)")
    p.add_argument("--candidates", type=int, help="sampled schedules per workload and target (200)")
    p.add_argument("--trials", type=int, help="tuning trials on the simulator and on the real target (200)")
    p.add_argument("--sections", default="correlation,tuning", help="correlation, tuning or both")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, help="threads per kernel; the chip is modeled with as many cores")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the raw results (every time pair) to this file")
    args = p.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.candidates = args.candidates or (24 if args.quick else 200)
    args.trials = args.trials or (16 if args.quick else 200)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [w for w in names if w not in sizes] + [t for t in targets if t not in CHIPS]
    if bad:
        p.error(f"unknown workload(s) or target(s): {', '.join(bad)}")
    tmp = Path(tempfile.mkdtemp(prefix="autosched_sim_bench_"))
    sections = {s.strip() for s in args.sections.split(",")}
    out: dict[str, list[dict]] = {"correlation": [], "tuning": []}
    for target in targets:
        chip_file = _chip_for(args, target, tmp)
        for name in names:
            if "correlation" in sections:
                r = correlation(name, sizes[name](), target, chip_file, args)
                out["correlation"].append(r)
                print(f"# {target:24s} {name:10s} spearman {r['spearman']:.3f} over {r['ok']} of "
                      f"{r['candidates']} (modeled/measured median {r['modeled_over_measured']:.2f}, "
                      f"{r['seconds']:.0f} s)", flush=True)  # fmt: skip
            if "tuning" in sections:
                r = sim_vs_real(name, sizes[name](), target, chip_file, args, tmp)
                out["tuning"].append(r)
                print(f"# {target:24s} {name:10s} tuned on sim: {r['sim_pick_s'] * 1e3:.3f} ms, on the "
                      f"real target: {r['real_pick_s'] * 1e3:.3f} ms, ratio {r['ratio']:.2f}",
                      flush=True)  # fmt: skip
    print()
    if out["correlation"]:
        print("Spearman rank correlation, modeled vs measured (goal >= 0.8)")
        for r in out["correlation"]:
            where = f"({r['ok']} candidates, {r['chip']})"
            print(f"  {r['target']:24s} {r['workload']:10s} {r['spearman']:6.3f}  {where}")
        rhos = [r["spearman"] for r in out["correlation"] if r["spearman"] == r["spearman"]]
        if rhos:
            print(f"  median {statistics.median(rhos):.3f}, min {min(rhos):.3f}")
    if out["tuning"]:
        print(f"Best found tuning on the simulator vs on the target, {args.trials} trials each (goal >= 0.8)")
        for r in out["tuning"]:
            print(f"  {r['target']:24s} {r['workload']:10s} {r['ratio']:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
