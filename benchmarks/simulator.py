"""How well the simulator (autosched/sim) ranks and picks schedules, against real measurements here.

For the four workloads of search_efficiency.py plus a depthwise conv, a max pool and a layer norm:

1. Rank correlation (Spearman) between modeled and measured times over ``--candidates`` distinct
   schedules sampled from the sketch rules, on this machine (``llvm-cpu`` modeled from ``--chip``,
   default the shipped file of this CPU, else ``rocketlake``) and for ``llvm-cpu -mcpu=haswell``
   modeled from the AVX2 chip file (``avx2-desktop``; another chip, its code measured here). Goal: >= 0.8.
   The haswell code runs on this machine, so its chip is the AVX2 file's core (vector width,
   registers, FMA units and latency, ports) on the native chip's cores, clock, caches and memory
   (:func:`~autosched.sim.chip.core_on_machine`); the data sheet's whole chip (an i7-4770: 4 cores,
   256 KiB L2, 8 MiB L3) describes another machine's memory, and its figure is printed beside.
2. Tuning on the simulator: the best schedule found by ``--trials`` trials on ``sim -chip=...``, timed
   for real, relative to the best found by the same trials on the real target (``real best time / time
   of the simulator's pick``). Goal: >= 0.8.

    python benchmarks/simulator.py                          # the full run: hours, alone on the machine
    python benchmarks/simulator.py --quick                  # tiny sizes, 24 candidates, 16 trials
    python benchmarks/simulator.py --workloads matmul,pool --candidates 60 --trials 32 --threads 1

``--threads 1`` measures one thread and models a one-core chip (steadier on a busy machine).
Timing on a machine shared with other work is noisy: the full figures need it alone.

Each candidate is measured ``--passes`` times (2), a pass over all of them before the next, and keeps
its least time; the first two passes against each other give the retest correlation, the machine's own
noise (0.51-0.96 on a 2-core VM, 2026-12-06), which weighs on every model's figure.

In pieces, resumable (:mod:`simulator_store`): every candidate measured is appended to ``--store``
(keyed by the hash of its lowered IR, the target, threads and repeats), so a rerun or a later piece
measures only what is new, and a change to the model re-predicts every stored candidate without
timing one; each finished tuning piece is stored too. One piece is one section, target and workload:

    python benchmarks/simulator.py --estimate               # the pieces still to run, minutes each
    python benchmarks/simulator.py --workloads depthwise --targets llvm-cpu --sections correlation
    python benchmarks/simulator.py --report                 # the figures from the store; measures nothing

Calibration (``autosched.sim.model.Calibration``): 30-50 candidates per workload sampled as here at
mid sizes (matmul 256^3, conv2d 32x28x28 -> 32, softmax 512x256, dense 128x256x256, depthwise 64x56x56,
max pool 64x56x56, layer norm 256x512), one thread, min of 3-5 repeats; each constant was set by
re-predicting those saved traces and keeping the value with the best rank correlation (``--json`` keeps
the traces for the same loop). The chip facts themselves are data sheet or measured figures, not fitted.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from autosched.lower.pipeline import lower
from autosched.lower.printer import format_func
from autosched.measure.builder import LocalBuilder
from autosched.measure.measure import LocalMeasurer
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.records.log import trace_key
from autosched.search.guided import rank_correlation
from autosched.search_space.schedule import replay
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.trace import trace_to_json
from autosched.sim.chip import core_on_machine, load_chip, shipped_chips, write_chip
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulator_plan import piece_flags, plan, print_plan, tuning_piece_key
from simulator_store import CODEGEN, Store, host_store, ir_hash, measure_key, newest

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
    """Spearman's rank correlation (:func:`~autosched.search.guided.rank_correlation`, average ranks
    for ties); nan for fewer than 3 points or a constant side, so the report leaves it out."""
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return rank_correlation(np.asarray(a), np.asarray(b))


def host_cpu() -> str:
    """This host's CPU as LLVM names it (``znver5``)."""
    from llvmlite import binding

    return str(binding.get_host_cpu_name())


def native_chip() -> str:
    """The shipped chip file of this host's CPU (by its LLVM name, ``znver5``), else ``rocketlake``."""
    host = host_cpu()
    return next((n for n in shipped_chips() if load_chip(n).llvm_cpu == host), CHIPS["llvm-cpu"])


def default_store(quick: bool) -> Path:
    """The store of this host in the repository, by LLVM CPU name and core count (the measurements are
    keyed by target string only, so two machines must not share a file): later sessions on the same kind
    of machine add to it, and ``--report`` prints its figures anywhere."""
    return host_store("simulator", "_quick" if quick else "")


