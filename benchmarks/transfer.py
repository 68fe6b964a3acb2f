"""Logs across chips: trials chip B needs from scratch, with chip A's log, and with the pretrained model.

Six workloads where search is hard, three seeds each. Chip A is this machine's ``llvm-cpu``; chip B is
``llvm-cpu -mcpu=haswell`` (AVX2 only) and the OpenCL device (PoCL). For every workload, seed and B:

- *scratch*: B tuned with no log and no model (``--cost-model none``);
- *transfer*: B tuned with A's log (``--transfer-from``), A tuned first with the same seed, under the
  command's default ``--cost-model auto`` (the shipped model guides B's search; A's log overrides it
  while A's probes rank well on B);
- *pretrained*: B tuned with the shipped pretrained model and no log of the workload at all;
- *log_alone* (only with ``--modes``): A's log with ``--cost-model none``, what *transfer* was until
  session 36 (runs stored before then, a *transfer* line without ``cost_model``, are read as this).

A guided run stores the hash of the model file that guided it; ``--report`` counts the runs that another
model than today's guided (the shipped model retrained since: run them again to compare).

Printed per workload and B: the best GFLOP/s found on B (by any of the runs of a seed), the median over
seeds of the trials each run needs to reach 90% of it, the best at 32 and 64 trials, and the ratios
(done when: transfer >= 3x fewer on four of six workloads, none worse than scratch by more than 10%;
pretrained >= 2x). Times are re-timed ones: once a seed's runs on a chip are stored, their new bests
are timed again over fresh processes (``transfer_retime.py``; ``--no-retime``: the search's own), and
again, all together, when a run of another mode is stored later (``--modes`` runs a part of them).

    python benchmarks/transfer.py --estimate               # the pieces still to run, minutes each
    python benchmarks/transfer.py --workloads matmul --seeds 0   # one piece (about 20-30 min alone)
    python benchmarks/transfer.py --report                 # the table from the stored pieces, runs nothing
    python benchmarks/transfer.py                          # everything not yet stored (hours: see --estimate)
    python benchmarks/transfer.py --quick                  # tiny shapes, 8 trials, seed 0: a smoke run
    python benchmarks/transfer.py --source-log A.jsonl     # reuse chip A's records instead of tuning A

Resumable and splittable: every finished run (one workload, seed, chip B and mode) is appended to
``--results`` (JSON lines, keyed by workload, chip, seed, mode and trials; by default the host's file
in ``benchmarks/stores``, kept in the repository) and skipped when the script is run again, so the
full run is done one piece (``--workloads W --seeds S``: chip A once, then both chips B in all three
modes) at a time, by one session or several sharing the results file. A run cut
short leaves nothing stored and is redone whole. ``--report`` prints the table from whatever is
stored and lists the pieces still missing, with the command for each. Timing on a machine shared
with other work is meaningless: run every piece alone. A run on an LLVM chip B stores the codegen
version of its kernels (``simulator_store.CODEGEN``; none stored: 1), and ``--report`` flags a table
that mixes versions: run its rows again under one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from autosched.cost_model.pretrained import model_path, topi_instance
from autosched.tune import TuneOptions, Tuner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulator_store import CODEGEN, host_store
from transfer_retime import retime_seed
from transfer_table import FROM_A, MODES, RETIME, print_table, run_key, summarize, verdict

TARGET_A = "llvm-cpu"
TARGETS_B = ("llvm-cpu -mcpu=haswell", "opencl")
DEFAULT_MODES = MODES[:3]
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
# Seconds a trial (compile, check, time) at full size, for the estimate until stored runs refine it:
# 8-trial runs of matmul and conv2d on two loaded cores took 0.6 s a trial on the CPU and 3-9 s on
# PoCL (where random 1024^3 matmul schedules ran into the 10 s timeout).
SECONDS_PER_TRIAL = {"cpu": 1.0, "opencl": 6.0, "quick": 0.3}


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    """The stored runs, keyed anew from their fields (lines of the first version had no trials in
    their key; a line cut short by an interrupted run is skipped)."""
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = _renamed(json.loads(line))
                out[run_key(r["workload"], r["target"], r["seed"], r["mode"], r["trials"])] = r
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return out


def _renamed(r: dict[str, Any]) -> dict[str, Any]:
    """A line stored before transfer ran under the pretrained model (no ``cost_model`` on a transfer
    run, no ``modes_v`` on a re-timing) names A's log alone *transfer*: read as *log_alone*."""
    if r["mode"] == "transfer" and "cost_model" not in r:
        return {**r, "mode": "log_alone"}
    if r["mode"] == RETIME and "modes_v" not in r:
        old = {"transfer": "log_alone"}
        r = {**r, "histories": {old.get(m, m): h for m, h in r["histories"].items()}}
        # the first version's lines name no modes: it timed the three of then
        r["modes"] = [old.get(m, m) for m in r.get("modes", ("scratch", "transfer", "pretrained"))]
    return r


