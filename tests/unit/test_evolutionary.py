"""Evolutionary search, mutations and the task scheduler, against fake measurements (no compiler)."""

import math
import random

import pytest

from autosched.cost_model.random_model import RandomModel
from autosched.measure.fake import FakeMeasurer
from autosched.records.log import load_records, trace_key
from autosched.search.evolutionary import EvolutionarySearch
from autosched.search.random_search import RandomSearch
from autosched.search.task_scheduler import GradientTaskScheduler, TaskProgress
from autosched.search_space.mutate import decision_kind, mutate, mutate_tile
from autosched.search_space.sketch import SketchPolicy
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul, make_softmax
from autosched.tune import TuneOptions, Tuner


def matmul(n=64):
    return WorkloadInstance("matmul", {"M": n}, tuple(make_matmul(n, n, n)))


def fake_cost(trace):
    """Seconds as a function of the trace: the accumulator tile's splits and the unroll pragma."""
    factors, unroll = {}, 0
    for step in trace:
        j = step.to_json()
        if j[0] == "split" and j[1] == "matmul.local":
            factors[j[2][0]] = j[2][1]
        elif j[0] == "pragma" and j[1] == "matmul.local":
            unroll = j[2][2]
    c = 1e-3
    c *= 1 + 0.5 * abs(math.log2(factors.get("j", 1)) - 4)
    c *= 1 + 0.3 * abs(math.log2(factors.get("i", 1)) - 2)
    c *= 1 + 0.2 * abs(math.log2(factors.get("k", 1)) - 3)
    return c * {0: 1.4, 16: 1.1, 64: 1.0, 512: 1.2}[unroll]


def drive(strategy, trials, batch=16):
    """Run a strategy against fake_cost; returns the best cost after each trial, checking no repeats."""
    measured, best, history = set(), math.inf, []
    while len(history) < trials:
        cands = strategy.propose(min(batch, trials - len(history)), measured)
        keys = [trace_key(c.trace) for c in cands]
        assert not measured & set(keys) and len(set(keys)) == len(keys)  # never measured twice
        costs = [fake_cost(c.trace) for c in cands]
        for k, c in zip(keys, costs):
            measured.add(k)
            best = min(best, c)
            history.append(best)
        strategy.update(cands, costs)
    return history


# Mutations ----------------------------------------------------------------------------------------


def test_mutate_tile_moves_a_factor_and_keeps_the_product():
    rng = random.Random(0)
    for _ in range(200):
        tiles = [rng.choice([1, 2, 4, 8]) for _ in range(4)]
        out = mutate_tile(tiles, rng)
        if out is None:
            assert tiles == [1, 1, 1, 1]
            continue
        assert math.prod(out) == math.prod(tiles) and out != tiles and out[-1] <= 64
        assert sum(a != b for a, b in zip(out, tiles)) == 2


def test_mutate_changes_one_decision_and_rebuilds():
    policy = SketchPolicy(list(make_matmul(64, 64, 64)[-1:]))
    rng = random.Random(1)
    _, d = policy.sample(rng)
    kinds = set()
    for _ in range(100):
        child = mutate(d, rng)
        changed = [k for k in set(d) | set(child) if d.get(k) != child.get(k)]
        assert len(changed) == 1
        kinds.add(decision_kind(changed[0]))
        policy.sample(rng, child)  # always rebuilds (bad values are resampled)
    assert {"tile", "unroll", "parallel_depth"} <= kinds
    assert decision_kind("C.local/tile/i") == "tile" and decision_kind("C/rfactor_lanes") == "rfactor_lanes"


def test_mutations_of_reductions_rebuild():
    policy = SketchPolicy(list(make_softmax((16, 64))[-1:]))
    rng = random.Random(0)
    _, d = policy.sample(rng)
    for _ in range(50):
        d = policy.sample(rng, mutate(d, rng))[1]


# Search -------------------------------------------------------------------------------------------


def test_search_beats_random_at_equal_trials():
    # 512^3: with whole-vector, register-sized accumulator tiles, random search finds the fake
    # optimum of 64^3 within 64 trials too; a larger space keeps the comparison meaningful.
    policy = SketchPolicy(list(make_matmul(512, 512, 512)[-1:]))
    evo, rnd = [], []
    for seed in range(3):
        evo.append(drive(EvolutionarySearch(policy, seed=seed, population=32, generations=2), 64))
        rnd.append(drive(RandomSearch(policy, seed=seed), 64))
    assert all(len(h) == 64 for h in evo + rnd)
    evo_best = sum(h[-1] for h in evo) / 3
    rnd_best = sum(h[-1] for h in rnd) / 3
    assert evo_best < 0.9 * rnd_best, (evo_best, rnd_best)


def test_seeded_search_is_reproducible_and_never_repeats():
    policy = SketchPolicy(list(make_matmul(32, 32, 32)[-1:]))
    runs = [drive(EvolutionarySearch(policy, seed=5, population=16, generations=1), 40, 8) for _ in "ab"]
    assert runs[0] == runs[1]


def test_first_round_is_random_then_model_guided():
    policy = SketchPolicy(list(make_matmul(32, 32, 32)[-1:]))
    model = RandomModel(seed=0)
    s = EvolutionarySearch(policy, seed=0, model=model, population=16, generations=1)
    batch = s.propose(8, set())
    assert len(batch) == 8 and not model.trained
    s.update(batch, [fake_cost(c.trace) for c in batch])
    assert model.n_samples == 8 and s.rounds == 1
    assert s.best_cost == min(fake_cost(c.trace) for c in batch)
    assert len(s.propose(8, {trace_key(c.trace) for c in batch})) == 8