def _chip_for(args: argparse.Namespace, target: str, tmp: Path) -> str:
    """The chip file for ``target``: the native chip, or the AVX2 core on it unless --avx2-chip names a
    whole chip; with --threads, a copy with that many cores (as the runner runs)."""
    native = args.chip or native_chip()
    if target == "llvm-cpu":
        name = native
    elif args.avx2_chip:
        name = args.avx2_chip
    else:
        chip = core_on_machine(load_chip(CHIPS[target]), load_chip(native))
        name = str(tmp / f"{chip.name}.json")
        write_chip(chip, name)
    if not args.threads:
        return name
    chip = dataclasses.replace(load_chip(name), cores=args.threads)
    path = tmp / f"{Path(name).stem}-{args.threads}core.json"
    write_chip(chip, path)
    return str(path)


def data_sheet_chip(args: argparse.Namespace, target: str) -> str | None:
    """The data sheet's whole chip for a target modeled as its core on this machine (printed beside)."""
    return CHIPS[target] if target != "llvm-cpu" and not args.avx2_chip else None


def _measurer(target: str, args: argparse.Namespace) -> LocalMeasurer:
    runner = LocalRunner(timeout_s=args.timeout, repeat=args.repeat, num_threads=args.threads)
    return LocalMeasurer(LocalBuilder(n_workers=1), runner)


def sample_candidates(name: str, tensors: list, chip_file: str, args: argparse.Namespace) -> list[tuple]:
    """``--candidates`` schedules sampled from the sketch rules, distinct as lowered kernels: (trace,
    lowered function, hash of its IR). The same seed samples the same ones (a rerun finds them stored)."""
    chip = load_chip(chip_file)  # the sketch sizes tiles for the chip's cores and lanes, as tune does
    policy = SketchPolicy([tensors[-1]], cores=chip.cores, lanes=chip.lanes)
    inst = WorkloadInstance(name, {}, tuple(tensors))
    rng = random.Random(args.seed)
    out: list[tuple] = []
    seen: set[str] = set()
    keys: set[str] = set()
    for _ in range(50 * args.candidates):
        if len(out) == args.candidates:
            break
        sch, _ = policy.sample(rng)
        key = trace_key(sch.trace)
        if key in seen:
            continue
        seen.add(key)
        func = lower(replay(list(inst.outputs), sch.trace), list(tensors), name, "llvm-cpu")
        ir = ir_hash(format_func(func))
        if ir not in keys:  # two traces that lower to the same kernel are one candidate
            keys.add(ir)
            out.append((sch.trace, func, ir))
    return out


def correlation(name: str, tensors: list, target: str, chip_file: str, args: argparse.Namespace,
                store: Store, run: bool = True, beside: str | None = None,
                cands: list[tuple] | None = None) -> dict:  # fmt: skip
    """Sample distinct candidates (or take ``cands``, sampled so before), measure on ``target`` those not
    yet in ``store``, model them all on ``chip_file`` (and on ``beside``, for comparison).
    ``run=False``: measure nothing (``missing`` counts what is not stored)."""
    cands = sample_candidates(name, tensors, chip_file, args) if cands is None else cands
    key = measure_key(name, args.sizes, target, args.threads, args.repeat)
    start = time.perf_counter()
    measured_now = 0
    # Pass by pass, all candidates of a pass before any of the next, so that the passes of one kernel
    # are minutes apart: a slow spell of the machine then costs one pass, not the kernel's least time.
    for n in [*range(1, args.passes + 1), *([math.inf] if args.again else [])]:  # --again: one more
        todo = [c for c in cands if _needs_pass(store, key, c[2], n)]
        if todo and run:
            _measure(name, tensors, target, args, store, key, todo)
        measured_now += len(todo)
    stored = store.measured(key)  # with what this run added
    chip = load_chip(chip_file)
    other = load_chip(beside) if beside else None
    measured, modeled, modeled_beside, kept, missing = [], [], [], [], 0
    for trace, func, ir in cands:
        rec = stored.get(ir)
        if rec is None:
            missing += 1
        elif rec["cost"] is not None:
            measured.append(rec["cost"])
            modeled.append(predict(func, chip).seconds)
            if other is not None:
                modeled_beside.append(predict(func, other).seconds)
            kept.append(trace_to_json(trace))  # in --json: what to look at where the model is wrong
    rho = spearman(measured, modeled)
    rho_beside = spearman(measured, modeled_beside) if other is not None else float("nan")
    # The machine against itself: two passes of the same kernels rank alike only as far as its noise
    # allows, and that noise caps what any model's correlation with the measurements can reach.
    passes = store.passes(key)
    twice = [passes[ir][:2] for _, _, ir in cands if len(passes.get(ir, ())) >= 2]
    retest = spearman([t[0] for t in twice], [t[1] for t in twice])
    ratio = statistics.median(p / t for p, t in zip(modeled, measured)) if measured else float("nan")
    return {"workload": name, "target": target, "chip": chip_file, "candidates": len(cands),
            "ok": len(measured), "missing": missing, "measured_now": measured_now if run else 0,
            "spearman": rho, "beside": beside, "spearman_beside": rho_beside, "retest": retest,
            "retest_n": len(twice), "modeled_over_measured": ratio,
            "seconds": time.perf_counter() - start,
            "measured": measured, "modeled": modeled, "traces": kept}  # fmt: skip


