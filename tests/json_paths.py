"""The paths into a JSON value, for the fuzz tests that delete or replace one part of a valid object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path (tuple of keys and indices) into a JSON value, the value's own () first."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths_of(v, (*prefix, i))
