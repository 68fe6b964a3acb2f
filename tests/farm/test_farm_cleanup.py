"""What a farm leaves behind: a half-started local cluster, the tasks' data on the workers (finding 11)."""

import time

import distributed
import pytest

from autosched.measure import farm as farm_module
from autosched.measure.farm import HELD_TASKS, Farm, FarmError
from autosched.measure.farm_worker import ChipFactsPlugin, FakeBackend
from autosched.search_space.default import default_schedule
from autosched.tune import Tuner

from .common import cost, small_matmul


class BrokenPlugin(ChipFactsPlugin):
    def setup(self, worker):
        raise RuntimeError("no chip facts on this worker")


def _tasks_on_scheduler(dask_scheduler=None):
    return sorted(str(k) for k in dask_scheduler.tasks)


def test_a_local_farm_whose_workers_fail_to_start_closes_its_cluster(monkeypatch):
    started = []

    class Recorded(distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(distributed, "LocalCluster", Recorded)
    monkeypatch.setattr(farm_module, "ChipFactsPlugin", BrokenPlugin)
    with pytest.raises(FarmError, match=r"local:1: could not start the workers for llvm-cpu.*no chip facts"):
        Farm.connect("local:1", ["llvm-cpu"])
    (cluster,) = started
    assert str(cluster.status.name) == "closed" and not cluster.workers


def test_only_the_last_tasks_data_stays_on_the_workers_and_closing_releases_it(farm2, tmp_path):
    measurer = farm2.measurer("llvm-cpu", FakeBackend(cost))
    inst = small_matmul()
    task = Tuner([inst], "llvm-cpu", tmp_path / "held.jsonl", measurer=measurer).tasks[0].measure_task
    trace = default_schedule(inst.outputs[0], cores=1).trace
    copies = [type(task).create(task.name, task.args, task.target, seed=i) for i in range(HELD_TASKS + 2)]
    for t in copies:
        (res,) = measurer.measure(t, [trace])
        assert res.ok, res.error_msg
    assert len(measurer._refs) == HELD_TASKS
    assert [id(t) for t, _ in measurer._refs.values()] == [id(t) for t in copies[-HELD_TASKS:]]
    keys = {str(f.key) for _, f in measurer._refs.values()}
    assert keys <= set(farm2.client.run_on_scheduler(_tasks_on_scheduler))
    measurer.close()
    deadline = time.monotonic() + 10
    while keys & set(farm2.client.run_on_scheduler(_tasks_on_scheduler)):
        assert time.monotonic() < deadline, "the tasks' data is still on the farm"
        time.sleep(0.05)
    assert measurer in farm2._measurers  # the farm closes it too, when it closes
