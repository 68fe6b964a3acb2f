"""autosched vs TVM MetaSchedule at the same trial budget, on the same machine, in one run.

Eleven operators (``vs_tvm_ops.py``), each written in both DSLs with the same math and shapes:

- the four workloads of ``search_efficiency.py``: matmul 1024^3; conv2d NCHW 1x64x56x56 -> 64, 3x3,
  stride 1, pad 1; softmax 4096x1024; dense 512x1024x1024 + bias + relu;
- ``sumsq``: sqrt of the sum of squares of a whole 1024x1024 tensor (one output value);
- ``stencil``: a five-point stencil over the interior of a 2048x2048 grid (0.5 x centre + 0.125 x 4 near);
- ``layer_norm``: over the last axis of 4096x1024, with gamma and beta;
- ``max_pool``: 3x3, stride 2, pad 1, NHWC 1x112x112x64 -> 1x56x56x64;
- ``conv1d``: NCW 1x64x8192 -> 64 channels, kernel 3, stride 2, pad 1;
- ``conv2d_transpose``: NCHW 1x64x28x28 -> 64 channels, 4x4 kernel, stride 2, pad 1 (-> 56x56);
- ``capsule_conv2d``: NHWIJC 1x16x16 of 32 4x4 capsules -> 32, 3x3, stride 2, pad 1 (Ansor's capsule conv).

For each operator both tuners run (64 trials by default; MetaSchedule in this run, on this machine), then
both final bests are built here and their outputs checked against each other and a numpy reference on
random inputs, and then timed natively in turns in this process: autosched's built library through its
prepared call (``compare.raw_call``), TVM's through its ``time_evaluator``; the median of the samples.
The table gives milliseconds, GFLOP/s (GB/s and the fraction of the measured memory bandwidth for the
memory-bound four: bytes = inputs read once + outputs written once), the ratio autosched / MetaSchedule
speed (> 1: autosched is faster; the median of the ratios of neighbouring blocks, round by round) and
each tool's tuning wall time. The full suite takes about an hour here.
Run it alone on the machine: with other processes on the two cores, a two-thread kernel's parallel
regions stalled for milliseconds (a 3 us matmul read 10-20 ms), in the tuner's runner as here.

Needs ``pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost psutil cloudpickle
tornado`` (ffi 0.1.15.post2 segfaults inside MetaSchedule); without TVM it says so and exits 0.
Exit status 1 when an autosched kernel is missing or disagrees with the reference.

    TVM_NUM_THREADS=2 python benchmarks/vs_tvm.py                 # all eleven, 64 trials
    python benchmarks/vs_tvm.py --ops sumsq,max_pool --trials 64,256
    python benchmarks/vs_tvm.py --quick                           # tiny sizes, 8 trials: checks the script
    TVM_NUM_THREADS=1 python benchmarks/vs_tvm.py --ops capsule_conv2d --threads 1 --show-traces
    python benchmarks/vs_tvm.py --ops layer_norm,conv2d_transpose --tvm-topi   # against TVM's own topi
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from models_tvm import send_by_value, tvm_build  # this directory
from vs_tvm_ops import OPS, Op, nbytes

from autosched.hai.timing import TimingPolicy, time_calls
from autosched.measure.compare import Race
from autosched.te.workload import WorkloadInstance

INSTALL = (
    "pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost psutil cloudpickle tornado"
)


def tune_autosched(op: Op, s: tuple, budget: int, args: argparse.Namespace, work: Path) -> dict:
    """autosched's tuner on ``op``: its best trace and wall time."""
    from autosched.tune import TuneOptions, Tuner

    inst = WorkloadInstance(op.name, {}, tuple(op.ours(s)))
    opts = TuneOptions(
        trials=budget, batch_size=args.batch_size, seed=args.seed, baseline=False, num_threads=args.cores
    )
    start = time.perf_counter()
    (task,) = Tuner([inst], "llvm-cpu", work / f"autosched_{op.name}_{budget}.jsonl", opts).run()
    return {"inst": inst, "trace": task.best_trace, "wall": time.perf_counter() - start}