def _needs_pass(store: Store, key: str, ir: str, n: float) -> bool:
    """Whether candidate ``ir`` still lacks its ``n``-th pass (a kernel's own failure needs none)."""
    rec = store.measured(key).get(ir)
    return rec is None or (rec["cost"] is not None and len(store.passes(key).get(ir, ())) < n)


def _measure(name: str, tensors: list, target: str, args: argparse.Namespace, store: Store, key: str,
             todo: list[tuple]) -> None:  # fmt: skip
    """One pass over ``todo`` on ``target``, in batches of 16, each candidate appended to ``store``."""
    inst = WorkloadInstance(name, {}, tuple(tensors))
    task = MeasureTask.create(name, tensors, target, flops=inst.flop_count())
    with _measurer(target, args) as m:
        for i in range(0, len(todo), 16):
            batch = todo[i : i + 16]
            t0 = time.perf_counter()
            results = m.measure(task, [c[0] for c in batch])
            each = (time.perf_counter() - t0) / len(batch)
            for (_, _, ir), res in zip(batch, results):
                if res.ok:  # another process can only make a run slower: the least of the repeats
                    store.add_measured(key, ir, min(res.costs), each)
                else:  # kept only when the kernel's own failure (see simulator_store.PERMANENT)
                    store.add_measured(key, ir, None, each, f"{res.error}: {res.error_msg}")


def tune_best(name: str, tensors: list, target: str, args: argparse.Namespace, log: Path) -> Any:
    inst = WorkloadInstance(name, {}, tuple(tensors))
    options = TuneOptions(trials=args.trials, batch_size=args.batch_size, seed=args.seed, baseline=False,
                          num_threads=args.threads, timeout_s=args.timeout)  # fmt: skip
    (task,) = Tuner([inst], target, log, options).run()
    return task.best_trace


