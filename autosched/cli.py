"""The ``autosched`` command line: tune, devices, logs, build.

Every problem is one line on stderr, ``autosched <command>: error: <what, where, what to do>``, and
exit code 2; ``autosched --debug ...`` shows the traceback instead. Ctrl-C exits 130, a closed pipe
(``autosched logs show L | head``) exits quietly.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path
from typing import Any

from .errors import AutoschedError
from .report.cli import add_report_parser
from .runtime.cli_build import add_build_parser


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word, e.g. dtype=float32


def parse_args_kv(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise AutoschedError(f"--args: expected KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = _parse_value(value.strip())
    return out


def _instances(op_file: str, workload: str | None, args: dict[str, Any]) -> list[Any]:
    from .errors import WorkloadError
    from .te.workload import load_op_file

    workloads = load_op_file(op_file)
    if workload is not None:
        chosen = [w for w in workloads if w.name == workload]
        if not chosen:
            names = ", ".join(w.name for w in workloads)
            raise WorkloadError(f"{op_file}: no workload named {workload!r}; the file defines: {names}")
        workloads = chosen
    known = {k: None for w in workloads for k in w.defaults}
    unknown = [k for k in args if k not in known]
    if unknown:  # a typo (MM=128) would otherwise tune the default sizes without a word
        names = ", ".join(w.name for w in workloads)
        raise WorkloadError(
            f"--args: unknown argument(s) {', '.join(unknown)} for {names} in {op_file}; "
            f"known: {', '.join(known) or '(none)'}"
        )
    return [w.instantiate(**{k: v for k, v in args.items() if k in w.defaults}) for w in workloads]


def tune_options(ns: argparse.Namespace) -> Any:
    """The TuneOptions of ``autosched tune``'s flags (an operator file or a model)."""
    from .tune import TuneOptions

    return TuneOptions(
        trials=ns.trials, batch_size=ns.batch_size, strategy=ns.strategy, resume=ns.resume, seed=ns.seed,
        num_threads=ns.threads, timeout_s=ns.timeout, early_stopping=ns.early_stop,
        transfer_from=tuple(ns.transfer_from or ()), transfer_top=ns.transfer_top,  # issue 6
        cost_model=getattr(ns, "cost_model", None),  # issue 20
        finalists=getattr(ns, "finalists", 4),  # issue 17
        flush_cache=ns.op_file.endswith(".onnx") if ns.flush_cache is None else ns.flush_cache,
    )  # fmt: skip


def cmd_tune(ns: argparse.Namespace) -> int:
    from .progress import TuneProgress, print_summary
    from .tune import Tuner

    if ns.op_file.endswith(".onnx") and ns.cluster:  # a model on a farm (issue 15): farm_cli.py
        from .farm_cli import cmd_tune_model_farm

        return cmd_tune_model_farm(ns, tune_options(ns))
    if ns.op_file.endswith(".onnx"):  # a model: its tasks tuned together (graph/tune_model.py, issue 12)
        from .graph.tune_model import cmd_tune_model

        return cmd_tune_model(ns, tune_options(ns))
    instances = _instances(ns.op_file, ns.workload, parse_args_kv(ns.args or []))
    log = ns.log or f"tuning_logs/{Path(ns.op_file).stem}.jsonl"
    options = tune_options(ns)
    if ns.cluster:  # a measurement farm (issue 15): Dask is imported only on this path
        from .farm_cli import cmd_tune_farm

        return cmd_tune_farm(ns, instances, log, options)
    with TuneProgress(options.trials) as progress:
        tuner = Tuner(instances, ns.target, log, options, reporter=progress.report)
        progress.header(tuner)
        for task in tuner.tasks:
            for note in tuner.load_previous(task):
                progress.note(note)
        try:
            scheduled = ns.task_scheduler == "gradient" and len(tuner.tasks) > 1
            tasks = tuner.run_scheduled() if scheduled else tuner.run()
        except KeyboardInterrupt:
            progress.stop()
            print(f"\ninterrupted: every finished batch is in {log}; continue with --resume", file=sys.stderr)
            return 130
    _compare_with_numpy(tasks, tuner)
    print_summary(tasks, tuner)
    return 0


