"""Tuning records and logs: versioned JSON lines, bad lines reported, other chips never silently used."""

import json
import math
from pathlib import Path

import pytest

from autosched import te
from autosched.hai.base import ChipInfo
from autosched.records import log as log_module
from autosched.records import record as record_module
from autosched.records import show as show_module
from autosched.records import validate as validate_module
from autosched.records.log import (
    LogError,
    append_records,
    best_records,
    best_valid_record,
    ensure_appendable,
    load_records,
    measured_traces,
    merge_logs,
    read_log,
    trace_key,
)
from autosched.records.record import (
    ERROR_COMPILE,
    ERROR_KINDS,
    ERROR_TIMEOUT,
    LOG_VERSION,
    RecordError,
    TuningRecord,
    fingerprint_of,
    make_record,
)
from autosched.records.show import format_seconds, show_best, show_log
from autosched.records.validate import validate_record
from autosched.search_space.trace import Step
from autosched.target import parse_target
from autosched.te.workload import workload

HASWELL = ChipInfo(
    name="haswell", kind="cpu", arch="haswell", features=("avx2", "fma", "avx"), cores=4, vector_bits=256
)
ZEN = ChipInfo(
    name="znver4",
    kind="cpu",
    arch="znver4",
    features=("avx512f", "avx2", "fma"),
    cores=16,
    vector_bits=512,
    extra={"note": "by hand"},
)
T_HASWELL = parse_target("llvm-cpu -mcpu=haswell")
T_NATIVE = parse_target("llvm-cpu")
FP = fingerprint_of(T_HASWELL, HASWELL)
FP_OTHER = fingerprint_of(T_NATIVE, ZEN)

TRACE_A = (Step("split", "C", ("i", 8, None)), Step("parallel", "C", ("i.outer",)))
TRACE_B = (
    Step("split", "C", ("j", 4, None)),
    Step("reorder", "C", (("i", "j.outer", "j.inner"),)),
    Step("vectorize", "C", ("j.inner",)),
)


def rec(trace=TRACE_A, costs=(1e-3, 2e-3, 3e-3), fp=FP, key="k" * 64, error=None, msg=""):
    return TuningRecord(
        workload_key=key,
        workload_name="matmul",
        workload_args={"M": 64, "N": 64, "K": 64, "dtype": "float32"},
        target=str(T_HASWELL if fp == FP else T_NATIVE),
        fingerprint=fp,
        chip=(HASWELL if fp == FP else ZEN).to_json(),
        trace=trace,
        costs=() if error else costs,
        error=error,
        error_msg=msg,
        timestamp="2024-05-01T12:00:00+00:00",
        flops=2 * 64**3,
    )


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


# --- one record ---------------------------------------------------------------------------------------


def test_round_trip_through_one_line():
    r = rec(trace=TRACE_B)
    line = r.to_json_line()
    assert "\n" not in line
    assert TuningRecord.from_json_line(line) == r
    data = json.loads(line)
    assert list(data) == sorted(data)
    assert set(data) == {"version", "autosched", "workload", "target", "trace", "costs", "error", "timestamp",
                         "flops"}  # fmt: skip
    assert data["version"] == LOG_VERSION
    assert set(data["workload"]) == {"key", "name", "args"}
    assert set(data["target"]) == {"name", "fingerprint", "chip"}
    assert data["error"] is None


def test_how_outputs_were_checked_is_an_optional_field():
    import dataclasses

    plain = rec()
    assert "check" not in json.loads(plain.to_json_line())  # absent: the line is the old format
    sampled = dataclasses.replace(plain, check="sampled:4096")
    assert json.loads(sampled.to_json_line())["check"] == "sampled:4096"
    assert TuningRecord.from_json_line(sampled.to_json_line()) == sampled
    for bad in ("sampled:", "everything", 'full"'):
        with pytest.raises(RecordError, match="check"):
            dataclasses.replace(plain, check=bad)


