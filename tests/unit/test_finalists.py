"""The finalists round (issue 17): the best few schedules timed again over fresh processes, those times
standing for them in memory and in the log, so one lucky timing never picks a library's kernel."""

import hashlib
import json

import pytest

from autosched.measure.fake import FakeMeasurer
from autosched.measure.result import FAILED_COST, MeasureResult
from autosched.measure.retime import merge_rounds, retime
from autosched.records.log import best_records, best_valid_record, merge_logs, read_log, standing, trace_key
from autosched.records.record import RecordError, TuningRecord
from autosched.search.finalists import Standings, run_finalists
from autosched.search_space.trace import Step
from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_matmul
from autosched.tune import OptionError, TuneOptions, Tuner


def matmul(n=64):
    return WorkloadInstance("matmul", {"M": n}, tuple(make_matmul(n, n, n)))


class LuckyFirstTiming(FakeMeasurer):
    """Each schedule's true time is ``cost_fn``; its first timing is luckier by a factor drawn per trace
    (0.75-1.0), as a good page placement in one process; later timings are the true time."""

    def __init__(self, cost_fn):
        super().__init__(cost_fn)
        self.timed: dict[str, int] = {}

    def measure(self, task, traces):
        out = []
        for r, t in zip(super().measure(task, traces), traces, strict=True):
            k = trace_key(t)
            self.timed[k] = self.timed.get(k, 0) + 1
            luck = 0.75 + 0.25 * (_digest(t) // 9973 % 1000) / 1000 if self.timed[k] == 1 else 1.0
            out.append(MeasureResult(tuple(c * luck for c in r.costs)) if r.ok else r)
        return out


def _digest(trace):
    return int(hashlib.sha256(trace_key(trace).encode()).hexdigest()[:12], 16)


def true_cost(trace):
    return 1e-3 * (1 + _digest(trace) % 9973 / 1000)  # a fixed cost per schedule (ties unlikely)


def _tuner(tmp_path, measurer, trials=32, **kw):
    opts = TuneOptions(trials=trials, batch_size=8, baseline=False, seed=0, **kw)
    return Tuner([matmul()], "llvm-cpu", tmp_path / "t.jsonl", opts, measurer=measurer)


def test_the_pick_is_the_fastest_finalist_by_its_retiming_and_the_log_agrees(tmp_path):
    m = LuckyFirstTiming(true_cost)
    tuner = _tuner(tmp_path, m)
    [task] = tuner.run()
    out = task.finalists
    assert out is not None and out.retimed == 5 and out.failed == 0
    recs, _ = read_log(tmp_path / "t.jsonl")
    firsts = [r for r in recs if r.retimed is None]
    retimed = [r for r in recs if r.retimed is not None]
    assert len(firsts) == 32 and len({trace_key(r.trace) for r in firsts}) == 32
    assert len(retimed) == 5 and all(r.retimed == {"rounds": 3, "finalists": 5, "passes": 2} for r in retimed)
    assert all(len(r.costs) == 3 * 2 * 3 for r in retimed)  # 3 rounds of 2 passes of the fake's 3 repeats
    # The finalists are the search's four best and the default schedule (measured first, ranked below
    # them here); the pick is the fastest of them by its re-timing.
    by_search = sorted(firsts, key=lambda r: r.mean_cost)[:4]
    default = task.strategy.untuned
    assert trace_key(firsts[0].trace) == trace_key(default) and default not in [r.trace for r in by_search]
    expected = {trace_key(r.trace) for r in by_search} | {trace_key(default)}
    assert {trace_key(r.trace) for r in retimed} == expected
    assert task.best_cost == pytest.approx(min(true_cost(r.trace) for r in [*by_search, firsts[0]]))
    assert m.calls == 32 + 5 * 3 * 2
    # What `build`, the op library and compile_model compile: the same schedule, by its re-timing.
    rec, problems = best_valid_record([tmp_path / "t.jsonl"], task.inst, tuner.fingerprint)
    assert not problems and rec.retimed is not None and trace_key(rec.trace) == trace_key(task.best_trace)
    assert best_records(recs)[(task.inst.key, tuner.fingerprint)] == rec
    assert rec.mean_cost == task.best_cost


def test_a_resumed_run_with_nothing_new_holds_no_second_round_and_counts_schedules(tmp_path):
    _tuner(tmp_path, LuckyFirstTiming(true_cost), trials=16).run()
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    m = LuckyFirstTiming(true_cost)
    tuner = _tuner(tmp_path, m, trials=16, resume=True)
    [task] = tuner.tasks
    tuner.load_previous(task)
    assert task.previous == 16  # distinct schedules: the round's records are not trials
    rec, _ = best_valid_record([tmp_path / "t.jsonl"], task.inst, tuner.fingerprint)
    assert rec.retimed is not None and task.best_cost == rec.mean_cost  # the log's pick, loaded
    tuner.run()
    assert m.calls == 0 and task.finalists is None
    assert (tmp_path / "t.jsonl").read_text().splitlines() == lines


def test_finalists_zero_keeps_the_searchs_best_and_bad_values_are_refused(tmp_path):
    m = LuckyFirstTiming(true_cost)
    [task] = _tuner(tmp_path, m, trials=16, finalists=0).run()
    assert task.finalists is None and m.calls == 16
    assert all(r.retimed is None for r in read_log(tmp_path / "t.jsonl")[0])
    with pytest.raises(OptionError, match="--finalists must be a whole number >= 0"):
        TuneOptions(finalists=-1)


def _trace(name):
    return (Step("split", name, ("i", 4, None)),)


def _board(**firsts):
    board = Standings()
    for name, cost in firsts.items():
        board.note(_trace(name), cost)
    return board


def test_a_failed_finalist_is_out_and_an_earlier_pick_defends_its_place():
    board = _board(s0=1.0, s1=2.0, s2=3.0)
    true = {"s0": None, "s1": 9.0, "s2": 2.5, "s5": 4.0, "s6": 0.7}  # None: fails when run again
    calls = []

    def time_again(entries):
        names = [e.trace[0].stage for e in entries]
        calls.append(names)
        return [MeasureResult((true[n],)) if true[n] else MeasureResult((), "crash", "x") for n in names]

    out = run_finalists(board, 2, time_again, fresh=True)
    # s0 fails and is out; s1 re-times at 9.0 and is the pick: a re-timing outranks s2's search 3.0.
    assert calls == [["s0", "s1"]] and out.failed == 1 and out.retimed == 2
    assert board.best().trace == _trace("s1") and out.search_rank == 2 and out.changed
    assert "a new pick, the search's #2 (1 s -> 9 s)" in out.describe("pool")
    assert "1 failed there and are out" in out.describe("pool")
    # A later run finds s5 and s6: its finalists are those two, and s1, the pick, defends its place.
    board.note(_trace("s5"), 0.5)
    board.note(_trace("s6"), 0.6)
    out = run_finalists(board, 2, time_again, fresh=True)
    assert calls[1] == ["s5", "s6", "s1"] and out.retimed == 3 and out.after.trace == _trace("s6")
    assert [e.trace[0].stage for e in board.by_search(9)] == ["s5", "s6", "s1", "s2"]  # s0 is out


def test_the_default_joins_the_round_once_and_only_if_it_ran():
    """``also`` (the tuner passes the default schedule) joins the search's k best, not twice when it is
    one of them, and not when it failed or never ran; a joined schedule can be the pick."""
    board = _board(s0=1.0, s1=2.0, s2=3.0, d=5.0)
    board.note(_trace("bad"), FAILED_COST)
    true = {"s0": 2.0, "s1": 2.2, "d": 1.5}
    calls = []

    def time_again(entries):
        calls.append([e.trace[0].stage for e in entries])
        return [MeasureResult((true[n],)) for n in calls[-1]]

    out = run_finalists(board, 2, time_again, fresh=True, also=[_trace("d"), _trace("bad"), _trace("new")])
    assert calls == [["s0", "s1", "d"]] and out.retimed == 3
    assert board.best().trace == _trace("d") and out.search_rank == 4
    out = run_finalists(board, 2, time_again, fresh=True, also=[_trace("s0")])
    assert calls[1] == ["s0", "s1", "d"]  # s0 is one of the two best already; d defends its pick


def test_no_round_without_two_schedules_with_k_below_two_or_with_nothing_new():
    never = lambda entries: pytest.fail("timed")  # noqa: E731
    assert run_finalists(_board(a=1.0), 4, never, fresh=True) is None
    assert run_finalists(_board(a=1.0, b=2.0), 1, never, fresh=True) is None
    board = _board(a=1.0, b=2.0)
    board.note_retimed(_trace("a"), 1.5)
    board.note_retimed(_trace("b"), 1.2)
    assert run_finalists(board, 4, never, fresh=False) is None
    assert board.best().trace == _trace("b")
    board.note(_trace("b"), 0.1)  # a second search timing changes nothing: the first and the re-timing stand
    assert board.best().cost == 1.2 and board.by_search(1)[0].first == 1.0


def test_retime_merges_rounds_and_a_failure_in_any_round_is_the_result():
    class Rounds(FakeMeasurer):
        n = 0

        def measure(self, task, traces):
            self.n += 1
            return [MeasureResult((), "wrong_result", "flaky") if self.n == 2 and t == ("b",)
                    else MeasureResult((self.n * 1.0,)) for t in traces]  # fmt: skip

    a, b = retime(Rounds(lambda t: 1.0), None, [("a",), ("b",)], rounds=3)  # traces: opaque here
    assert a.costs == (1.0, 2.0, 3.0) and b.error == "wrong_result"
    a, b = retime(Rounds(lambda t: 1.0), None, [("a",), ("b",)], rounds=2, passes=2)  # a fake: 4 batches
    assert a.costs == (1.0, 2.0, 3.0, 4.0) and b.error == "wrong_result"
    timing = {"repeat": 1, "misaligned": {"offset_bytes": 16, "median_s": 1.0, "repeat": 3}}
    merged = merge_rounds([MeasureResult((1.0,), timing={"repeat": 1}), MeasureResult((2.0,), timing=timing)])
    assert merged.costs == (1.0, 2.0) and merged.timing["misaligned"]["median_s"] == 1.0


# Records ----------------------------------------------------------------------------------------


def _record(trace, costs, retimed=None, error=None):
    return TuningRecord("k", "matmul", {"M": 8}, "llvm-cpu", "fp", {}, trace, costs, error=error,
                        flops=1.0, retimed=retimed)  # fmt: skip


def test_a_retimed_record_stands_for_its_trace_and_merging_keeps_it(tmp_path):
    ta, tb = (Step("split", "C", ("i", 4, None)),), (Step("split", "C", ("i", 8, None)),)
    mark = {"rounds": 3, "finalists": 2}  # as older lines have it: no "passes"
    lucky = _record(ta, (1.0,))
    plain = _record(tb, (1.5,))
    again = _record(ta, (2.0, 2.1, 1.9), retimed=mark)
    assert standing([lucky, plain, again]) == [plain, again]
    assert best_records([lucky, plain, again])[("k", "fp")] is again  # a re-timing outranks search timings
    # A later re-timing replaces an earlier one, even a faster one; a failed re-timing takes it out.
    failed = _record(ta, (), retimed=mark, error="crash")
    assert standing([again, failed, plain]) == [failed, plain]
    assert best_records([lucky, again, failed]) == {}
    # Lines round-trip; merging two logs keeps the re-timing over the faster first timing.
    line = again.to_json_line()
    assert json.loads(line)["retimed"] == mark and TuningRecord.from_json_line(line) == again
    passes = _record(ta, (2.0,), retimed={**mark, "passes": 2})  # as this version writes it
    assert TuningRecord.from_json_line(passes.to_json_line()) == passes
    (tmp_path / "a.jsonl").write_text(lucky.to_json_line() + "\n")
    (tmp_path / "b.jsonl").write_text(again.to_json_line() + "\n" + plain.to_json_line() + "\n")
    merge_logs([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "m.jsonl")
    merged, _ = read_log(tmp_path / "m.jsonl")
    assert sorted(r.mean_cost for r in merged) == [1.5, 2.0]


@pytest.mark.parametrize(
    "value, message",
    [
        ({"rounds": 3}, "field 'retimed': expected"),
        ({"rounds": 0, "finalists": 4}, "field 'retimed.rounds': expected a whole number 1..1000"),
        ({"rounds": 3, "finalists": True}, "field 'retimed.finalists'"),
        ({"rounds": 3, "finalists": 4, "x": 1}, "field 'retimed': expected"),
        ({"rounds": 3, "finalists": 4, "passes": 0}, "field 'retimed.passes': expected a whole number"),
        ([3, 4], "field 'retimed': expected object"),
    ],
)
def test_a_bad_retimed_field_is_refused_naming_it(value, message):
    data = json.loads(_record((), (1.0,)).to_json_line())
    data["retimed"] = value
    with pytest.raises(RecordError, match=message):
        TuningRecord.from_json_line(json.dumps(data))


def test_a_real_round_builds_once_and_times_each_round_in_a_fresh_runner_process(tmp_path):
    from autosched.measure.builder import LocalBuilder
    from autosched.measure.measure import LocalMeasurer
    from autosched.measure.runner import LocalRunner

    m = LocalMeasurer(LocalBuilder(n_workers=1), LocalRunner(timeout_s=20, repeat=2, min_repeat_ms=0.2))
    pids, builds = [], []
    run, build = m.runner.run, m.builder.build

    def spy_run(task, built, **kw):
        out = run(task, built, **kw)
        pids.append(m.runner._proc.pid)
        return out

    m.runner.run = spy_run
    m.builder.build = lambda task, traces: builds.append(len(traces)) or build(task, traces)
    opts = TuneOptions(trials=4, batch_size=4, baseline=False, finalists=2)
    try:
        [task] = Tuner([matmul(16)], "llvm-cpu", tmp_path / "t.jsonl", opts, measurer=m).run()
    finally:
        m.close()
    # the search's batch, then the two finalists once, and the default (measured first) if it ranked below
    assert builds[0] == 4 and builds[1] in (2, 3) and len(builds) == 2
    assert len(pids) == 1 + 3 * 2 and len(set(pids[1:])) == 3  # a fresh worker per round, two passes in it
    assert pids[1] == pids[2] and pids[3] == pids[4] and pids[5] == pids[6]
    retimed = [r for r in read_log(tmp_path / "t.jsonl")[0] if r.retimed is not None]
    # timed sustained: 15 repeats of >= 10 ms a pass, none cut short for being slower than the best (on
    # a loaded machine the runner's budget may stop a pass after fewer)
    assert len(retimed) == builds[1] and all(r.ok and 6 <= len(r.costs) <= 3 * 2 * 15 for r in retimed)
    assert all(r.timing["repeat"] == 15 and r.timing["min_repeat_s"] == 0.01 for r in retimed)
    assert all(r.check == "full" and r.timing["alignment_bytes"] == 64 for r in retimed)
    # each finalist was timed misaligned too (in the first round), whether or not it was ever a new best
    assert all(r.timing["misaligned"]["offset_bytes"] == 16 for r in retimed)