def sim_vs_real(name: str, tensors: list, target: str, chip_file: str, args: argparse.Namespace,
                log_dir: Path) -> dict:  # fmt: skip
    """Tune on the simulated chip and on the real target; time both picks on the real target in turns."""
    start = time.perf_counter()
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
            "sim_pick_s": best["sim"], "real_pick_s": best["real"], "ratio": best["real"] / best["sim"],
            "seconds": time.perf_counter() - start}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 24 candidates, 16 trials: a smoke test")
    p.add_argument("--workloads", default=",".join(FULL), help=f"comma-separated, from {', '.join(FULL)}")
    p.add_argument("--targets", default=",".join(CHIPS), help="real targets, from: " + "; ".join(CHIPS))
    p.add_argument(
        "--avx2-chip",
        help="chip file for llvm-cpu -mcpu=haswell (default: the shipped avx2-desktop; `autosched devices "
        "--chip-file F --target 'llvm-cpu -mcpu=haswell'` writes this machine's AVX2 facts)",
    )
    p.add_argument(
        "--chip",
        help="chip file for the native llvm-cpu (default: the shipped file of this CPU, else rocketlake)",
    )
    p.add_argument("--candidates", type=int, help="sampled schedules per workload and target (200)")
    p.add_argument("--trials", type=int, help="tuning trials on the simulator and on the real target (200)")
    p.add_argument("--sections", default="correlation,tuning", help="correlation, tuning or both")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, help="threads per kernel; the chip is modeled with as many cores")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the raw results (every time pair) to this file")
    p.add_argument("--store", help="measured candidates and finished tuning pieces, reused by reruns "
                   "(default benchmarks/stores/simulator_CPU_Nc[_quick].jsonl, this host's)")  # fmt: skip
    p.add_argument("--passes", type=int, default=2, help="times each candidate is measured, a pass "
                   "over all at a time; it keeps its least (two give the retest correlation)")  # fmt: skip
    p.add_argument(
        "--again", action="store_true", help="measure stored candidates once more (each keeps its least)"
    )
    p.add_argument("--estimate", action="store_true", help="print the pieces still to run, minutes each")
    p.add_argument("--report", action="store_true", help="print the figures from the store; measure nothing")
    args = p.parse_args(argv)
    args.flags = piece_flags(sys.argv[1:] if argv is None else argv)
    args.sizes = "quick" if args.quick else "full"
    sizes = QUICK if args.quick else FULL
    args.candidates = args.candidates or (24 if args.quick else 200)
    args.trials = args.trials or (16 if args.quick else 200)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if args.passes < 1:
        p.error(f"--passes {args.passes}: each candidate needs at least one pass")
    bad = [w for w in names if w not in sizes] + [t for t in targets if t not in CHIPS]
    if bad:
        p.error(f"unknown workload(s) or target(s): {', '.join(bad)}")
    store = Store(Path(args.store or default_store(args.quick)))
    tmp = Path(tempfile.mkdtemp(prefix="autosched_sim_bench_"))
    sections = {s.strip() for s in args.sections.split(",")}
    chips = {t: _chip_for(args, t, tmp) for t in targets}

    tensors = functools.cache(lambda name: sizes[name]())

    @functools.cache
    def sampled(name: str, target: str) -> list[tuple]:  # the plan and the piece sample the same ones
        return sample_candidates(name, tensors(name), chips[target], args)

    todo = plan(args, store, names, targets, sections, chips, lambda n, t: [c[2] for c in sampled(n, t)])
    print(f"store {store.path}; still to run:")
    print_plan(todo, args)
    if args.estimate:
        return 0
    run = not args.report
    out: dict[str, list[dict]] = {"correlation": [], "tuning": []}
    for target in targets:
        chip_file = chips[target]
        for name in names:
            if "correlation" in sections:
                beside = data_sheet_chip(args, target)
                r = correlation(
                    name, tensors(name), target, chip_file, args, store, run, beside, sampled(name, target)
                )
                out["correlation"].append(r)
                print(f"# {target:24s} {name:10s} spearman {r['spearman']:.3f} over {r['ok']} of "
                      f"{r['candidates']} ({r['measured_now']} measured now, {r['missing']} missing; "
                      f"modeled/measured median {r['modeled_over_measured']:.2f}, {r['seconds']:.0f} s)",
                      flush=True)  # fmt: skip
            if "tuning" in sections:
                key = tuning_piece_key(name, target, chip_file, args)
                got = store.tuning(key)
                if got is None and run:
                    got = sim_vs_real(name, sizes[name](), target, chip_file, args, tmp)
                    store.add_tuning(key, got)
                if got is None:  # --report: the piece as an earlier codegen's kernels ran it, said so
                    piece = functools.partial(tuning_piece_key, name, target, chip_file, args)
                    found = newest(piece, store.tuning, below=CODEGEN)
                    if found is None:
                        continue
                    got = {**found[1], "codegen": found[0]}
                out["tuning"].append(got)
                print(f"# {target:24s} {name:10s} tuned on sim: {got['sim_pick_s'] * 1e3:.3f} ms, on the "
                      f"real target: {got['real_pick_s'] * 1e3:.3f} ms, ratio {got['ratio']:.2f}",
                      flush=True)  # fmt: skip
    print()
    if out["correlation"]:
        print(
            "Spearman rank correlation, modeled vs measured (goal >= 0.8); retest: the first two passes "
            "of the same candidates against each other, the machine's own noise"
        )
        for r in out["correlation"]:
            short = f", {r['missing']} not measured" if r["missing"] else ""
            where = f"({r['ok']} candidates{short}, {Path(r['chip']).stem})"
            again = f"retest {r['retest']:6.3f}" if r["retest_n"] >= 3 else "retest    n/a"
            beside = f"  [{r['beside']} as a whole chip: {r['spearman_beside']:.3f}]" if r["beside"] else ""
            print(f"  {r['target']:24s} {r['workload']:10s} {r['spearman']:6.3f}  {again}  {where}{beside}")
        rhos = [r["spearman"] for r in out["correlation"] if r["spearman"] == r["spearman"]]
        if rhos:
            print(f"  median {statistics.median(rhos):.3f}, min {min(rhos):.3f}")
        beside = [r["spearman_beside"] for r in out["correlation"]
                  if r["beside"] and r["spearman_beside"] == r["spearman_beside"]]  # fmt: skip
        if beside:  # the rows modeled as a core on this machine, modeled from whole data-sheet chips
            print(f"  [those rows from the data sheets' whole chips: median {statistics.median(beside):.3f}]")
    if out["tuning"]:
        print(f"Best found tuning on the simulator vs on the target, {args.trials} trials each (goal >= 0.8)")
        for r in out["tuning"]:
            was = f"  (kernels of codegen {r['codegen']}, before {CODEGEN})" if "codegen" in r else ""
            print(f"  {r['target']:24s} {r['workload']:10s} {r['ratio']:6.2f}{was}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
