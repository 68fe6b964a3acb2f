"""Building candidates in worker processes: trace -> schedule -> loop IR -> object -> shared library.

A bad candidate costs one result, never the run: an illegal trace is a "schedule" error, a refused
compile or link a "compile" error, a build that hangs a "timeout", and a worker that dies (say, LLVM
aborts) a "crash"; the dead or hung worker is replaced.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import multiprocessing
import os
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError, LowerError, ScheduleError, TargetError
from ..runtime.scratch import make_scratch_dir
from ..te.tensor import Tensor
from .result import BuildResult
from .runner import start_without_sigint
from .task import MeasureTask


@dataclasses.dataclass(frozen=True)
class BuildJob:
    """One candidate to build, as sent to a worker process (te tensors pickle between our processes)."""

    args: tuple[Tensor, ...]
    n_inputs: int
    target: str
    trace: Any  # a Trace, or its JSON form
    func_name: str
    out_path: str


def build_candidate(job: BuildJob) -> BuildResult:
    """Replay, lower and compile one candidate; raises ScheduleError, LowerError or CompileError.

    An adapter that emits objects gets a shared library at ``job.out_path``; any other adapter's
    candidate is rendered here (a code generator that refuses or hangs costs this worker, not the
    runner) and comes back as its lowered function, which the runner's worker compiles and runs.
    Example: ``build_candidate(BuildJob(tuple(args), 2, "llvm-cpu", trace, "matmul", "/tmp/c0/k.so"))``.
    """
    from ..hai.registry import get_adapter
    from ..lower.ir import Allocate
    from ..lower.pipeline import lower
    from ..lower.stmt_visit import walk_stmts
    from ..runtime.link import link_shared
    from ..search_space.schedule import replay

    t0 = time.perf_counter()
    adapter = get_adapter(job.target)
    outputs = list(job.args[job.n_inputs :])
    func = lower(replay(outputs, job.trace), job.args, job.func_name, job.target)
    workspace = sum(
        s.buffer.size * np.dtype(s.buffer.dtype).itemsize
        for s in walk_stmts(func.body)
        if isinstance(s, Allocate)
    )
    if not adapter.spec.can_export:
        adapter.render(func)
        return BuildResult(None, job.func_name, len(func.params), build_s=time.perf_counter() - t0,
                           workspace_bytes=workspace, func=func)  # fmt: skip
    obj = adapter.compile_object(func)
    link_shared([obj], job.out_path)
    return BuildResult(
        job.out_path,
        job.func_name,
        len(func.params),
        build_s=time.perf_counter() - t0,
        workspace_bytes=workspace,
    )


BuildFn = Callable[[BuildJob], BuildResult]
PARENT_POLL_S = 0.5  # how often a build worker looks whether the process that started it is still alive


def exit_with_parent(parent_pid: int) -> None:
    """Pool initializer: end this worker when ``parent_pid`` dies (pool workers never notice otherwise).

    A thread polls ``os.getppid()`` rather than ``PR_SET_PDEATHSIG``: that signal fires when the parent
    *thread* that spawned the worker ends, and the pool spawns from whichever thread submits.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)  # mid-compile too: nobody is left to take the result

    threading.Thread(target=watch, name="autosched-exit-with-parent", daemon=True).start()


def _run_job(build_fn: BuildFn, job: BuildJob) -> BuildResult:
    """In the worker: turn every failure into data, by the stage it happened in."""
    t0 = time.perf_counter()
    try:
        return build_fn(job)
    except (ScheduleError, LowerError) as e:
        kind, msg = "schedule", f"{type(e).__name__}: {e}"
    except (CompileError, TargetError) as e:
        kind, msg = "compile", f"{type(e).__name__}: {e}"
    except Exception as e:
        # A bug in autosched shows up here; it costs this candidate, and the traceback says where.
        tb = traceback.extract_tb(e.__traceback__)
        in_lowering = any("/lower/" in f.filename or "/search_space/" in f.filename for f in tb)
        kind = "schedule" if in_lowering else "compile"
        msg = f"internal error {type(e).__name__}: {e}\n{''.join(traceback.format_tb(e.__traceback__)[-3:])}"
    return BuildResult(None, job.func_name, error=kind, error_msg=msg, build_s=time.perf_counter() - t0)


