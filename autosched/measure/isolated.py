"""Compiles outside the tuner (``autosched build``, ``autosched.ops``, the end of ``tune``) in a worker.

A trace read from a log is untrusted input: one record (``auto_unroll_max_step = 10**12``) kept an
in-process compile running for minutes at over a gigabyte, and LLVM aborts the whole process on
some bad targets. So the compile runs in a worker of :class:`~autosched.measure.builder.LocalBuilder`
(the tuner's own machinery: spawned process, per-job time limit, a dead or hung worker replaced),
with ``RLIMIT_AS`` set in the worker; a worker that overruns either limit is a CompileError here.

One worker per memory limit is kept for the life of the process, so only the first compile pays
for starting it. :func:`build_isolated` wraps the result as a callable, as ``autosched.build`` does for
a trusted schedule. Example::

    obj = compile_isolated(inst.tensors, len(inst.inputs), "llvm-cpu", trace, "matmul", link=False)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import importlib.machinery
import multiprocessing
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..build import check_arrays, count_inputs
from ..errors import CompileError
from ..target import Target
from ..te.tensor import Tensor
from .builder import BuildJob, LocalBuilder, build_candidate
from .result import BuildResult

ENV_TIMEOUT = "AUTOSCHED_COMPILE_TIMEOUT"  # seconds for one compile
ENV_MEMORY = "AUTOSCHED_COMPILE_MEMORY_MB"  # address space of the compiling worker
DEFAULT_TIMEOUT_S = 300.0  # the tuner's builds of the same traces had 30 s
DEFAULT_MEMORY_BYTES = 8 << 30

_builders: dict[int, LocalBuilder] = {}
_limit_set = False  # in a worker: RLIMIT_AS applied
_lock = threading.Lock()


def compile_limits(timeout_s: float | None = None, memory_bytes: int | None = None) -> tuple[float, int]:
    """The limits: the arguments, else ``$AUTOSCHED_COMPILE_TIMEOUT`` / ``_MEMORY_MB``, else defaults."""
    try:
        if timeout_s is None:
            timeout_s = float(os.environ.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT_S)
        if memory_bytes is None:
            mb = os.environ.get(ENV_MEMORY)
            memory_bytes = int(float(mb) * (1 << 20)) if mb else DEFAULT_MEMORY_BYTES
    except ValueError as e:
        raise CompileError(f"${ENV_TIMEOUT} / ${ENV_MEMORY} must be numbers: {e}") from None
    if not timeout_s > 0 or memory_bytes <= 0:
        raise CompileError(f"compile limits must be positive, got {timeout_s} s and {memory_bytes} bytes")
    return timeout_s, memory_bytes


@dataclasses.dataclass(frozen=True)
class _CompileTask:
    """What LocalBuilder.build reads of a MeasureTask (no reference data: nothing is run)."""

    args: tuple[Any, ...]
    n_inputs: int
    target: str
    func_name: str

    @property
    def inputs(self) -> tuple[Any, ...]:
        return self.args[: self.n_inputs]


def compile_object_job(job: BuildJob) -> BuildResult:
    """In the worker: replay, lower and compile one function to an object file at ``job.out_path``."""
    from ..hai.registry import get_adapter
    from ..lower.pipeline import lower
    from ..search_space.schedule import replay

    func = lower(replay(list(job.args[job.n_inputs :]), job.trace), job.args, job.func_name, job.target)
    out = Path(job.out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(get_adapter(job.target).compile_object(func))
    return BuildResult(job.out_path, job.func_name, len(func.params))


def _limited(memory_bytes: int, build_fn: Any, job: BuildJob) -> BuildResult:
    """In the worker: ``build_fn(job)`` with at most ``memory_bytes`` more address space than the
    worker has once its compiler is loaded; running out is a "memory" error."""
    import resource

    from ..hai.registry import get_adapter

    global _limit_set
    if not _limit_set:  # once per worker: later jobs must not stack their headroom on this one's
        get_adapter(job.target)  # loads the compiler (llvmlite maps ~100 MB) before the limit
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = _address_space() + memory_bytes
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        _limit_set = True
    try:
        return build_fn(job)
    except MemoryError:
        return BuildResult(
            None, job.func_name, error="memory",
            error_msg=f"the compile needed more than {memory_bytes / (1 << 20):.0f} MB of address space",
        )  # fmt: skip


def _address_space() -> int:
    """This process's virtual memory size in bytes (Linux); 0 where /proc is not there."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """While workers start: a spawned child re-imports the caller's ``__main__`` (re-running a script
    without an ``if __name__ == "__main__"`` guard, whose ops call would then spawn again and fail),
    unless ``__main__``'s spec is named ``__main__``. The worker needs none of it: build functions
    are module level."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    had, saved = hasattr(main, "__spec__"), getattr(main, "__spec__", None)
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        yield
    finally:
        if had:
            main.__spec__ = saved
        else:
            del main.__spec__


def _builder(memory_bytes: int) -> LocalBuilder:
    with _lock:
        b = _builders.get(memory_bytes)
        if b is None:
            b = _builders[memory_bytes] = LocalBuilder(n_workers=1)
        return b


@atexit.register
def close_workers() -> None:
    """Stop the compile workers (also at exit); the next compile starts a new one."""
    with _lock:
        for b in _builders.values():
            b.close()
        _builders.clear()


