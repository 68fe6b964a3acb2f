"""``autosched sim explain`` and ``autosched devices --chip-file``: the simulator's commands.

Kept apart from ``cli.py`` (which only registers them) so the simulator's command code is one file.

    autosched sim explain examples/matmul.py --chip avx2-desktop [--log L] [--workload W] [--args M=512]
    autosched devices --chip-file mychip.json [--target "llvm-cpu -mcpu=haswell"]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_sim_parser(sub: Any) -> None:
    sim = sub.add_parser("sim", help="the hardware characteristic simulator: chip files and a time model")
    ssub = sim.add_subparsers(dest="sim_cmd", required=True)
    ex = ssub.add_parser("explain", help="which resource bounds each store of a schedule, at which loop")
    ex.add_argument("op_file")
    ex.add_argument("--chip", required=True, help="a chip file, or a shipped chip's name (rocketlake, ...)")
    ex.add_argument("--log", help="explain the best record of the workload in this log (default: the "
                    "default schedule)")  # fmt: skip
    ex.add_argument("--workload", help="only this workload of the file")
    ex.add_argument("--args", nargs="*", metavar="K=V", help="workload arguments, e.g. M=512 N=512")
    ex.add_argument("--top", type=int, default=12, help="stores shown, the slowest first (default 12)")
    sim.set_defaults(func=cmd_sim)


def cmd_sim(ns: argparse.Namespace) -> int:
    from .cli import _instances, parse_args_kv
    from .hai.registry import get_adapter
    from .lower.pipeline import lower
    from .search_space.default import default_trace
    from .search_space.schedule import replay
    from .sim.explain import explain

    adapter = get_adapter(f"sim -chip={ns.chip}")
    for inst in _instances(ns.op_file, ns.workload, parse_args_kv(ns.args or [])):
        outputs = list(inst.outputs)
        trace, how = default_trace(outputs, adapter, cores=adapter.chip.cores), "the default schedule"
        if ns.log:
            trace, how = _logged_trace(ns.log, inst, adapter, trace, how)
        func = lower(replay(outputs, trace), list(inst.tensors), inst.name, adapter.target)
        print(f"# {inst.name}: {how}")
        print(explain(adapter.predict(func), flops=float(inst.flop_count()), top=ns.top))
    return 0


def _logged_trace(log: str, inst: Any, adapter: Any, trace: Any, how: str) -> tuple[Any, str]:
    """The best record of ``inst`` in ``log``: this simulated chip's if any, else the fastest of any chip."""
    from .records.log import best_records, load_records
    from .records.record import fingerprint_of

    res = load_records(log, workload=inst)
    best = best_records(res.records)
    own = fingerprint_of(adapter.target, adapter.info())
    mine = [r for (key, fp), r in best.items() if key == inst.key and fp == own]
    others = sorted((r for (key, fp), r in best.items() if key == inst.key and fp != own),
                    key=lambda r: r.mean_cost)  # fmt: skip
    if mine:
        ms = mine[0].mean_cost * 1e3
        return mine[0].trace, f"the best record in {log} for this chip ({ms:.4f} ms modeled)"
    if others:
        r = others[0]
        how = "modeled for" if (r.chip.get("extra") or {}).get("simulated") else "measured on"
        return r.trace, f"the best record in {log} ({how} {r.fingerprint}: {r.mean_cost * 1e3:.4f} ms)"
    print(f"note: {log} has no record of {inst.name}; explaining {how}", file=sys.stderr)
    return trace, how


def write_chip_file(path: str, target: str, remeasure: bool = False) -> str:
    """Measure ``target``'s facts (cached) and write them as a chip file; returns a one-line summary."""
    from .hai.chip_facts import measured_info
    from .hai.llvm_host import sys_cache_ways
    from .hai.registry import get_adapter
    from .sim.chip import write_chip
    from .sim.from_facts import chip_from_facts

    adapter = get_adapter(target)
    info = measured_info(adapter, remeasure=remeasure)
    local_cpu = info.kind == "cpu" and not (info.extra or {}).get("simulated")  # this host's caches
    chip = chip_from_facts(info, str(adapter.target), sys_cache_ways() if local_cpu else None)
    write_chip(chip, path)
    return (
        f"wrote {path}: {chip.name}, {chip.cores} cores, {chip.simd_bits}-bit, {chip.clock_ghz} GHz, "
        f"{chip.peak_gflops_core:.1f} GFLOP/s a core, {chip.memory_bandwidth_gbs} GB/s memory "
        f'(use it with --target "sim -chip={path}")'
    )