def test_error_record_round_trip_and_properties():
    r = rec(error=ERROR_TIMEOUT, msg="took more than 10 s")
    assert not r.ok and r.mean_cost == math.inf and r.gflops == 0.0
    data = json.loads(r.to_json_line())
    assert data["error"] == {"kind": "timeout", "message": "took more than 10 s"} and data["costs"] == []
    assert TuningRecord.from_json_line(r.to_json_line()) == r
    assert set(ERROR_KINDS) == {"build", "compile", "run", "timeout", "crash", "wrong_result", "memory",
                                "schedule"}  # fmt: skip


def test_median_and_gflops():
    r = rec(costs=(3e-3, 1e-3, 100.0))  # one slow outlier does not move the median
    assert r.mean_cost == 3e-3
    assert r.gflops == pytest.approx(2 * 64**3 / 3e-3 / 1e9)


def test_tuple_args_round_trip():
    r = TuningRecord("k", "softmax", {"shape": (4, 16)}, "llvm-cpu", FP, {}, (), (1e-6,), flops=64)
    back = TuningRecord.from_json_line(r.to_json_line())
    assert back.workload_args == {"shape": (4, 16)} and back == r


def test_construction_rejects_bad_values():
    with pytest.raises(RecordError, match="unknown kind 'oops'"):
        rec(error="oops")
    with pytest.raises(RecordError, match="workload argument 'f'"):
        TuningRecord("k", "w", {"f": object()}, "llvm-cpu", FP, {}, ())
    with pytest.raises(RecordError, match="costs"):
        rec(costs=(float("nan"),))


def _line(**changes):
    data = json.loads(rec().to_json_line())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        obj = data
        for p in parents:
            obj = obj[p]
        if value is KeyError:
            del obj[last]
        else:
            obj[last] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    "line, reason",
    [
        ("{not json", "invalid JSON"),
        (rec().to_json_line()[:-40], "invalid JSON.*cut-off last line"),  # a killed writer
        ("[1, 2]", "expected a JSON object, got list"),
        (_line(version=KeyError), "missing field 'version'"),
        (_line(version=LOG_VERSION + 1), f"written by a newer autosched \\(format {LOG_VERSION + 1}\\)"),
        (_line(version=0), "unknown format version 0"),
        (_line(version="1"), "field 'version': expected number, got string"),
        (_line(workload__key=KeyError), "missing field 'workload.key'"),
        (_line(target=KeyError), "missing field 'target'"),
        (_line(target__fingerprint=7), "field 'target.fingerprint': expected string, got number"),
        (_line(costs="fast"), "field 'costs': expected array"),
        (_line(costs=[1.0, "x"]), "field 'costs': expected a list of numbers"),
        (_line(flops=True), "field 'flops': expected number, got boolean"),
        (_line(timestamp="yesterday"), "field 'timestamp'"),
        (_line(error={"kind": "bogus", "message": ""}), "error: unknown kind 'bogus'"),
        (_line(trace=[["frobnicate", "C", []]]), "field 'trace': trace: unknown primitive 'frobnicate'"),
        (_line(trace=[["split", "C", ["i"]]]), "field 'trace': trace: split takes 3"),
        ('{"version": 1, "costs": [NaN]}', "invalid JSON"),
    ],
)
def test_every_record_error(line, reason):
    with pytest.raises(RecordError, match=reason):
        TuningRecord.from_json_line(line)


# --- fingerprints ---------------------------------------------------------------------------------------


def test_fingerprint_shape_and_stability():
    assert FP.startswith("llvm-cpu:haswell:") and len(FP.rsplit(":", 1)[1]) == 8
    # Another machine: same chip facts except the name, peak and cores, and features in another order.
    same = ChipInfo(name="other box", kind="cpu", arch="haswell", features=("fma", "avx", "avx2"),
                    cores=8, vector_bits=256, peak_gflops=500.0)  # fmt: skip
    assert fingerprint_of(parse_target("llvm-cpu -mcpu=haswell"), same) == FP