def compile_isolated(
    args: Sequence[Any],
    n_inputs: int,
    target: str,
    trace: Any,
    func_name: str,
    *,
    link: bool = True,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
    build_fn: Any = None,
) -> bytes:
    """The shared library (``link``) or object file of ``trace`` on ``args``, compiled in a worker.

    Raises CompileError, whose message says which limit was hit or what the compiler said, when the
    trace does not replay, the compile fails, runs over ``timeout_s`` or ``memory_bytes``, or the
    worker dies. ``build_fn`` (module level, takes a BuildJob) replaces the compile, for tests.
    """
    timeout_s, memory_bytes = compile_limits(timeout_s, memory_bytes)
    fn = build_fn or (build_candidate if link else compile_object_job)
    if multiprocessing.current_process().daemon:
        return _compile_here(fn, args, n_inputs, target, trace, func_name)
    task = _CompileTask(tuple(args), n_inputs, str(target), func_name)
    builder = _builder(memory_bytes)
    with _lock, _main_not_rerun():  # one job at a time per worker; the builder is not thread-safe
        builder.timeout_s = timeout_s
        builder.build_fn = functools.partial(_limited, memory_bytes, fn)
        [res] = builder.build(task, [trace])  # type: ignore[arg-type]
    out = None if res.path is None else Path(res.path)
    try:
        if not res.ok or out is None or not out.is_file():
            raise CompileError(_failure_message(func_name, res, timeout_s, memory_bytes))
        return out.read_bytes()
    finally:
        if out is not None:
            shutil.rmtree(out.parent, ignore_errors=True)


def _failure_message(func_name: str, res: BuildResult, timeout_s: float, memory_bytes: int) -> str:
    if res.error == "timeout":
        why = f"took over {timeout_s:g} s, the time limit (${ENV_TIMEOUT})"
    elif res.error == "memory":
        why = f"{res.error_msg} (the limit, ${ENV_MEMORY})"
    elif res.error == "crash":
        why = (
            f"killed the compiling process ({res.error_msg}); out of its {memory_bytes >> 20} MB memory "
            f"limit (${ENV_MEMORY}), or the compiler aborted"
        )
    else:
        why = f"failed: {res.error_msg or 'no library came back'}"
    return f"compile of {func_name} {why}; if its schedule came from a log, that record is the likely cause"


def _compile_here(fn: Any, args: Sequence[Any], n_inputs: int, target: str, trace: Any, name: str) -> bytes:
    """In this process, without limits: a daemonic process (a multiprocessing.Pool worker) may not
    start the compile worker, and refusing would break the op library there."""
    from ..runtime.scratch import scratch_dir

    with scratch_dir("autosched-build-") as tmp:
        job = BuildJob(tuple(args), n_inputs, str(target), trace, name, str(tmp / f"{name}.out"))
        res = fn(job)
        if not res.ok:
            raise CompileError(f"compile of {name} failed: {res.error_msg}")
        return Path(job.out_path).read_bytes()


def render_source_job(job: BuildJob) -> BuildResult:
    """In the worker: replay, lower and render the source of one function for an adapter that compiles
    in the caller's process (OpenCL, CUDA); a trace that would hang the code generator stops here."""
    from ..hai.registry import get_adapter
    from ..lower.pipeline import lower
    from ..search_space.schedule import replay

    func = lower(replay(list(job.args[job.n_inputs :]), job.trace), job.args, job.func_name, job.target)
    out = Path(job.out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(str(get_adapter(job.target).render(func)))
    return BuildResult(job.out_path, job.func_name, len(func.params))


class IsolatedFunction:
    """A kernel compiled by :func:`build_isolated`: callable on numpy arrays like BuiltFunction.

    ``kernel.cfunc`` is the C entry point, for callers that time it without the argument checks.
    """

    def __init__(self, name: str, args: Sequence[Tensor], kernel: Any, target: Target):
        self.name = name
        self.args = tuple(args)
        self.n_inputs = count_inputs(args)
        self.kernel = kernel  # a runtime.link.LoadedKernel
        threads = target.get("num-threads")
        self._set_threads = None
        if threads:  # as the adapter's launch does: the target's thread count, for parallel loops
            from ..hai.registry import get_adapter

            set_threads = get_adapter(target).set_num_threads
            self._set_threads = lambda: set_threads(int(threads))

    def __call__(self, *arrays: Any) -> None:
        checked = check_arrays(self.name, self.args, arrays, self.n_inputs)
        if self._set_threads is not None:
            self._set_threads()
        self.kernel(checked)


def build_isolated(
    args: Sequence[Tensor],
    trace: Any,
    target: str | Target = "llvm-cpu",
    name: str = "main",
    *,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
) -> IsolatedFunction:
    """``trace`` (say, a record from a log) compiled in a worker with a time and memory limit.

    For CPU targets whose adapter emits objects; a trace that hangs or exhausts the compiler is a
    CompileError here, never a hung caller. Example: ``f = build_isolated([A, B, C], rec.trace)``.
    """
    from ..runtime.link import LoadedKernel, load_function
    from ..runtime.scratch import scratch_dir
    from ..target import parse_target

    t = parse_target(target)
    so = compile_isolated(
        list(args), count_inputs(args), str(t), trace, name, timeout_s=timeout_s, memory_bytes=memory_bytes
    )
    with scratch_dir("autosched-build-") as tmp:
        path = Path(tmp) / f"{name}.so"
        path.write_bytes(so)
        kernel = LoadedKernel(load_function(path, name, len(args)), path)  # mapped: the file may go
    return IsolatedFunction(name, args, kernel, t)
