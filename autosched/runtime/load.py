"""``autosched.load(DIR)``: a built library as a Python object whose attributes are its functions.

Loading compiles nothing and imports neither llvmlite nor the compiler stack. Everything in the
directory is untrusted until checked, in this order: the manifest's schema (:mod:`.manifest`); the
library path (a plain file in DIR: no ``../``, no absolute path, no symlink); this machine's CPU
features; the sha256 over the library and the manifest; the ELF structure (a truncated file would
kill the process with SIGBUS when mapped: :mod:`.elf`); then ``dlopen``, the ABI the library embeds
against the manifest's shapes and dtypes, and only ``autosched_<name>`` symbols.

Example::

    lib = autosched.load("build/matmul")
    lib.matmul(a, b, c)          # fills c; or c = lib.matmul(a, b) to get a new output
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import ArgumentTypeError, check_call
from .elf import check_shared_object
from .manifest import (
    ABI_SYMBOL,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    SYMBOL_PREFIX,
    LoadError,
    abi_text,
    library_digest,
    validate_manifest,
)

__all__ = ["Library", "LibraryFunction", "LoadError", "check_compatible", "load", "read_manifest"]


class LibraryFunction:
    """One function of a loaded library: call it with its inputs and outputs (arrays)."""

    def __init__(self, entry: dict[str, Any], cfunc: Any, library: Path):
        self.name: str = entry["name"]
        self.entry = entry
        self.args: list[dict[str, Any]] = entry["args"]
        self.n_inputs = sum(1 for a in self.args if a["role"] == "input")
        self._cfunc = cfunc
        self._library = library
        self._specs = [
            (a["name"], tuple(a["shape"]), _numpy_dtype(a["dtype"], library), a["role"] == "output")
            for a in self.args
        ]

    @property
    def record(self) -> dict[str, Any]:
        """The record the function was built from: source ("log" or "default"), trace, costs."""
        return dict(self.entry["record"])

    def signature(self) -> str:
        """E.g. ``matmul(A: float32[64, 64], B: float32[64, 64], C: float32[64, 64] (out))``."""
        parts = [
            f"{a['name']}: {a['dtype']}{a['shape']}{' (out)' if a['role'] == 'output' else ''}"
            for a in self.args
        ]
        return f"{self.name}({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"<autosched function {self.signature()} from {self._library}>"

    def __call__(self, *arrays: Any) -> Any:
        """Run on all arguments (outputs filled in place, returns None), or on the inputs only
        (returns the new output, or a tuple of them)."""
        if len(arrays) == self.n_inputs and self.n_inputs < len(self.args):
            outs = [np.empty(shape, dtype) for _, shape, dtype, _ in self._specs[self.n_inputs :]]
            self._run([*arrays, *outs])
            return outs[0] if len(outs) == 1 else tuple(outs)
        if len(arrays) != len(self.args):
            raise ArgumentTypeError(
                f"{self.name}: expected {len(self.args)} arrays (inputs then outputs) or the "
                f"{self.n_inputs} inputs; got {len(arrays)}. Signature: {self.signature()}"
            )
        self._run(arrays)
        return None

    def _run(self, arrays: Sequence[Any]) -> None:
        checked = check_call(self.name, self._specs, arrays)
        self._cfunc(*[a.ctypes.data for a in checked])


def _numpy_dtype(name: str, library: Path) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        raise LoadError(f"{library}: dtype {name} has no numpy type here; it cannot be called") from None


class Library:
    """A loaded library: ``lib.<function>(...)``; ``lib.functions`` by name; ``lib.manifest``."""

    def __init__(
        self, directory: Path, manifest: dict[str, Any], handle: Any, functions: list[LibraryFunction]
    ):
        self.directory = directory
        self.manifest = manifest
        self._handle = handle  # keeps the library mapped while any function is reachable through us
        self.functions = {f.name: f for f in functions}

    def __getattr__(self, name: str) -> LibraryFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        where = self.__dict__.get("directory")
        raise AttributeError(f"library {where} has no function {name!r}; it has: {', '.join(functions)}")

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.functions]

    def __repr__(self) -> str:
        return f"<autosched library {self.directory}: {', '.join(self.functions)}>"


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The checked manifest of a built library directory; a LoadError naming what is wrong otherwise."""
    path = Path(directory) / MANIFEST
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise LoadError(f"{path}: over {MAX_MANIFEST_BYTES >> 20} MB: not a manifest autosched wrote")
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LoadError(
            f"{directory}: no {MANIFEST}; is this a directory written by `autosched build`?"
        ) from None
    except (OSError, ValueError, RecursionError) as e:
        raise LoadError(f"{path}: not a readable manifest: {e}") from None
    return validate_manifest(manifest, str(path))


