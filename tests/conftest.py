import os

os.environ.setdefault("AUTOSCHED_VERIFY", "1")
os.environ.setdefault("AUTOSCHED_MEASURE_CHIP", "0")  # chip facts: estimates, no timing in tests

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from this run")


@pytest.fixture
def golden(request):
    """``golden("name.txt", text)``: compare with tests/golden/name.txt (``--update-golden`` rewrites it)."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--update-golden") or not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            if not request.config.getoption("--update-golden"):
                pytest.fail(f"golden file {path} did not exist; written now, check it and commit it")
            return
        assert text == path.read_text(), (
            f"output differs from {path}; if intended, rerun with --update-golden"
        )

    return check


@pytest.fixture
def opencl():
    """The opencl adapter; skips the test unless pyopencl is installed and a device answers (PoCL here)."""
    pytest.importorskip("pyopencl")
    from autosched.errors import AutoschedError
    from autosched.hai.registry import get_adapter

    adapter = get_adapter("opencl")
    try:
        adapter.info()
    except AutoschedError as e:
        pytest.skip(f"no OpenCL device: {e}")
    return adapter
