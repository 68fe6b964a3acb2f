"""The workload registry, op files, and the structural workload key."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autosched import te
from autosched.errors import WorkloadError
from autosched.te.key import canonical_text
from autosched.te.workload import REGISTRY, Workload, load_op_file, workload, workload_key

ROOT = Path(__file__).resolve().parents[2]

MATMUL_SOURCE = """
from autosched import te
from autosched.te.workload import workload, workload_key

@workload
def {name}(M=64, N=32, K=16, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]
"""


def _write(tmp_path, text, name="op.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@workload
def wl_matmul(M=64, N=32, K=16, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def test_decorator_registers_and_keeps_the_function_callable():
    wl = REGISTRY["wl_matmul"]
    assert isinstance(wl, Workload) and wl_matmul.workload is wl
    assert wl.defaults == {"M": 64, "N": 32, "K": 16, "dtype": "float32"}
    A, _, C = wl_matmul(8, N=4)
    assert A.shape == (8, 16) and C.shape == (8, 4)
    assert wl_matmul.__name__ == "wl_matmul"


def test_instantiate_fills_defaults_and_applies_overrides():
    inst = REGISTRY["wl_matmul"].instantiate(M=128, dtype="float64")
    assert inst.name == "wl_matmul"
    assert inst.args == {"M": 128, "N": 32, "K": 16, "dtype": "float64"}
    assert [t.name for t in inst.inputs] == ["A", "B"] and [t.name for t in inst.outputs] == ["C"]
    assert inst.outputs[0].shape == (128, 32) and inst.outputs[0].dtype == "float64"
    assert inst.flop_count() == 128 * 32 * 16 * 2
    assert len(inst.key) == 64 and inst.key == workload_key(list(inst.tensors))


def test_unknown_argument_lists_the_valid_ones():
    with pytest.raises(WorkloadError, match=r"workload 'wl_matmul' \(in .*test_workload.py\): unknown .* L; "
                       r"valid: M, N, K, dtype"):  # fmt: skip
        REGISTRY["wl_matmul"].instantiate(L=3)


def test_bad_workload_functions(tmp_path):
    @workload(name="raises")
    def bad(M=-1):
        return [te.placeholder((M,), name="A")]

    with pytest.raises(WorkloadError, match=r"workload 'raises' \(in .*\) raised ValueError: .*shape"):
        bad.workload.instantiate()

    @workload
    def not_a_list(M=4):
        return te.placeholder((M,), name="A")

    with pytest.raises(WorkloadError, match="must return a list of tensors"):
        not_a_list.workload.instantiate()

    @workload
    def input_last(M=4):
        A = te.placeholder((M,), name="A")
        B = te.compute((M,), lambda i: A[i] * 2.0, name="B")
        return [B, A]

    with pytest.raises(WorkloadError, match=r"placeholder\(s\) A come after a computed tensor"):
        input_last.workload.instantiate()

    @workload
    def missing_input(M=4):
        A = te.placeholder((M,), name="A")
        return [te.compute((M,), lambda i: A[i] * 2.0, name="B")]

    with pytest.raises(WorkloadError, match=r"read placeholder\(s\) A that are not among"):
        missing_input.workload.instantiate()

    with pytest.raises(WorkloadError, match="'M' needs a default"):

        @workload
        def no_default(M, N=3):
            return []


def test_flop_count_counts_the_costlier_branch_and_not_index_math():
    @workload
    def relu_pad(N=10):
        A = te.placeholder((N,), name="A")
        B = te.compute((N + 2,), lambda i: te.if_then_else(i >= 1, te.exp(A[i * 1 - 1] + 1.0), 0.0), "B")
        return [A, B]

    assert relu_pad.workload.instantiate().flop_count() == 12 * 2


def _key_of(M=64, dtype="float32", const=0.5, name="C", index_shift=0):
    A = te.placeholder((M, 16), dtype, name="A")
    B = te.placeholder((16, 32), dtype, name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((M, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)
    D = te.compute((M, 32), lambda i, j: C[i, (j + index_shift) % 32] * const, name="D")
    return workload_key([A, B, D])


def test_key_changes_with_every_structural_change():
    base = _key_of()
    assert _key_of() == base  # rebuilt objects, same key
    variants = [_key_of(M=65), _key_of(dtype="float64"), _key_of(const=0.25), _key_of(name="C2"),
                _key_of(index_shift=1)]  # fmt: skip
    assert len({base, *variants}) == 1 + len(variants)


def test_key_counts_argument_order():
    A, B, C = wl_matmul()
    assert workload_key([A, B, C]) != workload_key([B, A, C])
    assert workload_key([C]) == workload_key([C])


def test_canonical_text_is_readable_and_golden():
    A, B, C = wl_matmul()
    text = canonical_text([A, B, C])
    assert text == (
        "autosched-te v1\n"
        't0 = placeholder "A" float32 [64, 16]\n'
        't1 = placeholder "B" float32 [16, 32]\n'
        't2 = compute "C" float32 (i:64, j:32) tag "" = '
        "sum<v0:float32, v1:float32 -> (v0:float32 + v1:float32); identity 0>"
        "((t0[i, k] * t1[k, j]), k:16)\n"
        "outputs t0 t1 t2\n"
    )
    # Records are looked up by this value: it must not change unless KEY_VERSION does.
    assert workload_key([A, B, C]) == GOLDEN_MATMUL_KEY


GOLDEN_MATMUL_KEY = "e769ed545b71deefde87587803ddc29b1c05a8f63aefada2dc2a8eef6c1289a9"


def test_key_is_the_same_in_another_process():
    # Another interpreter with another hash seed: nothing in the key may depend on id() or hash().
    script = MATMUL_SOURCE.format(name="sub_mm") + "print(workload_key(sub_mm()))"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == workload_key(wl_matmul())


def test_load_op_file(tmp_path):
    path = _write(tmp_path, MATMUL_SOURCE.format(name="opfile_mm") + MATMUL_SOURCE.format(name="opfile_mm2"))
    wls = load_op_file(path)
    assert [w.name for w in wls] == ["opfile_mm", "opfile_mm2"]
    assert REGISTRY["opfile_mm"] is wls[0] and wls[0].source_file == str(path)
    inst = wls[0].instantiate(M=8)
    assert inst.key == workload_key(wl_matmul(M=8))  # same structure, same key, wherever it is defined
    assert [w.name for w in load_op_file(path)] == ["opfile_mm", "opfile_mm2"]  # loading twice is fine


def test_load_op_file_errors(tmp_path):
    with pytest.raises(WorkloadError, match=r"op file .*nope\.py: not found"):
        load_op_file(tmp_path / "nope.py")
    bad = _write(tmp_path, "x = 1\ndef f(:\n    pass\n", "syntax.py")
    with pytest.raises(WorkloadError, match=r"syntax\.py, line 2: syntax error"):
        load_op_file(bad)
    raising = _write(tmp_path, "import math\n\nmath.sqrt(-1)\n", "raising.py")
    with pytest.raises(WorkloadError, match=r"raising\.py, line 3: importing raised ValueError: math domain"):
        load_op_file(raising)
    empty = _write(tmp_path, "from autosched import te\n", "empty.py")
    with pytest.raises(WorkloadError, match=r"empty\.py: defines no workloads"):
        load_op_file(empty)
