"""The benchmarks' smoke modes run to the end and print their tables (slow: each tunes for real)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "expect"),
    [
        ("search_efficiency.py", "trials to reach 90% of the final best"),
        ("vs_libraries.py", "vs numpy"),
        ("transfer.py", "trials on chip B to reach 90%"),
    ],
)
def test_benchmark_quick_mode(script: str, expect: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert expect in proc.stdout, proc.stdout[-2000:]
