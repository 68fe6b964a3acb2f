"""Flash attention: autosched tuned against torch's scaled_dot_product_attention and numpy.

For each row (batch x heads, sequence, head size, causal, GQA) the attention workload of the op
library (``ops_attention``) is tuned for ``--trials`` candidates (0: the default schedule, which is
the flash rewrite with default blocks), then autosched, torch SDPA and numpy (where its L x L
buffers fit in memory) are timed in turns in this process on ``--threads`` threads. GFLOP/s counts
the two products (4 * BH * S * L * D), half of it when causal. Peak memory: the high-water mark of
a fresh process running one call, above what it held before the call (inputs included before).

    python benchmarks/attention.py                       # the issue's five rows, 64 trials each
    python benchmarks/attention.py --rows 0 --trials 8 --scale 4   # a quick smoke run
    python benchmarks/attention.py --mask-cost --threads 1         # masked vs plain flash, 4 x 512 x 64

Each tuning candidate is checked before it is timed: at sequence 512 against the full numpy reference
of the te program; above that at a few hundred whole output rows, stratified over (batch, head,
query) plus the first and last row, on fresh random non-zero inputs (``te/reference_sampled.py``: every
checked row is exact, so a kernel wrong on a fraction f of the rows passes with probability about
(1 - f) ** rows). A candidate whose first two repeats are over 1.5x the best so far is timed no more.
Each row prints its tuning time and how the candidates were checked (``sampled:N``: N output values);
the tuned kernel's whole output is then compared with torch's before anything is timed.

Run it alone on the machine: anything else running makes the times meaningless.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# (batch x heads, sequence, head size, causal, kv heads per row as a divisor of the query heads)
ROWS = [
    (16, 512, 64, False, 1),
    (16, 2048, 64, False, 1),
    (16, 2048, 64, True, 1),
    (8, 8192, 64, True, 1),
    (32, 2048, 128, True, 4),  # GQA 4:1
]
NUMPY_MAX_BYTES = 6 * 2**30  # numpy's scores, exps and probabilities (3 L x L buffers) must fit


def workload_args(row: tuple[int, int, int, bool, int], scale: int) -> dict[str, Any]:
    bh, seq, d, causal, group = row
    seq = max(16, seq // scale)
    args: dict[str, Any] = {"B": 1, "H": bh, "S": seq, "L": seq, "D": d, "causal": causal}
    if group > 1:
        args["Hkv"] = bh // group
    return args


def instance(args: dict[str, Any]) -> Any:
    from autosched.ops.workloads import ops_attention
    from autosched.te.workload import WorkloadInstance

    wl = ops_attention.workload
    full = {**wl.defaults, **args}
    return WorkloadInstance(wl.name, full, tuple(wl.function(**full)))


def inputs_for(inst: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(t.shape).astype("float32") for t in inst.tensors[:3]]


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    reps = q.shape[1] // k.shape[1]
    if reps > 1:
        k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1 / math.sqrt(q.shape[-1]))
    if causal:
        S, L = s.shape[-2:]
        s[..., np.arange(L)[None, :] > np.arange(S)[:, None] + (L - S)] = -np.inf
    s = np.exp(s - s.max(-1, keepdims=True), out=s)
    s /= s.sum(-1, keepdims=True)
    return s @ v


def contenders(inst: Any, trace: Any, threads: int, with_numpy: bool) -> dict[str, Callable[[], Any]]:
    import torch

    from autosched.build import build
    from autosched.search_space.schedule import replay

    torch.set_num_threads(threads)
    q, k, v = inputs_for(inst)
    causal = bool(inst.args["causal"])
    out = np.empty(inst.tensors[-1].shape, np.float32)
    fn = build(replay(inst.tensors[-1:], trace), list(inst.tensors), "llvm-cpu", name="attention")
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    gqa = k.shape[1] != q.shape[1]

    def run_torch() -> Any:
        with torch.inference_mode():
            return torch.nn.functional.scaled_dot_product_attention(
                tq, tk, tv, is_causal=causal, enable_gqa=gqa
            )

    def run_ours() -> np.ndarray:
        fn(q, k, v, out)
        return out

    found = {"autosched": run_ours, "torch": run_torch}
    if with_numpy:
        found["numpy"] = lambda: numpy_attention(q, k, v, causal)
    return found


def check_whole_output(fns: dict[str, Callable[[], Any]]) -> float:
    """The tuned kernel's whole output against torch's (tuning checked sampled rows only); returns the
    largest absolute difference, or raises when they disagree."""
    ours = np.array(fns["autosched"](), copy=True)
    theirs = fns["torch"]().numpy()
    worst = float(np.max(np.abs(ours - theirs)))
    if not np.allclose(ours, theirs, rtol=1e-4, atol=1e-5):
        raise RuntimeError(f"the tuned kernel disagrees with torch SDPA: max abs difference {worst:.3g}")
    return worst


def time_in_turns(fns: dict[str, Callable[[], Any]], rounds: int, pause_s: float = 0.3) -> dict[str, float]:
    """Median seconds per call; each round times every contender, warm, after a pause, over enough
    calls to last about 50 ms (a single short call mostly times waking the thread pool)."""
    calls = {}
    for name, fn in fns.items():
        fn()  # first calls: compile caches, thread pools, page faults
        t0 = time.perf_counter()
        fn()
        calls[name] = max(1, math.ceil(0.05 / max(time.perf_counter() - t0, 1e-6)))
    times: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(pause_s)
            if name != "numpy":
                fn()
            t0 = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            times[name].append((time.perf_counter() - t0) / calls[name])
    return {n: statistics.median(t) for n, t in times.items()}


def native_lanes() -> int:
    """float32 lanes of this machine's vectors (8 on AVX2, 16 on AVX-512): the default's tiles fit them."""
    from autosched.hai.registry import get_adapter
    from autosched.search_space.default import target_lanes

    return target_lanes(get_adapter("llvm-cpu"))


def tuned_trace(inst: Any, trials: int, threads: int, work: Path) -> tuple[Any, str, str]:
    """The best trace, what it is ("64 trials"), and how the candidates' outputs were checked."""
    from autosched.hai.registry import get_adapter
    from autosched.records.log import best_valid_record
    from autosched.records.record import fingerprint_of
    from autosched.search_space.default import default_schedule
    from autosched.target import parse_target
    from autosched.tune import TuneOptions, Tuner

    if trials <= 0:
        return (
            default_schedule(inst.tensors[-1:], cores=threads, lanes=native_lanes()).trace,
            "default schedule",
            "-",
        )
    log = work / f"attention_{abs(hash(inst.key)) % 10**8}.jsonl"
    Tuner([inst], "llvm-cpu", log, TuneOptions(trials=trials, num_threads=threads)).run()
    target = parse_target("llvm-cpu")
    best, _ = best_valid_record([log], inst, fingerprint_of(target, get_adapter(target).info()))
    if best is None:
        default = default_schedule(inst.tensors[-1:], cores=threads, lanes=native_lanes()).trace
        return default, "default schedule (no trial ran)", "-"
    return best.trace, f"{trials} trials", str(best.check)  # as build picks: a re-timed schedule first