def _compare_with_numpy(tasks: list[Any], tuner: Any) -> None:
    """Re-time each tuned kernel against its numpy implementation, in turns, for a fair ratio."""
    from .measure.compare import compare_with_baseline
    from .tune import _workload_of

    for t in tasks:
        fn = getattr(_workload_of(t.inst), "baseline", None)
        if fn is None or t.best_trace is None or not tuner.adapter.spec.can_export:
            continue
        try:
            t.final_s, t.baseline_s = compare_with_baseline(
                t.inst.tensors, t.best_trace, str(tuner.target), t.measure_task.inputs, fn
            )
        except AutoschedError as e:  # the best schedule was measured, so this would be a bug: say so
            print(f"note: could not re-time {t.inst.name} against numpy: {e}", file=sys.stderr)


def cmd_devices(ns: argparse.Namespace) -> int:
    from .hai.registry import list_devices

    if ns.chip_file:  # the simulator (issue 16): this target's measured facts as a chip file
        from .sim_cli import write_chip_file

        print(write_chip_file(ns.chip_file, ns.target or "llvm-cpu", remeasure=ns.remeasure))
        return 0
    for line in list_devices(remeasure=ns.remeasure):
        print(line)
    return 0


def cmd_logs(ns: argparse.Namespace) -> int:
    from .records.log import merge_logs
    from .records.show import show_best, show_log

    if ns.logs_cmd == "show":
        print(show_log(ns.log, limit=ns.limit))
    elif ns.logs_cmd == "best":
        print(show_best(ns.log, workload=ns.workload, target=ns.target))
    else:
        print(merge_logs(ns.inputs, ns.output, keep=ns.keep).describe(ns.output))
    return 0


