"""The runner and a simulated chip (review findings 3, 4): its kernels are host code, so the memory
limit and the workspace pre-check apply; its modeled seconds never stop the next candidate early."""

from __future__ import annotations

import dataclasses

import pytest

from autosched import te
from autosched.measure import runner as runner_mod
from autosched.measure.builder import BuildJob, build_candidate
from autosched.measure.result import BuildResult
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.search_space.default import default_schedule

SIM = "sim -chip=avx2-desktop"


def _built(target: str = SIM) -> tuple[MeasureTask, BuildResult]:
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    task = MeasureTask.create("double", [A, B], target)
    job = BuildJob((A, B), 1, target, default_schedule(B, cores=1).trace, "double", "/nonexistent/k.so")
    built = build_candidate(job)
    assert built.ok and built.path is None  # compiled in the runner's worker, by the sim adapter
    return task, built


def test_modeled_times_never_stop_the_next_candidate_early(monkeypatch):
    # Any wall-clock wait derived from a modeled time (microseconds here) is shorter than a host run
    # and a round trip to the worker: were the best set by it, the second run would be a "timeout".
    monkeypatch.setattr(runner_mod, "ABORT_FLOOR_S", 1e-9)
    monkeypatch.setattr(runner_mod, "ABORT_FACTOR", 1.0)
    task, built = _built()
    with LocalRunner(timeout_s=30.0, repeat=2) as runner:
        first, second = runner.run(task, [built, built])
    assert first.ok and second.ok, (first.error_msg, second.error_msg)
    assert first.costs == second.costs  # the model is deterministic
    assert first.median < 1e-3  # modeled: far below what the host run and its round trip take


def test_sim_kernels_run_under_the_memory_limit_and_its_pre_check():
    task, built = _built()
    huge = dataclasses.replace(built, workspace_bytes=1 << 40)
    with LocalRunner(timeout_s=30.0, repeat=1, memory_limit_bytes=8 << 30) as runner:
        (refused,) = runner.run(task, [huge])
        assert refused.error == "memory" and "over the memory limit 8 GiB" in refused.error_msg, str(refused)
        (ok,) = runner.run(task, [built])
        assert ok.ok, ok.error_msg
        assert runner._host is True  # the worker took the address-space limit


@pytest.mark.parametrize("target, host", [(SIM, True), ("llvm-cpu", True)])
def test_host_code_is_declared(target: str, host: bool) -> None:
    assert runner_mod._runs_on_host(target) is host
