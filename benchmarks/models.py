"""End to end: the model set through autosched on default schedules, against onnxruntime and torch.

Per model: fused groups, tasks before and after deduplication, peak intermediate memory (the arena
of the memory plan, and without reuse), the latency of one inference for autosched, onnxruntime and
torch (timed in alternating blocks in this process, each on both cores), and autosched's largest
relative error against onnxruntime on fresh random inputs.

    python benchmarks/models.py --untuned               # the small set (ResNet at 64x64, 2-layer encoders)
    python benchmarks/models.py --untuned --full        # ResNet at 224x224, BERT 4 x 256 at seq 128
    python benchmarks/models.py --untuned resnet18 bert

Untuned speed is not the point (the tuned race is the next issue); correctness and coverage are.
Run it alone on the machine: anything else running makes the times meaningless.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
from export import MODELS, example_inputs, export_model  # benchmarks/models/export.py

from autosched.frontend.onnx import from_onnx
from autosched.graph.compiled import compile_model
from autosched.graph.tasks import extract_tasks
from autosched.measure.compare import interleaved_medians

THREADS = os.cpu_count() or 1


def _torch_runner(name: str, small: bool, inputs: dict[str, np.ndarray]):
    import torch

    torch.set_num_threads(THREADS)
    module = MODELS[name](small).module
    args = tuple(torch.from_numpy(a) for a in inputs.values())

    def run() -> None:
        with torch.no_grad():
            module(*args)

    return run


def _ort_session(path: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def print_tasks(tg) -> None:
    """MetaSchedule's task table: what tuning this model would spread its trials over."""
    print(f"  {'task':<58} {'pattern':<20} {'weight':>6} {'MFLOP':>9}")
    for t in tg.tasks:
        mflop = t.instance.flop_count() / 1e6
        print(f"  {t.name[:58]:<58} {t.pattern.name.lower():<20} {t.weight:>6} {mflop:>9.2f}")


def bench(name: str, small: bool, out_dir: Path, repeat: int, tasks: bool = False) -> dict[str, object]:
    path = export_model(name, out_dir, small=small)
    graph = from_onnx(path)
    tg = extract_tasks(graph)
    if tasks:
        print_tasks(tg)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every task is untuned here, by design
        model = compile_model(graph)
    compile_s = time.perf_counter() - t0
    inputs = example_inputs(name, small=small, seed=11)
    session = _ort_session(path)
    expected = session.run(None, inputs)
    got = list(model.run(inputs).values())
    err = max(float(np.abs(g - e).max() / np.abs(e).max()) for g, e in zip(got, expected, strict=True))
    contenders = [lambda: model.run(inputs), lambda: session.run(None, inputs)]
    try:
        contenders.append(_torch_runner(name, small, inputs))
    except ImportError:
        pass
    times = interleaved_medians(contenders, repeat=repeat, block=max(1, repeat // 4))
    mem = model.memory
    return {
        "model": f"{name}{' (small)' if small else ''}",
        "groups": len(tg.calls),
        "tasks": len(tg.tasks),
        "compile_s": compile_s,
        "arena_mib": mem["arena_bytes"] / 2**20,
        "no_reuse_mib": mem["total_bytes"] / 2**20,
        "autosched_ms": times[0] * 1e3,
        "onnxruntime_ms": times[1] * 1e3,
        "torch_ms": times[2] * 1e3 if len(times) > 2 else float("nan"),
        "max_rel_err": err,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--untuned", action="store_true", help="default schedules for every task (required)")
    p.add_argument("--full", action="store_true", help="full sizes (default: the small set)")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per contender")
    p.add_argument("--tasks", action="store_true", help="also list each model's tasks (weight, MFLOP)")
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"some of {', '.join(MODELS)}")
    ns = p.parse_args(argv)
    if not ns.untuned:
        p.error("only --untuned is implemented: tuning whole models is the next issue")
    unknown = [m for m in ns.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    header = (
        f"{'model':<22} {'groups':>6} {'tasks':>5} {'compile':>8} {'arena':>9} {'no reuse':>9} "
        f"{'autosched':>10} {'ort':>9} {'torch':>9} {'vs ort':>7} {'max rel err':>11}"
    )
    print(f"threads {THREADS}; groups = tasks before dedup, tasks after it; median ms per inference; MiB")
    print(header)
    with tempfile.TemporaryDirectory(prefix="autosched-models-") as tmp:
        for name in ns.models:
            r = bench(name, not ns.full, Path(tmp), ns.repeat, ns.tasks)
            print(
                f"{r['model']:<22} {r['groups']:>6} {r['tasks']:>5} {r['compile_s']:>7.1f}s "
                f"{r['arena_mib']:>9.2f} {r['no_reuse_mib']:>9.2f} {r['autosched_ms']:>10.2f} "
                f"{r['onnxruntime_ms']:>9.2f} {r['torch_ms']:>9.2f} "
                f"{r['onnxruntime_ms'] / r['autosched_ms']:>6.2f}x {r['max_rel_err']:>11.1e}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
