"""End to end: the model set through autosched, untuned or tuned, against onnxruntime and torch.

``--untuned``, per model: fused groups, tasks before and after deduplication, peak intermediate memory
(the arena of the memory plan, and without reuse), the latency of one inference for autosched,
onnxruntime and torch (timed in alternating blocks in this process, each on both cores), and
autosched's largest relative error against onnxruntime on fresh random inputs.

``--trials 200,500,2000`` (issue 12), per model and budget: the model tuned as ``autosched tune
model.onnx`` does (each budget continues the previous one's log), then the compiled model, onnxruntime
and torch timed in turns; the ratio to onnxruntime, tuning wall time so far, trials until the
estimated latency was within 90% of its final value, and the tasks holding the model back (their
share of the estimated latency). With apache-tvm installed (or ``--tvm``), TVM MetaSchedule tunes the
same ONNX file through Relax to the same budgets and its compiled model joins the race, checked against
onnxruntime first (``models_tvm.py``); ``--no-tvm`` leaves it out (it takes several times autosched's
tuning time).

    python benchmarks/models.py --untuned               # the small set (ResNet at 64x64, 2-layer encoders)
    python benchmarks/models.py --untuned --full        # ResNet at 224x224, BERT 4 x 256 at seq 128
    python benchmarks/models.py --untuned resnet18 bert
    python benchmarks/models.py --trials 200,500,2000 --models resnet18,mobilenet_v2,bert   # full sizes
    python benchmarks/models.py --trials 48 --small     # a quick check that it works
    python benchmarks/models.py --trials 96 --models resnet18 --threads 1 --per-task   # where it loses

``--per-task``: after each budget, each task's weighted best (from the log) against onnxruntime's
profiled kernel time for the same nodes (``autosched.graph.ort_profile``), its ratio and its share of
the end-to-end gap; ``--retime`` also races each task's best kernel against onnxruntime on the same
nodes cut out of the model (``autosched.graph.task_race``: CPU time at 1 thread, which a shared core
does not inflate). ``--in-model``: each task of the compiled model timed in place, in the model's
order (weights cold, inputs just written) against the same call repeated (warm, as the tuner timed
it): the part of the end-to-end time the tuner's figures leave out. ``--threads 1`` tunes, times
and profiles everything on one thread (for a shared machine: pin it, e.g. ``taskset -c 1``).

Run it alone on the machine: anything else running makes the times meaningless. Full sizes at 2000
trials take hours.
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
from models_tvm import RelaxModel, tvm_installed  # this directory; TVM itself is imported only when used

from autosched.frontend.onnx import from_onnx
from autosched.graph.compiled import as_graph, compile_model
from autosched.graph.ort_profile import per_task_comparison, print_per_task
from autosched.graph.task_race import in_model, print_in_model, print_races, race_tasks
from autosched.graph.tasks import extract_tasks
from autosched.graph.tune_model import (
    ModelTuner,
    compare_with_onnxruntime,
    ort_session,
    random_model_inputs,
)
from autosched.measure.compare import interleaved_medians
from autosched.tune import TuneOptions

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
    session = ort_session(path, THREADS)
    expected = session.run(None, inputs)
    got = list(model.run(inputs).values())
    err = max(float(np.abs(g - e).max() / np.abs(e).max()) for g, e in zip(got, expected, strict=True))
    contenders = [lambda: model.run(inputs), lambda: session.run(None, inputs)]
    try:
        contenders.append(_torch_runner(name, small, inputs))
    except ImportError:
        pass
    times = interleaved_medians(contenders, repeat=repeat, block=max(1, min(5, repeat // 4)))
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


def trials_to_90(curve: list[tuple[int, float]]) -> int | None:
    """Trials after which the estimated latency was first within 90% of its final value (speed >= 0.9x)."""
    if not curve:
        return None
    final = curve[-1][1]
    return next(trials for trials, latency in curve if latency * 0.9 <= final)


def bench_tuned(
    name: str,
    small: bool,
    out_dir: Path,
    budgets: list[int],
    repeat: int,
    batch: int,
    per_task: bool = False,
    retime: bool = False,
    in_place: bool = False,
    tvm: bool = False,
):
    """Yield one row per budget: the model tuned that far (continuing its log), then raced."""
    path = export_model(name, out_dir, small=small)
    stem = f"{name}{'_small' if small else ''}"
    relax, relax_note = _relax_model(path, out_dir / f"tvm_{stem}") if tvm else (None, None)
    log = out_dir / f"{stem}.jsonl"
    transform = as_graph  # what ModelTuner and compile_model do to the graph: conv and GEMM weight layouts
    model = path
    curve: list[tuple[int, float]] = []  # (trials so far, estimated latency) once every task has a result
    wall = 0.0
    torch_make = {"torch": lambda inputs: _torch_runner(name, small, inputs)}  # torch exported the model
    for budget in budgets:
        threads = THREADS if THREADS != os.cpu_count() else None
        opts = TuneOptions(  # caches evicted before each timed repeat, as `autosched tune model.onnx` does
            trials=budget, batch_size=batch, resume=True, seed=0, num_threads=threads, flush_cache=True
        )
        holder: list[ModelTuner] = []

        def on_event(event: str, _task, holder=holder) -> None:
            if event == "batch" and holder:
                latency, missing = holder[0].latency()
                if not missing:
                    curve.append((sum(t.previous + t.trials for t in holder[0].states), latency))

        mt = ModelTuner(model, "llvm-cpu", log, opts, reporter=on_event)
        holder.append(mt)
        mt.load_previous()
        t0 = time.perf_counter()
        mt.run()
        wall += time.perf_counter() - t0
        done = sum(t.previous + t.trials for t in mt.states)  # the log's trials: a rerun counts them too
        others, tvm_note = dict(torch_make), relax_note
        if relax is not None:
            tvm_note = _add_tvm(others, relax, budget, path, random_model_inputs(mt.graph, 5)) or relax_note
        race = compare_with_onnxruntime(
            path, graph=mt.graph, log=log, repeat=repeat, others=others, threads=THREADS
        )
        if per_task:
            best = {t.inst.key: t.best_cost for t in mt.states}
            rows, rest = per_task_comparison(
                path, best, threads=THREADS, runs=max(20, repeat), transform=transform
            )
            print(f"{name}, {done} trials: per task, ours (the log's best x weight) vs ort's profile")
            print_per_task(rows, rest)
            if retime:  # the log's wall-clock bests against CPU time in turns: see graph/task_race.py
                traces = {t.inst.key: t.best_trace for t in mt.states if t.best_trace is not None}
                print(f"{name}, {done} trials: each task's best re-timed against ort on its nodes")
                print_races(race_tasks(path, traces, threads=THREADS, transform=transform))
        if in_place:  # the compiled model's steps where they run, against the same calls warm
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = compile_model(mt.graph, log=log)
            rows = in_model(
                compiled, random_model_inputs(mt.graph, 5), rounds=max(5, repeat // 2), threads=THREADS
            )
            print(f"{name}, {done} trials: each task in the model (in order, once) vs warm (repeated)")
            print_in_model(rows)
        yield {
            "model": f"{name}{' (small)' if small else ''}",
            "trials": done,
            "tuned": f"{race.tuned_tasks}/{race.total_tasks}",
            "autosched_ms": race.autosched_s * 1e3,
            "onnxruntime_ms": (race.onnxruntime_s or float("nan")) * 1e3,
            "torch_ms": race.others.get("torch", float("nan")) * 1e3,
            "vs_ort": race.speedup or float("nan"),
            "wall_s": wall,
            "to_90": trials_to_90(curve),
            "err": race.max_rel_err,
            "holding_back": ", ".join(f"{n} {share:.0%}" for n, share in mt.shares()[:3]) or "-",
            "tvm_ms": race.others.get("tvm", float("nan")) * 1e3,
            "tvm_wall_s": relax.wall_s if relax is not None else float("nan"),
            "tvm_note": tvm_note,
        }


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}"


def _relax_model(path: Path, work_dir: Path) -> tuple[RelaxModel | None, str | None]:
    """The model under TVM MetaSchedule (models_tvm.py), or why TVM could not import it."""
    try:
        relax = RelaxModel(path, work_dir, THREADS)
        return relax, relax.note
    except Exception as e:  # TVM failing on a model is a figure of the table, not the end of the run
        return None, f"TVM could not import the model: {_why(e)}"


def _add_tvm(others: dict, relax: RelaxModel, budget: int, path: Path, inputs: dict[str, np.ndarray]):
    """Tune TVM to ``budget`` and add its compiled model to ``others`` (the race's ``name -> make(inputs)``)
    once it matches onnxruntime on ``inputs``; what went wrong otherwise, for the table."""
    from autosched.graph.tune_model import MATCH_RTOL

    try:
        relax.tune_to(budget)
        err = relax.max_rel_err(inputs, ort_session(path, THREADS).run(None, inputs))
    except Exception as e:
        return f"TVM: {_why(e)}"
    if not err <= MATCH_RTOL:  # NaN fails too
        return f"TVM's output differs from onnxruntime's by {err:.1e}: not timed"
    others["tvm"] = relax.runner
    return None


def _tvm_cells(r: dict) -> str:
    """TVM's time, autosched's speed relative to it (> 1: autosched is faster), TVM's tuning wall time."""
    ms, wall = r["tvm_ms"], r["tvm_wall_s"]
    ratio = ms / r["autosched_ms"]  # NaN when TVM was not timed
    return f" {ms:>8.2f} {ratio:>6.2f}x {wall:>9.0f}s"


def main_tuned(ns: argparse.Namespace) -> int:
    budgets = sorted({int(b) for b in ns.trials.split(",")})
    models = ns.models_list.split(",") if ns.models_list else ["resnet18", "mobilenet_v2", "bert"]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not budgets or budgets[0] < 1:
        raise SystemExit(f"--models: some of {', '.join(MODELS)}; --trials: positive numbers, e.g. 200,500")
    tvm = ns.tvm if ns.tvm is not None else tvm_installed()
    tvm_head = f" {'tvm':>8} {'vs tvm':>7} {'tvm tuning':>10}" if tvm else ""
    print(
        f"threads {THREADS}; median ms per inference, autosched (the compiled model with the log's best "
        "records), onnxruntime and torch timed in turns; vs ort > 1: autosched is faster; trials to 90%: "
        "until the estimated latency came within 90% of its final value"
    )
    print(
        f"{'model':<20} {'trials':>6} {'tuned':>7} {'autosched':>10} {'ort':>8} {'torch':>8} {'vs ort':>7} "
        f"{'tuning':>8} {'to 90%':>6} {'max err':>8}{tvm_head}  holding back"
    )
    out = Path(ns.keep) if ns.keep else Path(tempfile.mkdtemp(prefix="autosched-models-"))
    out.mkdir(parents=True, exist_ok=True)
    for name in models:
        rows = bench_tuned(
            name, ns.small, out, budgets, ns.repeat, ns.batch_size, ns.per_task, ns.retime, ns.in_model, tvm
        )
        for r in rows:
            to_90 = r["to_90"] if r["to_90"] is not None else "-"
            print(
                f"{r['model']:<20} {r['trials']:>6} {r['tuned']:>7} {r['autosched_ms']:>10.2f} "
                f"{r['onnxruntime_ms']:>8.2f} {r['torch_ms']:>8.2f} {r['vs_ort']:>6.2f}x "
                f"{r['wall_s']:>7.0f}s {to_90:>6} {r['err'] or 0:>8.1e}{_tvm_cells(r) if tvm else ''}  "
                f"{r['holding_back']}",
                flush=True,
            )
            if r["tvm_note"]:
                print(f"  {r['model']}: {r['tvm_note']}", flush=True)
    print(f"logs and models in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    global THREADS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--untuned", action="store_true", help="default schedules for every task")
    p.add_argument("--trials", help="tune each model to these total budgets, e.g. 200,500,2000 (issue 12)")
    p.add_argument("--models", dest="models_list", help="with --trials: comma-separated (default: "
                   "resnet18,mobilenet_v2,bert)")  # fmt: skip
    p.add_argument("--small", action="store_true", help="with --trials: the small set (default: full sizes)")
    p.add_argument("--batch-size", type=int, default=16, help="with --trials: candidates per batch")
    p.add_argument("--keep", metavar="DIR", help="with --trials: keep models and logs here")
    p.add_argument("--full", action="store_true", help="with --untuned: full sizes (default: the small set)")
    # 12 rounds of 5: this machine's speed swings by up to 1.5x for seconds at a time (a neighbour on the
    # shared L3), and 4 rounds let one slow stretch decide a 5% race (MobileNetV2: 0.97x to 1.07x).
    p.add_argument("--repeat", type=int, default=60, help="timed calls per contender, in rounds of 5")
    p.add_argument("--tasks", action="store_true", help="also list each model's tasks (weight, MFLOP)")
    p.add_argument("--per-task", action="store_true", help="with --trials: each task against onnxruntime's "
                   "profiled time for the same nodes")  # fmt: skip
    p.add_argument("--retime", action="store_true", help="with --per-task: race each task's best against "
                   "onnxruntime on its nodes, CPU time in turns at 1 thread")  # fmt: skip
    p.add_argument("--in-model", action="store_true", help="with --trials: each task timed in place "
                   "in the compiled model (in order, once: cold weights) vs the call repeated")  # fmt: skip
    p.add_argument("--tvm", action=argparse.BooleanOptionalAction, default=None,
                   help="with --trials: also TVM MetaSchedule through Relax at the same budgets "
                   "(default: when apache-tvm is installed)")  # fmt: skip
    p.add_argument("--threads", type=int, help="threads for tuning, autosched, onnxruntime and torch "
                   f"(default: {THREADS}, every core)")  # fmt: skip
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"some of {', '.join(MODELS)}")
    ns = p.parse_args(argv)
    if ns.threads is not None:
        if ns.threads < 1:
            p.error(f"--threads must be >= 1, got {ns.threads}")
        THREADS = ns.threads
        # read when libgomp starts (the compiled model's kernels); set it in the shell too to be sure
        os.environ["OMP_NUM_THREADS"] = str(ns.threads)
    if ns.trials:
        return main_tuned(ns)
    if not ns.untuned:
        p.error("pass --untuned (default schedules) or --trials 200,500,2000 (tuned)")
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