def test_seed_from_records_trains_the_model():
    policy = SketchPolicy(list(make_matmul(32, 32, 32)[-1:]))
    rng = random.Random(0)
    traces = [policy.sample(rng)[0].trace for _ in range(6)]
    costs = [fake_cost(t) for t in traces]
    s = EvolutionarySearch(policy, seed=0, population=16, generations=1)
    s.seed([[st.to_json() for st in t] for t in traces], costs)  # as a log stores them
    assert s.model.n_samples == 6 and s.model.trained
    assert s.best_cost == min(costs)
    fresh = s.propose(4, {trace_key(t) for t in traces})
    assert len(fresh) == 4 and not {trace_key(c.trace) for c in fresh} & {trace_key(t) for t in traces}


def test_converged_after_rounds_without_improvement():
    policy = SketchPolicy(list(make_matmul(32, 32, 32)[-1:]))
    s = EvolutionarySearch(policy, seed=0, model=RandomModel(0), population=8, generations=1, patience=3)
    batch = s.propose(4, set())
    s.update(batch, [1.0] * 4)
    for _ in range(2):
        s.update(batch, [1.0] * 4)
        assert not s.converged
    s.update(batch, [0.999] * 4)  # under min_improvement: still stale
    assert s.converged
    s.update(batch, [0.5] * 4)
    assert not s.converged


def test_bad_arguments():
    policy = SketchPolicy(list(make_matmul(32, 32, 32)[-1:]))
    with pytest.raises(ValueError, match="population"):
        EvolutionarySearch(policy, population=1)
    with pytest.raises(ValueError, match="eps_greedy"):
        EvolutionarySearch(policy, eps_greedy=2.0)


# Through the tuner --------------------------------------------------------------------------------


def test_tuner_with_evolutionary_search_exact_counts(tmp_path):
    fake = FakeMeasurer(fake_cost, errors={"crash": 0.1}, seed=0)
    log = tmp_path / "evo.jsonl"
    opts = TuneOptions(trials=40, batch_size=16, baseline=False, strategy="evolutionary", seed=0, finalists=0)
    (task,) = Tuner([matmul(32)], "llvm-cpu", log, opts, measurer=fake).run()
    assert task.trials == 40 and fake.calls == 40  # batches of 16, 16 and 8
    records = load_records(log).records
    assert len(records) == 40 and len({trace_key(r.trace) for r in records}) == 40
    assert task.strategy.rounds == 3 and task.strategy.model.n_samples == 40
    assert task.errors["crash"] == sum(1 for r in records if not r.ok)


def test_resume_seeds_the_model_from_the_log(tmp_path):
    log = tmp_path / "evo.jsonl"
    opts = TuneOptions(trials=16, batch_size=8, baseline=False, seed=0, finalists=0)
    Tuner([matmul(32)], "llvm-cpu", log, opts, measurer=FakeMeasurer(fake_cost)).run()
    opts2 = TuneOptions(trials=24, batch_size=8, baseline=False, seed=1, resume=True, finalists=0)
    tuner = Tuner([matmul(32)], "llvm-cpu", log, opts2, measurer=FakeMeasurer(fake_cost))
    (task,) = tuner.tasks
    tuner.load_previous(task)
    assert task.strategy.model.n_samples == 16 and task.strategy.model.trained
    tuner.run()
    assert task.trials == 8 and len({trace_key(r.trace) for r in load_records(log).records}) == 24


# Task scheduler -----------------------------------------------------------------------------------


def test_scheduler_warms_up_then_follows_the_gradient():
    sched = GradientTaskScheduler(eps=0.0)
    tasks = [TaskProgress(math.inf, 0), TaskProgress(math.inf, 0)]
    assert sched.next_task(tasks) == 0
    tasks[0] = TaskProgress(1e-3, 16, [1e-3] * 16)
    assert sched.next_task(tasks) == 1  # every task gets a first batch
    # Task 1 takes 10x longer and still improves: it gets the batch; a finished task never does.
    tasks = [TaskProgress(1e-3, 64, [1e-3] * 64), TaskProgress(1e-2, 64, [2e-2] * 32 + [1e-2] * 32)]
    assert sched.next_task(tasks) == 1
    tasks[1].done = True
    assert sched.next_task(tasks) == 0
    tasks[0].done = True
    assert sched.next_task(tasks) is None


def test_scheduler_uses_similar_tasks_speed():
    sched = GradientTaskScheduler(eps=0.0, beta=1.0)
    # Same op, same latency; task 1 runs far below the speed task 2 (same group) reaches.
    tasks = [
        TaskProgress(1e-3, 64, [1e-3] * 64, flops=1e6, group="a"),
        TaskProgress(1e-3, 64, [1e-3] * 64, flops=1e6, group="conv"),
        TaskProgress(1e-4, 64, [1e-4] * 64, flops=1e7, group="conv"),
    ]
    assert sched.next_task(tasks) == 1


def test_run_scheduled_spends_the_total_budget(tmp_path):
    insts = [matmul(32), matmul(64)]
    fake = FakeMeasurer(fake_cost, seed=0)
    opts = TuneOptions(trials=24, batch_size=8, baseline=False, strategy="random", seed=0, finalists=0)
    tasks = Tuner(insts, "llvm-cpu", tmp_path / "s.jsonl", opts, measurer=fake).run_scheduled()
    assert sum(t.trials for t in tasks) == 48 == fake.calls
    assert all(t.trials >= 8 for t in tasks)
    assert len(load_records(tmp_path / "s.jsonl").records) == 48
