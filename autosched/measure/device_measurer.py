"""Measuring on an adapter: the measurer for GPU-style targets (opencl, cuda).

The builder/runner pair builds CPU shared libraries; a GPU kernel is compiled and timed by its
adapter instead. Each candidate is replayed, lowered, compiled, run once and checked against
``task.expected``, then timed; every failure is a :class:`MeasureResult` with an error kind, never
an exception. All of it happens in a worker process (spawned, SIGINT ignored), because a running
kernel cannot be stopped from the process that enqueued it: a candidate still running after
``timeout_s`` (compiling after ``build_timeout_s``) is a "timeout", the worker is killed and a fresh
one takes the next candidate; a worker that dies is a "crash".

Example::

    with DeviceMeasurer("opencl", timeout_s=10) as m:
        results = m.measure(task, traces)
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CompileError, LowerError, RunError, ScheduleError, TargetError
from ..hai.timing import TimingPolicy
from ..target import parse_target
from .output_check import fill_garbage, outputs_match
from .result import MeasureResult
from .runner import START_TIMEOUT_S, _describe_death, start_without_sigint
from .task import MeasureTask


class DeviceMeasurer:
    """Compile, check and time candidates with the adapter of ``target`` (same interface as LocalMeasurer)."""

    def __init__(
        self,
        target: str,
        repeat: int = 5,
        warmup: int = 1,
        timeout_s: float = 10.0,
        build_timeout_s: float = 60.0,
    ):
        if repeat < 1 or timeout_s <= 0 or build_timeout_s <= 0:
            raise ValueError(
                f"DeviceMeasurer: need repeat >= 1 and timeouts > 0, "
                f"got {repeat}, {timeout_s}, {build_timeout_s}"
            )
        self.target = str(parse_target(target))
        self.repeat, self.warmup = repeat, warmup
        self.timeout_s, self.build_timeout_s = timeout_s, build_timeout_s
        self._proc: Any = None
        self._conn: Any = None
        self._task: MeasureTask | None = None  # the task the live worker holds

    def measure(self, task: MeasureTask, traces: Sequence[Any]) -> list[MeasureResult]:
        return [self._one(task, trace) for trace in traces]

    def _one(self, task: MeasureTask, trace: Any) -> MeasureResult:
        t0 = time.perf_counter()
        failed = self._ensure(task)
        if failed is not None:
            return MeasureResult((), failed[0], failed[1], check=task.check)
        reply = self._call(("build", trace), self.build_timeout_s, "compile")
        build_s = time.perf_counter() - t0
        if reply[0] != "ok":
            return MeasureResult((), reply[1], reply[2], build_s=build_s, check=task.check)
        reply = self._call(("run", self.repeat, self.warmup), self.timeout_s, "timeout")
        run_s = time.perf_counter() - t0 - build_s
        if reply[0] != "ok":
            return MeasureResult((), reply[1], reply[2], build_s=build_s, run_s=run_s, check=task.check)
        timing = TimingPolicy(self.repeat, self.warmup).to_json()  # as the adapters' time() takes them
        return MeasureResult(tuple(reply[1]), build_s=build_s, run_s=run_s, check=task.check, timing=timing)

    # The worker -----------------------------------------------------------------------------------
    def _ensure(self, task: MeasureTask) -> tuple[str, str] | None:
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            ctx = multiprocessing.get_context("spawn")  # never fork: the tuner has threads
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=_worker_main, args=(child, self.target), daemon=True,
                                     name="autosched-device")  # fmt: skip
            try:
                start_without_sigint(self._proc.start)
            finally:
                child.close()
        if self._task is task:
            return None
        samples = list(task.samples) or [None] * len(task.expected)
        message = ("task", task.args, task.func_name, list(task.inputs), list(task.expected),
                   list(task.tolerances), samples)  # fmt: skip
        reply = self._call(message, START_TIMEOUT_S, "run")
        if reply[0] == "ok":
            self._task = task
            return None
        return reply[1], "cannot start the device worker with this task: " + reply[2]

    def _call(self, message: tuple[Any, ...], timeout_s: float, on_timeout: str) -> tuple[Any, ...]:
        """Send and wait; past ``timeout_s`` the worker is killed and the reply is ``on_timeout``."""
        try:
            self._conn.send(message)
            if self._conn.poll(timeout_s):
                return self._conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            pass  # the worker died: its exit code says how
        else:
            self._kill()
            return ("error", on_timeout, f"no result within {timeout_s:g} s; the device worker was killed")
        self._proc.join(timeout=5)
        code = self._proc.exitcode
        self._kill()
        return ("error", "crash", _describe_death(code).replace("runner", "device worker"))

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.pid is not None:
                self._proc.kill()
                self._proc.join(timeout=5)
            self._conn.close()
        self._proc = self._conn = self._task = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(timeout=2)
            except (OSError, EOFError):
                pass
        self._kill()

    def __enter__(self) -> DeviceMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _worker_main(conn: Any, target: str) -> None:
    """Serve "task", "build" and "run" messages until "stop" or the pipe closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the tuner, which then stops us
    state = _DeviceWorker(target)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        try:
            reply = state.handle(message)
        except (ScheduleError, LowerError) as e:
            reply = ("error", "schedule", str(e))
        except (CompileError, TargetError) as e:
            reply = ("error", "compile", str(e)[:2000])
        except _Wrong as e:
            reply = ("error", "wrong_result", str(e))
        except MemoryError as e:
            reply = ("error", "memory", f"allocation failed in the device worker (MemoryError {e})")
        except Exception as e:  # RunError, and whatever a driver raises: this candidate's failure
            reply = ("error", "run", f"{type(e).__name__}: {e}"[:2000])
        conn.send(reply)


class _Wrong(RunError):
    pass


class _DeviceWorker:
    def __init__(self, target: str):
        self.target = target
        self.adapter: Any = None
        self.kernel: Any = None

    def handle(self, message: tuple[Any, ...]) -> tuple[Any, ...]:
        from ..hai.registry import get_adapter
        from ..lower.pipeline import lower
        from ..search_space.schedule import replay

        kind = message[0]
        if kind == "task":
            _, self.args, self.func_name, self.inputs, self.expected, self.tolerances, self.samples = message
            self.n_in = len(self.inputs)
            if self.adapter is None:
                self.adapter = get_adapter(self.target)
            return ("ok",)
        if kind == "build":
            self.kernel = None
            outputs = list(self.args[self.n_in :])
            func = lower(replay(outputs, message[1]), self.args, self.func_name, self.target)
            self.kernel = self.adapter.compile(func)
            return ("ok",)
        if kind == "run":
            _, repeat, warmup = message
            outs = [np.empty(t.shape, dtype=t.dtype) for t in self.args[self.n_in :]]
            for out in outs:
                fill_garbage(out)  # as the CPU runner: a kernel that skips an element cannot pass by luck
            self.adapter.launch(self.kernel, [*self.inputs, *outs])
            for out, exp, idx, (rtol, atol) in zip(outs, self.expected, self.samples, self.tolerances):
                got = out if idx is None else out.reshape(-1)[idx]
                if not outputs_match(got, exp, rtol, atol):
                    raise _Wrong(f"max abs error {float(np.max(np.abs(got.astype('float64') - exp))):.3g}")
            return ("ok", self.adapter.time(self.kernel, [*self.inputs, *outs], repeat=repeat, warmup=warmup))
        raise RunError(f"device worker: unknown message {kind!r}")
