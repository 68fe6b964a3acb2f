"""A model's weights on disk: raw little-endian arrays in one binary file and a JSON index. Never pickled.

``weights.json`` lists each array (name, dtype, shape, byte offset, byte count) and the sha256 of
``weights.bin``; reading checks every field against the file before it makes a single array, so a
truncated or edited file is an error that names the file and the entry, never garbage.

Example::

    write_weights("build/m", [("conv1.weight", w1), ("fc.bias", b)])
    [w1_again, b_again] = read_weights("build/m")
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime.load import LoadError
from ..runtime.manifest import MAX_ARRAY_BYTES, MAX_DIM

INDEX = "weights.json"
DATA = "weights.bin"
WEIGHTS_FORMAT = 1
ALIGNMENT = 64
DTYPES = ("float32", "float64", "int32", "int64", "float16", "int8", "uint8", "int16")


class WeightsError(LoadError):
    """A weights file that is missing, truncated, corrupted or does not match its index."""


def write_weights(directory: str | Path, arrays: Sequence[tuple[str, np.ndarray]]) -> Path:
    """Write ``weights.bin`` and ``weights.json`` into ``directory``; returns the index's path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    digest = hashlib.sha256()
    offset = 0
    with open(out / DATA, "wb") as f:
        for name, array in arrays:
            a = np.asarray(array)
            if a.dtype.name not in DTYPES:
                raise WeightsError(f"weight {name!r}: dtype {a.dtype} cannot be stored (one of {DTYPES})")
            raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
            pad = (-offset) % ALIGNMENT
            f.write(b"\0" * pad)
            digest.update(b"\0" * pad)
            offset += pad
            f.write(raw)
            digest.update(raw)
            entries.append(
                {
                    "name": name,
                    "dtype": a.dtype.name,
                    "shape": list(a.shape),
                    "offset": offset,
                    "nbytes": len(raw),
                }
            )
            offset += len(raw)
    index = {"format": WEIGHTS_FORMAT, "data": DATA, "nbytes": offset, "sha256": digest.hexdigest()}
    index["arrays"] = entries
    path = out / INDEX
    path.write_text(json.dumps(index, indent=1) + "\n")
    return path


def read_weights(directory: str | Path) -> list[np.ndarray]:
    """The arrays of ``directory``'s weights, in index order, after checking index and data agree."""
    index_path = Path(directory) / INDEX
    try:
        index = json.loads(index_path.read_text())
    except FileNotFoundError:
        raise WeightsError(
            f"{index_path}: not found; the model directory is incomplete, rebuild it"
        ) from None
    except (OSError, ValueError) as e:
        raise WeightsError(f"{index_path}: not a readable weights index: {e}") from None
    if not isinstance(index, dict) or index.get("format") != WEIGHTS_FORMAT:
        fmt = index.get("format") if isinstance(index, dict) else None
        raise WeightsError(f"{index_path}: weights format {fmt!r} is not {WEIGHTS_FORMAT}")
    if index.get("data") != DATA or not isinstance(index.get("arrays"), list):
        raise WeightsError(f"{index_path}: expected 'data': {DATA!r} and a list of 'arrays'")
    data_path = Path(directory) / DATA
    try:
        data = data_path.read_bytes()
    except OSError as e:
        raise WeightsError(f"{data_path}: cannot read the weights: {e}") from None
    if len(data) != index.get("nbytes"):
        raise WeightsError(
            f"{data_path}: {len(data)} bytes, the index says {index.get('nbytes')}: truncated or replaced; "
            "rebuild the model"
        )
    if hashlib.sha256(data).hexdigest() != index.get("sha256"):
        raise WeightsError(f"{data_path}: checksum mismatch: the weights were changed after the build")
    return [_array(data, entry, n, index_path) for n, entry in enumerate(index["arrays"])]


def _array(data: bytes, entry: Any, n: int, where: Path) -> np.ndarray:
    label = f"{where}: array {n}"
    if not isinstance(entry, dict):
        raise WeightsError(f"{label}: expected an object, got {type(entry).__name__}")
    label += f" ({entry.get('name')!r})"
    dtype, shape, offset, nbytes = (entry.get(k) for k in ("dtype", "shape", "offset", "nbytes"))
    if dtype not in DTYPES:
        raise WeightsError(f"{label}: dtype {dtype!r} is not one of {DTYPES}")
    if not isinstance(shape, list) or not all(type(d) is int and 0 <= d <= MAX_DIM for d in shape):
        raise WeightsError(f"{label}: shape {shape!r} is not a list of ints in [0, {MAX_DIM}]")
    if type(offset) is not int or type(nbytes) is not int or offset < 0:
        raise WeightsError(f"{label}: offset {offset!r} and nbytes {nbytes!r} must be non-negative ints")
    item = np.dtype(dtype).itemsize
    count = math.prod(shape)  # exact: np.prod in int64 wraps, and a wrapped size could match nbytes
    if count * item > MAX_ARRAY_BYTES:
        raise WeightsError(f"{label}: {dtype}{shape} is over {MAX_ARRAY_BYTES} bytes")
    if count * item != nbytes:
        raise WeightsError(f"{label}: {dtype}{shape} takes {count * item} bytes, the index says {nbytes}")
    if offset + nbytes > len(data):
        raise WeightsError(f"{label}: bytes {offset}..{offset + nbytes} lie past the end ({len(data)})")
    little = np.dtype(dtype).newbyteorder("<")
    array = np.frombuffer(data, dtype=little, count=count, offset=offset).reshape(shape)
    return array.astype(np.dtype(dtype), copy=False)
