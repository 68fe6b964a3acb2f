"""The shipped pretrained cost model: tune training workloads on several chips, then train on their logs.

The training workloads are deliberately *not* the shapes of ``benchmarks/transfer.py`` (that benchmark
measures the model on workloads it has never seen). Two steps:

    python benchmarks/pretrain.py --tune            # write tuning_logs/pretrain/<target>.jsonl.gz
    python benchmarks/pretrain.py                   # rebuild autosched/cost_model/pretrained/default.json
    python benchmarks/pretrain.py --tune --quick    # a smoke run: two tiny workloads, 8 trials

``--tune`` appends to the shipped logs (a workload already tuned there is skipped: resumable); the
shipped logs took about 25 minutes (three targets at once on two shared cores, 24 trials a workload).
Rebuilding the model from the shipped logs takes seconds.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

from autosched.cost_model.pretrained import topi_instance
from autosched.tune import TuneOptions, Tuner

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


def log_name(target: str) -> str:
    return target.replace(" -mcpu=", "-").replace(" ", "_") + ".jsonl.gz"


def tune_logs(names: list[str], targets: list[str], trials: int, seed: int) -> None:
    """Append each target's records to tuning_logs/pretrain/<target>.jsonl (resumable), then gzip it."""
    LOGS.mkdir(parents=True, exist_ok=True)
    for target in targets:
        log, packed = LOGS / log_name(target).removesuffix(".gz"), LOGS / log_name(target)
        if packed.exists() and not log.exists():  # add to the shipped records, not replace them
            with gzip.open(packed, "rb") as src, open(log, "wb") as dst:
                shutil.copyfileobj(src, dst)
        start = time.perf_counter()
        for name in names:
            inst = topi_instance(*TRAINING[name])
            opts = TuneOptions(
                trials=trials, batch_size=8, seed=seed, baseline=False, timeout_s=5.0, resume=True
            )
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tune", action="store_true", help="tune the training workloads first (writes the logs)")
    p.add_argument("--targets", nargs="+", default=list(TARGETS))
    p.add_argument("--workloads", nargs="+", choices=sorted(TRAINING), help="default: all")
    p.add_argument("--trials", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="two tiny workloads, 8 trials: a smoke run")
    p.add_argument("-o", "--output", default=str(MODEL), help="where the model is written")
    ns = p.parse_args(argv)
    if ns.tune:
        names = list(QUICK) if ns.quick else (ns.workloads or list(TRAINING))
        tune_logs(names, ns.targets, 8 if ns.quick else ns.trials, ns.seed)
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
