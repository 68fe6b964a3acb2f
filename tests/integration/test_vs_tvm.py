"""benchmarks/vs_tvm.py: its operators mean the same in autosched, TVM and numpy; --quick runs to the end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autosched.te.reference import reference_for
from autosched.testing import split_args, tolerance

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import vs_tvm  # noqa: E402
import vs_tvm_ops  # noqa: E402

HAVE_TVM = importlib.util.find_spec("tvm") is not None
NO_TVM = "apache-tvm is not installed (pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1)"


def _inputs(op: vs_tvm_ops.Op) -> tuple[list, list[np.ndarray]]:
    tensors = op.ours(op.quick)
    ins, _ = split_args(tensors)
    rng = np.random.default_rng(1)
    return tensors, [rng.standard_normal(t.shape).astype(np.float32) for t in ins]


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    rtol, atol = tolerance("float32", want)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=atol))


@pytest.mark.parametrize("name", list(vs_tvm_ops.OPS))
def test_autosched_version_matches_numpy(name: str) -> None:
    op = vs_tvm_ops.OPS[name]
    tensors, arrays = _inputs(op)
    assert _close(reference_for(tensors, arrays)[-1], op.reference(op.quick, *arrays))


TVM_VERSIONS = [(n, False) for n in vs_tvm_ops.OPS] + [
    (n, True) for n, op in vs_tvm_ops.OPS.items() if op.tvm_topi
]


@pytest.mark.skipif(not HAVE_TVM, reason=NO_TVM)
@pytest.mark.parametrize(("name", "topi"), TVM_VERSIONS)
def test_tvm_version_matches_numpy(name: str, topi: bool) -> None:
    import tvm
    from tvm import te

    op = vs_tvm_ops.OPS[name]
    _, arrays = _inputs(op)
    make = op.tvm_topi if topi and op.tvm_topi else op.theirs
    theirs = make(op.quick)
    lib = tvm.compile(tvm.IRModule({"main": te.create_prim_func(theirs)}), target="llvm")
    outs = [np.full([int(d) for d in t.shape], np.nan, np.float32) for t in theirs[len(arrays) :]]
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in [*arrays, *outs]]
    lib["main"](*args)
    assert _close(args[-1].numpy(), op.reference(op.quick, *arrays))


def test_memory_bound_bytes_count_inputs_and_outputs_once() -> None:
    op = vs_tvm_ops.OPS["stencil"]
    assert vs_tvm_ops.nbytes(op.ours((66, 66))) == (66 * 66 + 64 * 64) * 4


def test_without_tvm_it_says_so_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tvm", None)  # import tvm raises ImportError
    assert vs_tvm.main(["--quick", "--ops", "sumsq"]) == 0
    assert "apache-tvm is not installed" in capsys.readouterr().out


def test_unknown_operator_is_named() -> None:
    with pytest.raises(SystemExit):
        vs_tvm.main(["--ops", "nope"])


@pytest.mark.slow  # MetaSchedule costs about a minute an operator here even at 8 trials
@pytest.mark.skipif(not HAVE_TVM, reason=NO_TVM)
def test_quick_mode_compares_every_operator() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_NUM_THREADS": "2"}
    env.pop("AUTOSCHED_MEASURE_CHIP", None)  # the conftest estimates: the script needs the measured bandwidth
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vs_tvm.py"), "--quick"],
        capture_output=True, text=True, timeout=3600, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = proc.stdout.split("operator  trials")[-1]
    for name, op in vs_tvm_ops.OPS.items():
        row = next((line for line in table.splitlines() if line.strip().startswith(name + " ")), "")
        assert row, f"{name} missing from the table"
        unit = "GB/s" if op.memory_bound else "GFLOP/s"
        assert unit in row, row
        if op.memory_bound:
            assert "%" in row, row  # the fraction of the measured bandwidth
    assert "geometric mean ratio" in proc.stdout
