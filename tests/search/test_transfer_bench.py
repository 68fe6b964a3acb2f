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
            "seconds": 4.0 * len(hist), "cost_model": "none" if mode == "log_alone" else "auto"}  # fmt: skip


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
    assert table["matmul"][2:10] == ["1", "0", "1.0", "8", "1", "8", "-", "8.0x"]  # the 8-trial runs only
    assert table["softmax"][5:7] == ["1", "8"] and table["softmax"][9] == "0.1x"
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


def test_retimed_histories_replace_the_search_timings(tmp_path, bench, capsys):
    """A run's new bests, timed again, give its history: the fastest re-timed new best so far; a seed
    with a stored re-timing is read from it (transfer_retime.py)."""
    from transfer_retime import history, new_bests

    from autosched.records.record import TuningRecord
    from autosched.search_space.trace import Step, trace_key

    def rec(i, cost, retimed=None, error=None):
        trace = (Step("split", "C", ("i", i, None)),)
        return TuningRecord("k", "matmul", {}, "opencl", "fp", {}, trace, () if error else (cost,),
                            error=error, flops=1e9, retimed=retimed)  # fmt: skip

    log = tmp_path / "run.jsonl"
    round_mark = {"rounds": 3, "finalists": 1}  # a finalists round's record is no trial
    lines = [rec(1, 3.0), rec(2, 4.0), rec(4, 1.0, error="crash"), rec(8, 2.0), rec(16, 2.5), rec(32, 1.0),
             rec(8, 9.0, retimed=round_mark)]  # fmt: skip
    log.write_text("".join(r.to_json_line() + "\n" for r in lines))
    bests = new_bests(log)
    assert [(t, c) for t, _, c in bests] == [(0, 3.0), (3, 2.0), (5, 1.0)]
    key = {t: trace_key(tr) for t, tr, _ in bests}
    # Re-timed, the lucky 1.0 is 2.6 and the 2.0 holds; the first keeps its search time (not re-timed).
    assert history(bests, {key[3]: 2.1, key[5]: 2.6}, 7) == [3.0, 3.0, 3.0, 2.1, 2.1, 2.1, 2.1]

    t = "opencl"
    runs = [run("matmul", t, 0, m, best_so_far([2.0] * 8)) for m in ("scratch", "transfer", "pretrained")]
    res = tmp_path / "results.jsonl"
    res.write_text("".join(json.dumps(x) + "\n" for x in runs))
    args = ["--quick", "--out", str(tmp_path), "--targets", t, "--workloads", "matmul", "--seeds", "0"]
    assert bench.main([*args, "--report"]) == 0
    out = capsys.readouterr().out
    assert "1 seed(s) read from the search's own timings, not yet re-timed" in out
    slower = best_so_far([4.0] * 7 + [1.0])
    again = {"key": "r", "workload": "matmul", "target": t, "seed": 0, "mode": "retime", "trials": 8,
             "quick": True, "retimed": {}, "histories": {"scratch": slower},
             "modes": ["scratch", "transfer", "pretrained"], "modes_v": 2}  # fmt: skip
    with res.open("a") as f:
        f.write(json.dumps(again) + "\n")
    assert bench.main([*args, "--report"]) == 0
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("matmul "))
    assert row[2:8] == ["1", "1", "1.0", "8", ">8", ">8"]  # re-timed scratch: 1 GFLOP/s at trial 8
    assert "not yet re-timed" not in out


def test_a_seed_is_retimed_again_when_a_run_of_another_mode_is_stored(bench):
    import argparse

    t = "opencl"
    args = argparse.Namespace(workloads=["matmul"], targets=[t], seeds=[0], trials=8)
    results = {bench.run_key("matmul", t, 0, m, 8): run("matmul", t, 0, m, [2.0] * 8)
               for m in ("scratch", "pretrained")}  # fmt: skip
    assert bench.unretimed(results, args) == [("matmul", t, 0)]  # two modes are enough to re-time
    line = {"mode": "retime", "histories": {}, "modes": ["scratch", "pretrained"]}
    results[bench.run_key("matmul", t, 0, "retime", 8)] = line
    assert bench.unretimed(results, args) == []
    results[bench.run_key("matmul", t, 0, "transfer", 8)] = run("matmul", t, 0, "transfer", [2.0] * 8)
    assert bench.unretimed(results, args) == [("matmul", t, 0)]  # the new run is timed with the others
    first = bench._renamed({"mode": "retime", "histories": {"transfer": [1.0]}})  # the first version's line
    assert first["modes"] == ["scratch", "log_alone", "pretrained"] and "log_alone" in first["histories"]
    results[bench.run_key("matmul", t, 0, "retime", 8)] = first  # it re-timed the three modes of then
    assert bench.unretimed(results, args) == [("matmul", t, 0)]  # not transfer under the model
    del results[bench.run_key("matmul", t, 0, "transfer", 8)]
    results[bench.run_key("matmul", t, 0, "log_alone", 8)] = run("matmul", t, 0, "log_alone", [2.0] * 8)
    assert bench.unretimed(results, args) == []
    del results[bench.run_key("matmul", t, 0, "scratch", 8)]
    assert bench.unretimed(results, args) == []  # nothing to compare with before a scratch run


def test_the_report_counts_the_runs_another_model_guided(tmp_path, bench, capsys):
    model = tmp_path / "model.json"
    model.write_text('{"a": 1}\n')
    now = bench.model_id(str(model))
    assert now == bench.model_id(str(model)) and len(now) == 12 and bench.model_id("none") is None
    fast = best_so_far([1.0] * 8)
    lines = [{**run("matmul", "opencl", 0, "scratch", fast), "cost_model": "none"},
             {**run("matmul", "opencl", 0, "pretrained", fast), "model": now},
             {**run("matmul", "opencl", 0, "transfer", fast), "model": "0123456789ab"},  # retrained since
             run("matmul", "opencl", 0, "log_alone", fast),  # no model guided it
             run("matmul", "llvm-cpu", 0, "pretrained", fast)]  # before runs named their model  # fmt: skip
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["--quick", "--out", str(tmp_path), "--workloads", "matmul", "--seeds", "0", "--cost-model",
            str(model)]  # fmt: skip
    assert bench.main([*args, "--targets", "opencl", "llvm-cpu", "--report"]) == 0
    out = capsys.readouterr().out
    flagged = [ln for ln in out.splitlines() if "guided runs ran under another model" in ln]
    # the llvm-cpu line names no model: it cannot tell
    assert flagged == [f"opencl: 1 of the guided runs ran under another model than {str(model)!r} is now"]


def test_the_report_names_the_codegen_of_llvm_runs_and_flags_a_mix(tmp_path, bench, capsys):
    fast = best_so_far([1.0] * 8)
    hsw = "llvm-cpu -mcpu=haswell"
    lines = [
        {**run("matmul", hsw, 0, "scratch", fast), "cost_model": "none"},  # before runs named it: 1
        {**run("matmul", hsw, 0, "pretrained", fast), "codegen": bench.CODEGEN},
        {**run("matmul", "opencl", 0, "scratch", fast), "cost_model": "none"},  # OpenCL C: not counted
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["--quick", "--out", str(tmp_path), "--workloads", "matmul", "--seeds", "0"]
    assert bench.main([*args, "--targets", "opencl", hsw, "--report"]) == 0
    out = [ln for ln in capsys.readouterr().out.splitlines() if "codegen version" in ln]
    assert out == [f"{hsw}: runs by codegen version of the LLVM kernels {{1: 1, {bench.CODEGEN}: 1}}: "
                   f"compare runs under one only (now {bench.CODEGEN})"]  # fmt: skip
