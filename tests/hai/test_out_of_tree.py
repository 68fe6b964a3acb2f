"""An adapter from outside the package (issue 13): a distribution on sys.path with an entry point in
the ``autosched.adapters`` group, as ``pip install autosched-mychip`` leaves it. With no change to
autosched, ``autosched devices`` lists it, ``tune --target mychip`` tunes on it, ``build`` builds for it
and ``autosched.ops.*(platform="auto")`` runs on it."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import autosched
from autosched.hai import registry
from autosched.measure.isolated import close_workers
from autosched.ops import dispatch

# A vendor's whole adapter: the llvm-cpu code generator under another kind, reporting a faster chip.
ADAPTER = '''
"""autosched-mychip: MyChip (the host CPU under another name) for autosched."""

import dataclasses

from autosched.hai.llvm_cpu import LLVMCPUAdapter


class MyChipAdapter(LLVMCPUAdapter):
    spec = dataclasses.replace(
        LLVMCPUAdapter.spec, kind="mychip", aliases=(), measures_facts=False,
        description="MyChip: the host CPU through LLVM, under another name",
    )

    def info(self):
        host = super().info()
        faster = 10 * host.peak_gflops
        return dataclasses.replace(host, name="mychip-1", peak_gflops=faster, bandwidth_gbs=1e3)
'''

OPS_FILE = os.path.join(os.path.dirname(autosched.__file__), "ops", "workloads.py")


@pytest.fixture
def mychip(install_adapter, tmp_path, monkeypatch):
    """The site folder of an installed autosched-mychip, on sys.path and on the children's PYTHONPATH."""
    site = install_adapter("mychip", "MyChipAdapter", ADAPTER)
    monkeypatch.setenv("AUTOSCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AUTOSCHED_LOGS", raising=False)
    dispatch.clear_memory_cache()
    monkeypatch.setattr(dispatch, "_chips", {})
    close_workers()  # a compile worker started before the install would not see the new package
    yield site
    dispatch.clear_memory_cache()
    close_workers()


def _cli(*args):
    r = subprocess.run(
        [sys.executable, "-m", "autosched.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_entry_point_makes_a_target_kind(mychip):
    assert "mychip" in registry.kinds()
    adapter = registry.get_adapter("mychip -mcpu=x86-64-v3")
    assert adapter.spec.style == "cpu" and adapter.info().name == "mychip-1"
    assert any(line.startswith("mychip") and "mychip-1" in line for line in registry.list_devices())


def test_tune_build_and_run_an_op_on_the_out_of_tree_adapter(mychip, tmp_path, caplog):
    log = tmp_path / "mychip.jsonl"
    shape = ["M=16", "N=16", "K=16"]
    devices = _cli("devices")
    assert "mychip" in devices and "mychip-1" in devices
    out = _cli("tune", OPS_FILE, "--workload", "ops_matmul", "--args", *shape, "--target", "mychip",
               "--trials", "4", "--batch-size", "4", "--log", str(log))  # fmt: skip
    assert "GFLOP/s" in out
    _cli("build", OPS_FILE, "--workload", "ops_matmul", "--args", *shape, "--target", "mychip",
         "--log", str(log), "-o", str(tmp_path / "lib"))  # fmt: skip
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 16), "float32"), rng.standard_normal((16, 16), "float32")
    c = autosched.load(tmp_path / "lib").ops_matmul(a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    with caplog.at_level(logging.DEBUG, logger="autosched.hai"):
        c = autosched.ops.matmul(a, b, platform="auto", logs=log)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "on mychip, its fastest tuned record" in caplog.text


def test_auto_prefers_the_higher_peak_without_records(mychip, caplog):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((8, 12), "float32"), rng.standard_normal((12, 4), "float32")
    with caplog.at_level(logging.DEBUG, logger="autosched.hai"), pytest.warns(UserWarning, match="no tuned"):
        c = autosched.ops.matmul(a, b, platform="auto")
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "on mychip, no tuned record" in caplog.text