def test_fingerprint_differs_for_mcpu_and_options():
    host = ChipInfo(
        name="haswell", kind="cpu", arch="haswell", features=("avx2", "fma", "avx"), vector_bits=256
    )
    # The host is a Haswell too, yet the native target and -mcpu=haswell are distinct chips in logs.
    assert fingerprint_of(T_NATIVE, host) != fingerprint_of(T_HASWELL, host)
    assert fingerprint_of(parse_target("llvm-cpu -mcpu=haswell -mattr=+avx2"), host) != FP
    assert fingerprint_of(T_NATIVE, ZEN) != fingerprint_of(T_NATIVE, HASWELL)


def test_make_record_fills_from_the_workload_instance():
    @workload
    def rec_test_matmul(M=8, N=8, K=4, dtype="float32"):
        A = te.placeholder((M, K), dtype, name="A")
        B = te.placeholder((K, N), dtype, name="B")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        return [A, B, C]

    inst = rec_test_matmul.workload.instantiate()
    r = make_record(inst, T_HASWELL, HASWELL, TRACE_A, costs=[1e-6, 2e-6])
    assert (r.workload_key, r.workload_name, r.flops) == (inst.key, "rec_test_matmul", 8 * 8 * 4 * 2)
    assert r.fingerprint == FP and r.target == "llvm-cpu -mcpu=haswell" and r.chip == HASWELL.to_json()
    assert TuningRecord.from_json_line(r.to_json_line()) == r
    failed = make_record(inst, T_HASWELL, HASWELL, TRACE_A, costs=[1.0], error=ERROR_COMPILE, error_msg="x")
    assert failed.costs == () and not failed.ok


# --- logs -------------------------------------------------------------------------------------------------


def test_loader_reports_bad_lines_and_counts_foreign(tmp_path):
    path = tmp_path / "log.jsonl"
    good1, good2 = rec(trace=TRACE_A), rec(trace=TRACE_B, costs=(5e-4,))
    path.write_text(
        "\n".join(
            [
                good1.to_json_line(),  # 1
                "{corrupt",  # 2
                "",  # 3: blank lines are harmless
                rec(fp=FP_OTHER).to_json_line(),  # 4: another chip
                rec(key="other").to_json_line(),  # 5: another workload
                good2.to_json_line(),  # 6
                good1.to_json_line()[:50],  # 7: truncated by a killed writer, no newline
            ]
        )
    )
    res = load_records(path, target_fingerprint=FP, workload_key="k" * 64)
    assert res.records == [good1, good2]
    assert [(p.line_no, p.path) for p in res.problems] == [(2, str(path)), (7, str(path))]
    assert "invalid JSON" in res.problems[0].reason and str(res.problems[1]).startswith(f"{path}:7: ")
    assert res.foreign == 1 and res.other_workloads == 1
    everything = load_records(path)
    assert len(everything.records) == 4 and everything.foreign == 0


def test_missing_log_is_a_clear_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"tuning log .*nope\.jsonl not found"):
        load_records(tmp_path / "nope.jsonl")


def test_append_only_and_creates_dirs(tmp_path):
    path = tmp_path / "sub" / "dir" / "log.jsonl"
    assert append_records(path, [rec(trace=TRACE_A)]) == 1
    before = path.read_bytes()
    assert append_records(path, [rec(trace=TRACE_B), rec(error=ERROR_COMPILE, msg="bad")]) == 2
    after = path.read_bytes()
    assert after.startswith(before) and len(lines_of(path)) == 3
    assert append_records(path, []) == 0 and path.read_bytes() == after


