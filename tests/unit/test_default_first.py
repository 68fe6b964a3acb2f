"""Operator tuning measures the default schedule first (what runs untuned), and seeds its search with
the default's decisions; a resumed run does not measure it again."""

from autosched.measure.fake import FakeMeasurer
from autosched.records.log import read_log, trace_key
from autosched.search.default_first import DefaultFirst
from autosched.search.strategy import Candidate
from autosched.search_space.default import default_candidate, default_schedule
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul
from autosched.tune import TuneOptions, Tuner


def matmul(n=64):
    return WorkloadInstance("matmul", {"M": n}, tuple(make_matmul(n, n, n)))


class Recording(FakeMeasurer):
    def __init__(self, cost_fn):
        super().__init__(cost_fn)
        self.batches = []

    def measure(self, task, traces):
        self.batches.append([trace_key(t) for t in traces])
        return super().measure(task, traces)


def _tuner(tmp_path, measurer, trials=16, **kw):
    opts = TuneOptions(trials=trials, batch_size=8, baseline=False, seed=0, finalists=0, **kw)
    return Tuner([matmul()], "llvm-cpu", tmp_path / "t.jsonl", opts, measurer=measurer)


def test_the_first_candidate_is_the_default_and_the_best_is_never_slower(tmp_path):
    # Every searched schedule is 10x slower than the default: the log's best must be the default.
    m = Recording(lambda t: 1e-4 if trace_key(t) == key else 1e-3)
    tuner = _tuner(tmp_path, m)
    default, decisions = default_candidate(list(tuner.tasks[0].inst.outputs), tuner.adapter, tuner.chip.cores)
    key = trace_key(default)
    [task] = tuner.run()
    assert m.batches[0][0] == key
    assert sum(b.count(key) for b in m.batches) == 1
    assert trace_key(task.best_trace) == key and task.best_cost == 1e-4
    recs, _ = read_log(tmp_path / "t.jsonl")
    assert len(recs) == 16 and trace_key(recs[0].trace) == key
    assert recs[0].decisions == decisions  # the sketch's keys: tiles, packing, unrolling
    assert any(k.endswith("/pack") for k in decisions) and any("/tile/" in k for k in decisions)
    # The default's decisions start the search's populations (the evolutionary strategy's best).
    assert task.strategy.inner._measured[0][1] == key


def test_a_resumed_run_does_not_measure_the_default_again(tmp_path):
    m = Recording(lambda t: 1e-3)
    _tuner(tmp_path, m, trials=8).run()
    first = m.batches[0][0]
    m2 = Recording(lambda t: 1e-3)
    tuner = _tuner(tmp_path, m2, trials=16, resume=True)
    for task in tuner.tasks:
        tuner.load_previous(task)
    tuner.run()
    assert sum(len(b) for b in m2.batches) == 8
    assert all(first not in b for b in m2.batches)


def test_default_first_can_be_turned_off(tmp_path):
    m = Recording(lambda t: 1e-3)
    on = _tuner(tmp_path, m)
    key = trace_key(on.tasks[0].strategy.default)
    _tuner(tmp_path, m, default_first=False).run()
    assert isinstance(on.tasks[0].strategy, DefaultFirst)
    assert m.batches and all(key not in b for b in m.batches)


def test_the_wrapper_forwards_what_it_does_not_own_and_measures_the_default_before_transfer_probes():
    trace = default_schedule(make_matmul(8, 8, 8)[-1]).trace

    class Inner:
        queue_alone = False

        def propose(self, n, measured):
            out = [Candidate(trace, {"probe": self.queue_alone})] * n
            self.queue_alone = False
            return out

    inner = Inner()
    wrapped = DefaultFirst(inner, trace, {"d": 1})
    wrapped.queue_alone = True  # transfer sets this on the strategy it is given: its probes, alone
    assert inner.queue_alone is True and "queue_alone" not in vars(wrapped)
    first = wrapped.propose(3, set())  # the default, then the probes in the same batch
    assert first == [Candidate(trace, {"d": 1}), *[Candidate(trace, {"probe": True})] * 2]
    # the search's first batch, drawn in the same call as without probes (n - 1), comes next
    assert wrapped.propose(3, set()) == [Candidate(trace, {"probe": False})] * 2
    assert wrapped.propose(3, set()) == [Candidate(trace, {"probe": False})] * 3  # the default once only
