"""The manifest of a built library: its schema, its checksum and the ABI the library itself carries.

A manifest is untrusted input to :func:`autosched.load`: every field is checked for type and range,
with a :class:`LoadError` naming the field (``functions[0].args[1].shape[0]``). The ``sha256`` covers
the ``.so`` bytes and the manifest's canonical JSON (every field but ``sha256``), so an edit of either
is caught. The library also embeds its ABI (the symbol ``autosched_abi``: each function's arguments,
shapes, dtypes and roles), which load compares with the manifest, so that even an edit whose checksum
was recomputed cannot make a kernel run on arrays of another size.

Each function's ``record`` says what its time was measured on: ``alignment_bytes`` (the boundary every
buffer started on) and, where the log has it, ``misaligned`` (``offset_bytes`` past that boundary and
its ``median_s``). Both are optional: older manifests lack them. The call path does not copy a
misaligned argument to aligned scratch: see :mod:`autosched.records.alignment` for why.

Stdlib only: loading a library must stay light. Example::

    m = validate_manifest(json.loads(text), "build/manifest.json")
    ok = library_digest(so_bytes, m) == m["sha256"]
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, NoReturn

from ..errors import AutoschedError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 2  # 2: checksum covers the manifest, symbols prefixed, ABI embedded
SYMBOL_PREFIX = "autosched_"  # every kernel a library exports; load never resolves any other name
ABI_SYMBOL = "autosched_abi"  # const char[]: abi_text(manifest), NUL-terminated
MAX_MANIFEST_BYTES = 16 << 20
MAX_DIM = (1 << 31) - 1
MAX_ARRAY_BYTES = 1 << 46  # 64 TiB: more than any machine maps; keeps shape arithmetic sane

# numpy dtype names a library may take, and the C type of a pointer to their elements (float16 has no
# portable C type: raw bits).
C_TYPES = {
    "float32": "float", "float64": "double", "float16": "uint16_t", "bfloat16": "uint16_t",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "uint8_t",
}  # fmt: skip
ITEM_BYTES = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "int16": 2, "int32": 4,
    "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
}  # fmt: skip

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}\Z")
_LIBRARY = re.compile(r"lib[A-Za-z0-9_]{1,200}\.so\Z")
_HEADER = re.compile(r"[A-Za-z0-9_]{1,200}\.h\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


class LoadError(AutoschedError):
    """A library that must not be loaded here; the message says why."""


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def library_digest(so_bytes: bytes, manifest: dict[str, Any]) -> str:
    """sha256 over the library and the canonical manifest without its ``sha256`` field."""
    h = hashlib.sha256(so_bytes)
    h.update(b"\0autosched-manifest\0")
    h.update(canonical_json({k: v for k, v in manifest.items() if k != "sha256"}))
    return h.hexdigest()


def abi_text(manifest: dict[str, Any]) -> str:
    """What the library embeds as :data:`ABI_SYMBOL`: names, shapes, dtypes and roles, nothing else."""
    abi = [
        [f["name"], [[a["name"], list(a["shape"]), a["dtype"], a["role"]] for a in f["args"]]]
        for f in manifest["functions"]
    ]
    return canonical_json(abi).decode()


def abi_c_source(manifest: dict[str, Any]) -> str:
    """A C file defining :data:`ABI_SYMBOL` (the text is ASCII JSON: only ``\\`` and ``"`` need escapes)."""
    text = abi_text(manifest).replace("\\", "\\\\").replace('"', '\\"')
    return f'const char {ABI_SYMBOL}[] = "{text}";\n'


def validate_manifest(m: Any, where: str) -> dict[str, Any]:
    """``m`` when it is a well-formed manifest of this format; otherwise a LoadError naming the field."""
    if not isinstance(m, dict):
        raise LoadError(f"{where}: the manifest must be a JSON object, got {type(m).__name__}")
    fmt = m.get("format")
    if fmt == 1:
        raise LoadError(
            f"{where}: built by an older autosched (manifest format 1, whose checksum does not cover the "
            "manifest); rebuild the library with `autosched build`"
        )
    if type(fmt) is not int or fmt != MANIFEST_FORMAT:
        raise LoadError(
            f"{where}: manifest format {fmt!r} is not one this autosched reads ({MANIFEST_FORMAT})"
        )
    field = _Fields(where)
    field.text(m, "autosched")
    field.match(m, "name", _IDENT, "a C identifier")
    field.match(m, "library", _LIBRARY, "a file name lib<name>.so in the library's directory")
    field.match(m, "sha256", _SHA256, "64 lower-case hex digits")
    field.match(m, "header", _HEADER, "a file name <name>.h in the library's directory")
    field.optional_text(m, "log")
    target = field.get(m, "target", dict)
    for key in ("name", "fingerprint", "triple", "cpu"):
        field.text(target, key, "target.")
    features = field.get(target, "cpu_features", list, "target.")
    for i, f in enumerate(features):
        if not isinstance(f, str):
            field.fail(f"target.cpu_features[{i}]", "a string", f)
    field.get(target, "chip", dict, "target.")
    functions = field.get(m, "functions", list)
    if not functions:
        field.fail("functions", "a non-empty list", functions)
    names: set[str] = set()
    for i, fn in enumerate(functions):
        _validate_function(field, fn, f"functions[{i}]")
        if fn["name"] in names:
            field.fail(f"functions[{i}].name", "a name no other function has", fn["name"])
        names.add(fn["name"])
    return m


def _validate_function(field: _Fields, fn: Any, at: str) -> None:
    if not isinstance(fn, dict):
        field.fail(at, "an object", fn)
    field.match(fn, "name", _IDENT, "a C identifier", f"{at}.")
    field.text(fn, "workload", f"{at}.")
    field.text(fn, "workload_key", f"{at}.")
    field.get(fn, "workload_args", dict, f"{at}.")
    record = field.get(fn, "record", dict, f"{at}.")
    if record.get("source") not in ("log", "default"):
        field.fail(f"{at}.record.source", '"log" or "default"', record.get("source"))
    _validate_alignment(field, record, f"{at}.record")
    args = field.get(fn, "args", list, f"{at}.")
    if not args:
        field.fail(f"{at}.args", "a non-empty list", args)
    roles = []
    for j, a in enumerate(args):
        aat = f"{at}.args[{j}]"
        if not isinstance(a, dict):
            field.fail(aat, "an object", a)
        field.text(a, "name", f"{aat}.")
        dtype = a.get("dtype")
        if not isinstance(dtype, str) or dtype not in C_TYPES:
            field.fail(f"{aat}.dtype", f"one of {', '.join(C_TYPES)}", dtype)
        if a.get("role") not in ("input", "output"):
            field.fail(f"{aat}.role", '"input" or "output"', a.get("role"))
        roles.append(a["role"])
        shape = field.get(a, "shape", list, f"{aat}.")
        size = ITEM_BYTES[dtype]
        for d, n in enumerate(shape):
            if type(n) is not int or not 0 <= n <= MAX_DIM:
                field.fail(f"{aat}.shape[{d}]", f"an integer in [0, {MAX_DIM}]", n)
            size *= n
        if size > MAX_ARRAY_BYTES:
            field.fail(f"{aat}.shape", f"an array of at most {MAX_ARRAY_BYTES} bytes", shape)
    if "output" not in roles or roles != sorted(roles):  # "input" < "output": inputs come first
        field.fail(f"{at}.args", "inputs, then at least one output", roles)


def _validate_alignment(field: _Fields, record: dict[str, Any], at: str) -> None:
    """The optional alignment facts of a kernel's record (older manifests lack them): the boundary its
    time was measured on, and the misaligned case's offset and median seconds."""
    if "alignment_bytes" in record:
        value = record["alignment_bytes"]
        if type(value) is not int or not 0 < value <= 1 << 20:
            field.fail(f"{at}.alignment_bytes", "a whole number of bytes > 0", value)
    if "misaligned" in record:
        mis = record["misaligned"]
        if not isinstance(mis, dict):
            field.fail(f"{at}.misaligned", "an object", mis)
        offset, median = mis.get("offset_bytes"), mis.get("median_s")
        if type(offset) is not int or not 0 < offset <= 1 << 20:
            field.fail(f"{at}.misaligned.offset_bytes", "a whole number of bytes > 0", offset)
        if not is_seconds(median):
            field.fail(f"{at}.misaligned.median_s", "finite seconds >= 0", median)


def is_seconds(v: Any) -> bool:
    """A JSON number (not a boolean) that is finite and >= 0."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v) and v >= 0
    except OverflowError:  # an integer of 400 digits
        return False


class _Fields:
    """Field checks that raise one LoadError naming the field, what it should be and what it is."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, name: str, expected: str, got: Any) -> NoReturn:
        shown = repr(got)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise LoadError(
            f"{self.where}: field {name} must be {expected}, got {shown}; the manifest is malformed "
            "(rebuild the library with `autosched build`)"
        )

    def get(self, obj: dict[str, Any], key: str, kind: type, at: str = "") -> Any:
        if key not in obj:
            raise LoadError(f"{self.where}: the manifest has no field {at}{key}; rebuild the library")
        value = obj[key]
        if not isinstance(value, kind):
            self.fail(at + key, f"a JSON {'object' if kind is dict else kind.__name__}", value)
        return value

    def text(self, obj: dict[str, Any], key: str, at: str = "") -> str:
        value: str = self.get(obj, key, str, at)
        return value

    def optional_text(self, obj: dict[str, Any], key: str, at: str = "") -> None:
        if obj.get(key) is not None:
            self.text(obj, key, at)

    def match(
        self, obj: dict[str, Any], key: str, pattern: re.Pattern[str], expected: str, at: str = ""
    ) -> None:
        value = self.text(obj, key, at)
        if not pattern.match(value):
            self.fail(at + key, expected, value)
