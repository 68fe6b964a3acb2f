"""Writes the notebooks of this folder from the cells below, outputs cleared: edit here, then run
``python notebooks/make_notebooks.py``. tests/report/test_notebooks.py executes them (nbclient).

Each notebook tunes at small sizes with few trials, so it runs in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

SETUP = '''\
%matplotlib inline
import subprocess, sys, tempfile
from pathlib import Path

import numpy as np

import autosched

work = Path(tempfile.mkdtemp(prefix="autosched-notebook-"))


def autosched_cli(*args):
    """Run `autosched ARGS...` (the command line a user types) and show what it prints."""
    cmd = [sys.executable, "-m", "autosched.cli", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:], sep="\\n")
    assert r.returncode == 0, f"autosched {args[0]} failed"


work'''

OP_FILE = """\
op_file = work / "matmul_op.py"
op_file.write_text(\'\'\'
import numpy as np
import autosched
from autosched import te


@autosched.workload(numpy=lambda a, b: [np.matmul(a, b)])
def matmul(M=32, N=32, K=32, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]
\'\'\')"""

QUICKSTART = [
    new_markdown_cell(
        "# Quick start: write an op, tune it, build it, load it, see where the time went\n\n"
        "Small sizes and few trials, so this runs in well under a minute. For real tuning use a few "
        "hundred trials (`--trials 200`) on a quiet machine."
    ),
    new_code_cell(SETUP),
    new_markdown_cell(
        "## 1. Write an op\nAn op file holds `@autosched.workload` functions: inputs first, then outputs."
    ),
    new_code_cell(OP_FILE),
    new_markdown_cell(
        "## 2. Tune it briefly\nEvery measured candidate is checked against numpy and appended to the log."
    ),
    new_code_cell(
        'log = work / "matmul.jsonl"\n'
        'autosched_cli("tune", op_file, "--trials", 16, "--batch-size", 8, "--log", log)'
    ),
    new_markdown_cell("## 3. Build the library and load it"),
    new_code_cell(
        'autosched_cli("build", op_file, "--log", log, "-o", work / "lib")\n'
        'lib = autosched.load(work / "lib")\n'
        "rng = np.random.default_rng(0)\n"
        "a = rng.uniform(-1, 1, (32, 32)).astype(np.float32)\n"
        "b = rng.uniform(-1, 1, (32, 32)).astype(np.float32)\n"
        "c = lib.matmul(a, b)\n"
        "np.testing.assert_allclose(c, a @ b, rtol=2e-4, atol=2e-4)\n"
        "lib.matmul"
    ),
    new_markdown_cell(
        "## 4. Plot its tuning curve\nThe report's own figure functions return matplotlib Figures."
    ),
    new_code_cell(
        "from autosched.report.data import read_logs, summarize\n"
        "from autosched.report.figures import tuning_curve_figure\n\n"
        "data = summarize(read_logs([log]))\n"
        "(task,) = data.tasks\n"
        'print(f"{task.label}: best {task.best_gflops:.1f} GFLOP/s in {task.trials} trials")\n'
        "tuning_curve_figure(data.curves[task.key], title=task.label)"
    ),
    new_markdown_cell(
        "## 5. Profile the library and write the report\n`autosched profile DIR` and `autosched report LOG`."
    ),
    new_code_cell(
        "from autosched.report.profile import format_profile, profile_directory\n\n"
        'prof = profile_directory(work / "lib", repeat=5, op_files=[str(op_file)])\n'
        "print(format_profile(prof))\n"
        'assert prof.kernels[0].check == "ok"\n'
        'autosched_cli("report", log, "--op", op_file, "-o", work / "report.html")'
    ),
]

TRANSFER = [
    new_markdown_cell(
        "# Two chips, and transfer between them\n\n"
        "`llvm-cpu` (this machine's CPU) and `llvm-cpu -mcpu=haswell` (AVX2 code on the same machine) "
        "are two chips to autosched: their records never mix. `--transfer-from` lets tuning on the second "
        "learn from the first chip's log: its records train the cost model and its best schedules are "
        "measured anew first. Small sizes, few trials."
    ),
    new_code_cell(SETUP),
    # no numpy baseline here: each tune would end with a 10 s timed comparison against it
    new_code_cell(
        OP_FILE.replace("@autosched.workload(numpy=lambda a, b: [np.matmul(a, b)])", "@autosched.workload")
    ),
    new_markdown_cell("## Tune on the first chip"),
    new_code_cell(
        'native = work / "llvm-cpu.jsonl"\n'
        'autosched_cli("tune", op_file, "--trials", 12, "--batch-size", 6, "--log", native)'
    ),
    new_markdown_cell("## Tune on the second chip, starting from the first chip's log"),
    new_code_cell(
        'haswell = work / "llvm-cpu-haswell.jsonl"\n'
        'autosched_cli("tune", op_file, "--target", "llvm-cpu -mcpu=haswell", "--trials", 12,\n'
        '              "--batch-size", 6, "--log", haswell, "--transfer-from", native, "--transfer-top", 4)'
    ),
    new_markdown_cell("## Compare: one tuning curve per chip, and the report's side-by-side table"),
    new_code_cell(
        "from autosched.report.data import read_logs, summarize\n"
        "from autosched.report.figures import tuning_curve_figure\n\n"
        "data = summarize(read_logs([native, haswell]))\n"
        "for t in data.tasks:\n"
        '    print(f"{t.target:28} best {t.best_gflops:7.1f} GFLOP/s in {t.trials} trials")\n'
        "assert len({t.fingerprint for t in data.tasks}) == 2\n"
        "(key,) = data.curves\n"
        'tuning_curve_figure(data.curves[key], title="matmul 32x32x32 on two chips")'
    ),
    new_code_cell(
        'autosched_cli("report", native, haswell, "--op", op_file, "-o", work / "two_chips.html")\n'
        'assert "cross-chip-table" in (work / "two_chips.html").read_text()'
    ),
]

ONNX_MODEL = [
    new_markdown_cell(
        "# From ONNX to a profile: where a model's time goes\n\n"
        "A small MLP written with `onnx.helper`, built into a model directory "
        "(`autosched build model.onnx`), loaded, checked against numpy, and profiled kernel by kernel "
        "(`autosched profile DIR`). Its tasks use default schedules here (no log): the profile shows "
        "which ones to tune first."
    ),
    new_code_cell(SETUP),
    new_code_cell(
        "import onnx\n"
        "from onnx import TensorProto, helper, numpy_helper\n\n"
        "rng = np.random.default_rng(0)\n"
        "w1 = rng.uniform(-0.5, 0.5, (64, 128)).astype(np.float32)\n"
        "b1 = rng.uniform(-0.5, 0.5, (128,)).astype(np.float32)\n"
        "w2 = rng.uniform(-0.5, 0.5, (128, 10)).astype(np.float32)\n"
        "nodes = [\n"
        '    helper.make_node("MatMul", ["x", "w1"], ["h"]),\n'
        '    helper.make_node("Add", ["h", "b1"], ["hb"]),\n'
        '    helper.make_node("Relu", ["hb"], ["r"]),\n'
        '    helper.make_node("MatMul", ["r", "w2"], ["logits"]),\n'
        '    helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),\n'
        "]\n"
        "graph = helper.make_graph(\n"
        '    nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],\n'
        '    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [8, 10])],\n'
        '    [numpy_helper.from_array(a, name) for a, name in ((w1, "w1"), (b1, "b1"), (w2, "w2"))],\n'
        ")\n"
        'model_file = work / "mlp.onnx"\n'
        'onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_file)'
    ),
    new_markdown_cell("## Build, load, and check against numpy"),
    new_code_cell(
        'autosched_cli("build", model_file, "-o", work / "mlp")\n'
        'model = autosched.load(work / "mlp")\n'
        "x = rng.uniform(-1, 1, (8, 64)).astype(np.float32)\n"
        "logits = np.maximum(x @ w1 + b1, 0) @ w2\n"
        "expected = np.exp(logits - logits.max(-1, keepdims=True))\n"
        "expected /= expected.sum(-1, keepdims=True)\n"
        'np.testing.assert_allclose(model.run({"x": x})["probs"], expected, rtol=2e-4, atol=2e-6)\n'
        "model"
    ),
    new_markdown_cell(
        "## Profile: time per kernel, share of one run, GFLOP/s, fraction of the roofline bound\n"
        "On a busy machine parallel kernels wait at barriers: the profile says so."
    ),
    new_code_cell(
        "from autosched.report.profile import format_profile, profile_directory, profile_section\n"
        "from autosched.report.page import write_report\n\n"
        'prof = profile_directory(work / "mlp", repeat=10)\n'
        "print(format_profile(prof))\n"
        'assert len(prof.kernels) == len(model.plan["tasks"])\n'
        'write_report([], work / "mlp_profile.html", extra_sections=[profile_section(prof)])'
    ),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_two_chips_transfer.ipynb": TRANSFER,
    "03_onnx_profile.ipynb": ONNX_MODEL,
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.validate(nb)
        nbformat.write(nb, HERE / name)
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