def tune(inst: Any, target: str, log: Path, args: argparse.Namespace, seed: int, **kw: Any) -> dict[str, Any]:
    # No finalists round: trials to 90% are read from the search's own history, and it would cost
    # ten seconds a run over 108 runs.
    opts = TuneOptions(trials=args.trials, batch_size=args.batch_size, seed=seed, baseline=False,
                       num_threads=args.threads, timeout_s=args.timeout, finalists=0, **kw)  # fmt: skip
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", choices=list(FULL), default=list(FULL))
    p.add_argument("--seeds", nargs="+", type=int, help="default 0 1 2 (quick: 0)")
    p.add_argument("--targets", nargs="+", default=list(TARGETS_B), help="the chips B")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(DEFAULT_MODES))
    p.add_argument("--trials", type=int, help="trials per run (default 64; quick 8)")
    p.add_argument("--batch-size", type=int, help="candidates per round (default 8; quick 4)")
    p.add_argument("--quick", action="store_true", help="tiny shapes, 8 trials: a smoke run")
    p.add_argument("--source-log", help="chip A's log to transfer from (default: tune A here, per seed)")
    p.add_argument("--cost-model", default="auto", help="the pretrained model (default: the shipped one)")
    p.add_argument("--threads", type=int, help="threads per kernel (default: all cores)")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--out", help="logs and results here (default ~/.cache/autosched/transfer_bench[_quick])")
    p.add_argument(
        "--results",
        help="the results file (default: stores/transfer_<cpu>_<cores>c.jsonl "
        "in benchmarks/; with --out or --quick, OUT/results.jsonl)",
    )
    p.add_argument(
        "--estimate", action="store_true", help="print the pieces still to run, minutes each, and stop"
    )
    p.add_argument("--report", action="store_true", help="print the table from the stored runs; run nothing")
    p.add_argument("--no-retime", action="store_true",
                   help="read trials to 90%% from the search's own timings (default: re-time each seed's new "
                        "bests in fresh processes first; transfer_retime.py)")  # fmt: skip
    args = p.parse_args(argv)
    args.flags = piece_flags(sys.argv[1:] if argv is None else argv)
    args.trials = args.trials or (8 if args.quick else 64)
    args.seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    args.batch_size = args.batch_size or (4 if args.quick else 8)
    sizes = QUICK if args.quick else FULL
    cache = Path.home() / ".cache" / "autosched"
    out = Path(args.out or cache / ("transfer_bench_quick" if args.quick else "transfer_bench"))
    res_path = Path(args.results or (out / "results.jsonl" if args.quick or args.out else default_results()))
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    results = load_results(res_path)
    if args.report:
        return report(results, args, res_path)

    todo = [(wl, t, s, m) for wl in args.workloads for s in args.seeds for t in args.targets
            for m in args.modes if run_key(wl, t, s, m, args.trials) not in results]  # fmt: skip
    print(f"chip A {TARGET_A!r}, chips B {args.targets}; {args.trials} trials a run; results in {res_path}")
    print_plan(todo, results, args)
    if args.estimate:
        return 0
    start = time.perf_counter()
    for wl, target, seed, mode in todo:
        inst = topi_instance(*sizes[wl])
        print(f"# {wl} on {target}, seed {seed}, {mode}", flush=True)
        kw: dict[str, Any] = {"cost_model": "none"}
        if mode in FROM_A:
            src = log_a(args, wl, seed)
            if not args.source_log and not src.exists():
                print(f"  chip A {TARGET_A}:", flush=True)
                tune(inst, TARGET_A, src.with_suffix(".part"), args, seed, cost_model="none")
                src.with_suffix(".part").rename(src)  # only a finished A log is reused
            kw["transfer_from"] = (str(src),)
            kw["cost_model"] = args.cost_model if mode == "transfer" else "none"
        elif mode == "pretrained":
            kw["cost_model"] = args.cost_model
        r = tune(inst, target, run_log(args, wl, target, seed, mode), args, seed, **kw)
        r.update(key=run_key(wl, target, seed, mode, args.trials), workload=wl, target=target, seed=seed,
                 mode=mode, trials=args.trials, quick=args.quick, cost_model=kw["cost_model"],
                 model=model_id(kw["cost_model"]))  # fmt: skip
        if target.startswith("llvm"):  # the LLVM kernels' codegen (OpenCL C's has one version so far)
            r["codegen"] = CODEGEN
        store(results, res_path, r)
    if todo:
        print(f"\nthis run: {len(todo)} B run(s) in {(time.perf_counter() - start) / 60:.1f} min")
    if not args.no_retime:
        for wl, target, seed in unretimed(results, args):
            retime_piece(results, res_path, sizes, wl, target, seed, args)
    print()
    return report(results, args, res_path)


