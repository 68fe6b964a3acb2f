"""Helpers of the farm tests: module-level, so farm workers unpickle them by reference."""

import hashlib
import time
from pathlib import Path

from autosched.records.log import load_records, trace_key
from autosched.te.workload import load_op_file

ROOT = Path(__file__).resolve().parents[2]


def small_matmul():
    (w,) = [w for w in load_op_file(ROOT / "examples" / "matmul.py") if w.name == "matmul"]
    return w.instantiate(M=32, N=32, K=32)


def cost(trace) -> float:
    """A deterministic cost with some spread, so the search has something to find."""
    h = int(hashlib.sha256(trace_key(trace).encode()).hexdigest()[:8], 16)
    return 1e-4 * (1 + (h % 1000) / 100) + 1e-6 * len(trace)


def crashes(trace) -> bool:
    """About one candidate in six takes its worker process down."""
    return int(hashlib.sha256(trace_key(trace).encode()).hexdigest()[:8], 16) % 6 == 0


def records(log):
    """The search's records in ``log``: a finalists round's re-timings (``retimed``) left out."""
    return [r for r in load_records(log).records if r.retimed is None]


def retimed(log):
    """The finalists round's records in ``log``."""
    return [r for r in load_records(log).records if r.retimed is not None]


def wait_for_records(log: Path, n: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and len(records(log)) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{log}: fewer than {n} records after {timeout_s} s")


def elsewhere_chip(target: str = "llvm-cpu"):
    """(fingerprint, ChipInfo) of a chip this machine does not have: what a farm machine reports."""
    import dataclasses

    from autosched.measure.farm_worker import chip_facts
    from autosched.records.record import fingerprint_of
    from autosched.target import parse_target

    chip = dataclasses.replace(chip_facts(target)[1], name="farm-machine", arch="zen9")
    return fingerprint_of(parse_target(target), chip), chip


def elsewhere_plugin():
    from autosched.measure.farm_worker import ChipFactsPlugin

    class ElsewherePlugin(ChipFactsPlugin):
        def setup(self, worker):
            worker._autosched_chips = {t: elsewhere_chip(t) for t in self.targets}

    return ElsewherePlugin(["llvm-cpu"])
