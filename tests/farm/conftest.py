"""Farm tests: a distributed.LocalCluster of process workers (2, one thread each), fake measurements."""

import pytest

pytest.importorskip("distributed", reason="farm tests need Dask distributed: pip install 'autosched[dask]'")

from autosched.measure.farm import Farm


@pytest.fixture(scope="module")
def farm2():
    """Two local worker processes owning llvm-cpu and its haswell variant (distinct chips here)."""
    notes: list[str] = []
    with Farm.connect("local:2", ["llvm-cpu", "llvm-cpu -mcpu=haswell"], on_note=notes.append) as farm:
        farm.notes = notes
        yield farm