def _count(text: str) -> int:
    """argparse type for --limit: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autosched", description="Auto-scheduling tensor compiler.")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error, not one line")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="search for the fastest schedule of each workload in an op file")
    t.add_argument("op_file", help="a Python file with @autosched.workload functions, or a model .onnx")
    t.add_argument("--input-shape", nargs="*", metavar="NAME=1x3x224", help="static shapes of model inputs")
    t.add_argument("--workload", help="tune only this workload of the file")
    t.add_argument("--args", nargs="*", metavar="K=V", help="workload arguments, e.g. M=512 N=512")
    t.add_argument("--trials", type=int, default=200,
                   help="measured candidates per workload; a model .onnx: in all (default 200)")  # fmt: skip
    t.add_argument("--target", default="llvm-cpu", help="e.g. llvm-cpu, 'llvm-cpu -mcpu=haswell'")
    t.add_argument("--log", help="tuning log (JSON lines); default tuning_logs/<op file>.jsonl")
    t.add_argument("--resume", action="store_true", help="count the log's records toward --trials")
    t.add_argument("--strategy", default="evolutionary", choices=["evolutionary", "random"],
                   help="model-guided evolutionary search (default) or random sampling")  # fmt: skip
    t.add_argument("--task-scheduler", default="gradient", choices=["gradient", "sequential"],
                   help="several workloads: give each batch where it cuts total latency most (gradient, "
                        "default), or tune them one after another")  # fmt: skip
    t.add_argument("--flush-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="evict the caches before each timed repeat (recorded in the log); default: on for a "
                        "model, whose kernels run with the previous task's data in cache and their weights "
                        "cold, off for an operator")  # fmt: skip
    t.add_argument("--early-stop", action="store_true",
                   help="stop a workload when several rounds in a row bring no improvement")  # fmt: skip
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--threads", type=int, help="threads per kernel (default: all cores)")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds before a candidate run is killed")
    t.add_argument("--seed", type=int, default=0)
    # --- logs across chips (issue 6) ---
    t.add_argument("--transfer-from", nargs="+", metavar="LOG",
                   help="logs of other chips: their records of the same workload train the cost model and "
                        "their best schedules are measured anew here first (records of this chip in them "
                        "are not measured again); a workload with no record on this chip is also guided by "
                        "--cost-model beneath them")  # fmt: skip
    t.add_argument("--transfer-top", type=int, default=16, metavar="K",
                   help="foreign schedules measured first with --transfer-from (default 16)")  # fmt: skip
    # Default auto (issue 20): a workload with no log on this chip starts from the shipped model, which
    # reached 90% of the best in 2x fewer trials on 2-4 of 6 workloads on chips it had no log of
    # (benchmarks/transfer.py) and does not slow the quick start (README); a log, once written, rules.
    # With --transfer-from, it guides beneath the source's prior.
    t.add_argument("--cost-model", default="auto", metavar="M",
                   help="a model from `autosched model train` to guide workloads with no log on this chip; "
                        "auto (default): the shipped pretrained model; none: start cold")  # fmt: skip
    # --- end logs across chips ---
    t.add_argument("--finalists", type=int, default=4, metavar="K",
                   help="at the end, time each workload's K best schedules again in turns over fresh "
                        "processes and pick by those times (default 4; 0: the search's best)")  # fmt: skip
    # --- measurement farms (issue 15): farm_cli.py ---
    t.add_argument("--cluster", metavar="tcp://HOST:8786 | local:N",
                   help="measure on a Dask farm (a scheduler's address, or N local worker processes); "
                        "--target may then list several targets (a,b) or be all")  # fmt: skip
    t.set_defaults(func=cmd_tune)

    d = sub.add_parser("devices", help="list the targets this machine can run, with chip facts")
    d.add_argument("--remeasure", action="store_true",
                   help="measure peak and bandwidth again (with nothing else running)")  # fmt: skip
    d.add_argument("--chip-file", metavar="OUT", help="write the measured facts of --target as a chip file")
    d.add_argument("--target", help="with --chip-file: the local target (default llvm-cpu)")
    d.set_defaults(func=cmd_devices)

    lg = sub.add_parser("logs", help="inspect and combine tuning logs")
    lsub = lg.add_subparsers(dest="logs_cmd", required=True)
    ls = lsub.add_parser("show", help="records per workload and chip, errors, best speed")
    ls.add_argument("log")
    ls.add_argument("--limit", type=_count, default=20, help="groups and problems listed (default 20)")
    lb = lsub.add_parser("best", help="the best schedule per workload and chip, as schedule code")
    lb.add_argument("log")
    lb.add_argument("--workload")
    lb.add_argument("--target")
    lm = lsub.add_parser(
        "merge", help="merge logs, dropping duplicate records; lines that do not parse are kept verbatim"
    )
    lm.add_argument("inputs", nargs="+")
    lm.add_argument("-o", "--output", required=True)
    lm.add_argument("--keep", choices=["all", "best"], default="all")
    lg.set_defaults(func=cmd_logs)
    add_build_parser(sub)  # autosched build: runtime/cli_build.py
    add_report_parser(sub)  # autosched report, autosched profile: report/cli.py
    from .farm_cli import add_worker_parser

    add_worker_parser(sub)  # autosched worker: farm_cli.py (imports Dask only when it runs)
    from .sim_cli import add_sim_parser

    add_sim_parser(sub)  # autosched sim explain: sim_cli.py (issue 16)
    from .cost_model.cli import add_model_parser

    add_model_parser(sub)  # autosched model train: cost_model/cli.py (issue 20)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv  # anywhere: `autosched tune op.py --debug` too
    ns = build_parser().parse_args([a for a in argv if a != "--debug"])
    if debug:
        return int(ns.func(ns))
    try:
        return int(ns.func(ns))
    except BrokenPipeError:  # `autosched logs show L | head`: the reader has all it wanted
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        print(f"autosched {_command(ns)}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"autosched {_command(ns)}: error: {error_line(e)}", file=sys.stderr)
        return 2


def _command(ns: argparse.Namespace) -> str:
    """The command as typed: ``tune``, ``logs merge``."""
    return " ".join(filter(None, [ns.command, getattr(ns, "logs_cmd", None), getattr(ns, "sim_cmd", None)]))


def error_line(e: BaseException) -> str:
    """One line for a problem: what went wrong, where, and what to do about it."""
    if isinstance(e, AutoschedError):
        text = str(e)
    elif isinstance(e, MemoryError):
        text = (
            f"out of memory ({e or 'MemoryError'}): the workload's arrays or the search do not fit in "
            "this machine's memory; use smaller sizes (--args)"
        )
    elif isinstance(e, OSError):
        where = f" {e.filename}" if e.filename else ""
        text = f"{e.strerror or e}:{where}; check the path and its permissions"
    elif isinstance(e, ValueError):
        text = str(e)
    else:
        text = f"internal error {type(e).__name__}: {e} (a bug: rerun with --debug and report the traceback)"
    return " ".join(text.split())  # one line


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (captured in tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