def test_append_after_a_truncated_line_keeps_new_records_whole(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(rec().to_json_line() + "\n" + rec().to_json_line()[:30])  # writer killed mid-line
    append_records(path, [rec(trace=TRACE_B)])
    res = load_records(path)
    assert [r.trace for r in res.records] == [TRACE_A, TRACE_B]
    assert [p.line_no for p in res.problems] == [2]


def test_append_fsyncs_once_per_call(tmp_path, monkeypatch):
    calls = []
    real = log_module.os.fsync
    monkeypatch.setattr(log_module.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    append_records(tmp_path / "log.jsonl", [rec(), rec(trace=TRACE_B), rec()])
    assert len(calls) == 1


def test_best_records_picks_lowest_median():
    slow = rec(trace=TRACE_A, costs=(1e-3, 1e-3, 1e-3))
    fast_median = rec(trace=TRACE_B, costs=(1e-4, 5e-4, 50.0))  # huge mean, lowest median
    failed = rec(trace=(), error=ERROR_TIMEOUT)
    other_chip = rec(fp=FP_OTHER, costs=(9.0,))
    best = best_records([slow, failed, fast_median, other_chip])
    assert best == {("k" * 64, FP): fast_median, ("k" * 64, FP_OTHER): other_chip}
    assert best_records([failed]) == {}


def test_measured_traces_include_failures_and_filter():
    records = [rec(trace=TRACE_A), rec(trace=TRACE_B, error=ERROR_COMPILE), rec(trace=(), fp=FP_OTHER)]
    seen = measured_traces(records, "k" * 64, FP)
    assert seen == {trace_key(TRACE_A), trace_key(TRACE_B)}
    assert trace_key(tuple(TRACE_A)) == trace_key(TRACE_A) != trace_key(TRACE_B)


def test_merge_dedupes_and_keeps_best(tmp_path):
    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "out" / "m.jsonl"
    append_records(a, [rec(trace=TRACE_A, costs=(3e-3,)), rec(trace=TRACE_B, costs=(2e-3,))])
    append_records(b, [rec(trace=TRACE_A, costs=(1e-3,)), rec(trace=TRACE_A, error=ERROR_COMPILE)])
    b.write_text(b.read_text() + "garbage\n")
    stats = merge_logs([a, b], out)
    assert (stats.read, stats.written, stats.duplicates) == (4, 2, 2)
    assert [(p.path, p.line_no) for p in stats.problems] == [(str(b), 3)]
    merged = {trace_key(r.trace): r for r in load_records(out).records}
    assert merged[trace_key(TRACE_A)].costs == (1e-3,) and merged[trace_key(TRACE_B)].costs == (2e-3,)

    best_only = merge_logs([a, b], out, keep="best")
    assert best_only.written == 1 and best_only.dropped == 1
    assert [r.costs for r in load_records(out).records] == [(1e-3,)]


def test_merge_into_one_of_its_inputs(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_records(a, [rec(trace=TRACE_A)])
    append_records(b, [rec(trace=TRACE_B), rec(trace=TRACE_A)])
    assert merge_logs([a, b], a).written == 2
    assert len(load_records(a).records) == 2 and not (tmp_path / "a.jsonl.tmp").exists()
    with pytest.raises(ValueError, match="keep"):
        merge_logs([a], a, keep="most")  # type: ignore[arg-type]


def test_logs_are_data_never_code():
    for module in (record_module, log_module, show_module):
        src = Path(module.__file__).read_text()
        for banned in ("pickle", "eval(", "exec(", "marshal", "shelve", "yaml", "importlib", "__import__"):
            assert banned not in src, f"{module.__name__} uses {banned}"


# --- text for the CLI -------------------------------------------------------------------------------------


def test_show_log_summarises_groups_errors_and_problems(tmp_path):
    path = tmp_path / "log.jsonl"
    append_records(
        path,
        [
            rec(trace=TRACE_A, costs=(1e-3,)),
            rec(trace=TRACE_B, costs=(5e-4,)),
            rec(trace=(), error=ERROR_COMPILE),
            rec(trace=(), error=ERROR_COMPILE),
            rec(trace=(), error=ERROR_TIMEOUT),
            rec(fp=FP_OTHER),
        ],
    )
    path.write_text(path.read_text() + "oops\n")
    text = show_log(path)
    assert "6 records, 1 workload(s), 2 chip(s)" in text
    assert "5 records: 2 ok, 3 errors (compile 2, timeout 1)" in text
    assert f"[{FP}]" in text and f"[{FP_OTHER}]" in text
    assert f"best: {2 * 64**3 / 5e-4 / 1e9:.2f} GFLOP/s, 500 us" in text
    assert f"{path}:7: invalid JSON" in text
    assert "1 more workload/chip group" in show_log(path, limit=1)


def test_show_best_prints_the_schedule_code(tmp_path):
    path = tmp_path / "log.jsonl"
    append_records(path, [rec(trace=TRACE_A, costs=(1e-3,)), rec(trace=TRACE_B, costs=(5e-4,)),
                          rec(fp=FP_OTHER, costs=(2e-3,))])  # fmt: skip
    text = show_best(path, workload="matmul", target="llvm-cpu -mcpu=haswell")
    assert "s['C'].vectorize('j.inner')" in text and "s['C'].split('j', factor=4)" in text
    assert "split('i'" not in text and FP_OTHER not in text
    assert FP_OTHER in show_best(path, target=FP_OTHER)
    assert "no successful records for workload='conv2d'" in show_best(path, workload="conv2d")


def test_format_seconds():
    assert [format_seconds(s) for s in (2.5, 1.27e-3, 1.27e-5, 3e-9)] == [
        "2.5 s",
        "1.27 ms",
        "12.7 us",
        "3 ns",
    ]


# --- hardening (issue 19): merge keeps every line, records validated before use ----------------------


def test_merge_in_place_keeps_unreadable_lines_verbatim(tmp_path):
    log = tmp_path / "l.jsonl"
    newer = _line(version=LOG_VERSION + 1)
    append_records(log, [rec(trace=TRACE_A), rec(trace=TRACE_A, costs=(5e-4,))])
    with log.open("ab") as f:
        f.write(newer.encode() + b"\n{corrupt\n\xff\xfe not utf-8\n")
    stats = merge_logs([log], log)
    assert (stats.read, stats.written, stats.duplicates, stats.kept_unparsed) == (2, 1, 1, 3)
    lines = log.read_bytes().split(b"\n")
    assert lines[1:] == [newer.encode(), b"{corrupt", b"\xff\xfe not utf-8", b""]
    text = stats.describe(log)
    assert text.startswith(f"merged 2 record(s) into {log}: 1 written, 1 duplicate(s)")
    assert "3 line(s) could not be parsed; 3 kept verbatim" in text and "newer autosched" in text
    again = merge_logs([log], log)  # merging again neither loses nor multiplies them
    assert again.kept_unparsed == 3 and log.read_bytes().split(b"\n")[1:] == lines[1:]
    assert [p.name for p in tmp_path.iterdir()] == ["l.jsonl"]  # no temporary file left behind


def test_merge_output_directory_and_unreadable_inputs_are_clear_errors(tmp_path):
    log = tmp_path / "l.jsonl"
    append_records(log, [rec()])
    before = log.read_bytes()
    with pytest.raises(LogError, match=r"output .* is a directory; give a file path"):
        merge_logs([log], tmp_path)
    with pytest.raises(LogError, match=r"tuning log .* is a directory; give the path of a \.jsonl file"):
        merge_logs([tmp_path], tmp_path / "out.jsonl")
    with pytest.raises(LogError, match="is a directory"):
        read_log(tmp_path)
    with pytest.raises(LogError, match=r"cannot write .*l\.jsonl/out\.jsonl"):
        merge_logs([log], log / "out.jsonl")  # under a regular file
    assert log.read_bytes() == before


def test_unreadable_log_is_a_clear_error(tmp_path, monkeypatch):
    log = tmp_path / "l.jsonl"
    append_records(log, [rec()])

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(LogError, match=r"cannot read tuning log .*l\.jsonl: Permission denied"):
        read_log(log)


def test_ensure_appendable(tmp_path):
    ensure_appendable(tmp_path / "new" / "l.jsonl")
    assert (tmp_path / "new").is_dir() and not (tmp_path / "new" / "l.jsonl").exists()  # no empty log left
    (tmp_path / "new" / "l.jsonl").write_text("kept\n")
    ensure_appendable(tmp_path / "new" / "l.jsonl")
    assert (tmp_path / "new" / "l.jsonl").read_text() == "kept\n"  # an existing log is left as it was
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LogError, match=r"cannot write tuning log .*file/l\.jsonl.*pass --log"):
        ensure_appendable(blocker / "l.jsonl")
    with pytest.raises(LogError, match="is a directory"):
        ensure_appendable(tmp_path)
    assert blocker.read_text() == "x"


@workload
def _vmatmul(M=32, N=32, K=16, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    return [A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]


def _sketched(inst, n=12, seed=0):
    import random

    from autosched.search_space.sketch import SketchPolicy

    policy = SketchPolicy(list(inst.outputs), cores=2, lanes=16)
    rng = random.Random(seed)
    return [make_record(inst, T_HASWELL, HASWELL, policy.sample(rng)[0].trace, (1e-3,)) for _ in range(n)]


def test_every_sketched_record_validates():
    inst = _vmatmul.workload.instantiate()
    for r in _sketched(inst, n=30):
        validate_record(r, inst)
        validate_record(TuningRecord.from_json_line(r.to_json_line()), inst)


def _with_trace(r, trace):
    data = json.loads(r.to_json_line())
    data["trace"] = trace
    return json.dumps(data)


@pytest.mark.parametrize(
    "trace, reason",
    [
        ([["pragma", "C", ["i", "auto_unroll_max_step", 10**12]]], "auto_unroll_max_step = 1000000000000"),
        ([["split", "C", ["i", 0, None]]], "factor = 0: expected an int in 1"),
        ([["split", "C", [{"a": 1}, 4, None]]], "axis = .*expected a name"),
        ([["fuse", "C", [[]]]], "expected a non-empty list of names"),
        ([["cache_read", "A", ["local", [["C"]]]]], "readers = .*expected a non-empty list of names"),
        ([["rfactor", "C", ["k", True]]], "factor_axis = True"),
        ([["parallel", "C", ["i"]]] * 10_001, "more than the 10000"),
    ],
)
def test_trace_arguments_are_bounded_when_parsed(trace, reason):
    with pytest.raises(RecordError, match=reason):
        TuningRecord.from_json_line(_with_trace(rec(), trace))


def test_crafted_unroll_record_is_rejected_naming_its_line(tmp_path):
    log = tmp_path / "l.jsonl"
    inst = _vmatmul.workload.instantiate()
    good = _sketched(inst, n=1)[0]
    crafted = json.loads(good.to_json_line())
    crafted["trace"].append(["pragma", "C", [crafted["trace"][0][2][0], "auto_unroll_max_step", 10**12]])
    crafted["costs"] = [1e-9]  # the fastest in the log: it would be the one compiled
    log.write_text(good.to_json_line() + "\n" + json.dumps(crafted) + "\n")
    res = load_records(log, workload=inst)
    assert res.records == [good]
    assert [p.line_no for p in res.problems] == [2] and "auto_unroll_max_step" in res.problems[0].reason
    best, problems = best_valid_record([log], inst, FP)
    assert best == good and str(problems[0]).startswith(f"{log}:2: ")


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda t: [["split", "nope", ["i", 4, None]], *t], "no stage 'nope'"),
        (lambda t: [["split", "C", ["zz", 4, None]], *t], "'zz' is not an axis"),
        (lambda t: [["split", "C", ["i", 64, None]], *t], "factor 64 is larger than the extent 32"),
        (lambda t: [["tile", "C", ["i", "j", 4, 33]], *t], "y_factor 33 is larger than the extent 32"),
        (lambda t: [["fuse", "C", [["i", "j"]]], ["vectorize", "C", ["i.j.fused"]]], "1024 iterations"),
        (lambda t: [["unroll", "C", ["i"]], ["unroll", "C", ["j"]], ["unroll", "C", ["k"]]], "16384 copies"),
    ],
)
def test_records_that_do_not_fit_the_workload_are_rejected(tmp_path, edit, reason, monkeypatch):
    monkeypatch.setattr(validate_module, "MAX_VECTOR_LANES", 512)
    inst = _vmatmul.workload.instantiate()
    good = _sketched(inst, n=1)[0]
    data = json.loads(good.to_json_line())
    bad = TuningRecord.from_json_line(_with_trace(good, edit([])))
    with pytest.raises(RecordError, match=reason):
        validate_record(bad, inst)
    log = tmp_path / "l.jsonl"
    log.write_text(json.dumps(data) + "\n" + bad.to_json_line() + "\n")
    res = load_records(log, target_fingerprint=FP, workload=inst)
    assert (
        res.records == [good] and res.problems[0].line_no == 2 and "record rejected" in str(res.problems[0])
    )


