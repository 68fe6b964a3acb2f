"""The README's example runs as written (and computes a matmul)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)  # the first block: writing an operator
    np.testing.assert_allclose(scope["c"], scope["a"] @ scope["b"], rtol=1e-4)