class LocalBuilder:
    """Compiles candidates in ``n_workers`` processes (spawned: forking a threaded parent is unsafe).

    Example::

        builder = LocalBuilder(n_workers=2)
        built = builder.build(task, [trace0, trace1])     # [BuildResult(path=".../k.so"), ...]
        builder.close()
    """

    def __init__(
        self,
        n_workers: int = 2,
        timeout_s: float = 30.0,
        *,
        out_dir: str | os.PathLike[str] | None = None,
        build_fn: BuildFn = build_candidate,
    ):
        if n_workers < 1:
            raise ValueError(f"LocalBuilder: n_workers must be >= 1, got {n_workers}")
        self.n_workers = n_workers
        self.timeout_s = timeout_s
        self.build_fn = build_fn  # a module-level function: workers import it by name
        self._own_dir = out_dir is None
        self.out_dir = (
            Path(out_dir) if out_dir is not None else make_scratch_dir("autosched-build-")  # pid-tagged
        )
        self._pool: ProcessPoolExecutor | None = None
        self._batch = 0

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self.n_workers, mp_context=ctx, initializer=exit_with_parent, initargs=(os.getpid(),)
            )
        return self._pool

    def _kill_pool(self) -> str:
        """Kill every worker (one is hung or dead); returns how they ended, for the crash message."""
        pool, self._pool = self._pool, None
        if pool is None:
            return ""
        # ProcessPoolExecutor has no public way to kill a hung worker before Python 3.14.
        procs = list(getattr(pool, "_processes", {}).values())
        codes = [p.exitcode for p in procs]
        for p in procs:
            p.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.join(timeout=5)
        return ", ".join(_describe_exit(c) for c in codes if c is not None)

    def build(self, task: MeasureTask, traces: Sequence[Any]) -> list[BuildResult]:
        """One BuildResult per trace, in order; never raises for a bad candidate."""
        self._batch += 1
        jobs = [
            BuildJob(
                task.args,
                len(task.inputs),
                task.target,
                trace,
                task.func_name,
                str(self.out_dir / f"b{self._batch}_{i}" / f"{task.func_name}.so"),
            )
            for i, trace in enumerate(traces)
        ]
        results: list[BuildResult | None] = [None] * len(jobs)
        pending = collections.deque(range(len(jobs)))
        suspects: set[int] = set()  # in flight when a worker died: retried alone to find the culprit
        in_flight: dict[Future[BuildResult], tuple[int, float]] = {}
        while pending or in_flight:
            while pending and len(in_flight) < self.n_workers:
                if (pending[0] in suspects and in_flight) or any(
                    i in suspects for i, _ in in_flight.values()
                ):
                    break
                i = pending.popleft()
                pool = self._get_pool()
                fut = start_without_sigint(functools.partial(pool.submit, _run_job, self.build_fn, jobs[i]))
                in_flight[fut] = (i, time.monotonic())
            first_deadline = min(t0 for _, t0 in in_flight.values()) + self.timeout_s
            done, _ = wait(
                in_flight, timeout=max(0.0, first_deadline - time.monotonic()), return_when=FIRST_COMPLETED
            )
            broken: list[int] = []
            for fut in done:
                i, t0 = in_flight.pop(fut)
                suspects.discard(i)
                try:
                    results[i] = fut.result()
                except BrokenProcessPool:
                    broken.append(i)
                except Exception as e:  # e.g. the job failed to pickle: this candidate's problem only
                    results[i] = BuildResult(
                        None, task.func_name, error="compile", error_msg=f"builder: {e!r}"
                    )
            now = time.monotonic()
            expired = [f for f, (_, t0) in in_flight.items() if now - t0 >= self.timeout_s]
            if not broken and not expired:
                continue
            for fut in expired:
                i, t0 = in_flight.pop(fut)
                results[i] = BuildResult(
                    None, task.func_name, error="timeout", error_msg=f"build took over {self.timeout_s:g} s",
                    build_s=now - t0,
                )  # fmt: skip
            bystanders = [i for i, _ in in_flight.values()]  # their worker is killed below: run them again
            in_flight.clear()
            how = self._kill_pool()
            involved = broken + bystanders if broken else []
            if len(involved) == 1:  # it ran alone, or with nothing else: the culprit
                msg = "build worker died" + (f" ({how})" if how else "") + " while building this candidate"
                results[involved[0]] = BuildResult(None, task.func_name, error="crash", error_msg=msg)
            elif involved:
                suspects.update(involved)
                pending.extendleft(reversed(involved))
            else:
                pending.extendleft(reversed(bystanders))
        return [r for r in results if r is not None]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._own_dir:
            shutil.rmtree(self.out_dir, ignore_errors=True)

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