def tune_tvm(op: Op, s: tuple, budget: int, args: argparse.Namespace, work: Path) -> dict:
    """MetaSchedule on ``op``: its best schedule compiled (None if nothing built) and the wall time."""
    import tvm
    from tvm import te

    try:
        from tvm.s_tir import meta_schedule as ms
    except ImportError:  # older TVM
        from tvm import meta_schedule as ms  # type: ignore[no-redef]

    send_by_value()  # tvm_build reaches the build workers
    tensors = (op.tvm_topi if args.tvm_topi and op.tvm_topi else op.theirs)(s)
    target = tvm.target.Target({"kind": "llvm", "mcpu": args.mcpu, "num-cores": args.cores})
    mod = tvm.IRModule({"main": te.create_prim_func(tensors)})
    start = time.perf_counter()
    database = ms.tir_integration.tune_tir(
        mod=mod, target=target, work_dir=str(work / f"tvm_{op.name}_{budget}"), max_trials_global=budget,
        num_trials_per_iter=min(64, budget), seed=args.seed, num_tuning_cores=args.cores,
        strategy="replay-trace" if args.quick else "evolutionary",  # quick: skip its search's minute
        builder=ms.builder.LocalBuilder(timeout_sec=args.tvm_build_timeout, f_build=tvm_build),
    )  # fmt: skip
    sch = ms.tir_integration.compile_tir(database, mod, target)  # the best schedule in the database
    wall = time.perf_counter() - start
    if sch is None:
        return {"lib": None, "wall": wall}
    if args.show_traces:
        print(f"# MetaSchedule's best {op.name} at {budget} trials:\n{sch.trace}", flush=True)
    build = getattr(tvm, "compile", None) or tvm.build
    lib = build(sch.mod, target=target)
    return {"lib": lib.jit() if hasattr(lib, "jit") else lib, "wall": wall}  # TVM >= 0.20: JIT it first


def prepare_ours(
    inst: WorkloadInstance, trace: Any, inputs: list[np.ndarray], threads: int
) -> tuple[Callable, list]:
    """The best trace built as a library running on ``threads`` threads, as it was tuned (libgomp may
    have read OMP_NUM_THREADS before this script set it: a --threads 1 run timed ours on both cores
    against TVM on one); (its prepared call, its outputs after one call)."""
    from autosched.measure.compare import raw_call
    from autosched.measure.isolated import build_isolated
    from autosched.measure.runner import aligned_empty
    from autosched.testing import split_args

    _, outs = split_args(list(inst.tensors))
    fn = build_isolated(list(inst.tensors), trace, f"llvm-cpu -num-threads={threads}", name="tuned")
    out_arrays = [aligned_empty(t.shape, t.dtype) for t in outs]
    for a in out_arrays:
        a.fill(np.nan)  # an element the kernel skips cannot pass the check
    fn(*inputs, *out_arrays)
    return raw_call(fn, [*inputs, *out_arrays]), out_arrays


def shared_tensors(arrays: list[np.ndarray]) -> list:
    """TVM tensors on the memory of ``arrays`` (DLPack, no copy): TVM reads and writes what ours does."""
    import tvm

    return [tvm.runtime.from_dlpack(a) for a in arrays]


def prepare_tvm(lib: Any, inputs: list[np.ndarray], out_shapes: list[tuple]) -> tuple[Any, list, list]:
    """(the compiled function, its argument tensors, its outputs after one call as numpy)."""
    import tvm

    dev = tvm.cpu(0)
    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    outs = [np.full(shape, np.nan, np.float32) for shape in out_shapes]
    tensors = [make(a, dev) for a in [*inputs, *outs]]
    lib["main"](*tensors)
    return lib, tensors, [t.numpy() for t in tensors[len(inputs) :]]


