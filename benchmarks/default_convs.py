"""The default (untuned) schedule of each MobileNetV2 / ResNet-18 conv kind, against another version of it.

Each kind (batch 1, 224x224 model shapes: conv + bias + activation, as the model's tasks are) is built
with :func:`autosched.search_space.default.default_schedule` and with the ``default.py`` of a git
revision (``--against``, default ``HEAD``), checked against numpy, and timed in turns (median of
``--repeat`` calls). CPU time of the calling thread (a shared core preempts a kernel of a few ms, which
then reads several times its time in wall time), so use one thread, pin it, and compare ratios:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/default_convs.py --threads 1
    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/default_convs.py --threads 1 \
        --kinds mb_project_7 --repeat 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from autosched import te, topi
from autosched.build import build
from autosched.te.reference import evaluate, random_inputs

ROOT = Path(__file__).resolve().parent.parent
# name: (C, H, K, kernel, stride, depthwise)
KINDS: dict[str, tuple[int, int, int, int, int, bool]] = {
    "mb_stem": (3, 224, 32, 3, 2, False),
    "mb_dw_s1_112": (32, 112, 32, 3, 1, True),
    "mb_dw_s2_112": (96, 112, 96, 3, 2, True),
    "mb_dw_s1_14": (384, 14, 384, 3, 1, True),
    "mb_expand_56": (24, 56, 144, 1, 1, False),
    "mb_expand_7": (160, 7, 960, 1, 1, False),
    "mb_project_56": (144, 56, 24, 1, 1, False),
    "mb_project_28": (192, 28, 32, 1, 1, False),
    "mb_project_14": (576, 14, 96, 1, 1, False),
    "mb_project_7": (960, 7, 160, 1, 1, False),
    "rn_stem": (3, 224, 64, 7, 2, False),
    "rn_3x3_56": (64, 56, 64, 3, 1, False),
    "rn_3x3_28": (128, 28, 128, 3, 1, False),
    "rn_3x3_14": (256, 14, 256, 3, 1, False),
    "rn_3x3_7": (512, 7, 512, 3, 1, False),
    "rn_down_28": (64, 56, 128, 1, 2, False),
    "rn_3x3_s2_28": (64, 56, 128, 3, 2, False),
}


def workload(kind: str) -> list[te.Tensor]:
    """The conv with its bias and ReLU, as a model task is: [data, weight, bias, output]."""
    c, h, k, r, stride, depthwise = KINDS[kind]
    x = te.placeholder((1, c, h, h), name="x")
    pad = r // 2
    if depthwise:
        w = te.placeholder((c, 1, r, r), name="w")
        y = topi.depthwise_conv2d(x, w, stride=stride, padding=pad)
    else:
        w = te.placeholder((k, c, r, r), name="w")
        y = topi.conv2d(x, w, stride=stride, padding=pad)
    b = te.placeholder((k,), name="b")
    out = te.compute(y.shape, lambda n, f, i, j: te.max(y[n, f, i, j] + b[f], 0.0), name="relu")
    return [x, w, b, out]


def load_default(rev: str) -> Any:
    """``default.py`` as it is at git revision ``rev``, imported beside the current one."""
    src = subprocess.run(
        ["git", "show", f"{rev}:autosched/search_space/default.py"], cwd=ROOT, check=True,
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "default_at_rev.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("autosched.search_space._default_at_rev", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cpu_medians(fns: list[Any], repeat: int) -> list[float]:
    """Median CPU seconds per call of each function, called in turns: on a shared core a kernel of a
    few ms is preempted (a 3 ms conv read 15 ms of wall time), its CPU time is not (one thread)."""
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()  # warm
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.thread_time()
            fn()
            times[i].append(time.thread_time() - t0)
    return [statistics.median(t) for t in times]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, some of {', '.join(KINDS)}")
    p.add_argument("--against", default="HEAD", help="git revision whose default.py is the baseline")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per contender")
    p.add_argument("--threads", type=int, default=None, help="threads (sets OMP/TVM_NUM_THREADS)")
    ns = p.parse_args(argv)
    if ns.threads:
        os.environ["OMP_NUM_THREADS"] = os.environ["TVM_NUM_THREADS"] = str(ns.threads)
    from autosched.search_space import default as now

    old = load_default(ns.against)
    cores = ns.threads or os.cpu_count() or 1
    from autosched.hai.registry import get_adapter
    from autosched.search_space.default import target_lanes

    lanes = target_lanes(get_adapter("llvm-cpu"))  # this machine's (8 on AVX2)
    print(f"{'kind':<15} {'MFLOP':>7} {ns.against + ' ms':>10} {'now ms':>9} {'speedup':>8} {'GFLOP/s':>8}")
    for kind in ns.kinds.split(","):
        args = workload(kind)
        inputs = random_inputs(args[:-1], seed=3)
        (expected,) = evaluate([args[-1]], dict(zip(args[:-1], inputs, strict=True)))
        runs = []
        for mod in (old, now):
            fn = build(mod.default_schedule(args[-1], cores=cores, lanes=lanes), args, "llvm-cpu")
            out = np.empty(args[-1].shape, "float32")
            fn(*inputs, out)
            np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4 * float(np.abs(expected).max()))
            runs.append(lambda fn=fn, out=out, inputs=inputs: fn(*inputs, out))
        times = cpu_medians(runs, ns.repeat)
        c, h, k, r, stride, dw = KINDS[kind]
        oh = (h + 2 * (r // 2) - r) // stride + 1
        mflop = 2 * k * oh * oh * (1 if dw else c) * r * r / 1e6
        print(
            f"{kind:<15} {mflop:>7.1f} {times[0] * 1e3:>10.3f} {times[1] * 1e3:>9.3f} "
            f"{times[0] / times[1]:>7.2f}x {mflop / 1e3 / times[1]:>8.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
