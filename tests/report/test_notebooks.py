"""The notebooks run, top to bottom, in a fresh kernel (nbclient): they never rot."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra: pip install 'autosched[notebooks]'")
nbclient = pytest.importorskip("nbclient", reason="the notebooks extra: pip install 'autosched[notebooks]'")
pytest.importorskip("ipykernel", reason="the notebooks extra: pip install 'autosched[notebooks]'")
pytest.importorskip("matplotlib", reason="the notebooks plot with the report extra (matplotlib)")

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_and_they_are_stored_without_outputs():
    assert len(NOTEBOOKS) >= 2
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code), path.name


NEEDS = {"03_onnx_profile": "onnx"}  # notebooks that need more than the report and notebooks extras


# Not slow-marked: CI executes the notebooks so they never rot (each tunes or builds for real: 10-30 s).
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    if path.stem in NEEDS:
        pytest.importorskip(NEEDS[path.stem], reason=f"{path.name} needs {NEEDS[path.stem]}")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    code = [c for c in nb.cells if c.cell_type == "code"]
    if any("tuning_curve_figure(" in c.source for c in code):
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, "the tuning curve figure was shown"
