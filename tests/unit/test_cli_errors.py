"""One error style for the CLI (issue 19): one line per problem on stderr, exit 2; --debug shows the
traceback. Each case below printed a traceback, lost data or did nothing silently before."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from autosched import cli
from autosched.cli import main
from autosched.hai.base import ChipInfo
from autosched.records.log import LogError, append_records, read_log
from autosched.records.record import LOG_VERSION, make_record
from autosched.target import parse_target
from autosched.te.workload import load_op_file

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
CHIP = ChipInfo(name="test", kind="cpu", arch="test", features=("avx2",), cores=2, vector_bits=256)


def small_matmul(n=16):
    (wl,) = load_op_file(MATMUL)
    return wl.instantiate(M=n, N=n, K=n)


def records(n=3, size=16):
    from autosched.search_space.default import default_schedule

    inst = small_matmul(size)
    trace = default_schedule(list(inst.outputs), cores=2).trace
    return [
        make_record(inst, parse_target("llvm-cpu"), CHIP, trace[: i + 1], (1e-3 * (i + 1),)) for i in range(n)
    ]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *words):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autosched ") and ": error: " in lines[0], err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]


# --- logs merge: nothing lost --------------------------------------------------------------------------


def test_merge_in_place_keeps_newer_and_corrupt_lines_and_says_so(tmp_path, capsys):
    log = tmp_path / "l.jsonl"
    recs = records(2)
    append_records(log, [*recs, recs[0]])
    newer = json.loads(recs[0].to_json_line())
    newer["version"] = LOG_VERSION + 1
    with log.open("a") as f:
        f.write(json.dumps(newer) + "\n{corrupt\n")
    kept_lines = log.read_text().splitlines()[3:]
    code, out, err = run(capsys, "logs", "merge", log, "-o", log)
    assert code == 0, err
    assert "MergeStats" not in out
    assert f"merged 3 record(s) into {log}: 2 written, 1 duplicate(s)" in out
    assert "2 line(s) could not be parsed; 2 kept verbatim" in out
    assert log.read_text().splitlines()[2:] == kept_lines


def test_merge_into_a_directory_is_one_line(tmp_path, capsys):
    log = tmp_path / "l.jsonl"
    append_records(log, records(1))
    code, _, err = run(capsys, "logs", "merge", log, "-o", tmp_path)
    assert_one_line_error(code, err, "is a directory", "give a file path")


def test_a_log_that_is_a_directory_is_not_called_missing(tmp_path, capsys):
    for argv in (
        ["logs", "show", tmp_path],
        ["logs", "best", tmp_path],
        ["logs", "merge", tmp_path, "-o", "x"],
    ):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, "is a directory")
        assert "not found" not in err


def test_oserror_reading_a_log_is_one_line(tmp_path, capsys, monkeypatch):
    log = tmp_path / "l.jsonl"
    append_records(log, records(1))

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    code, _, err = run(capsys, "logs", "show", log)
    assert_one_line_error(code, err, "cannot read tuning log", "Permission denied")


def test_logs_show_limit_must_not_be_negative(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["logs", "show", str(tmp_path / "l.jsonl"), "--limit", "-1"])
    assert e.value.code == 2 and "expected a whole number >= 0" in capsys.readouterr().err


# --- tune options, found before anything runs ------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--trials", "-5", "--trials must be a whole number >= 1, got -5"),
        ("--trials", "0", "--trials must be a whole number >= 1"),
        ("--batch-size", "0", "--batch-size must be a whole number >= 1, got 0"),
        ("--timeout", "0", "--timeout must be a number of seconds > 0, got 0.0"),
        ("--timeout", "-2", "--timeout must be a number of seconds > 0"),
        ("--timeout", "nan", "--timeout must be a number of seconds > 0"),
        ("--threads", "0", "--threads must be a whole number >= 1, got 0"),
        ("--transfer-top", "-1", "--transfer-top must be a whole number >= 0"),
    ],
)
def test_tune_option_out_of_range(tmp_path, capsys, option, value, words):
    log = tmp_path / "l.jsonl"
    code, _, err = run(capsys, "tune", MATMUL, "--args", "M=16", "N=16", "K=16", option, value, "--log", log)
    assert_one_line_error(code, err, words)
    assert not log.exists()  # refused before anything was written


def test_unwritable_log_is_found_before_the_first_batch(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    measured = []
    monkeypatch.setattr("autosched.tune.Tuner._step", lambda *a: measured.append(a))
    code, _, err = run(capsys, "tune", MATMUL, "--args", "M=16", "N=16", "K=16", "--log", blocker / "l.jsonl")
    assert_one_line_error(code, err, "cannot write tuning log", "file/l.jsonl", "pass --log")
    assert measured == [] and blocker.read_text() == "not a folder"


TWO_WORKLOADS = textwrap.dedent("""
    import autosched
    from autosched import te

    @autosched.workload
    def square(N=8):
        A = te.placeholder((N,), name="A")
        return [A, te.compute((N,), lambda i: A[i] * A[i], name="B")]

    @autosched.workload
    def double(M=8):
        A = te.placeholder((M,), name="A")
        return [A, te.compute((M,), lambda i: A[i] + A[i], name="B")]
