"""``autosched build OP.py --log LOG -o DIR``: the tuned workloads of an op file as a C library.

Example::

    autosched build examples/matmul.py --log tuning_logs/matmul.jsonl -o build/matmul --args M=64 N=64 K=64
    cc app.c -Ibuild/matmul -Lbuild/matmul -lmatmul -Wl,-rpath,build/matmul
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_build(ns: argparse.Namespace) -> int:
    from ..cli import _instances, parse_args_kv
    from .export import export_library

    if ns.op_file.endswith(".onnx"):  # a model: graph/export.py
        from ..graph.export import cmd_build_model

        return cmd_build_model(ns)
    instances = _instances(ns.op_file, ns.workload, parse_args_kv(ns.args or []))
    name = ns.name or Path(ns.op_file).stem
    res = export_library(
        instances, ns.output, log=ns.log, target=ns.target, name=name, allow_default=ns.allow_default,
        compile_timeout_s=ns.compile_timeout,
    )  # fmt: skip
    for fn in res.functions:
        if fn.record is None:
            how = "default schedule (untuned)"
        else:
            how = f"tuned record, {fn.record.mean_cost * 1e6:.1f} us, {fn.record.gflops:.1f} GFLOP/s"
        print(f"  {fn.name}: {how}")
    print(f"built {res.library}\n      {res.header}\n      {res.manifest}")
    _note_skipped_lines(ns.log)
    return 0


def _note_skipped_lines(log: str | None) -> None:
    """Say how many lines of the log could not be used, and the first of them (issue 19)."""
    import sys

    from ..records.log import read_log

    if log is None or not Path(log).is_file():
        return
    problems = read_log(log)[1]
    if problems:
        print(
            f"note: skipped {len(problems)} unreadable line(s) of {log}, first {problems[0]}; "
            f"autosched logs show {log} lists them",
            file=sys.stderr,
        )


def add_build_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``build`` subcommand on the ``autosched`` parser's subparsers."""
    b = subparsers.add_parser(
        "build", help="build the best tuned schedules of an op file into a shared library + C header"
    )
    b.add_argument("op_file", help="a Python file with @autosched.workload functions, or a model .onnx")
    b.add_argument("--input-shape", nargs="*", metavar="NAME=1x3x224", help="static shapes of model inputs")
    b.add_argument("--log", help="tuning log to take the best records from")
    b.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for lib<name>.so etc.")
    b.add_argument("--target", default="llvm-cpu", help="e.g. llvm-cpu, 'llvm-cpu -mcpu=x86-64-v3'")
    b.add_argument("--workload", help="build only this workload of the file")
    b.add_argument("--args", nargs="*", metavar="K=V", help="workload arguments, e.g. M=512 N=512")
    b.add_argument("--name", help="library name (default: the op file's name): lib<name>.so, <name>.h")
    b.add_argument(
        "--allow-default", action="store_true", help="use the default schedule for workloads without a record"
    )
    b.add_argument(
        "--compile-timeout", type=_positive_seconds, metavar="S",
        help="seconds one function may take to compile (default $AUTOSCHED_COMPILE_TIMEOUT or 300)",
    )  # fmt: skip
    b.set_defaults(func=cmd_build)
    return b


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value
