"""Pure parts of the runtime: CPU feature checks, manifest checks, C names and headers (no compiler)."""

import json

import pytest

from autosched.runtime.cpufeatures import checkable, cpuinfo_flag, host_flags, missing_features
from autosched.runtime.export import ExportedFunction, c_identifier, render_header
from autosched.runtime.load import LoadError, check_compatible, read_manifest
from autosched.topi.workloads import make_dense

FLAGS = frozenset("fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma bmi1 lm abm avx512f".split())


def test_llvm_feature_names_map_to_cpuinfo_flags():
    assert cpuinfo_flag("sse4.1") == "sse4_1"
    assert cpuinfo_flag("sse3") == "pni"
    assert cpuinfo_flag("avx512vnni") == "avx512_vnni"
    assert cpuinfo_flag("amx-tile") == "amx_tile"
    assert cpuinfo_flag("avx2") == "avx2"


def test_missing_and_checkable_features():
    assert missing_features(["avx2", "fma", "sse4.2", "64bit"], FLAGS) == []
    assert missing_features(["avx2", "avx512fp16", "amx-tile"], FLAGS) == ["amx-tile", "avx512fp16"]
    assert checkable(["avx2", "shstk", "sse3"], FLAGS) == ["avx2", "sse3"]  # shstk: hidden by the kernel


def test_host_flags_reads_x86_and_arm(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n\nprocessor\t: 1\nflags\t\t: fpu sse avx2\n")
    assert host_flags(x86) == frozenset({"fpu", "sse", "avx2"})
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert "sve" in host_flags(arm)
    assert host_flags(tmp_path / "missing") is None


def manifest(**target):
    base = {"name": "llvm-cpu", "fingerprint": "llvm-cpu:x:0", "cpu": "x", "triple": "", "cpu_features": []}
    return {
        "format": 1,
        "library": "libx.so",
        "sha256": "0" * 64,
        "target": {**base, **target},
        "functions": [],
    }


def test_check_compatible_refuses_other_architectures():
    with pytest.raises(LoadError, match="built for sparc64"):
        check_compatible(manifest(triple="sparc64-unknown-linux-gnu"))
    check_compatible(manifest())  # nothing to check: fine


def test_read_manifest_errors(tmp_path):
    with pytest.raises(LoadError, match=r"no manifest\.json"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(LoadError, match="not a readable manifest"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest(), "format": 99}))
    with pytest.raises(LoadError, match="format 99"):
        read_manifest(tmp_path)


def test_c_identifiers():
    assert c_identifier("matmul") == "matmul"
    assert c_identifier("conv2d-nchw.v2") == "conv2d_nchw_v2"
    assert c_identifier("3x3") == "_3x3"
    assert c_identifier("float") == "float_"


def test_header_declares_inputs_const_and_shapes():
    from autosched.te.workload import WorkloadInstance

    tensors = make_dense(M=4, N=8, K=16, activation="relu")
    inst = WorkloadInstance("dense", {"M": 4}, tuple(tensors))
    h = render_header("nn", [ExportedFunction("dense", inst, ())])
    assert "void autosched_dense(const float* X, const float* W, const float* bias, float* bias_relu);" in h
    assert "#define DENSE_BIAS_DIM0 8" in h and "#define DENSE_BIAS_RELU_DIM1 8" in h
    assert h.count("#ifndef AUTOSCHED_NN_H") == 1 and 'extern "C"' in h
