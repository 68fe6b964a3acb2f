"""Fixtures for the HAI tests: an adapter package installed from outside autosched, as pip leaves one."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def install_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, str], Path]:
    """``install_adapter(kind, entry, source)``: the distribution ``autosched-<kind>`` 0.1, its module
    ``autosched_<kind>`` holding ``source`` and the entry point ``<kind> = autosched_<kind>:<entry>`` in
    the ``autosched.adapters`` group, in a site folder on sys.path and on the worker processes'
    PYTHONPATH. Returns the site folder."""

    def install(kind: str, entry: str, source: str) -> Path:
        module = f"autosched_{kind}"
        site = tmp_path / "site"
        dist = site / f"{module}-0.1.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: autosched-{kind}\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[autosched.adapters]\n{kind} = {module}:{entry}\n")
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(site))
        paths = [str(site), os.environ.get("PYTHONPATH")]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
        return site

    return install
