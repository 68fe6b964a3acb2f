"""What benchmarks/simulator.py keeps between runs, so that a rerun measures nothing twice.

One JSON-lines file (``--store``), each line versioned (``"v": 1``) and of one kind:

- ``measured``: one candidate's measured time on a real target, keyed by the piece it belongs to
  (workload, sizes, target, threads, repeats, the generated code's version :data:`CODEGEN`) and the
  hash of its lowered loop IR (``ir``), so a change to the sketch, to lowering or to codegen that
  yields another kernel is measured anew, while a change to the model
  re-predicts the stored kernels without timing any of them; measured again (``--again``), a candidate
  keeps its least time (every pass's is kept too, for the retest correlation); a failure is kept only
  when it is the kernel's own (``PERMANENT``).
  ``seconds``: the wall time its batch took a candidate (compile, check, time), for ``--estimate``.
- ``tuning``: one finished tuning piece (workload, target, chip file content, trials, seed, threads,
  batch size, model version, generated code's version) with both picks' times.

Lines from a run cut short are kept (each batch is appended when it is done); a line that does not
parse (cut mid-write) or has an unknown version is skipped.

Example::

    store = Store(Path("sim_bench.jsonl"))
    store.add_measured(piece, ir_hash, cost_s, seconds=0.4)
    store.measured(piece).get(ir_hash)        # {"cost": ..., "seconds": ...}
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

VERSION = 1
# Failures that are the candidate's own; a crash, timeout or out-of-memory may be the machine's doing (a
# runner that could not start, a build worker killed) and is tried again by the next run.
PERMANENT = ("schedule", "wrong_result", "compile")


def host_store(kind: str, suffix: str = "") -> Path:
    """``benchmarks/stores/<kind>_<cpu>_<cores>c<suffix>.jsonl``: a benchmark's results on this kind of
    host (LLVM's CPU name, core count), kept in the repository so that later sessions on the same kind
    of machine add to it and ``--report`` prints it anywhere; two kinds of machine never share one."""
    import os

    from llvmlite import binding

    name = f"{kind}_{binding.get_host_cpu_name()}_{os.cpu_count()}c{suffix}.jsonl"
    return Path(__file__).resolve().parent / "stores" / name


def ir_hash(text: str) -> str:
    """The key of one candidate: its printed loop IR (the kernel the target compiles)."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


# The generated code's version: the same loop IR compiles to another kernel when codegen changes, so
# its times are measured again. 2: every access carries alias scopes (codegen.llvm_alias, 2026-12-07);
# a tile on the heap in a parallel body had been stored and reloaded at every update.
CODEGEN = 2


def newest(key_of: Callable[[int], str], get: Callable[[str], T | None], below: int = CODEGEN + 1
           ) -> tuple[int, T] | None:  # fmt: skip
    """The newest codegen version under ``below`` whose key (``key_of(version)``) ``get`` finds something
    for, with what it found; None when no version has any."""
    return next(((g, got) for g in range(below - 1, 0, -1) if (got := get(key_of(g)))), None)


def measure_key(workload: str, sizes: str, target: str, threads: int | None, repeat: int,
                codegen: int = CODEGEN) -> str:  # fmt: skip
    """The key of one correlation piece; ``codegen`` 1 is the first version's (no ``|g`` part)."""
    return f"{workload}|{sizes}|{target}|t{threads or 0}|r{repeat}" + (f"|g{codegen}" if codegen > 1 else "")


def tuning_key(workload: str, sizes: str, target: str, chip_sha: str, trials: int, seed: int,
               threads: int | None, batch: int, model: int, codegen: int = CODEGEN) -> str:  # fmt: skip
    key = f"{workload}|{sizes}|{target}|{chip_sha}|n{trials}|s{seed}|t{threads or 0}|b{batch}|m{model}"
    return key + (f"|g{codegen}" if codegen > 1 else "")


class Store:
    """The measured candidates and finished tuning pieces of one store file (appended as they come)."""

    def __init__(self, path: Path):
        self.path = path
        self._measured: dict[str, dict[str, dict[str, Any]]] = {}
        self._tuning: dict[str, dict[str, Any]] = {}
        self._passes: dict[str, dict[str, list[float]]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    if rec.get("v") != VERSION:
                        continue
                    if rec["kind"] == "measured":
                        self._keep(rec)
                    elif rec["kind"] == "tuning":
                        self._tuning[rec["key"]] = rec
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue

    def _append(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    def measured(self, key: str) -> dict[str, dict[str, Any]]:
        """The stored candidates of one piece: ir hash -> {"cost": seconds or None (failed), ...}."""
        return self._measured.get(key, {})

    def passes(self, key: str) -> dict[str, list[float]]:
        """Every time measured of each stored candidate of one piece, in the order measured (a pass of
        ``--again`` adds one): two passes tell how far the machine's own noise lets any model rank."""
        return self._passes.get(key, {})

    def _keep(self, rec: dict[str, Any]) -> None:
        """A candidate measured again keeps its least time (another process only makes a run slower);
        a failure counts only when it is the kernel's own (the others are measured again next time)."""
        if rec["cost"] is None and str(rec.get("error", "")).split(":", 1)[0] not in PERMANENT:
            return
        if rec["cost"] is not None:
            self._passes.setdefault(rec["key"], {}).setdefault(rec["ir"], []).append(rec["cost"])
        piece = self._measured.setdefault(rec["key"], {})
        old = piece.get(rec["ir"])
        if old is None or (rec["cost"] is not None and (old["cost"] is None or rec["cost"] < old["cost"])):
            piece[rec["ir"]] = rec

    def add_measured(self, key: str, ir: str, cost: float | None, seconds: float, error: str = "") -> None:
        rec = {"v": VERSION, "kind": "measured", "key": key, "ir": ir, "cost": cost, "seconds": seconds}
        if error:
            rec["error"] = error[:200]
        self._keep(rec)
        self._append(rec)

    def tuning(self, key: str) -> dict[str, Any] | None:
        return self._tuning.get(key)

    def add_tuning(self, key: str, result: dict[str, Any]) -> None:
        rec = {"v": VERSION, "kind": "tuning", "key": key, **result}
        self._tuning[key] = rec
        self._append(rec)

    def seconds_per_candidate(self, key: str) -> float | None:
        """The median wall time a stored candidate of this piece took, None when none is stored."""
        got = [
            r["seconds"] for r in self.measured(key).values() if isinstance(r.get("seconds"), (int, float))
        ]
        return statistics.median(got) if got else None

    def seconds_per_trial(self, workload: str, target: str, sizes: str) -> float | None:
        """Over the stored tuning pieces of this workload and target: wall seconds per tuning trial."""
        prefix = f"{workload}|{sizes}|{target}|"
        runs = [r for k, r in self._tuning.items() if k.startswith(prefix) and r.get("seconds")]
        trials = sum(2 * r["trials"] for r in runs)  # a piece tunes twice: on the simulator, on the target
        return sum(r["seconds"] for r in runs) / trials if trials else None
