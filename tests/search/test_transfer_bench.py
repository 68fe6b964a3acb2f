"""benchmarks/transfer.py in pieces (issue 20): stored runs are skipped, the table and the done-when
verdict come from what is stored (``--report``, nothing run), and the missing pieces are listed with
the command that runs each."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("transfer_bench", ROOT / "benchmarks" / "transfer.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(wl: str, target: str, seed: int, mode: str, hist: list[float | None], trials: int = 8) -> dict:
    return {"key": f"{wl}|{target}|{seed}|{mode}", "workload": wl, "target": target, "seed": seed,
            "mode": mode, "trials": trials, "quick": True, "flops": 1e9, "history": hist,
            "seconds": 4.0 * len(hist)}  # fmt: skip


def best_so_far(costs: list[float]) -> list[float | None]:
    out, best = [], float("inf")
    for c in costs:
        best = min(best, c)
        out.append(best)
    return out


def test_report_from_stored_pieces_and_the_missing_ones(tmp_path, bench, capsys):
    t = "opencl"
    slow = best_so_far([4.0, 3.0, 2.0, 2.0, 2.0, 1.5, 1.2, 1.0])  # reaches 1 GFLOP/s at trial 8
    fast = best_so_far([1.0] * 8)  # at trial 1
    lines = [run("matmul", t, 0, "scratch", slow), run("matmul", t, 0, "transfer", fast),
             run("matmul", t, 0, "pretrained", slow), run("softmax", t, 0, "scratch", fast),
             run("softmax", t, 0, "transfer", slow),
             run("matmul", t, 0, "scratch", fast, trials=16)]  # fmt: skip
    res = tmp_path / "results.jsonl"
    res.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"key": "cut sho')  # an interrupted line
    args = ["--quick", "--out", str(tmp_path), "--targets", t, "--workloads", "matmul", "softmax",
            "--seeds", "0", "1"]  # fmt: skip
    assert bench.main([*args, "--report"]) == 0
    out = capsys.readouterr().out
    table = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith(("matmul ", "softmax "))}
    assert table["matmul"][2:8] == ["1", "1.0", "8", "1", "8", "8.0x"]  # 8 trials runs only, not the 16's
    assert table["softmax"][4:6] == ["1", "8"] and table["softmax"][7] == "0.1x"
    assert "worse than scratch by > 10% on softmax: not met" in out
    missing = [ln for ln in out.splitlines() if ln.strip().startswith("piece ")]
    cmd = f"python benchmarks/transfer.py --quick --out {tmp_path} --targets opencl"
    assert missing[0].endswith(f"{cmd} --workloads matmul --seeds 1") and "3 B run(s) + chip A" in missing[0]
    assert any(ln.endswith("--workloads softmax --seeds 0") and "1 B run(s)," in ln for ln in missing)
    assert len(missing) == 3 and "7 B run(s) to do" in out  # softmax seed 0 pretrained, two seed-1 pieces

    assert bench.main([*args, "--estimate"]) == 0  # the same pieces, nothing run
    assert "7 B run(s) to do" in capsys.readouterr().out
    assert bench.piece_flags(["--targets", "llvm-cpu -mcpu=haswell", "--seeds=2", "--report"]) == (
        "--targets 'llvm-cpu -mcpu=haswell' "
    )