def library_path(directory: Path, manifest: dict[str, Any]) -> Path:
    """The library file, which must be a regular file directly inside ``directory`` (no symlink)."""
    so = directory / manifest["library"]  # the schema allows only lib<name>.so: no "/" or ".."
    if so.is_symlink():
        raise LoadError(f"{so}: a symbolic link; a library must be a plain file in {directory}")
    if so.resolve().parent != directory.resolve():
        raise LoadError(f"{so}: not directly inside {directory}")
    return so


def check_compatible(manifest: dict[str, Any], where: str = "library") -> None:
    """Raise LoadError when this machine cannot run the library's code (architecture, CPU features)."""
    from .cpufeatures import host_machine, missing_features

    target = manifest["target"]
    triple = str(target.get("triple") or "")
    arch = triple.split("-")[0]
    here = host_machine()
    if arch and here and arch != here:
        raise LoadError(f"{where}: built for {arch} ({target.get('name')}), but this machine is {here}")
    missing = missing_features(target.get("cpu_features", []))
    if missing:
        raise LoadError(
            f"{where}: built for {target.get('cpu')} ({target.get('fingerprint')}), whose code uses CPU "
            f"features this machine lacks: {', '.join(missing)}. Rebuild it here, or for a common "
            "subset with --target 'llvm-cpu -mcpu=x86-64-v3'"
        )


def load(directory: str | os.PathLike[str]) -> Library:
    """Load a library built by ``autosched build``, after checking it fits this machine.

    Example: ``lib = autosched.load("build"); c = lib.matmul(a, b)``.
    """
    from ..graph.load import is_model_directory, load_model

    if is_model_directory(directory):  # a model: kernels + graph + weights (graph/export.py)
        return load_model(directory)  # type: ignore[return-value]
    directory = Path(directory)
    manifest = read_manifest(directory)
    so = library_path(directory, manifest)
    check_compatible(manifest, str(so))
    try:
        data = so.read_bytes()
    except OSError as e:
        raise LoadError(f"{so}: cannot read the library: {e}") from None
    digest = library_digest(data, manifest)
    if digest != manifest["sha256"]:
        raise LoadError(
            f"{so}: checksum mismatch (sha256 {digest[:16]}..., manifest says {manifest['sha256'][:16]}...): "
            "the library or its manifest was changed or corrupted after it was built; rebuild it"
        )
    check_shared_object(data, str(so))
    try:
        handle = ctypes.CDLL(str(so.resolve()), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError as e:
        raise LoadError(f"{so}: the system loader refused it: {e}") from None
    _check_abi(handle, manifest, so)
    functions = []
    for entry in manifest["functions"]:
        symbol = SYMBOL_PREFIX + entry["name"]  # never a name the manifest spells out: not `puts`
        try:
            cfunc = getattr(handle, symbol)
        except AttributeError:
            raise LoadError(
                f"{so}: the manifest names {entry['name']!r}, but the library has no {symbol}"
            ) from None
        cfunc.argtypes = [ctypes.c_void_p] * len(entry["args"])
        cfunc.restype = None
        functions.append(LibraryFunction(entry, cfunc, so))
    return Library(directory, manifest, handle, functions)


def _check_abi(handle: Any, manifest: dict[str, Any], so: Path) -> None:
    """The library's own account of its functions (names, shapes, dtypes, roles) must be the manifest's."""
    try:
        address = ctypes.addressof(ctypes.c_char.in_dll(handle, ABI_SYMBOL))
    except ValueError:
        raise LoadError(f"{so}: has no {ABI_SYMBOL}: not a library autosched built; rebuild it") from None
    embedded = ctypes.string_at(address).decode("ascii", errors="replace")
    if embedded != abi_text(manifest):
        raise LoadError(
            f"{so}: the manifest's functions (names, shapes, dtypes or roles) differ from what the library "
            "was compiled for; the manifest was edited: rebuild the library"
        )