def test_vector_lanes_times_unrolled_copies_is_bounded_per_stage():
    inst = _vmatmul.workload.instantiate(M=4096, N=4096, K=1)
    good = _sketched(inst, n=1)[0]
    each_at_its_limit = [["unroll", "C", ["i"]], ["vectorize", "C", ["j"]]]  # 4096 copies x 4096 lanes
    with pytest.raises(RecordError, match="16777216 lanes; at most 65536"):
        validate_record(TuningRecord.from_json_line(_with_trace(good, each_at_its_limit)), inst)
    validate_record(TuningRecord.from_json_line(_with_trace(good, [["vectorize", "C", ["j"]]])), inst)


def test_record_for_other_args_or_key_is_rejected():
    inst = _vmatmul.workload.instantiate()
    good = _sketched(inst, n=1)[0]
    data = json.loads(good.to_json_line())
    data["workload"]["args"]["M"] = 10**9
    with pytest.raises(RecordError, match=r"workload arguments .* do not match"):
        validate_record(TuningRecord.from_json_line(json.dumps(data)), inst)
    with pytest.raises(RecordError, match="is for workload key"):
        validate_record(good, _vmatmul.workload.instantiate(M=16))


def test_the_limits_cover_what_the_space_samples():
    from autosched.search_space.sketch import UNROLL_STEPS
    from autosched.search_space.sketch_base import WINDOW_UNROLL_MAX
    from autosched.search_space.trace import ARG_KINDS, MAX_AUTO_UNROLL_STEP, PRIMITIVES

    assert max(UNROLL_STEPS) <= MAX_AUTO_UNROLL_STEP and set(ARG_KINDS) == set(PRIMITIVES)
    assert 64 * WINDOW_UNROLL_MAX <= validate_module.MAX_UNROLLED_LANES  # 64 lanes x an unrolled window
    assert all(len(ARG_KINDS[p]) == len(PRIMITIVES[p]) for p in PRIMITIVES)


def test_merge_in_place_refuses_when_the_log_grows_meanwhile(tmp_path, monkeypatch):
    log = tmp_path / "l.jsonl"
    append_records(log, [rec(trace=TRACE_A)])
    real_scan = log_module.scan_log

    def scan_then_a_tuner_appends(path):
        lines = real_scan(path)
        append_records(log, [rec(trace=TRACE_B)])  # a tuner's batch lands while merge runs
        return lines

    monkeypatch.setattr(log_module, "scan_log", scan_then_a_tuner_appends)
    with pytest.raises(LogError, match="changed while it was being merged"):
        merge_logs([log], log)
    assert [r.trace for r in read_log(log)[0]] == [TRACE_A, TRACE_B]  # the batch is still there


def test_merge_keeps_fields_this_version_does_not_know(tmp_path):
    log = tmp_path / "l.jsonl"
    data = json.loads(rec().to_json_line())
    data["measured_by"] = "a newer autosched, same format"  # an optional field added later
    log.write_text(json.dumps(data) + "\n")
    merge_logs([log], tmp_path / "out.jsonl")
    assert json.loads((tmp_path / "out.jsonl").read_text())["measured_by"] == data["measured_by"]
