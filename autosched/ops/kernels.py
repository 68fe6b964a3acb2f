"""Compiled kernels of the op library, cached in memory and on disk.

On disk a kernel is a shared library named by a hash of (the compiler's code, workload key, target
and its fingerprint, trace), in ``$AUTOSCHED_CACHE_DIR`` or ``~/.cache/autosched``; a second process loads
it without compiling. Files appear by atomic rename, so concurrent processes never see half of one.

Example::

    k = get_kernel(inst, target, adapter, fingerprint, trace)
    k(a, b, c)
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RunError
from ..version import __version__

ENV_CACHE = "AUTOSCHED_CACHE_DIR"
STATS: Counter[str] = Counter()  # "compiled", "disk_hits", "memory_hits": for tests and benchmarks


def cache_dir() -> Path:
    """Where compiled kernels are kept: ``$AUTOSCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/autosched``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "autosched"


@functools.cache
def compiler_digest() -> str:
    """A hash of the code that turns a trace into machine code (lowering, codegen, adapters).

    Part of every cache name, so a fixed code generator never serves kernels its old self compiled,
    even when the version number did not change (a development checkout).
    """
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for sub in ("lower", "codegen", "hai", "search_space"):
        for f in sorted((root / sub).glob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def kernel_digest(workload_key: str, target: str, fingerprint: str, trace: Any) -> str:
    """The cache name of a kernel: the same workload, chip, schedule and compiler give the same file."""
    from ..records.log import trace_key

    text = "\n".join([compiler_digest(), workload_key, target, fingerprint, trace_key(tuple(trace))])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class AdapterKernel:
    """A kernel of another adapter (OpenCL, CUDA): arrays are copied to the device and back."""

    adapter: Any
    kernel: Any
    n_inputs: int

    def __call__(self, arrays: list[np.ndarray]) -> None:
        ad = self.adapter
        handles = [ad.copy_in(a) for a in arrays[: self.n_inputs]]
        handles += [ad.alloc(a.shape, str(a.dtype)) for a in arrays[self.n_inputs :]]
        ad.launch(self.kernel, handles)
        for h, a in zip(handles[self.n_inputs :], arrays[self.n_inputs :]):
            ad.copy_out(h, a)


def _lower(inst: Any, trace: Any, target: Any) -> Any:
    from ..lower.pipeline import lower
    from ..search_space.schedule import replay

    return lower(replay(list(inst.outputs), trace), inst.tensors, inst.name, target)


def get_kernel(inst: Any, target: Any, adapter: Any, fingerprint: str, trace: Any) -> Any:
    """The kernel of ``inst`` scheduled by ``trace``: from the disk cache, else compiled (and cached)."""
    from ..measure.isolated import compile_isolated, render_source_job

    if not adapter.spec.can_export:
        # The kernel object lives in this process, so it is compiled here; the code generator (where
        # a hostile trace spends its time) runs first in a worker, with the limits.
        compile_isolated(
            inst.tensors, len(inst.inputs), str(target), trace, inst.name, build_fn=render_source_job
        )
        STATS["compiled"] += 1
        return AdapterKernel(adapter, adapter.compile(_lower(inst, trace, target)), len(inst.inputs))
    from ..runtime.link import LoadedKernel, load_function

    digest = kernel_digest(inst.key, str(target), fingerprint, trace)
    path = cache_dir() / "kernels" / f"{inst.name}-{digest}.so"
    nargs = len(inst.tensors)
    if path.is_file():
        try:
            fn = load_function(path, inst.name, nargs)
            STATS["disk_hits"] += 1
            return LoadedKernel(fn, path)
        except RunError:
            pass  # unreadable or foreign: rebuild it below
    # In a worker with a time and memory limit: a record from a log must not hang or kill the caller.
    so = compile_isolated(inst.tensors, len(inst.inputs), str(target), trace, inst.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{inst.name}-", suffix=".so", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    STATS["compiled"] += 1
    return LoadedKernel(load_function(path, inst.name, nargs), path)
