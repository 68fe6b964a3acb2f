"""A farm tunes as the local path does, and keeps each target's records apart (issue 15)."""

import pytest

from autosched.farm_cli import tune_on_farm
from autosched.measure.fake import FakeMeasurer
from autosched.measure.farm import FarmError
from autosched.measure.farm_worker import FakeBackend, chip_resource
from autosched.records.log import trace_key
from autosched.tune import TuneOptions, Tuner

from .common import cost, records, retimed, small_matmul

ERRORS = {"timeout": 0.1, "wrong_result": 0.05}


def _outcomes(log):
    return [(trace_key(r.trace), r.costs, r.error, r.fingerprint) for r in records(log)]


def test_farm_tuning_equals_local_tuning_with_the_same_seed(farm2, tmp_path):
    inst = small_matmul()
    options = TuneOptions(trials=24, batch_size=8, baseline=False, seed=3)
    local = Tuner([inst], "llvm-cpu", tmp_path / "local.jsonl", options,
                  measurer=FakeMeasurer(cost, errors=ERRORS, seed=3))  # fmt: skip
    (expected,) = local.run()
    measurer = farm2.measurer("llvm-cpu", FakeBackend(cost, errors=ERRORS, seed=3))
    farm = Tuner([inst], "llvm-cpu", tmp_path / "farm.jsonl", options, measurer=measurer)
    (got,) = farm.run()
    assert got.trials == expected.trials == 24
    assert _outcomes(tmp_path / "farm.jsonl") == _outcomes(tmp_path / "local.jsonl")
    assert any(r.error for r in records(tmp_path / "farm.jsonl"))  # the injected errors came through
    assert (got.best_cost, got.errors) == (expected.best_cost, expected.errors)
    assert farm.fingerprint == local.fingerprint  # same machine: the workers report the same chip


def test_two_targets_are_tuned_at_once_into_one_log_with_per_target_records_sharing_transfer(farm2, tmp_path):
    log = tmp_path / "two.jsonl"
    targets = ["llvm-cpu", "llvm-cpu -mcpu=haswell"]
    options = TuneOptions(trials=24, batch_size=8, baseline=False)  # 3 batches: the peers' first ones arrive
    done = tune_on_farm(
        farm2, [small_matmul()], targets, log, options, backend=FakeBackend(cost, delay_s=0.02)
    )
    assert sorted(done) == sorted(targets)
    (t1, _), (t2, _) = done[targets[0]], done[targets[1]]
    assert t1.fingerprint != t2.fingerprint and t1.model is not t2.model  # two chips, a model each
    by_target = {t: [r for r in records(log) if r.target == t] for t in targets}
    for target, (tuner, (task,)) in done.items():
        assert task.trials == 24
        assert len(by_target[target]) == 24
        assert {r.fingerprint for r in by_target[target]} == {tuner.fingerprint}
        assert task.foreign > 0  # it learnt from the other chip's batches as they came


def test_a_target_no_worker_owns_is_refused_naming_what_the_farm_offers(farm2):
    assert chip_resource("llvm-cpu:x86 64:1a=b") == "chip:llvm-cpu:x86_64:1a_b"
    with pytest.raises(FarmError, match=r"owns target 'opencl'.*offered: llvm-cpu, llvm-cpu -mcpu=haswell"):
        farm2.measurer("opencl")


def test_real_kernels_are_built_checked_and_timed_on_the_workers(farm2, tmp_path):
    log = tmp_path / "real.jsonl"
    options = TuneOptions(trials=4, batch_size=4, baseline=False, strategy="random")
    (task,) = Tuner([small_matmul()], "llvm-cpu", log, options, measurer=farm2.measurer("llvm-cpu")).run()
    got = records(log)
    assert task.trials == 4 and len(got) == 4
    assert all(r.ok and r.check == "full" and min(r.costs) > 0 for r in got), [r.error_msg for r in got]
    again = retimed(log)  # the finalists round, measured on the workers six times over (3 rounds x 2 passes)
    assert {trace_key(r.trace) for r in again} == {trace_key(r.trace) for r in got}
    assert all(r.ok and len(r.costs) >= 6 for r in again), [r.error_msg for r in again]
    assert all(r.retimed == {"rounds": 3, "finalists": 4, "passes": 2} for r in again)


