"""The shipped pretrained cost model: tune training workloads on several chips, then train on their logs.

The training workloads are deliberately *not* the shapes of ``benchmarks/transfer.py`` or of
``benchmarks/simulator.py`` (those measure the model on workloads it has never seen). Two kinds of
records, both in one log per target:

- *tuned*: small shapes tuned by the evolutionary search (24 trials): good schedules, near each other;
- *corpus*: random schedules of mid-size shapes (``--corpus``, 48 a workload by default; the shipped
  logs hold 96 on each CPU target, 48 on PoCL: 35 minutes in all), TenSet's way. A search starts from
  random schedules, and a model that has seen only tuned ones cannot rank them: trained on the tuned
  records alone, the model ranked the random candidates of the simulator store (workloads it never
  saw) at a median Spearman of -0.01; with the corpus, +0.72 (``--eval``, Emerald Rapids store).

    python benchmarks/pretrain.py --tune            # tuned records -> tuning_logs/pretrain/<target>.jsonl.gz
    python benchmarks/pretrain.py --corpus          # random-schedule records, the same logs
    python benchmarks/pretrain.py                   # rebuild autosched/cost_model/pretrained/default.json
    python benchmarks/pretrain.py --eval            # how the model ranks the simulator store's candidates
    python benchmarks/pretrain.py --tune --quick    # a smoke run: two tiny workloads, 8 trials

``--tune`` and ``--corpus`` append to the shipped logs (a workload already there is skipped:
resumable). Rebuilding the model from the shipped logs takes a minute.

PoCL's shipped records are GPU-style schedules (collected before PoCL got the CPU rules).
``tuning_logs/pretrain/unused/opencl-cpu-rules.jsonl.gz`` holds 1152 under today's CPU rules, its
threads pinned (``--tune --corpus --targets opencl``, 20 minutes); not trained on: a model trained with
them instead ranked the candidates the transfer benchmark measured from scratch on PoCL no better
(Spearman per workload, shipped -> with them: matmul .54 -> .51, conv2d .55 -> .62, dense .72 -> .75,
depthwise .50 -> .40, softmax .46 -> .17, layer norm -.06 -> -.23; with both sets, .41 on average
against .45), and retraining on any of these sets moved single workloads by 0.1-0.2.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from autosched.cost_model.pretrained import topi_instance
from autosched.tune import TuneOptions, Tuner

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tuning_logs" / "pretrain"
MODEL = ROOT / "autosched" / "cost_model" / "pretrained" / "default.json"
TARGETS = ("llvm-cpu", "llvm-cpu -mcpu=haswell", "opencl")

# (topi maker, arguments): records name them, so `autosched model train` rebuilds each workload from its
# log (autosched.cost_model.pretrained.resolve). Small shapes (the machine is shared), none of them a
# benchmarks/transfer.py shape.
TRAINING: dict[str, tuple[str, dict]] = {
    "matmul 128x192x96": ("matmul", {"M": 128, "N": 192, "K": 96}),
    "matmul 64x512x64": ("matmul", {"M": 64, "N": 512, "K": 64}),
    "matmul 256x64x128": ("matmul", {"M": 256, "N": 64, "K": 128}),
    "conv2d c16 14x14 f32 k3": ("conv2d", {"N": 1, "C": 16, "H": 14, "W": 14, "K": 32, "stride": 1}),
    "conv2d c32 7x7 f64 k1": (
        "conv2d",
        {"N": 1, "C": 32, "H": 7, "W": 7, "K": 64, "R": 1, "S": 1, "stride": 1, "padding": 0},
    ),
    "conv2d c8 28x28 f16 k3 s2": ("conv2d", {"N": 1, "C": 8, "H": 28, "W": 28, "K": 16, "stride": 2}),
    "dense 16x256x128": ("dense", {"M": 16, "N": 256, "K": 128}),
    "dense 64x128x256": ("dense", {"M": 64, "N": 128, "K": 256, "activation": None}),
    "depthwise c32 28x28": ("depthwise_conv2d", {"N": 1, "C": 32, "H": 28, "W": 28}),
    "softmax 64x256": ("softmax", {"shape": (64, 256)}),
    "softmax 8x1000": ("softmax", {"shape": (8, 1000)}),
    "layer_norm 32x384": ("layer_norm", {"shape": (32, 384)}),
    "max_pool c16 28x28": ("max_pool2d", {"N": 1, "C": 16, "H": 28, "W": 28}),
    "avg_pool c32 14x14": ("avg_pool2d", {"N": 1, "C": 32, "H": 14, "W": 14}),
}
QUICK = ("matmul 128x192x96", "softmax 64x256")
# Random schedules of mid sizes (none a transfer.py or simulator.py shape): the corpus.
CORPUS: dict[str, tuple[str, dict]] = {
    "matmul 512x512x512": ("matmul", {"M": 512, "N": 512, "K": 512}),
    "matmul 384x768x256": ("matmul", {"M": 384, "N": 768, "K": 256}),
    "matmul 2048x128x256": ("matmul", {"M": 2048, "N": 128, "K": 256}),
    "conv2d c128 28x28 f128 k3": ("conv2d", {"N": 1, "C": 128, "H": 28, "W": 28, "K": 128, "stride": 1}),
    "conv2d c32 56x56 f64 k3 s2": ("conv2d", {"N": 1, "C": 32, "H": 56, "W": 56, "K": 64, "stride": 2}),
    "conv2d c256 14x14 f128 k1": (
        "conv2d",
        {"N": 1, "C": 256, "H": 14, "W": 14, "K": 128, "R": 1, "S": 1, "stride": 1, "padding": 0},
    ),
    "dense 256x512x2048": ("dense", {"M": 256, "N": 512, "K": 2048}),
    "dense 64x768x768": ("dense", {"M": 64, "N": 768, "K": 768, "activation": None}),
    "depthwise c64 112x112": ("depthwise_conv2d", {"N": 1, "C": 64, "H": 112, "W": 112}),
    "depthwise c256 28x28": ("depthwise_conv2d", {"N": 1, "C": 256, "H": 28, "W": 28}),
    "depthwise c96 56x56 s2": ("depthwise_conv2d", {"N": 1, "C": 96, "H": 56, "W": 56, "stride": 2}),
    "softmax 1024x512": ("softmax", {"shape": (1024, 512)}),
    "softmax 128x4096": ("softmax", {"shape": (128, 4096)}),
    "layer_norm 512x1024": ("layer_norm", {"shape": (512, 1024)}),
    "layer_norm 128x3072": ("layer_norm", {"shape": (128, 3072)}),
    "max_pool c64 56x56": ("max_pool2d", {"N": 1, "C": 64, "H": 56, "W": 56}),
    "avg_pool c128 28x28": ("avg_pool2d", {"N": 1, "C": 128, "H": 28, "W": 28}),
}


def log_name(target: str) -> str:
    return target.replace(" -mcpu=", "-").replace(" ", "_") + ".jsonl.gz"


def tune_logs(names: list[str], targets: list[str], trials: int, seed: int, strategy: str = "evolutionary"
              ) -> None:  # fmt: skip
    """Append each target's records to tuning_logs/pretrain/<target>.jsonl (resumable), then gzip it:
    ``names`` tuned by ``strategy`` (``random``: the corpus's random schedules)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    for target in targets:
        log, packed = LOGS / log_name(target).removesuffix(".gz"), LOGS / log_name(target)
        if packed.exists() and not log.exists():  # add to the shipped records, not replace them
            with gzip.open(packed, "rb") as src, open(log, "wb") as dst:
                shutil.copyfileobj(src, dst)
        start = time.perf_counter()
        for name in names:
            inst = topi_instance(*{**TRAINING, **CORPUS}[name])
            opts = TuneOptions(trials=trials, batch_size=8, seed=seed, baseline=False, timeout_s=5.0,
                               resume=True, strategy=strategy, finalists=0)  # fmt: skip
            tuner = Tuner([inst], target, log, opts)
            (task,) = tuner.tasks
            tuner.load_previous(task)
            tuner.run()
            print(f"{target}: {name}: best {task.best_gflops:.1f} GFLOP/s after {task.trials} trials",
                  flush=True)  # fmt: skip
        with open(log, "rb") as src, gzip.open(packed, "wb") as dst:
            shutil.copyfileobj(src, dst)
        log.unlink()
        print(f"{target}: {time.perf_counter() - start:.0f} s -> {LOGS / log_name(target)}", flush=True)


def ranking(model: Any, store_path: Path, targets: list[str], workloads: list[str]
            ) -> dict[tuple[str, str], tuple[int, float]]:  # fmt: skip
    """(target, workload) -> (candidates, Spearman of ``model``'s scores against their measured
    times) for the random candidates of a simulator store (``benchmarks/stores``). Their workloads
    are the shapes of ``transfer.py`` and ``simulator.py``, none in the training logs: this is how the
    model ranks workloads it has never seen, measured on the store's chip. Spearman is nan under 10
    candidates (a store sampled by an older sketch matches few of today's)."""
    import tempfile
    from functools import partial

    import numpy as np
    import simulator as sim
    from simulator_store import Store, measure_key, newest

    from autosched.cost_model.features import candidate_features
    from autosched.hai.registry import get_adapter
    from autosched.target import parse_target

    store = Store(store_path)
    host = store_path.stem.split("_")[1]  # simulator_<cpu>_<cores>c: the chip its candidates are sized for
    args = argparse.Namespace(candidates=200, seed=0, sizes="full", threads=None, repeat=3, chip=host,
                              avx2_chip=None)  # fmt: skip
    out = {}
    with tempfile.TemporaryDirectory(prefix="autosched-eval-") as tmp:
        for target in targets:
            chip = get_adapter(parse_target(target)).info()
            chip_file = sim._chip_for(args, target, Path(tmp))
            for name in workloads:
                # the newest generated code's times the store holds (each ranks that machine's kernels)
                found = newest(partial(measure_key, name, "full", target, None, 3), store.measured)
                stored = found[1] if found else {}
                cands = [(f, stored[ir]["cost"]) for _, f, ir in
                         sim.sample_candidates(name, sim.FULL[name](), chip_file, args)
                         if stored.get(ir) and stored[ir]["cost"] is not None]  # fmt: skip
                rho = float("nan")
                if len(cands) >= 10:
                    scores = model.predict(np.stack([candidate_features(f, chip) for f, _ in cands]))
                    rho = sim.spearman(list(scores), [-c for _, c in cands])
                out[target, name] = (len(cands), rho)
    return out


def evaluate(model_path: str, store_name: str | None) -> int:
    """Print :func:`ranking` for every workload and target of the store."""
    import statistics
    from math import isnan

    import simulator as sim

    from autosched.cost_model.pretrained import PretrainedModel

    path = Path(store_name) if store_name else sim.default_store(False)
    if not path.exists():
        print(f"no simulator store {path}: run benchmarks/simulator.py on this host or pass --store",
              file=sys.stderr)  # fmt: skip
        return 2
    model = PretrainedModel.load(model_path)
    print(f"{model.describe()}\nranking the measured candidates of {path.name} (Spearman, goal: high)")
    rhos = []
    for (target, name), (n, rho) in ranking(model, path, list(sim.CHIPS), list(sim.FULL)).items():
        print(f"  {target:24s} {name:11s} {n:3d} candidates  " + ("skipped" if isnan(rho) else f"{rho:+.3f}"))
        rhos += [] if isnan(rho) else [rho]
    print(f"median {statistics.median(rhos):+.3f} over {len(rhos)}" if rhos else "nothing to rank")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tune", action="store_true", help="tune the training workloads first (writes the logs)")
    p.add_argument("--targets", nargs="+", default=list(TARGETS))
    p.add_argument("--corpus", action="store_true", help="measure the corpus's random schedules first")
    p.add_argument("--workloads", nargs="+", choices=sorted({**TRAINING, **CORPUS}),
                   help="default: all of --tune's or --corpus's")  # fmt: skip
    p.add_argument("--trials", type=int, help="a workload's trials (default: --tune 24, --corpus 48)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="two tiny workloads, 8 trials: a smoke run")
    p.add_argument("-o", "--output", default=str(MODEL), help="where the model is written")
    p.add_argument("--eval", action="store_true", help="rank the simulator store's candidates; train nothing")
    p.add_argument("--store", help="the simulator store --eval reads (default: this host's)")
    ns = p.parse_args(argv)
    if ns.eval:
        return evaluate(ns.output, ns.store)
    if ns.tune:
        names = list(QUICK) if ns.quick else [w for w in ns.workloads or TRAINING if w in TRAINING]
        tune_logs(names, ns.targets, 8 if ns.quick else ns.trials or 24, ns.seed)
    if ns.corpus:
        names = [w for w in ns.workloads or CORPUS if w in CORPUS]
        tune_logs(names, ns.targets, ns.trials or 48, ns.seed, strategy="random")
    from autosched.cost_model.pretrained import train_from_logs

    logs = sorted(LOGS.glob("*.jsonl.gz"))
    if not logs:
        print(f"no logs in {LOGS}: run with --tune first", file=sys.stderr)
        return 2
    model = train_from_logs(logs, ns.output)
    print(f"{ns.output}: {model.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
