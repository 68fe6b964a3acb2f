"""Linking compiled objects into a shared library with the system C compiler, and loading one function.

Used by the measurer (one ``.so`` per candidate) and to export tuned libraries. Example::

    so = link_shared([adapter.compile_object(func)], "build/matmul.so")
    f = load_function(so, "matmul", nargs=3)
    f(a.ctypes.data, b.ctypes.data, c.ctypes.data)
"""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CompileError, RunError
from .scratch import scratch_dir

LINK_TIMEOUT_S = 60.0


def c_compiler() -> list[str]:
    """The C compiler command: ``$CC`` when set (it may carry flags), else ``cc``."""
    return shlex.split(os.environ.get("CC") or "cc")


def link_shared(
    objects: list[bytes],
    out_path: str | os.PathLike[str],
    *,
    openmp: bool = True,
    timeout_s: float = LINK_TIMEOUT_S,
    c_sources: Sequence[str] = (),
) -> Path:
    """Link ELF objects (and small C sources, compiled on the way) into the shared library ``out_path``;
    a refusal is a CompileError with cc's stderr.

    Example: ``link_shared([obj], "/tmp/k/kernel.so", c_sources=['const char tag[] = "v1";'])``.
    """
    if not objects:
        raise CompileError("link_shared: no objects to link")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with scratch_dir("autosched-link-") as tmp:
        paths = []
        for i, data in enumerate(objects):
            p = tmp / f"obj{i}.o"
            p.write_bytes(data)
            paths.append(str(p))
        for i, text in enumerate(c_sources):
            p = tmp / f"src{i}.c"
            p.write_text(text)
            paths.append(str(p))
        # --no-undefined: a missing symbol fails here, with a message, rather than at dlopen in a runner.
        cmd = [*c_compiler(), "-shared", "-fPIC", "-Wl,--no-undefined", "-o", str(out), *paths]
        cmd += ["-lgomp", "-lm"] if openmp else ["-lm"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError as e:
            raise CompileError(f"link_shared: C compiler {cmd[0]!r} not found (set $CC): {e}") from e
        except subprocess.TimeoutExpired as e:
            raise CompileError(f"link_shared: {' '.join(cmd[:1])} took over {timeout_s:.0f} s") from e
    if proc.returncode != 0:
        raise CompileError(
            f"link_shared: {shlex.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
        )
    return out


def load_function(so_path: str | os.PathLike[str], name: str, nargs: int) -> Any:
    """The C function ``void name(void*, ...)`` (``nargs`` pointers) from a shared library.

    Example: ``f = load_function("k.so", "matmul", 3); f(a.ctypes.data, b.ctypes.data, c.ctypes.data)``.
    The library stays loaded as long as the function object lives (it holds the handle).
    """
    from .elf import check_shared_object
    from .manifest import LoadError

    try:  # a truncated file (a cache written by a killed process) would SIGBUS when mapped
        check_shared_object(Path(so_path).read_bytes(), str(so_path))
        lib = ctypes.CDLL(str(so_path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except (OSError, LoadError) as e:
        raise RunError(f"load_function: cannot load {so_path}: {e}") from e
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise RunError(f"load_function: {so_path} defines no function {name!r}") from None
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    fn._autosched_lib = lib  # keep the library alive with the function
    return fn


@dataclass
class LoadedKernel:
    """A kernel in a shared library: call with C-contiguous arrays (inputs, then outputs), checked before.

    ``cfunc`` is what :func:`load_function` returns; ``path`` where the library was loaded from.
    """

    cfunc: Any
    path: Path

    def __call__(self, arrays: Sequence[Any]) -> None:
        self.cfunc(*[a.ctypes.data for a in arrays])