@pytest.mark.slow
def test_llvm_cpu_and_opencl_on_pocl_are_tuned_at_once_with_real_kernels(tmp_path):
    from autosched.measure.farm import Farm

    pytest.importorskip("pyopencl", reason="opencl needs pyopencl (and PoCL)")
    log, targets = tmp_path / "cpu_ocl.jsonl", ["llvm-cpu", "opencl"]
    options = TuneOptions(trials=12, batch_size=4, baseline=False)  # evolutionary: transfer between them
    with Farm.connect("local:2", targets, on_note=lambda text: None) as farm:
        done = tune_on_farm(farm, [small_matmul()], targets, log, options)
    for target, (tuner, (task,)) in done.items():
        mine = [r for r in records(log) if r.target == target]
        assert len(mine) == 12 and {r.fingerprint for r in mine} == {tuner.fingerprint}
        assert task.best_trace is not None  # kernels ran and matched the reference
        assert not {r.error for r in mine} & {"wrong_result", "crash"}
        assert not [r for r in mine if "thread binding" in r.error_msg]  # no GPU schedule came to the CPU


def test_records_name_the_chip_of_the_workers_that_timed_them_not_this_machine(tmp_path):
    import dask
    import distributed

    from autosched.measure.farm import Farm
    from autosched.measure.farm_worker import WORKER_CONFIG

    from .common import elsewhere_chip, elsewhere_plugin

    fingerprint, _ = elsewhere_chip()
    with dask.config.set(WORKER_CONFIG):
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None,
                                           resources={chip_resource(fingerprint): 1})  # fmt: skip
    client = distributed.Client(cluster, set_as_default=False)
    client.register_plugin(elsewhere_plugin())
    with Farm(client, cluster, "local:1", on_note=lambda text: None) as farm:
        log = tmp_path / "elsewhere.jsonl"
        options = TuneOptions(trials=8, batch_size=4, baseline=False, strategy="random")
        tuner = Tuner(
            [small_matmul()], "llvm-cpu", log, options, measurer=farm.measurer("llvm-cpu", FakeBackend(cost))
        )
        tuner.run()
    got = records(log)
    assert len(got) == 8 and tuner.fingerprint == fingerprint
    assert {r.fingerprint for r in got} == {fingerprint} and {r.chip["name"] for r in got} == {"farm-machine"}


def test_a_target_losing_its_farm_stops_the_other_targets_after_their_batch(farm2, tmp_path):
    from autosched.measure.farm import FarmLostError

    class LosesItsFarm:  # the haswell workers' measurer: its second batch finds the farm gone
        def __init__(self, inner):
            self.inner, self.batches = inner, 0

        def chip_facts(self, target):
            return self.inner.chip_facts(target)

        def measure(self, task, traces):
            self.batches += 1
            if self.batches > 1:
                raise FarmLostError("the farm went away (test)")
            return self.inner.measure(task, traces)

    class Proxy:
        def measurer(self, target, backend=None):
            m = farm2.measurer(target, backend)
            return LosesItsFarm(m) if "haswell" in target else m

    log, targets = tmp_path / "lost.jsonl", ["llvm-cpu", "llvm-cpu -mcpu=haswell"]
    options = TuneOptions(trials=400, batch_size=4, baseline=False, strategy="random")
    backend = FakeBackend(cost, delay_s=0.01)
    with pytest.raises(FarmLostError):
        tune_on_farm(Proxy(), [small_matmul()], targets, log, options, backend=backend)
    got = records(log)
    assert sum(r.target == "llvm-cpu -mcpu=haswell" for r in got) == 4  # its one finished batch
    assert sum(r.target == "llvm-cpu" for r in got) < 400  # the other stopped early, at a batch's end
    assert sum(r.target == "llvm-cpu" for r in got) % 4 == 0


def test_workers_without_the_chip_resource_are_refused_not_waited_for():
    import distributed

    from autosched.measure.farm import Farm
    from autosched.measure.farm_worker import ChipFactsPlugin

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None)
    client = distributed.Client(cluster, set_as_default=False)
    client.register_plugin(ChipFactsPlugin(["llvm-cpu"]))  # reports the chip, declares no resource
    with Farm(client, cluster, "local:1", on_note=lambda text: None) as farm:
        with pytest.raises(FarmError, match="none declares the resource 'chip:llvm-cpu"):
            farm.measurer("llvm-cpu")


def test_a_resumed_run_of_two_targets_learns_from_the_other_chips_logged_records(farm2, tmp_path):
    log, targets = tmp_path / "resumed.jsonl", ["llvm-cpu", "llvm-cpu -mcpu=haswell"]
    backend = FakeBackend(cost)
    tune_on_farm(farm2, [small_matmul()], targets, log, TuneOptions(trials=8, batch_size=8, baseline=False),
                 backend=backend)  # fmt: skip
    options = TuneOptions(trials=16, batch_size=8, baseline=False, resume=True)  # one batch more each
    done = tune_on_farm(farm2, [small_matmul()], targets, log, options, backend=backend)
    for _, (task,) in done.values():
        assert task.previous == 8 and task.trials == 8
        assert task.foreign >= 8  # the other chip's 8 logged records, before its first batch of this run
