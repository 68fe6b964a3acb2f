"""The checks a new adapter must pass: every op kind of ``autosched.topi`` correct on the target.

For each case of :data:`autosched.topi.workloads.SMALL_CASES` the default schedule and a few schedules
sampled from the sketch rules of the target's style are lowered for the target, compiled by its adapter
and, where the adapter runs kernels (``spec.can_run``), run on fresh random inputs and compared with the
numpy reference. A compile-only device (``null``) gets the compile part, reported as "compiled (not
run)", never as passed. A table comes out; the exit status is 1 when anything failed.

Example::

    python -m autosched.hai.conformance --target mychip
    python -m autosched.hai.conformance --target "llvm-cpu -mcpu=haswell" --samples 3 --ops matmul,softmax
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AutoschedError
from ..lower.pipeline import lower
from ..testing import assert_matches_numpy, split_args
from ..topi.workloads import SMALL_CASES, case_inputs
from .chip_facts import measured_info
from .registry import get_adapter


@dataclass(frozen=True)
class Check:
    """One schedule of one op on the target: ``status`` is "ok", "compiled" (compile-only) or "FAIL"."""

    op: str
    schedule: str  # "default" or "sketch N"
    status: str
    message: str = ""


def _policy(outputs: list[Any], adapter: Any) -> Any:
    chip = measured_info(adapter, measure_now=False)
    if adapter.spec.style == "gpu":
        from ..search_space.gpu_sketch import GPUSketchPolicy

        return GPUSketchPolicy(outputs, chip.max_threads_per_block, chip.shared_mem_bytes or 48 * 1024)
    from ..search_space.sketch import SketchPolicy

    return SketchPolicy(outputs, cores=chip.cores, lanes=max(4, chip.vector_bits // 32))


def _default(outputs: list[Any], adapter: Any) -> Any:
    if adapter.spec.style == "gpu":
        from ..search_space.gpu_sketch import default_gpu_schedule

        return default_gpu_schedule(outputs)
    from ..search_space.default import default_schedule

    chip = measured_info(adapter, measure_now=False)
    return default_schedule(outputs, cores=chip.cores, lanes=max(4, chip.vector_bits // 32))


def check_schedule(op: str, label: str, sch: Any, args: list[Any], adapter: Any, seed: int) -> Check:
    """Compile ``sch`` for the adapter and, where it runs kernels, compare it with the reference."""
    target = str(adapter.target)
    try:
        if not adapter.spec.can_run:
            adapter.compile(lower(sch, args, op, target=target))
            return Check(op, label, "compiled")
        assert_matches_numpy(sch, args, target, inputs=case_inputs(op, args, seed=seed))
        return Check(op, label, "ok")
    except (AutoschedError, AssertionError) as e:
        return Check(op, label, "FAIL", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")


def run_conformance(
    target: str, ops: Sequence[str] | None = None, samples: int = 2, seed: int = 0
) -> list[Check]:
    """Every check of the suite on ``target``; ``ops`` narrows it to some cases of SMALL_CASES."""
    adapter = get_adapter(target)
    names = list(ops) if ops else list(SMALL_CASES)
    unknown = [n for n in names if n not in SMALL_CASES]
    if unknown:
        raise AutoschedError(
            f"conformance: unknown op case(s) {', '.join(unknown)}; known: {', '.join(SMALL_CASES)}"
        )
    checks = []
    for op in names:
        args = SMALL_CASES[op]()
        outputs = split_args(args)[1]
        checks.append(check_schedule(op, "default", _default(outputs, adapter), args, adapter, seed))
        rng = random.Random(f"{op}-{seed}")
        policy = _policy(outputs, adapter)
        for i in range(samples):
            try:
                sch, _ = policy.sample(rng)
            except AutoschedError as e:  # the sketch rules themselves failed on this op: a finding
                checks.append(Check(op, f"sketch {i + 1}", "FAIL", f"sampling: {e}"))
                continue
            checks.append(check_schedule(op, f"sketch {i + 1}", sch, args, adapter, seed + i))
    return checks


COMPILED_ONLY = "compiled (not run)"  # how a compile-only check shows: compiled, never checked


def format_table(target: str, checks: Sequence[Check]) -> str:
    """One row per op, one column per schedule; failures listed under the table."""
    columns = list(dict.fromkeys(c.schedule for c in checks))
    rows: dict[str, dict[str, str]] = {}
    for c in checks:
        rows.setdefault(c.op, {})[c.schedule] = COMPILED_ONLY if c.status == "compiled" else c.status
    width = max([len("op"), *(len(op) for op in rows)])
    cell = max([9, *(len(s) for cells in rows.values() for s in cells.values())])
    lines = [f"conformance of {target}", "  ".join(["op".ljust(width), *(c.ljust(cell) for c in columns)])]
    for op, cells in rows.items():
        lines.append("  ".join([op.ljust(width), *(cells.get(c, "-").ljust(cell) for c in columns)]))
    failed = [c for c in checks if c.status == "FAIL"]
    passed = sum(1 for c in checks if c.status == "ok")  # a compile-only check ran nothing: not a pass
    compiled = sum(1 for c in checks if c.status == "compiled")
    summary = f"{passed} of {len(checks)} checks passed"
    if compiled:
        summary += f", {compiled} {COMPILED_ONLY}: the target does not run kernels"
    lines.append(summary)
    lines += [f"FAIL {c.op} ({c.schedule}): {c.message}" for c in failed]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autosched.hai.conformance", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--target", required=True, help="the target to check, e.g. mychip or 'llvm-cpu -mcpu=haswell'"
    )
    parser.add_argument("--samples", type=int, default=2, help="sketch schedules sampled per op (default 2)")
    parser.add_argument("--ops", help="comma-separated cases of autosched.topi SMALL_CASES (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    try:
        checks = run_conformance(ns.target, ns.ops.split(",") if ns.ops else None, ns.samples, ns.seed)
    except AutoschedError as e:
        print(f"conformance: error: {e}", file=sys.stderr)
        return 2
    print(format_table(str(get_adapter(ns.target).target), checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
