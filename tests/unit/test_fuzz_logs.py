"""Fuzzed tuning logs (issue 19): random mutations of valid lines fed to ``logs show``, ``logs best``,
``logs merge`` (in place too) and the loader of ``tune --resume``. The property: a clear error or a
correct result within a time limit; never a traceback, a hang, or a changed or lost input line.
Seeds are printed by hypothesis on failure; ``-m slow`` runs many more examples."""

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched.cli import main
from autosched.errors import AutoschedError
from autosched.hai.base import ChipInfo
from autosched.lower.pipeline import lower
from autosched.records.log import load_records, scan_log, trace_key
from autosched.records.record import ERROR_TIMEOUT, make_record
from autosched.records.validate import validate_record
from autosched.search_space.schedule import replay
from autosched.search_space.sketch import SketchPolicy
from autosched.target import parse_target
from autosched.te.workload import load_op_file
from tests.json_paths import paths_of

ROOT = Path(__file__).resolve().parents[2]
CHIP = ChipInfo(name="fuzz", kind="cpu", arch="fuzz", features=("avx2", "fma"), cores=2, vector_bits=256)
TARGET = parse_target("llvm-cpu")
(MATMUL,) = load_op_file(ROOT / "examples" / "matmul.py")
INST = MATMUL.instantiate(M=16, N=32, K=8)
FP = make_record(INST, TARGET, CHIP, ()).fingerprint


def _valid_lines() -> list[str]:
    policy = SketchPolicy(list(INST.outputs), cores=2, lanes=8)
    rng = random.Random(0)
    recs = [make_record(INST, TARGET, CHIP, policy.sample(rng)[0].trace, (1e-4 * (i + 1),)) for i in range(4)]
    recs.append(make_record(INST, TARGET, CHIP, recs[0].trace[:2], error=ERROR_TIMEOUT, error_msg="> 10 s"))
    lines = [r.to_json_line() for r in recs]
    for shipped in sorted((ROOT / "tuning_logs").glob("*.jsonl"))[:1]:  # another workload, another chip
        lines += shipped.read_text().splitlines()[:2]
    return lines


VALID = _valid_lines()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
huge_numbers = st.sampled_from([10**400, -(10**400), 10**12, -1, 0, 2**31, 1e308, -1e-308])


@st.composite
def mutated_line(draw) -> bytes:
    line = draw(st.sampled_from(VALID))
    kind = draw(
        st.sampled_from(["json", "json", "json", "trace", "trace", "delete", "bytes", "truncate", "nest"])
    )
    if kind == "trace":  # plausible values (names and small numbers of this trace) reach replay's checks
        data = json.loads(line)
        steps = data["trace"]
        names = sorted({a for step in steps for a in step[2] if isinstance(a, str)} | {"C", "A", "B", "k"})
        plausible = (
            st.sampled_from(names) | st.integers(-2, 70) | st.none() | st.lists(st.sampled_from(names))
        )
        for _ in range(draw(st.integers(1, 3))):
            step = draw(st.sampled_from(steps))
            where = draw(st.integers(0, 2))
            if where == 2 and step[2]:
                step[2][draw(st.integers(0, len(step[2]) - 1))] = draw(plausible)
            elif where == 1:
                step[1] = draw(st.sampled_from(names))
            else:
                steps.insert(draw(st.integers(0, len(steps))), draw(st.sampled_from(steps)))
        return json.dumps(data).encode()
    if kind in ("json", "delete"):
        data = json.loads(line)
        paths = [p for p in paths_of(data) if p]
        path = draw(st.sampled_from(paths))
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        if kind == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values | huge_numbers)
        return json.dumps(data).encode()
    raw = line.encode()
    if kind == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    if kind == "nest":
        depth = draw(st.sampled_from([10, 1000, 100_000]))
        return raw[:-1] + b', "trace2": ' + b"[" * depth + b"]" * depth + b"}"
    at = draw(st.integers(0, len(raw)))
    junk = draw(st.binary(min_size=1, max_size=8))
    return raw[:at] + junk + raw[at + draw(st.integers(0, 4)) :]


log_bodies = st.lists(mutated_line() | st.sampled_from(VALID).map(str.encode), min_size=1, max_size=6)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code in (0, 2), (code, err)
    assert "Traceback" not in out + err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and ": error: " in err, err
    return code, out, err


def check_log(capsys, lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "fuzz.jsonl"
        body = b"\n".join(lines) + b"\n"
        log.write_bytes(body)
        scanned = scan_log(log)  # never raises on content
        for argv in (
            ["logs", "show", log],
            ["logs", "best", log],
            ["logs", "best", log, "--workload", "matmul"],
        ):
            assert _cli(capsys, *argv)[0] == 0
            assert log.read_bytes() == body  # reading never changes the log

        resumed = load_records(log, target_fingerprint=FP, workload=INST)  # what tune --resume folds in
        for rec in resumed.records:
            validate_record(rec, INST)
            try:
                lower(replay(list(INST.outputs), rec.trace), list(INST.tensors), "fuzz")
            except AutoschedError:
                pass  # a clear error; the tuner records it as a failed candidate

        merged = Path(d) / "merged.jsonl"
        assert _cli(capsys, "logs", "merge", log, "-o", merged)[0] == 0
        assert _cli(capsys, "logs", "merge", log, "-o", log)[0] == 0  # in place
        for out in (merged, log):
            after = scan_log(out)
            kept_raw = {x.raw for x in after if x.record is None}
            groups = {(r.workload_key, r.fingerprint, trace_key(r.trace)) for x in after if (r := x.record)}
            for x in scanned:  # every input line is in the output: verbatim, or as its record's group
                if x.record is None:
                    assert x.raw in kept_raw
                else:
                    assert (x.record.workload_key, x.record.fingerprint, trace_key(x.record.trace)) in groups


FUZZ = settings(max_examples=50, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(log_bodies)
def test_fuzzed_logs_give_a_clear_error_or_a_correct_result(capsys, lines):
    check_log(capsys, lines)


@pytest.mark.slow
@settings(FUZZ, max_examples=1500, deadline=10_000)
@given(log_bodies)
def test_fuzzed_logs_many(capsys, lines):
    check_log(capsys, lines)


def test_the_valid_lines_are_valid():
    assert all(x.record is not None for x in scan_log_of(VALID))
    assert len(VALID) >= 6


def scan_log_of(lines: list[str]):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "l.jsonl"
        p.write_text("\n".join(lines) + "\n")
        return scan_log(p)
