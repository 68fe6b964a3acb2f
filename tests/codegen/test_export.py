"""``autosched build`` + ``autosched.load``: build from a log, load in a fresh process, call from C."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched.runtime.cpufeatures import host_flags
from autosched.runtime.export import ExportError, export_library
from autosched.runtime.load import LoadError
from tests.dlpack import DLPackOnly

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
SHAPE = {"M": 16, "N": 32, "K": 8}
ARGS = [f"{k}={v}" for k, v in SHAPE.items()]


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autosched.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)  # fmt: skip


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    """A log with two records for the matmul at SHAPE on this chip: the faster one must be built."""
    from autosched.hai.registry import get_adapter
    from autosched.records.log import append_records
    from autosched.records.record import make_record
    from autosched.target import parse_target
    from autosched.te.workload import load_op_file

    [wl] = load_op_file(MATMUL)
    inst = wl.instantiate(**SHAPE)
    target = parse_target("llvm-cpu")
    chip = get_adapter(target).info()
    C = inst.outputs[0]
    s = autosched.create_schedule(C)
    i, j = s[C].op.axis
    _, ji = s[C].split(j, factor=8)
    s[C].vectorize(ji)
    s[C].parallel(i)
    slow = autosched.create_schedule(C)
    path = tmp_path_factory.mktemp("log") / "matmul.jsonl"
    append_records(path, [make_record(inst, target, chip, slow.trace, [2e-6]),
                          make_record(inst, target, chip, s.trace, [1e-6])])  # fmt: skip
    return path, s.trace


@pytest.fixture(scope="module")
def built(tuned_log, tmp_path_factory):
    log, _ = tuned_log
    out = tmp_path_factory.mktemp("lib") / "matmul"
    res = cli("build", MATMUL, "--log", log, "-o", out, "--args", *ARGS)
    assert res.returncode == 0, res.stderr
    assert "tuned record" in res.stdout
    return out


def test_build_writes_library_header_manifest(built, tuned_log):
    from autosched.search_space.trace import trace_to_json

    assert sorted(p.name for p in built.iterdir()) == ["libmatmul.so", "manifest.json", "matmul.h"]
    m = json.loads((built / "manifest.json").read_text())
    [fn] = m["functions"]
    assert fn["name"] == "matmul" and fn["workload_args"]["M"] == 16
    assert [(a["name"], a["shape"], a["dtype"], a["role"]) for a in fn["args"]] == [
        ("A", [16, 8], "float32", "input"),
        ("B", [8, 32], "float32", "input"),
        ("C", [16, 32], "float32", "output"),
    ]
    assert fn["record"]["source"] == "log" and fn["record"]["median_s"] == 1e-6
    assert fn["record"]["trace"] == json.loads(json.dumps(trace_to_json(tuned_log[1])))  # the best record
    assert m["target"]["fingerprint"].startswith("llvm-cpu:") and "sse2" in m["target"]["cpu_features"]
    assert len(m["sha256"]) == 64
    header = (built / "matmul.h").read_text()
    assert "void autosched_matmul(const float* A, const float* B, float* C);" in header
    assert "#define MATMUL_A_DIM0 16" in header


def test_load_in_fresh_process(built):
    code = f"""