def peak_memory(args: dict[str, Any], trace: Any, who: str, threads: int) -> int | None:
    """Bytes a fresh process gains over one call of ``who`` (its inputs already made)."""
    from autosched.search_space.trace import trace_to_json

    spec = json.dumps({"args": args, "trace": trace_to_json(trace), "who": who, "threads": threads})
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(
        [sys.executable, __file__, "--memory-probe", spec],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("peak ")]
    return int(lines[-1].split()[1]) if done.returncode == 0 and lines else None


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_probe(spec_text: str) -> int:
    from autosched.search_space.trace import trace_from_json

    spec = json.loads(spec_text)
    inst = instance(spec["args"])
    fns = contenders(inst, trace_from_json(spec["trace"]), spec["threads"], spec["who"] == "numpy")
    before = _rss_bytes()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM) to the current size
    fns[spec["who"]]()
    print(f"peak {max(0, _peak_bytes() - before)}")
    return 0


def _peak_bytes() -> int:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f}"


MASK_COST_ROW = (4, 512, 64)  # batch x heads, sequence, head size


def onnx_flash_kernel(bh: int, seq: int, d: int, mask_shape: tuple[int, ...]) -> Callable[[], Any]:
    """The default schedule of the flash task of one ONNX Attention with a bool mask of ``mask_shape``
    (a quarter of the keys hidden), ready to call on random inputs."""
    import onnx
    from onnx import TensorProto, helper

    from autosched.build import build
    from autosched.frontend.onnx import from_onnx
    from autosched.graph.tasks import extract_tasks
    from autosched.search_space.default import default_schedule

    shapes = {"Q": (1, bh, seq, d), "K": (1, bh, seq, d), "V": (1, bh, seq, d), "M": mask_shape}
    types = {n: TensorProto.BOOL if n == "M" else TensorProto.FLOAT for n in shapes}
    node = helper.make_node("Attention", list(shapes), ["Y"])
    graph = helper.make_graph(
        [node],
        "attention",
        [helper.make_tensor_value_info(n, types[n], s) for n, s in shapes.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shapes["Q"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    (task,) = extract_tasks(from_onnx(model)).tasks
    inst = task.instance
    fn = build(
        default_schedule(list(inst.outputs), lanes=native_lanes()),
        list(inst.tensors),
        "llvm-cpu",
        name="masked",
    )
    rng = np.random.default_rng(0)
    arrays = []
    for t in inst.tensors:
        if t.shape == mask_shape:
            arrays.append((rng.random(mask_shape) >= 0.25).astype(t.dtype))
        else:
            arrays.append(rng.standard_normal(t.shape).astype(t.dtype))
    return lambda: fn(*arrays)


def mask_cost(rounds: int, threads: int) -> int:
    """Plain flash attention against masked ones at MASK_COST_ROW, default schedules, timed in turns."""
    from autosched.build import build
    from autosched.search_space.default import default_schedule

    bh, seq, d = MASK_COST_ROW
    fns: dict[str, Callable[[], Any]] = {}
    for label, masked in (("plain", False), ("additive mask (B, H, S, L)", True)):
        inst = instance({"B": 1, "H": bh, "S": seq, "L": seq, "D": d, "masked": masked})
        fn = build(
            default_schedule(inst.tensors[-1:], cores=threads, lanes=native_lanes()),
            list(inst.tensors),
            "llvm-cpu",
        )
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(t.shape).astype("float32") for t in inst.tensors]
        if masked:
            arrays[3][rng.random(arrays[3].shape) < 0.25] = -np.inf
        fns[label] = lambda fn=fn, arrays=arrays: fn(*arrays)
    fns["ONNX bool key mask (1, 1, 1, L)"] = onnx_flash_kernel(bh, seq, d, (1, 1, 1, seq))
    fns["ONNX bool mask (S, L)"] = onnx_flash_kernel(bh, seq, d, (seq, seq))
    times = time_in_turns(fns, rounds, pause_s=0.05)
    base = times["plain"]
    print(f"flash attention {bh} x {seq} x {d}, default schedules, {threads} thread(s), {rounds} turns")
    for name, t in times.items():
        print(f"  {name:34s} {t * 1e3:8.3f} ms  {t / base:5.2f}x plain")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default=",".join(str(i) for i in range(len(ROWS))), help="row indices, e.g. 0,2")
    p.add_argument("--trials", type=int, default=64, help="tuning trials per row (0: the default schedule)")
    p.add_argument("--rounds", type=int, default=7, help="timed calls of each contender, in turns")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--scale", type=int, default=1, help="divide the sequence lengths (smoke runs)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory probes")
    p.add_argument("--mask-cost", action="store_true", help="time masked against plain flash attention only")
    p.add_argument("--memory-probe", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.memory_probe:
        return memory_probe(ns.memory_probe)
    os.environ.setdefault("OMP_NUM_THREADS", str(ns.threads))
    if ns.mask_cost:
        return mask_cost(ns.rounds, ns.threads)
    work = Path(tempfile.mkdtemp(prefix="autosched_attention_"))
    head = ["BH", "seq", "D", "causal", "GQA", "schedule", "autosched ms", "GFLOP/s", "torch ms", "vs torch",
            "numpy ms", "vs numpy", "MiB ours", "MiB torch", "MiB numpy"]  # fmt: skip
    table = []
    for index in [int(x) for x in ns.rows.split(",") if x.strip()]:
        row = ROWS[index]
        args = workload_args(row, ns.scale)
        inst = instance(args)
        bh, seq, d = args["H"], args["S"], args["D"]
        with_numpy = 3 * bh * seq * seq * 4 <= NUMPY_MAX_BYTES
        t0 = time.perf_counter()
        trace, how, check = tuned_trace(inst, ns.trials, ns.threads, work)
        tuned_s = time.perf_counter() - t0
        print(f"# row {index}: tuned in {tuned_s:.0f} s, outputs checked: {check}", flush=True)
        fns = contenders(inst, trace, ns.threads, with_numpy)
        diff = check_whole_output(fns)
        print(f"# row {index}: whole output within {diff:.2g} of torch SDPA", flush=True)
        times = time_in_turns(fns, ns.rounds)
        flops = 4 * bh * seq * seq * d / (2 if args["causal"] else 1)
        ours = times["autosched"]
        mem = {} if ns.no_memory else {w: peak_memory(args, trace, w, ns.threads) for w in times}
        gqa = f"{row[4]}:1" if row[4] > 1 else "-"
        line = [str(bh), str(seq), str(d), "yes" if args["causal"] else "no", gqa, how,
                f"{ours * 1e3:.2f}", f"{flops / ours / 1e9:.0f}"]  # fmt: skip
        for lib in ("torch", "numpy"):
            t = times.get(lib)
            line += [f"{t * 1e3:.2f}", f"{t / ours:.2f}x"] if t else ["-", "-"]
        line += [_mib(mem.get(w)) for w in ("autosched", "torch", "numpy")]
        table.append(line)
        print("# " + "  ".join(line), flush=True)
    widths = [max(len(x) for x in col) for col in zip(head, *table)]
    print()
    for line in [head, *table]:
        print("  ".join(x.rjust(w) for x, w in zip(line, widths)))
    print(f"vs X = X's time / autosched's (> 1: autosched is faster); {ns.threads} threads each, timed in "
          "turns in this process; GFLOP/s counts 4*BH*S*L*D, halved when causal")  # fmt: skip
    from autosched.measure import blas

    print(blas.describe())  # numpy's products run on its BLAS: say which kernel
    torch = sys.modules.get("torch")
    if torch is not None:  # SDPA's CPU kernel dispatches on this capability; its products go to torch's BLAS
        blas_of_torch = "MKL" if torch.backends.mkl.is_available() else "its own BLAS"
        print(f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}, "
              f"{blas_of_torch}, {torch.get_num_threads()} threads")  # fmt: skip
    warning = blas.forced_warning()
    if warning:
        print(f"warning: {warning}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
