"""``autosched report LOG... [-o report.html]`` and ``autosched profile DIR [--html PATH]``.

Example::

    autosched report tuning_logs/*.jsonl -o report.html
    autosched profile build/matmul --html profile.html
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def cmd_report(ns: argparse.Namespace) -> int:
    from .page import write_report

    report = write_report(ns.logs, ns.output, op_files=ns.op or ())
    for line in report.notes:
        print(f"note: {line}", file=sys.stderr)
    data = report.data
    print(
        f"wrote {ns.output}: {data.n_records} record(s) from {len(data.logs)} log(s), "
        f"{len(data.tasks)} task(s) on {len(data.chips)} chip(s)"
    )
    return 0


def cmd_profile(ns: argparse.Namespace) -> int:
    from .profile import format_profile, profile_directory, profile_section

    prof = profile_directory(ns.directory, repeat=ns.repeat, op_files=ns.op or ())
    print(format_profile(prof))
    if ns.html:
        from .page import write_report

        logs = [prof.log] if prof.log and Path(prof.log).is_file() else []
        write_report(logs, ns.html, op_files=ns.op or (), extra_sections=[profile_section(prof)])
        print(f"wrote {ns.html}" + (f" (with the report of {logs[0]})" if logs else ""))
    if prof.mismatches:
        print(
            f"error: {len(prof.mismatches)} kernel(s) differ from the numpy reference: "
            f"{', '.join(prof.mismatches)}",
            file=sys.stderr,
        )
        return 1
    return 0


def add_report_parser(subparsers: Any) -> None:
    """Register ``report`` and ``profile`` on the ``autosched`` parser's subparsers."""
    r = subparsers.add_parser("report", help="one self-contained HTML page about tuning logs")
    r.add_argument("logs", nargs="+", metavar="LOG", help="tuning logs (JSON lines)")
    r.add_argument("-o", "--output", default="report.html", help="the page to write (default report.html)")
    r.add_argument("--op", action="append", metavar="FILE",
                   help="op file defining workloads of the logs (for loop IR, code and the roofline); "
                        "the op library's are always known")  # fmt: skip
    r.set_defaults(func=cmd_report)

    p = subparsers.add_parser("profile", help="time each kernel of a built library: where the time goes")
    p.add_argument("directory", metavar="DIR", help="a directory written by autosched build")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per kernel (default 20)")
    p.add_argument("--html", metavar="PATH", help="also write the profile (and its log's report) as HTML")
    p.add_argument("--op", action="append", metavar="FILE", help="op file defining the library's workloads")
    p.set_defaults(func=cmd_profile)