import sys, numpy as np, autosched
lib = autosched.load({str(built)!r})
a = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
b = np.random.default_rng(1).standard_normal((8, 32)).astype("float32")
c = np.empty((16, 32), "float32")
assert lib.matmul(a, b, c) is None
np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(lib.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
assert not [m for m in sys.modules if m.startswith("llvmlite")], "loading must not need llvmlite"
print("OK")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr


def test_c_program(built, tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    app = tmp_path / "app"
    src = ROOT / "examples" / "c_app" / "main.c"
    subprocess.run([cc, "-O2", f"-I{built}", str(src), f"-L{built}", "-lmatmul", "-lm",
                    f"-Wl,-rpath,{built}", "-o", str(app)], check=True)  # fmt: skip
    res = subprocess.run([str(app)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("OK: matmul 16x32x8")


def test_missing_record_is_a_clear_error(tuned_log, tmp_path):
    log, _ = tuned_log
    res = cli("build", MATMUL, "--log", log, "-o", tmp_path / "x", "--args", "M=8", "N=8", "K=8")
    assert res.returncode == 2
    assert "no tuned record for workload matmul(M=8, N=8, K=8" in res.stderr
    assert str(log) in res.stderr and "--allow-default" in res.stderr
    assert not (tmp_path / "x" / "manifest.json").exists()
    with pytest.raises(ExportError, match="not found"):
        _export_missing_log(tmp_path)


def _export_missing_log(tmp_path):
    from autosched.te.workload import load_op_file

    [wl] = load_op_file(MATMUL)
    export_library([wl.instantiate(M=4, N=4, K=4)], tmp_path / "y", log=tmp_path / "nope.jsonl")


def test_allow_default(tmp_path):
    from autosched.te.workload import load_op_file

    [wl] = load_op_file(MATMUL)
    res = export_library([wl.instantiate(M=4, N=16, K=4)], tmp_path, name="mm", allow_default=True)
    assert res.functions[0].record is None
    lib = autosched.load(tmp_path)
    a, b = np.ones((4, 4), "float32"), np.ones((4, 16), "float32")
    assert (lib.matmul(a, b) == 4).all()
    assert lib.matmul.record["source"] == "default"


def copy_lib(built, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(built, d)
    return d


def test_manifest_from_another_cpu_is_refused(built, tmp_path):
    flags = host_flags() or frozenset()
    foreign = next(f for f in ("sve", "amx-fp16", "avx512vp2intersect", "fma4", "xop") if f not in flags)
    d = copy_lib(built, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    m["target"]["cpu_features"].append(foreign)
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(LoadError, match=f"lacks: {foreign}"):
        autosched.load(d)


def test_corrupt_library_is_refused(built, tmp_path):
    d = copy_lib(built, tmp_path)
    so = d / "libmatmul.so"
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    so.write_bytes(bytes(data))
    with pytest.raises(LoadError, match="checksum mismatch"):
        autosched.load(d)
    (d / "manifest.json").unlink()
    with pytest.raises(LoadError, match=r"no manifest\.json"):
        autosched.load(d)


def test_wrong_arguments_at_call_time(built):
    lib = autosched.load(built)
    a, b, c = np.ones((16, 8), "float32"), np.ones((8, 32), "float32"), np.empty((16, 32), "float32")
    with pytest.raises(
        ValueError, match=r"argument 1 \('B'\) expects float32\[8, 32\], got float64\[8, 32\]"
    ):
        lib.matmul(a, b.astype("float64"), c)
    with pytest.raises(
        ValueError, match=r"argument 0 \('A'\) expects float32\[16, 8\], got float32\[8, 16\]"
    ):
        lib.matmul(a.T.copy(), b, c)
    with pytest.raises(ValueError, match="C-contiguous"):
        lib.matmul(np.ones((8, 16), "float32").T, b, c)
    with pytest.raises(TypeError, match=r"expected 3 arrays .* or the 2 inputs; got 1"):
        lib.matmul(a)
    with pytest.raises(TypeError, match=r"must be a numpy array, got list: .* supports DLPack"):
        lib.matmul(a.tolist(), b, c)
    with pytest.raises(AttributeError, match="has no function 'conv'; it has: matmul"):
        lib.conv  # noqa: B018


def test_dlpack_arrays(built):
    lib = autosched.load(built)
    a, b, c = np.ones((16, 8), "float32"), np.ones((8, 32), "float32"), np.zeros((16, 32), "float32")
    lib.matmul(DLPackOnly(a), DLPackOnly(b), DLPackOnly(c))  # the output is written through its DLPack view
    assert (c == 8).all()