def agree(got: np.ndarray, want: np.ndarray) -> str:
    """'' when ``got`` matches ``want`` within float32 tolerance, else what differs."""
    from autosched.testing import tolerance

    rtol, atol = tolerance("float32", want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if np.allclose(got, want, rtol=rtol, atol=atol):
        return ""
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
    return (
        f"{int(bad.sum())} of {got.size} elements differ (max abs error {np.nanmax(np.abs(got - want)):.3g})"
    )


def time_in_turns(
    ours: Callable[[], Any], lib: Any, tensors: list, samples: int, block: int = 5, pause_s: float = 0.3
) -> tuple[float, float, float]:
    """Median seconds per call of each contender, timed in alternating blocks of ``block`` samples, and
    the median over rounds of each round's ratio (TVM's block median / ours: ``compare.Race.ratio``).

    A sample lasts at least 1 ms (enough calls averaged), as the runner's and time_evaluator's do. Each
    block follows a pause (the other's spinning threads stop) and 0.3 s of warm-up calls.
    """
    import tvm

    func, dev = lib["main"], tvm.cpu(0)
    timer = lib.time_evaluator("main", dev, number=1, repeat=block, min_repeat_ms=1)
    policy = TimingPolicy(repeat=block, warmup=0, min_repeat_s=1e-3)
    blocks: tuple[list, list] = ([], [])
    for _ in range(max(1, samples // block)):
        for which in (0, 1):
            time.sleep(pause_s)
            call = ours if which == 0 else (lambda: func(*tensors))
            until = time.perf_counter() + 0.3
            while time.perf_counter() < until:
                call()
            if which == 0:
                blocks[0].append(tuple(time_calls(ours, policy)))
            else:
                blocks[1].append(tuple(float(x) for x in timer(*tensors).results))
    done = Race((tuple(blocks[0]), tuple(blocks[1])))
    return done.median(0), done.median(1), done.ratio(1, 0)


def compare_op(op: Op, s: tuple, budget: int, args: argparse.Namespace, work: Path, bw: float) -> dict:
    """Tune both, check both, time both: one row of the table (``error`` names what went wrong)."""
    row: dict[str, Any] = {"op": op.name, "trials": budget}
    try:
        mine = tune_autosched(op, s, budget, args, work)
    except Exception as e:  # a crash in one operator's tuning is reported, and the suite goes on
        traceback.print_exc()
        return {**row, "error": f"autosched tuning raised {type(e).__name__}: {e}"}
    row["ours_wall"] = mine["wall"]
    if args.show_traces and mine["trace"] is not None:
        from autosched.search_space.trace import trace_from_json

        steps = mine["trace"] if isinstance(mine["trace"], tuple) else trace_from_json(mine["trace"])
        print(f"# autosched's best {op.name} at {budget} trials:", *(st.to_code() for st in steps), sep="\n")
    try:
        theirs = tune_tvm(op, s, budget, args, work)
    except Exception as e:
        traceback.print_exc()
        theirs = {"lib": None, "wall": math.nan, "error": f"{type(e).__name__}: {e}"}
    row["tvm_wall"] = theirs["wall"]
    if mine["trace"] is None:
        return {**row, "error": "autosched found no valid kernel"}
    inst = mine["inst"]
    rng = np.random.default_rng(args.seed)
    from autosched.measure.runner import aligned_empty
    from autosched.testing import split_args

    ins, outs = split_args(list(inst.tensors))
    inputs = []
    for t in ins:  # 64-byte aligned, as TVM allocates its tensors and as the runner times
        a = aligned_empty(t.shape, t.dtype)
        a[...] = rng.standard_normal(t.shape)
        inputs.append(a)
    want = op.reference(s, *inputs)
    call, got = prepare_ours(inst, mine["trace"], inputs, args.cores)
    problem = agree(got[-1], want)
    if problem:
        return {**row, "error": f"autosched's best kernel is wrong: {problem}"}
    if theirs["lib"] is None:  # autosched's time alone, nothing to race
        ours_s = statistics.median(time_calls(call, TimingPolicy(repeat=args.repeat)))
        return {**row, "tvm_error": theirs.get("error", "MetaSchedule found no schedule"), "ours_s": ours_s}
    lib, _, tvm_out = prepare_tvm(theirs["lib"], inputs, [t.shape for t in outs])
    problem = agree(tvm_out[-1], want) or agree(got[-1], tvm_out[-1])
    if problem:
        return {**row, "tvm_error": f"MetaSchedule's best kernel is wrong: {problem}"}
    # Timed on the same buffers: a memory-bound kernel's speed depends on where its pages fall in the
    # caches, and separate copies made max pool a coin toss between the tools (0.70-1.37x over runs).
    ours_s, tvm_s, ratio = time_in_turns(call, lib, shared_tensors([*inputs, *got]), args.repeat)
    flops, moved = inst.flop_count(), nbytes(list(inst.tensors))
    row.update(ours_s=ours_s, tvm_s=tvm_s, ratio=ratio, gflops=(flops / ours_s / 1e9, flops / tvm_s / 1e9))
    if op.memory_bound:
        row["gbs"] = (moved / ours_s / 1e9, moved / tvm_s / 1e9)
        if bw > 0:  # an estimated chip (AUTOSCHED_MEASURE_CHIP=0) may not know its bandwidth
            row["bw"] = tuple(x / bw for x in row["gbs"])
    return row


def cells(r: dict) -> list[str]:
    walls = [f"{r[k]:.0f}" if isinstance(r.get(k), float) and math.isfinite(r[k]) else "-"
             for k in ("ours_wall", "tvm_wall")]  # fmt: skip
    head = [r["op"], str(r["trials"])]
    if "ratio" not in r:
        why = r.get("error") or r.get("tvm_error", "")
        ours = f"{r['ours_s'] * 1e3:.4g}" if r.get("ours_s") else "-"
        return [*head, ours, "-", "-", "-", "-", "-", *walls, why]
    speed, unit = (r["gbs"], "GB/s") if "gbs" in r else (r["gflops"], "GFLOP/s")
    bw = [f"{100 * x:.0f}%" for x in r["bw"]] if "bw" in r else ["-", "-"]
    times = [f"{r['ours_s'] * 1e3:.4g}", f"{r['tvm_s'] * 1e3:.4g}"]
    return [
        *head,
        *times,
        f"{speed[0]:.1f} / {speed[1]:.1f} {unit}",
        f"{r['ratio']:.2f}",
        *bw,
        *walls,
        r.get("tvm_error", ""),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    quick = "tiny sizes, 8 trials, MetaSchedule's random search: checks the whole script"
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument(
        "--ops", "--workloads", dest="ops", default=",".join(OPS), help=f"subset of {','.join(OPS)}"
    )
    p.add_argument("--trials", help="comma-separated budgets (default 64; quick 8)")
    p.add_argument(
        "--batch-size", type=int, help="autosched candidates per round (TVM: 64; default: the tuner's)"
    )
    p.add_argument("--mcpu", help="LLVM cpu for TVM's target (default: the one autosched compiles for)")
    p.add_argument(
        "--tvm-build-timeout", type=float, default=30.0,
        help="seconds MetaSchedule may spend building one candidate (its default, 30; on a slow day "
        "every dense build here ran past it and no trial finished)",
    )  # fmt: skip
    p.add_argument(
        "--tvm-topi", action="store_true",
        help="MetaSchedule tunes TVM's own topi formulation where it differs from autosched's (layer norm's "
        "one-pass variance, the transposed conv's zero-inserted input) instead of the same math",
    )  # fmt: skip
    p.add_argument(
        "--cores", "--threads", type=int, default=os.cpu_count() or 1,
        help="threads of both tools, tuning and timing (default: every core; 1 to compare on a busy machine)",
    )  # fmt: skip
    p.add_argument(
        "--show-traces", action="store_true",
        help="print both tools' best schedules (autosched's trace, MetaSchedule's) to compare them",
    )  # fmt: skip
    p.add_argument("--repeat", type=int, default=40, help="timed samples of each contender (>= 1 ms each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", help="keep logs and TVM databases here (default: a temporary directory)")
    args = p.parse_args(argv)
    names = [w.strip() for w in args.ops.split(",") if w.strip()]
    for name in names:
        if name not in OPS:
            p.error(f"unknown operator {name!r}; known: {', '.join(OPS)}")
    try:
        import tvm  # noqa: F401
    except ImportError:
        print(f"vs_tvm: apache-tvm is not installed, nothing to compare; install it with\n  {INSTALL}")
        return 0
    for var in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):  # both tools' thread pools, before either starts
        if var not in os.environ:
            print(f"note: {var} was not set; set to {args.cores}")
            os.environ[var] = str(args.cores)
    from autosched.hai.chip_facts import measured_info
    from autosched.hai.registry import get_adapter
    from autosched.tune import TuneOptions

    args.batch_size = args.batch_size or TuneOptions.batch_size
    chip = measured_info(get_adapter("llvm-cpu"))
    args.mcpu = args.mcpu or chip.arch
    bw = chip.bandwidth_gbs
    facts = chip.extra.get("facts")
    print(f"# {chip.name}, {args.cores} cores; memory bandwidth {bw:.1f} GB/s ({facts}); mcpu={args.mcpu}")
    budgets = [int(x) for x in (args.trials or ("8" if args.quick else "64")).split(",")]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="autosched_vs_tvm_"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        op = OPS[name]
        shape = op.quick if args.quick else op.full
        for budget in budgets:
            print(f"# {name} {shape}: tuning both at {budget} trials", flush=True)
            rows.append(compare_op(op, shape, budget, args, work, bw))
            print("# " + "  ".join(x for x in cells(rows[-1]) if x), flush=True)
    head = ["operator", "trials", "autosched ms", "TVM ms", "autosched / TVM speed", "ratio", "ours %bw",
            "TVM %bw", "ours tune s", "TVM tune s", "note"]  # fmt: skip
    table = [cells(r) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *table)]
    print()
    for line in [head, *table]:
        print("  ".join(x.rjust(w) for x, w in zip(line[:-1], widths)), line[-1])
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        gmean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"geometric mean ratio {gmean:.2f} over {len(ratios)}; ratio = MetaSchedule time / autosched "
              "time (> 1: autosched is faster), the median of the round-by-round ratios; "
              f"%bw = GB/s / the measured {bw:.1f} GB/s")  # fmt: skip
    from autosched.measure import blas

    print(blas.describe())  # numpy does not race here; said so that every benchmark names its BLAS
    failed = [r for r in rows if "error" in r]
    for r in failed:
        print(f"error: {r['op']} at {r['trials']} trials: {r['error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
