"""`autosched tune --transfer-from`: real (tiny) measurements on two CPU variants of this machine."""

import subprocess
import sys
from pathlib import Path

from autosched.records.log import read_log

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
SIZE = ["--args", "M=16", "N=16", "K=16"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "autosched.cli", *args], capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_tune_with_transfer_from_another_chip(tmp_path):
    log_a, log_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    r = run_cli("tune", str(MATMUL), *SIZE, "--trials", "4", "--batch-size", "4", "--log", str(log_a))
    assert r.returncode == 0, r.stderr
    (fp_a,) = {rec.fingerprint for rec in read_log(log_a)[0]}
    r = run_cli("tune", str(MATMUL), *SIZE, "--trials", "4", "--batch-size", "4", "--log", str(log_b),
                "--target", "llvm-cpu -mcpu=haswell", "--transfer-from", str(log_a),
                "--transfer-top", "2")  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())  # rich may wrap the line
    assert "transfer: matmul: 4 record(s)" in said and f"{fp_a} (4)" in said
    records = [rec for rec in read_log(log_b)[0] if rec.retimed is None]  # the search's
    assert len(records) == 4 and fp_a not in {rec.fingerprint for rec in records}
    assert all(rec.target == "llvm-cpu -mcpu=haswell" and rec.decisions is not None for rec in records)


def test_transfer_from_a_missing_log_is_an_error(tmp_path):
    r = run_cli("tune", str(MATMUL), *SIZE, "--trials", "1", "--log", str(tmp_path / "b.jsonl"),
                "--transfer-from", str(tmp_path / "nope.jsonl"))  # fmt: skip
    assert r.returncode == 2 and "nope.jsonl not found" in r.stderr


def test_the_shipped_model_guides_a_workload_with_no_log_by_default(tmp_path):
    """`--cost-model auto` is the default: a workload with no log on the chip starts from the shipped
    model; once the log holds its records, they rule; `none` starts cold."""
    log = tmp_path / "a.jsonl"
    tune = ("tune", str(MATMUL), *SIZE, "--trials", "4", "--batch-size", "4", "--log", str(log))
    first, again = run_cli(*tune), run_cli(*tune)
    cold = run_cli(*tune[:-1], str(tmp_path / "b.jsonl"), "--cost-model", "none")
    for r in (first, again, cold):
        assert r.returncode == 0, r.stderr
    assert "guided by pretrained cost model" in " ".join(first.stderr.split())
    assert "pretrained" not in again.stderr and "pretrained" not in cold.stderr
