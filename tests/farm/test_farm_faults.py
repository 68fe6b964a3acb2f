"""Farm faults: a worker killed by pid, a candidate that kills its worker, the scheduler gone (issue 15)."""

import os
import signal
import threading
import time

import pytest

from autosched.measure.farm import Farm, FarmLostError
from autosched.measure.farm_worker import FakeBackend
from autosched.records.log import trace_key
from autosched.search_space.default import default_schedule
from autosched.tune import TuneOptions, Tuner

from .common import cost, crashes, records, small_matmul, wait_for_records


def _in_background(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_a_worker_killed_mid_run_loses_nothing_and_the_run_goes_on(farm2, tmp_path):
    log = tmp_path / "killed.jsonl"
    measurer = farm2.measurer("llvm-cpu", FakeBackend(cost, delay_s=0.2))
    tuner = Tuner([small_matmul()], "llvm-cpu", log, TuneOptions(trials=24, batch_size=8, baseline=False),
                  measurer=measurer)  # fmt: skip
    pids = farm2.client.run(os.getpid)

    def kill():
        wait_for_records(log, 8)  # the first batch is logged: kill a worker timing one of the next
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            busy = [a for a, keys in farm2.client.processing().items() if any("run_task" in k for k in keys)]
            if busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                return
            time.sleep(0.02)
        raise AssertionError("no worker was timing a candidate")

    thread, errors = _in_background(kill)
    (task,) = tuner.run()
    thread.join(10)
    assert not errors
    got = records(log)
    assert task.trials == 24 and len(got) == 24 and all(r.ok for r in got)  # nothing lost, no error
    assert len({trace_key(r.trace) for r in got}) == 24
    assert measurer.resubmitted >= 1
    assert any("left the farm" in note for note in farm2.notes)


def _executing(dask_worker=None):
    """For ``client.run``: the names of the tasks this worker is running now."""
    return [str(ts.key) for ts in dask_worker.state.executing]


def _stat(pid):
    """(state, parent pid) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(pid):
    stats = {int(e): _stat(e) for e in os.listdir("/proc") if e.isdigit()}
    return [c for c, st in stats.items() if st is not None and st[0] != "Z" and st[1] == pid]


def _running(pid):
    st = _stat(pid)
    return st is not None and st[0] != "Z"  # a zombie has exited


@pytest.mark.parametrize("stage", ["build_task", "run_task"])
def test_a_worker_killed_while_building_or_timing_real_kernels_loses_no_candidate(tmp_path, stage):
    # Fresh workers: the first build (timing) on each starts its builder (runner), a wide window to kill it.
    # A farm of its own, not farm2 restarted: a restart under a loaded suite once waited over 120 s for a
    # worker that the previous case had killed.
    with Farm.connect("local:2", ["llvm-cpu"], on_note=lambda text: None) as farm2:
        _kill_one_while(farm2, tmp_path, stage)


def _kill_one_while(farm2, tmp_path, stage):
    log = tmp_path / f"{stage}.jsonl"
    measurer = farm2.measurer("llvm-cpu")  # the real LocalBackend: kernels compiled, checked and timed
    options = TuneOptions(trials=6, batch_size=6, baseline=False, strategy="random", seed=4)
    tuner = Tuner([small_matmul()], "llvm-cpu", log, options, measurer=measurer)
    pids = farm2.client.run(os.getpid)
    orphans = []

    def kill():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for addr, names in farm2.client.run(_executing).items():
                kids = _children(pids[addr]) if addr in pids else []  # its builder (runner) processes
                if any(stage in n for n in names) and (kids or stage == "run_task"):
                    os.kill(pids[addr], signal.SIGKILL)
                    orphans.extend(kids)
                    return
            time.sleep(0.02)
        raise AssertionError(f"no worker was running a {stage}")

    thread, errors = _in_background(kill)
    (task,) = tuner.run()
    thread.join(10)
    assert not errors
    got = records(log)
    assert task.trials == 6 and len(got) == 6, [r.error_msg for r in got]
    assert all(r.ok and r.check == "full" for r in got), [r.error_msg for r in got]  # re-measured, not lost
    assert len({trace_key(r.trace) for r in got}) == 6
    assert measurer.resubmitted >= 1  # what the killed worker had in flight was submitted again
    if stage == "build_task":  # the build pool of the killed worker does not outlive it
        deadline = time.monotonic() + 15
        while left := [p for p in orphans if _running(p)]:
            if time.monotonic() > deadline:
                for p in left:  # not to leave them behind when the test fails
                    os.kill(p, signal.SIGKILL)
                raise AssertionError(f"the killed worker's processes {left} still ran 15 s later")
            time.sleep(0.1)


def test_a_candidate_that_kills_its_worker_process_is_recorded_as_a_crash(farm2, tmp_path):
    log = tmp_path / "crash.jsonl"
    measurer = farm2.measurer("llvm-cpu", FakeBackend(cost, crash_if=crashes))
    options = TuneOptions(trials=12, batch_size=6, baseline=False, strategy="random", seed=2)
    (task,) = Tuner([small_matmul()], "llvm-cpu", log, options, measurer=measurer).run()
    got = records(log)
    assert task.trials == 12 and len(got) == 12
    crashed = {trace_key(r.trace) for r in got if r.error == "crash"}
    assert crashed, "the seed should draw at least one candidate that crashes"
    assert crashed == {trace_key(r.trace) for r in got if crashes(r.trace)}  # only those, each of them
    assert all(r.ok for r in got if not crashes(r.trace)), [r.error_msg for r in got if not crashes(r.trace)]


def _lost_in_recompute(task):
    import types

    import distributed

    raise distributed.KilledWorker("_hold", types.SimpleNamespace(address="tcp://10.0.0.9:1234"), 0)


def test_candidates_whose_arrays_were_lost_are_measured_again_not_blamed(farm2, tmp_path):
    # The arrays' holder died and the worker recomputing them died too: that future is erred for good,
    # and every candidate that depends on it fails as if its own worker had died, twice (CI, 2026-12-01).
    measurer = farm2.measurer("llvm-cpu", FakeBackend(cost))
    inst = small_matmul()
    task = Tuner([inst], "llvm-cpu", tmp_path / "lost.jsonl", measurer=measurer).tasks[0].measure_task
    traces = [default_schedule(inst.outputs[0], cores=c).trace for c in (1, 2)]
    lost = farm2.client.submit(_lost_in_recompute, task, pure=False)
    measurer._refs[id(task)] = (task, lost)
    got = measurer.measure(task, traces)
    assert [r.ok for r in got] == [True, True], [r.error_msg for r in got]
    assert measurer.resubmitted == 0  # nobody was a suspect
    assert measurer._refs[id(task)][1] is not lost


def test_the_scheduler_stopped_mid_run_keeps_finished_batches_and_resume_continues(tmp_path):
    log = tmp_path / "resume.jsonl"
    inst, backend = small_matmul(), FakeBackend(cost, delay_s=0.05)
    farm = Farm.connect("local:2", ["llvm-cpu"], on_note=lambda text: None)
    try:
        options = TuneOptions(trials=32, batch_size=4, baseline=False, strategy="random")
        tuner = Tuner([inst], "llvm-cpu", log, options, measurer=farm.measurer("llvm-cpu", backend))

        def stop_scheduler():
            wait_for_records(log, 8)
            farm.cluster.sync(farm.cluster.scheduler.close)

        thread, errors = _in_background(stop_scheduler)
        with pytest.raises(FarmLostError, match="--resume"):
            tuner.run()
        thread.join(10)
        assert not errors
    finally:
        farm.close()
    kept = len(records(log))
    assert kept % 4 == 0 and 8 <= kept < 32  # whole batches only
    with Farm.connect("local:2", ["llvm-cpu"], on_note=lambda text: None) as again:
        options = TuneOptions(trials=32, batch_size=4, baseline=False, strategy="random", resume=True)
        tuner = Tuner([inst], "llvm-cpu", log, options, measurer=again.measurer("llvm-cpu", backend))
        for task in tuner.tasks:
            tuner.load_previous(task)
        (task,) = tuner.run()
    got = records(log)
    assert task.previous == kept and task.trials == 32 - kept
    assert len(got) == 32 and len({trace_key(r.trace) for r in got}) == 32  # none measured twice


def test_a_chip_whose_last_worker_left_stops_the_run_instead_of_waiting_forever(tmp_path, monkeypatch):
    import autosched.measure.farm as farm_module

    monkeypatch.setattr(farm_module, "NO_WORKER_S", 1.0)
    log = tmp_path / "orphan.jsonl"
    with Farm.connect("local:1", ["llvm-cpu"], on_note=lambda text: None) as farm:
        options = TuneOptions(trials=64, batch_size=4, baseline=False, strategy="random")
        tuner = Tuner([small_matmul()], "llvm-cpu", log, options,
                      measurer=farm.measurer("llvm-cpu", FakeBackend(cost, delay_s=0.1)))  # fmt: skip

        def retire():
            wait_for_records(log, 4)
            farm.cluster.scale(0)  # the worker goes for good: nothing brings it back

        thread, errors = _in_background(retire)
        with pytest.raises(FarmLostError, match="no worker has owned llvm-cpu"):
            tuner.run()
        thread.join(10)
        assert not errors
    assert len(records(log)) % 4 == 0 and len(records(log)) >= 4
