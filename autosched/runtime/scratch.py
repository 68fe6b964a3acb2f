"""Scratch directories in the temp directory that a killed process does not leave behind for good.

Each name carries the creating process's id (``autosched-build-1234-abcd``). Making one first removes
the scratch directories of that prefix whose process is gone: a ``kill -9`` skips every ``finally``,
so the next run cleans up after it.

Example::

    with scratch_dir("autosched-link-") as tmp:
        (tmp / "obj0.o").write_bytes(obj)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def clean_stale(prefix: str, tmp: str | None = None) -> list[Path]:
    """Remove ``<tmp>/<prefix><pid>-*`` of processes that no longer run; returns what was removed.

    Directories of the older, pid-less form (``<prefix><random>``) are removed only when empty.
    """
    base = Path(tmp or tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    removed: list[Path] = []
    try:
        entries = list(base.glob(prefix + "*"))
    except OSError:
        return removed
    for d in entries:
        if d.is_symlink() or not d.is_dir():
            continue
        m = pattern.match(d.name)
        try:
            if m is None:
                d.rmdir()  # old-style name: only an empty one is surely abandoned (OSError if not)
            elif int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
                shutil.rmtree(d)
            else:
                continue
        except OSError:
            continue
        removed.append(d)
    return removed


def make_scratch_dir(prefix: str) -> Path:
    """A new directory ``<tmp>/<prefix><pid>-XXXX`` (after cleaning stale ones); the caller removes it."""
    clean_stale(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """:func:`make_scratch_dir` as a context manager that removes the directory on the way out."""
    d = make_scratch_dir(prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
