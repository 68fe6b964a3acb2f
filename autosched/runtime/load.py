"""``autosched.load(DIR)``: a built library as a Python object whose attributes are its functions.

Loading compiles nothing and imports neither llvmlite nor the compiler stack: it reads the manifest,
checks that this machine has the CPU features the code uses and that the library is the one the
manifest describes (sha256), and opens it with ctypes.

Example::

    lib = autosched.load("build/matmul")
    lib.matmul(a, b, c)          # fills c; or c = lib.matmul(a, b) to get a new output
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AutoschedError, RunError

MANIFEST = "manifest.json"  # also in export.py; not imported from there to keep loading light
KNOWN_FORMATS = (1,)
_DLPACK_CPU = 1  # kDLCPU


class LoadError(AutoschedError):
    """A library that must not be loaded here; the message says why."""


class LibraryFunction:
    """One function of a loaded library: call it with its inputs and outputs (arrays)."""

    def __init__(self, entry: dict[str, Any], cfunc: Any, library: Path):
        self.name: str = entry["name"]
        self.entry = entry
        self.args: list[dict[str, Any]] = entry["args"]
        self.n_inputs = sum(1 for a in self.args if a["role"] == "input")
        self._cfunc = cfunc
        self._library = library
        self._expect = [(tuple(a["shape"]), np.dtype(a["dtype"])) for a in self.args]

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
            outs = [np.empty(shape, dtype) for shape, dtype in self._expect[self.n_inputs :]]
            self._run([*arrays, *outs])
            return outs[0] if len(outs) == 1 else tuple(outs)
        if len(arrays) != len(self.args):
            raise TypeError(
                f"{self.name}: expected {len(self.args)} arrays (inputs then outputs) or the "
                f"{self.n_inputs} inputs; got {len(arrays)}. Signature: {self.signature()}"
            )
        self._run(arrays)
        return None

    def _run(self, arrays: Sequence[Any]) -> None:
        ptrs = []
        for i, a in enumerate(arrays):
            shape, dtype = self._expect[i]
            if type(a) is not np.ndarray:
                a = self._from_foreign(i, a)
            if a.dtype != dtype or a.shape != shape:
                raise ValueError(
                    f"{self.name}: argument {i} ({self.args[i]['name']!r}) expects {dtype}{list(shape)}, "
                    f"got {a.dtype}{list(a.shape)}"
                )
            if not a.flags.c_contiguous:
                raise ValueError(
                    f"{self.name}: argument {i} ({self.args[i]['name']!r}) must be C-contiguous "
                    "(use numpy.ascontiguousarray)"
                )
            if i >= self.n_inputs and not a.flags.writeable:
                raise ValueError(f"{self.name}: output argument {i} ({self.args[i]['name']!r}) is read-only")
            ptrs.append(a.ctypes.data)
        self._cfunc(*ptrs)

    def _from_foreign(self, i: int, a: Any) -> np.ndarray:
        """A numpy view of any array that speaks DLPack (on the CPU), sharing its memory."""
        label = f"{self.name}: argument {i} ({self.args[i]['name']!r})"
        if isinstance(a, np.ndarray):
            return a  # a subclass
        if not hasattr(a, "__dlpack__"):
            raise TypeError(f"{label} must be a numpy array or support DLPack, got {type(a).__name__}")
        if hasattr(a, "__dlpack_device__"):
            dev = a.__dlpack_device__()
            if int(dev[0]) != _DLPACK_CPU:
                raise ValueError(f"{label} lives on DLPack device {tuple(dev)}; this library runs on the CPU")
        view = np.from_dlpack(a)
        if i >= self.n_inputs and not view.flags.writeable:
            view = _writable_view(view)  # numpy marks DLPack views read-only; the memory is the caller's
        return view


def _writable_view(view: np.ndarray) -> np.ndarray:
    """The same memory as ``view``, writable (for outputs passed through DLPack)."""
    buf = (ctypes.c_char * view.nbytes).from_address(view.ctypes.data)
    return np.frombuffer(buf, dtype=view.dtype).reshape(view.shape)


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
    """The parsed manifest of a built library directory; a clear LoadError when absent or malformed."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise LoadError(
            f"{directory}: no {MANIFEST}; is this a directory written by `autosched build`?"
        ) from None
    except (OSError, ValueError) as e:
        raise LoadError(f"{path}: not a readable manifest: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in KNOWN_FORMATS:
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        raise LoadError(f"{path}: manifest format {fmt!r} is not one this autosched reads {KNOWN_FORMATS}")
    for key in ("library", "sha256", "target", "functions"):
        if key not in manifest:
            raise LoadError(f"{path}: manifest has no {key!r} field")
    return manifest


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
    directory = Path(directory)
    manifest = read_manifest(directory)
    so = directory / str(manifest["library"])
    check_compatible(manifest, str(so))
    try:
        data = so.read_bytes()
    except OSError as e:
        raise LoadError(f"{so}: cannot read the library: {e}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest["sha256"]:
        raise LoadError(
            f"{so}: checksum mismatch (sha256 {digest[:16]}..., manifest says "
            f"{str(manifest['sha256'])[:16]}...): "
            "the library was changed or corrupted after it was built; rebuild it"
        )
    try:
        handle = ctypes.CDLL(str(so.resolve()), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError as e:
        raise LoadError(f"{so}: the system loader refused it: {e}") from None
    functions = []
    for entry in manifest["functions"]:
        try:
            cfunc = getattr(handle, entry["name"])
        except AttributeError:
            raise RunError(f"{so}: the manifest names {entry['name']!r}, which the library lacks") from None
        cfunc.argtypes = [ctypes.c_void_p] * len(entry["args"])
        cfunc.restype = None
        functions.append(LibraryFunction(entry, cfunc, so))
    return Library(directory, manifest, handle, functions)
