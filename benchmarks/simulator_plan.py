"""Which pieces of benchmarks/simulator.py are still to run, and about how long each takes.

A piece is one section (correlation or tuning), target and workload. A correlation piece counts the
passes that the candidates sampled now still lack in the store (:mod:`simulator_store`): stored
candidates of an earlier sketch or lowering are other kernels and count for nothing. A tuning piece
is to run until the store holds its result for this chip file, trials, seed and model version. The
minutes come from what the store's earlier pieces took, else from :data:`SECONDS`.

Example::

    todo = plan(args, store, ["matmul"], ["llvm-cpu"], {"correlation"}, {"llvm-cpu": "znver5"},
                lambda name, target: ["576b654a1ce298d0bdb8", ...])  # the IR hashes sampled now
    print_plan(todo, args)
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from functools import partial

from simulator_store import CODEGEN, Store, measure_key, newest, tuning_key

from autosched.sim.chip import load_chip
from autosched.sim.model import SIM_MODEL_VERSION

# Wall seconds per candidate measured (compile, check, time) and per tuning trial, until the store has
# its own (one thread, core shared with three other jobs): --quick candidates took 0.2-2.1 s (median per
# workload), full-size ones (4 each of depthwise, matmul 1024^3, pool) 1.3-2.2 s; a --quick tuning
# piece of 8 trials 23 s (1.5 s a trial, the simulator's and the target's runs together).
SECONDS = {"candidate": {"quick": 1.0, "full": 2.0}, "trial": {"quick": 1.5, "full": 2.0}}


def piece_flags(argv: list[str]) -> str:
    """The options every piece repeats: all but the pieces' own and those that run nothing."""
    out, skip = [], False
    for tok in argv:
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            skip = name in ("--workloads", "--targets", "--sections", "--json")
            if skip or name in ("--report", "--estimate"):
                continue
        if not skip:
            out.append(shlex.quote(tok))
    return "".join(f"{t} " for t in out)


def plan(args: argparse.Namespace, store: Store, names: list[str], targets: list[str],
         sections: set[str], chips: dict[str, str],
         sampled: Callable[[str, str], list[str]]) -> list[tuple[str, str, str, float]]:  # fmt: skip
    """The pieces still to run: (section, target, workload, estimated seconds). A correlation piece
    counts the passes still lacking of the candidates ``sampled(workload, target)`` names (their IR
    hashes); a kernel's own failure needs none, and ``--again`` asks one more of each."""
    out = []
    for target in targets:
        for name in names:
            if "correlation" in sections:
                key = measure_key(name, args.sizes, target, args.threads, args.repeat)
                measured, passes = store.measured(key), store.passes(key)
                live = [ir for ir in sampled(name, target)
                        if ir not in measured or measured[ir]["cost"] is not None]  # fmt: skip
                missing = sum(max(0, args.passes - len(passes.get(ir, ()))) for ir in live)
                missing += len(live) if args.again else 0
                # minutes from the same piece under an earlier codegen until this one has its own
                timed = newest(partial(measure_key, name, args.sizes, target, args.threads, args.repeat),
                               store.seconds_per_candidate)  # fmt: skip
                each = timed[1] if timed else SECONDS["candidate"][args.sizes]
                if missing:
                    out.append(("correlation", target, name, missing * each))
            if "tuning" not in sections:
                continue
            if store.tuning(tuning_piece_key(name, target, chips[target], args)) is None:
                each = store.seconds_per_trial(name, target, args.sizes) or SECONDS["trial"][args.sizes]
                out.append(("tuning", target, name, 2 * args.trials * each))
    return out


def print_plan(todo: list[tuple[str, str, str, float]], args: argparse.Namespace) -> None:
    for section, target, name, secs in todo:
        cmd = (f"python benchmarks/simulator.py {args.flags}--workloads {name} "
               f"--targets {shlex.quote(target)} --sections {section}")  # fmt: skip
        print(f"  piece {section:11s} {target:24s} {name:10s} about {secs / 60:5.1f} min: {cmd}")
    total = sum(t[3] for t in todo)
    print(f"{len(todo)} piece(s) to run, about {total / 60:.0f} min in all" if todo else "nothing to run")


def tuning_piece_key(name: str, target: str, chip_file: str, args: argparse.Namespace,
                     codegen: int = CODEGEN) -> str:  # fmt: skip
    """The store key of one tuning piece: its workload, target, chip file content, trials, seed, threads,
    batch size, model version and generated code's version."""
    return tuning_key(name, args.sizes, target, load_chip(chip_file).sha, args.trials, args.seed,
                      args.threads, args.batch_size, SIM_MODEL_VERSION, codegen)  # fmt: skip
