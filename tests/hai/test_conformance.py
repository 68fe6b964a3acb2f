"""The conformance suite a vendor runs on their adapter (issue 13)."""

import dataclasses
import subprocess
import sys

import pytest

from autosched.hai import registry
from autosched.hai.conformance import main, run_conformance
from autosched.hai.llvm_cpu import LLVMCPUAdapter
from autosched.topi.workloads import SMALL_CASES

from ..codegen.test_opencl import _why as no_opencl

SOME = "matmul,conv2d,softmax,reduce_max_keepdims,take,attention_causal"


class WrongAdapter(LLVMCPUAdapter):
    """Compiles like llvm-cpu, but its launch forgets to run the kernel: the suite must catch it."""

    spec = dataclasses.replace(LLVMCPUAdapter.spec, kind="wrongchip", aliases=())

    def launch(self, kernel, args):
        pass


@pytest.mark.parametrize("target", ["llvm-cpu", "llvm-cpu -mcpu=haswell"])
def test_cpu_targets_pass_on_some_ops(target, capsys):
    assert main(["--target", target, "--ops", SOME, "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert f"conformance of {target}" in out and "12 of 12 checks passed" in out
    assert "FAIL" not in out


def test_the_null_device_compiles_every_op_kind():
    checks = run_conformance("null", samples=2)
    assert {c.op for c in checks} == set(SMALL_CASES) and len(checks) == 3 * len(SMALL_CASES)
    assert {c.status for c in checks} == {"compiled"}, [c for c in checks if c.status != "compiled"]


@pytest.mark.skipif(no_opencl is not None, reason=no_opencl or "")
def test_opencl_passes_on_some_ops():
    checks = run_conformance("opencl", SOME.split(","), samples=1)
    assert {c.status for c in checks} == {"ok"}, [c for c in checks if c.status != "ok"]


def test_a_wrong_adapter_fails_with_a_table_and_status_1(monkeypatch, capsys):
    monkeypatch.setitem(registry.ADAPTERS, "wrongchip", f"{__name__}:WrongAdapter")
    assert main(["--target", "wrongchip", "--ops", "matmul", "--samples", "1"]) == 1
    out = capsys.readouterr().out
    assert "0 of 2 checks passed" in out and "FAIL matmul (default): AssertionError" in out


def test_an_unknown_op_case_is_named(capsys):
    assert main(["--target", "null", "--ops", "matmul,nope"]) == 2
    assert "unknown op case(s) nope; known: matmul" in capsys.readouterr().err


def test_the_module_runs_from_the_command_line():
    r = subprocess.run(
        [sys.executable, "-m", "autosched.hai.conformance", "--target", "null", "--ops", "gelu"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr  # compile-only is no failure, and no pass either
    assert "0 of 3 checks passed, 3 compiled (not run)" in r.stdout
    assert "gelu  compiled (not run)  compiled (not run)" in r.stdout


@pytest.mark.slow
def test_llvm_cpu_passes_every_op_kind():
    checks = run_conformance("llvm-cpu", samples=2)
    assert {c.status for c in checks} == {"ok"}, [c for c in checks if c.status != "ok"]