""")


def test_args_typo_names_the_key_and_the_known_ones(tmp_path, capsys):
    ops = tmp_path / "two.py"
    ops.write_text(TWO_WORKLOADS)
    code, _, err = run(capsys, "tune", ops, "--args", "MM=128", "--log", tmp_path / "l.jsonl")
    assert_one_line_error(code, err, "unknown argument(s) MM", "square, double", "known: N, M")
    assert cli._instances(str(ops), None, {"N": 4})[0].args["N"] == 4  # a key of one workload is fine


# --- what escapes: MemoryError, Ctrl-C, a closed pipe, bugs -----------------------------------------------


def _raising(exc):
    def cmd(ns):
        raise exc

    return cmd


@pytest.mark.parametrize(
    "exc, words",
    [
        (MemoryError("Unable to allocate 149. GiB"), ["out of memory", "149. GiB", "--args"]),
        (PermissionError(13, "Permission denied", "/x/y.jsonl"), ["Permission denied", "/x/y.jsonl"]),
        (LogError("tuning log l is a directory"), ["tuning log l is a directory"]),
        (TypeError("bad\nthing"), ["internal error TypeError: bad thing", "--debug"]),
    ],
)
def test_what_escapes_a_command_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys, exc, words):
    monkeypatch.setattr(cli, "cmd_devices", _raising(exc))
    code, _, err = run(capsys, "devices")
    assert_one_line_error(code, err, *words)
    with pytest.raises(type(exc)):
        main(["--debug", "devices"])
    with pytest.raises(type(exc)):
        main(["devices", "--debug"])


def test_ctrl_c_is_one_line_exit_130(monkeypatch, capsys):
    monkeypatch.setattr(cli, "cmd_devices", _raising(KeyboardInterrupt()))
    code, _, err = run(capsys, "devices")
    assert code == 130 and err.strip() == "autosched devices: interrupted"


def test_broken_pipe_exits_quietly(monkeypatch, capsys):
    monkeypatch.setattr(cli, "cmd_devices", _raising(BrokenPipeError(32, "Broken pipe")))
    code, out, err = run(capsys, "devices")
    assert code == 141 and err == ""


def test_logs_show_into_head_exits_quietly(tmp_path):
    log = tmp_path / "big.jsonl"
    line = json.loads(records(1)[0].to_json_line())
    with log.open("w") as f:
        for i in range(3000):  # 3000 groups: far more output than a pipe holds
            line["workload"]["key"] = f"{i:064d}"
            f.write(json.dumps(line) + "\n")
    cmd = f"{sys.executable} -m autosched.cli logs show {log} --limit 3000 | head -n 2"
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
    assert r.stdout.startswith(f"{log}: 3000 records") and r.stderr == "", r.stderr


# --- build: skipped lines are said, a crafted record is never compiled ------------------------------------


def test_build_says_how_many_lines_it_skipped_and_rejects_a_crafted_record(tmp_path, capsys):
    log = tmp_path / "l.jsonl"
    crafted = json.loads(records(1)[0].to_json_line())
    crafted["trace"].append(["pragma", "C", ["i.outer", "auto_unroll_max_step", 10**12]])
    log.write_text("{corrupt\n" + json.dumps(crafted) + "\n")
    code, _, err = run(
        capsys, "build", MATMUL, "--args", "M=16", "N=16", "K=16", "--log", log, "-o", tmp_path / "b"
    )
    assert_one_line_error(code, err, "no tuned record")
    code, _, err = run(
        capsys, "build", MATMUL, "--args", "M=16", "N=16", "K=16", "--log", log, "-o", tmp_path / "b",
        "--allow-default",
    )  # fmt: skip
    assert code == 0, err
    assert "skipped 2 unreadable line(s)" in err and "l.jsonl:1: invalid JSON" in err
    parsed, problems = read_log(log)
    assert parsed == [] and "auto_unroll_max_step = 1000000000000" in problems[1].reason


# --- the summary's latency: the kernel timed as the runner times it ---------------------------------------


def test_compare_times_the_kernel_without_the_call_checks(monkeypatch):
    from autosched.build import build
    from autosched.errors import RunError
    from autosched.measure import compare
    from autosched.search_space.default import default_schedule
    from autosched.search_space.schedule import replay

    inst = small_matmul(32)
    trace = default_schedule(list(inst.outputs), cores=2).trace
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((32, 32)).astype("float32") for _ in range(2))
    fn = build(replay(list(inst.outputs), trace), list(inst.tensors), "llvm-cpu")
    c = np.full((32, 32), np.nan, "float32")
    fn(a, b, c)
    call = compare.raw_call(fn, [a, b, c])
    c[...] = np.nan

    class NoLaunch:
        def launch(self, *args):
            raise AssertionError("the timed call went through the checked launch path")

    fn.adapter = NoLaunch()
    call()  # the compiled entry point on the arrays' addresses, as the runner calls it
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    monkeypatch.setattr(compare, "interleaved_medians", lambda fns, repeat: [f() for f in fns] and [1.0, 2.0])
    ours, ref = compare.compare_with_baseline(inst.tensors, trace, "llvm-cpu", [a, b], lambda x, y: [x @ y])
    assert (ours, ref) == (1.0, 2.0)
    with pytest.raises(RunError, match="disagrees with the workload's numpy baseline"):
        compare.compare_with_baseline(inst.tensors, trace, "llvm-cpu", [a, b], lambda x, y: [x @ y + 1])


# --- records checked where they are used: tune --resume and the op library ---------------------------------


def _crafted_lines(inst, good):
    """Line 2: an unroll step of 10**12 (refused when parsed); line 3: a vector of 256 lanes (refused
    against the workload); both claim to be far faster than the good record on line 1."""
    unroll = json.loads(good.to_json_line())
    unroll["trace"].append(["pragma", "C", ["i", "auto_unroll_max_step", 10**12]])
    unroll["costs"] = [1e-9]
    wide = json.loads(good.to_json_line())
    wide["trace"] = [["fuse", "C", [["i", "j"]]], ["vectorize", "C", ["i.j.fused"]]]
    wide["costs"] = [1e-9]
    return "\n".join([good.to_json_line(), json.dumps(unroll), json.dumps(wide)]) + "\n"


def test_resume_folds_in_only_records_that_fit(tmp_path, monkeypatch):
    from autosched.measure.fake import FakeMeasurer
    from autosched.records import validate
    from autosched.tune import TuneOptions, Tuner

    monkeypatch.setattr(validate, "MAX_VECTOR_LANES", 128)
    inst = small_matmul(16)
    log = tmp_path / "l.jsonl"
    fake = FakeMeasurer(lambda trace: 1e-3)
    opts = TuneOptions(trials=2, batch_size=2, baseline=False, resume=True, strategy="random")
    tuner = Tuner([inst], "llvm-cpu", log, opts, measurer=fake)
    good = make_record(inst, tuner.target, tuner.chip, records(1)[0].trace, (1e-3,))
    log.write_text(_crafted_lines(inst, good))
    (task,) = tuner.tasks
    notes = tuner.load_previous(task)
    assert any(n.startswith(f"{log}:2: ") and "auto_unroll_max_step" in n for n in notes), notes
    assert any(n.startswith(f"{log}:3: ") and "256 iterations is vectorized" in n for n in notes), notes
    assert task.previous == 1 and task.best_trace == good.trace


def test_op_library_never_takes_a_record_that_does_not_fit(tmp_path, monkeypatch):
    from autosched.ops.logs import best_record
    from autosched.records import validate

    monkeypatch.setattr(validate, "MAX_VECTOR_LANES", 128)
    inst = small_matmul(16)
    good = records(1)[0]
    log = tmp_path / "l.jsonl"
    log.write_text(_crafted_lines(inst, good))
    assert best_record([log], inst, good.fingerprint) == good


def test_build_compiles_the_fastest_record_that_fits(tmp_path, capsys, monkeypatch):
    from autosched.hai.registry import get_adapter
    from autosched.records import validate

    monkeypatch.setattr(validate, "MAX_VECTOR_LANES", 128)
    inst = small_matmul(16)
    target = parse_target("llvm-cpu")
    chip = get_adapter(target).info()  # this machine: build takes records of its fingerprint only
    good = make_record(inst, target, chip, records(1)[0].trace, (1e-3,))
    log = tmp_path / "l.jsonl"
    log.write_text(_crafted_lines(inst, good))
    out = tmp_path / "lib"
    code, stdout, err = run(
        capsys, "build", MATMUL, "--args", "M=16", "N=16", "K=16", "--log", log, "-o", out
    )
    assert code == 0, err
    assert "tuned record, 1000.0 us" in stdout  # the good record, not the crafted ones at 1 ns
    assert "skipped 1 unreadable line(s)" in err and "l.jsonl:2:" in err


def test_a_directory_given_as_op_file_or_log_is_named_as_one(capsys, tmp_path):
    code, _, err = run(capsys, "tune", tmp_path, "--trials", "2")
    assert code == 2 and "is a directory; pass a Python file" in err
    code, _, err = run(capsys, "build", MATMUL, "--log", tmp_path, "-o", tmp_path / "out")
    assert code == 2 and "is a directory; pass a log file" in err


def test_tune_flags_reach_the_options_for_operators_and_models():
    ns = cli.build_parser().parse_args(["tune", "m.onnx", "--flush-cache", "--trials", "7"])
    options = cli.tune_options(ns)
    assert options.flush_cache is True and options.trials == 7
    parse = cli.build_parser().parse_args
    assert cli.tune_options(parse(["tune", "op.py"])).flush_cache is False
    # a model's tasks are timed with the caches evicted unless told not to: in the model, weights arrive cold
    assert cli.tune_options(parse(["tune", "m.onnx"])).flush_cache is True
    assert cli.tune_options(parse(["tune", "m.onnx", "--no-flush-cache"])).flush_cache is False
    assert cli.tune_options(parse(["tune", "op.py", "--flush-cache"])).flush_cache is True