def model_id(spec: str) -> str | None:
    """The first 12 hex digits of the SHA-256 of the pretrained model file a run is guided by (``auto``:
    the shipped one; None: no model), so that the report tells runs under an earlier model apart."""
    path = model_path(spec)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path and path.exists() else None


def reported_runs(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The stored B runs the report reads: this command's workloads, chips B, seeds and trials."""
    keys = (run_key(wl, t, s, m, args.trials) for wl in args.workloads for t in args.targets
            for s in args.seeds for m in MODES)  # fmt: skip
    return [results[k] for k in keys if k in results]


def other_models(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, int]:
    """Chip B -> how many of the reported runs a model guided other than ``--cost-model`` is now (lines
    stored before runs named their model cannot tell: not counted)."""
    now = model_id(args.cost_model)
    out: Counter[str] = Counter()
    for r in reported_runs(results, args):
        if r.get("cost_model", "none") != "none" and r.get("model") not in (None, now):
            out[r["target"]] += 1
    return dict(out)


def codegens(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, dict[int, int]]:
    """LLVM chip B -> how many of its reported runs each codegen version's kernels ran (runs stored
    before the version was recorded are codegen 1's)."""
    out: dict[str, Counter[int]] = {}
    for r in reported_runs(results, args):
        if r["target"].startswith("llvm"):
            out.setdefault(r["target"], Counter())[r.get("codegen", 1)] += 1
    return {t: dict(sorted(g.items())) for t, g in out.items()}


def stored_modes(results: dict[str, dict[str, Any]], wl: str, target: str, seed: int, trials: int
                 ) -> list[str]:  # fmt: skip
    """The modes whose runs of one workload, chip B and seed are stored."""
    return [m for m in MODES if run_key(wl, target, seed, m, trials) in results]


def default_results() -> Path:
    """The full run's results of this kind of host in the repository (``stores/transfer_<cpu>_<cores>c``,
    as ``simulator.py``'s store): the pieces take hours, so sessions on the same kind of machine add
    to one file, and ``--report`` prints it anywhere. The runs' logs stay in ``--out``."""
    return host_store("transfer")


def unretimed(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(workload, chip B, seed) with a scratch run stored whose stored runs no re-timing covers: none
    yet, or a run of another mode stored since (a re-timing line names the modes it timed together)."""
    out = []
    for wl, t, s in ((wl, t, s) for wl in args.workloads for t in args.targets for s in args.seeds):
        modes = stored_modes(results, wl, t, s, args.trials)
        line = results.get(run_key(wl, t, s, RETIME, args.trials))
        timed = line["modes"] if line else ()
        if "scratch" in modes and not set(modes) <= set(timed):
            out.append((wl, t, s))
    return out


def retime_piece(results: dict[str, dict[str, Any]], res_path: Path, sizes: dict[str, Any], wl: str,
                 target: str, seed: int, args: argparse.Namespace) -> None:  # fmt: skip
    """Re-time one seed's new bests on ``target`` (transfer_retime.py) and store the histories."""
    modes = stored_modes(results, wl, target, seed, args.trials)
    print(f"# re-timing {wl} on {target}, seed {seed}: the new bests of its {len(modes)} runs", flush=True)
    start = time.perf_counter()
    logs = {m: run_log(args, wl, target, seed, m) for m in modes}
    if not all(p.exists() for p in logs.values()):
        print(f"    skipped: a run's log is missing in {args.out}", flush=True)
        return
    r = retime_seed(topi_instance(*sizes[wl]), target, logs, args.trials, args.threads, args.timeout)
    print(
        f"    {len(r['retimed'])} schedule(s) timed again in {time.perf_counter() - start:.0f} s", flush=True
    )
    r.update(key=run_key(wl, target, seed, RETIME, args.trials), workload=wl, target=target, seed=seed,
             mode=RETIME, trials=args.trials, quick=args.quick, modes=modes, modes_v=2)  # fmt: skip
    store(results, res_path, r)


def store(results: dict[str, dict[str, Any]], res_path: Path, r: dict[str, Any]) -> None:
    """Keep a finished run (or a seed's re-timing) in memory and append it to the results file."""
    results[r["key"]] = r
    with res_path.open("a") as f:
        f.write(json.dumps(r) + "\n")


def run_log(args: argparse.Namespace, wl: str, target: str, seed: int, mode: str) -> Path:
    return Path(args.out) / f"{wl}_{target.replace(' ', '_')}_s{seed}_{mode}.jsonl"


def piece_flags(argv: list[str]) -> str:
    """The options of this command line that every piece repeats: all but the pieces' own and the modes
    that run nothing (``--report``, ``--estimate``); ends in a space when not empty."""
    out, skip = [], False
    for tok in argv:
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            skip = name in ("--workloads", "--seeds")
            if skip or name in ("--report", "--estimate"):
                continue
        if not skip:
            out.append(shlex.quote(tok))
    return "".join(f"{t} " for t in out)


def log_a(args: argparse.Namespace, wl: str, seed: int) -> Path:
    """Chip A's log for a workload and seed: ``--source-log``, or tuned here once and kept."""
    return Path(args.source_log or Path(args.out) / f"{wl}_A_seed{seed}_t{args.trials}.jsonl")


def pieces(todo: list[tuple[str, str, int, str]]) -> dict[tuple[str, int], int]:
    """The B runs still to do per piece (workload, seed)."""
    out: dict[tuple[str, int], int] = {}
    for wl, _, seed, _ in todo:
        out[wl, seed] = out.get((wl, seed), 0) + 1
    return out


def _seconds_per_trial(results: dict[str, dict[str, Any]], wl: str, target: str, quick: bool) -> float:
    """Measured in this workload's stored runs on ``target`` where there are some, else the default."""
    key = (wl, target, quick)
    runs = [
        r
        for r in results.values()
        if r["mode"] in MODES and (r["workload"], r["target"], r.get("quick")) == key and r["history"]
    ]
    if runs:
        return float(sum(r["seconds"] for r in runs) / sum(len(r["history"]) for r in runs))
    return SECONDS_PER_TRIAL["quick" if quick else "opencl" if target.startswith("opencl") else "cpu"]


def print_plan(todo: list[tuple[str, str, int, str]], results: dict[str, dict[str, Any]],
               args: argparse.Namespace) -> None:  # fmt: skip
    """Each piece still to run: its command and minutes (chip A's run included)."""
    total = 0.0
    for (wl, seed), n in sorted(pieces(todo).items()):
        needs_a = any(m in FROM_A for w, _, s, m in todo if (w, s) == (wl, seed))
        a_run = int(needs_a and not args.source_log and not log_a(args, wl, seed).exists())
        runs = [t for w, t, s, _ in todo if (w, s) == (wl, seed)] + [TARGET_A] * a_run
        est = sum(args.trials * _seconds_per_trial(results, wl, t, args.quick) for t in runs)
        total += est
        cmd = f"python benchmarks/transfer.py {args.flags}--workloads {wl} --seeds {seed}"
        print(f"  piece {wl} seed {seed}: {n} B run(s){' + chip A' if a_run else ''}, about "
              f"{est / 60:.0f} min: {cmd}")  # fmt: skip
    print(f"{len(todo)} B run(s) to do, about {total / 60:.0f} min in all" if todo else "nothing to run")


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace, res_path: Path) -> int:
    """The table and the done-when verdict from the stored runs; the pieces missing, if any."""
    rows, meds = summarize(results, args.workloads, args.targets, args.seeds, args.trials)
    if not rows:
        print(f"no stored runs in {res_path} for these workloads, seeds and {args.trials} trials")
    else:
        print_table(rows)
        print()
        for line in verdict(meds, args.targets, len(args.workloads)):
            print(line)
        for t, n in other_models(results, args).items():
            print(f"{t}: {n} of the guided runs ran under another model than {args.cost_model!r} is now")
        for t, gens in codegens(results, args).items():
            mixed = "" if list(gens) == [CODEGEN] else f": compare runs under one only (now {CODEGEN})"
            print(f"{t}: runs by codegen version of the LLVM kernels {gens}{mixed}")
    missing = [(wl, t, s, m) for wl in args.workloads for s in args.seeds for t in args.targets
               for m in args.modes if run_key(wl, t, s, m, args.trials) not in results]  # fmt: skip
    if missing:
        print(f"\nnot yet stored ({len(missing)} B run(s)); the pieces to run:")
        print_plan(missing, results, args)
    later = unretimed(results, args)
    if later:
        print(
            f"\n{len(later)} seed(s) read from the search's own timings, not yet re-timed (any run without "
            f"--report or --no-retime re-times them): {', '.join(f'{w} {t} s{s}' for w, t, s in later)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
