"""Fuzzing ``autosched.load`` and a call with mutated libraries (issue 19).

Random mutations of a valid library's manifest (fields deleted, values of the wrong type, huge numbers,
edited shapes and dtypes, paths with ``../``, names such as ``puts``, broken JSON), most with the
checksum recomputed so that the schema and the embedded ABI are what stands in the way; and of its
``.so`` (truncated with the checksum fixed, bytes flipped). The property: a LoadError (an
AutoschedError), or a library whose functions compute the right result; never a crash, a hang,
garbage, or an exception of another type.

Out of scope: bytes flipped in the machine code *with* the checksum recomputed: that is arbitrary code,
which no loader can judge (only the checksum stands in the way, and whoever recomputes it owns it).
"""

import copy
import json
import shutil
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autosched
from autosched.errors import AutoschedError
from autosched.runtime.manifest import library_digest
from tests.json_paths import paths_of

pytest.importorskip("llvmlite")

ROOT = Path(__file__).resolve().parents[2]
SHAPE = {"M": 8, "N": 16, "K": 4}
TIME_LIMIT_S = 20  # per example; a hang fails the test instead of stopping the run


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """(directory, manifest, .so bytes) of a library built once for the module."""
    from autosched.runtime.export import export_library
    from autosched.te.workload import load_op_file

    [wl] = load_op_file(ROOT / "examples" / "matmul.py")
    out = tmp_path_factory.mktemp("fuzzlib") / "mm"
    export_library([wl.instantiate(**SHAPE)], out, name="mm", allow_default=True)
    m = json.loads((out / "manifest.json").read_text())
    return Built((out, m, (out / m["library"]).read_bytes(), tmp_path_factory.mktemp("cases")))


class Built(tuple):
    """The fixture's (directory, manifest, .so bytes, cases directory), shown short in reports."""

    def __repr__(self):
        return f"Built({self[0]})"


SPECIAL_TEXT = ["../mm/libmm.so", "/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6", "puts", "system",
                "autosched_abi", "libmm.so/..", "", "float64", "bfloat16", "object", "<f4", "input",
                "output", "x" * 300, "lib../x.so", "libmm.so\x00", "é"]  # fmt: skip
SPECIAL_NUMBERS = [0, -1, 1, 2, 7, 8, 9, 16, 2**31, 2**63, 10**30, -(2**63), 1.5, 1e308, True, False]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from(SPECIAL_NUMBERS)
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(SPECIAL_TEXT)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def manifest_mutations(draw, manifest):
    """A list of (path, action, value) edits; actions: delete, replace."""
    paths = [p for p in paths_of(manifest) if p]
    # Half the edits hit what describes the code (functions, library, format); the chip facts and
    # CPU features would otherwise take most draws.
    focused = [p for p in paths if p[0] in ("functions", "library", "format", "name", "sha256")]
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths) | st.sampled_from(focused))
        action = draw(st.sampled_from(["delete", "replace", "replace"]))
        edits.append((path, action, draw(json_values)))
    return edits


def apply_edits(manifest, edits):
    m = copy.deepcopy(manifest)
    for path, action, value in edits:
        parent = m
        try:
            for key in path[:-1]:
                parent = parent[key]
            if action == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or retyped the way there
    return m


@contextmanager
def time_limit(seconds):
    def expired(signum, frame):
        raise TimeoutError(f"load or call ran over {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def write_case(library, manifest_text, so_bytes):
    base, _m, _so, cases = library
    d = Path(tempfile.mkdtemp(dir=cases))  # a fresh path each time: a loaded library is never rewritten
    shutil.copy(base / "mm.h", d / "mm.h")
    (d / "libmm.so").write_bytes(so_bytes)
    (d / "manifest.json").write_text(manifest_text)
    return d


def check_property(d):
    """A LoadError, or every function computes a @ b: never another exception, a crash or garbage."""
    with time_limit(TIME_LIMIT_S):
        try:
            lib = autosched.load(d)
        except AutoschedError:
            return "refused"
        rng = np.random.default_rng(0)
        a = rng.standard_normal((SHAPE["M"], SHAPE["K"])).astype("float32")
        b = rng.standard_normal((SHAPE["K"], SHAPE["N"])).astype("float32")
        assert list(lib.functions) == ["matmul"]
        np.testing.assert_allclose(lib.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    return "loaded"


def _manifest_case(library, edits, fix_checksum):
    _base, manifest, so, _cases = library
    m = apply_edits(manifest, edits)
    if fix_checksum and isinstance(m, dict):
        m["sha256"] = library_digest(so, m)
    return write_case(library, json.dumps(m), so)


FAST = settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
LONG = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fuzz_manifest(library, data):
    edits = data.draw(manifest_mutations(library[1]))
    fix = data.draw(st.booleans() | st.just(True))
    check_property(_manifest_case(library, edits, fix))


def _fuzz_library_bytes(library, data):
    _base, manifest, so, _cases = library
    kind = data.draw(st.sampled_from(["truncate", "flip", "flip_header"]))
    m = copy.deepcopy(manifest)
    if kind == "truncate":  # checksum fixed to match: the ELF check must stop it before dlopen
        so = so[: data.draw(st.integers(0, len(so) - 1))]
        m["sha256"] = library_digest(so, m)
    else:  # checksum left as built: the mismatch must stop it
        buf = bytearray(so)
        limit = 64 if kind == "flip_header" else len(buf) - 1
        for i in data.draw(st.lists(st.integers(0, limit), min_size=1, max_size=4, unique=True)):
            buf[i] ^= data.draw(st.integers(1, 255))
        so = bytes(buf)
    d = write_case(library, json.dumps(m), so)
    assert check_property(d) == "refused"


def _fuzz_manifest_text(library, data):
    _base, manifest, so, _cases = library
    text = json.dumps(manifest, indent=1)
    cut = data.draw(st.integers(0, len(text) - 1))
    junk = data.draw(st.sampled_from(["", "}", "{", "\x00", "[[[[", "NaN", "1e999999", '"\\ud800"']))
    d = write_case(library, text[:cut] + junk, so)
    assert check_property(d) == "refused"


@FAST
@given(data=st.data())
def test_mutated_manifests(library, data):
    _fuzz_manifest(library, data)


@FAST
@given(data=st.data())
def test_mutated_library_bytes(library, data):
    _fuzz_library_bytes(library, data)


@FAST
@given(data=st.data())
def test_broken_manifest_text(library, data):
    _fuzz_manifest_text(library, data)


def test_unmutated_library_loads_and_benign_edits_still_load(library, tmp_path):
    """The fuzz property can fail: the original loads and computes, and so does an edit of a field
    that does not describe the code (the log path), with the checksum recomputed."""
    assert check_property(_manifest_case(library, [], fix_checksum=True)) == "loaded"
    edits = [(("log",), "replace", "elsewhere.jsonl")]
    assert check_property(_manifest_case(library, edits, fix_checksum=True)) == "loaded"
    assert check_property(_manifest_case(library, edits, fix_checksum=False)) == "refused"


@pytest.mark.slow
@LONG
@given(data=st.data())
def test_mutated_manifests_long(library, data):
    _fuzz_manifest(library, data)


@pytest.mark.slow
@LONG
@given(data=st.data())
def test_mutated_library_bytes_long(library, data):
    _fuzz_library_bytes(library, data)
