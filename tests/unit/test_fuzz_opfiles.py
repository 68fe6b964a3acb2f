"""Op-file fuzz (issue 19): random mutations of valid op files go through load_op_file, instantiate,
the default schedule, ``autosched.build`` and a call on random inputs.

The property: a clear error (an AutoschedError, or the TypeError/ValueError/IndexError te raises for its
own checks) or a kernel that matches the numpy reference; never a crash, a hang, an out-of-bounds read
that compiled, or a wrong result. Each example runs in a worker process, so a segfault or a hang is
seen and reported (with the mutated source) instead of taking the test run down.
"""

from __future__ import annotations

import multiprocessing
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TEMPLATES = {
    "scale": """
import autosched
from autosched import te

@autosched.workload
def scale(N=16, dtype="float32"):
    A = te.placeholder((N,), dtype, name="A")
    B = te.compute((N,), lambda i: A[i] * 2, name="B")
    return [A, B]
""",
    "matmul": """
import autosched
from autosched import te

@autosched.workload
def matmul(M=8, N=12, K=8, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]
""",
    "shift_pad": """
import autosched
from autosched import te

@autosched.workload
def shift_pad(N=20, dtype="float32"):
    A = te.placeholder((N,), dtype, name="A")
    B = te.compute((N,), lambda i: te.if_then_else(i >= 2, A[i - 2], te.const(0, dtype)), name="B")
    return [A, B]
""",
    "bias_add": """
import autosched
from autosched import te

@autosched.workload
def bias_add(M=6, N=10, dtype="float32"):
    X = te.placeholder((M, N), dtype, name="X")
    b = te.placeholder((N,), dtype, name="b")
    Y = te.compute((M, N), lambda i, j: X[i, j] + b[j], name="Y")
    return [X, b, Y]
""",
}
DTYPES = ["int32", "int64", "float64", "bool", "float16", "complex64"]

# Mutations: each picks one spot of the source with the data drawn.


def _pick(draw: Any, matches: list[re.Match[str]]) -> re.Match[str] | None:
    return matches[draw(st.integers(0, len(matches) - 1))] if matches else None


def _replace(src: str, m: re.Match[str], group: int, text: str) -> str:
    return src[: m.start(group)] + text + src[m.end(group) :]


@st.composite
def shift_index(draw: Any, src: str) -> str:
    """One index of one read shifted or scaled (``A[i]`` -> ``A[i + 3]``, ``A[i * 5]``)."""
    m = _pick(draw, list(re.finditer(r"\b[A-Za-z]\[([^\[\]]+)\]", src)))
    if m is None:  # an earlier mutation (a broken bracket) left no such spot
        return src
    parts = m.group(1).split(", ")
    d = draw(st.integers(0, len(parts) - 1))
    op = draw(st.sampled_from(["+", "-", "*"]))
    amount = draw(st.integers(1, 10_000_000 if op == "*" else 4))
    parts[d] = f"({parts[d]}) {op} {amount}"
    return _replace(src, m, 1, ", ".join(parts))


@st.composite
def change_shape(draw: Any, src: str) -> str:
    """One dimension of one placeholder or compute shape changed (possibly to 0 or below)."""
    m = _pick(draw, list(re.finditer(r"te\.(?:placeholder|compute)\(\(([^()]*)\)", src)))
    if m is None:  # an earlier mutation (a broken bracket) left no such spot
        return src
    dims = [x for x in m.group(1).split(",") if x.strip()]
    d = draw(st.integers(0, len(dims) - 1))
    dims[d] = f"{dims[d].strip()} + {draw(st.integers(-20, 4))}"
    return _replace(src, m, 1, ", ".join(dims) + ("," if len(dims) == 1 else ""))


@st.composite
def change_dtype(draw: Any, src: str) -> str:
    """The default dtype replaced (some unsupported)."""
    return src.replace('dtype="float32"', f'dtype="{draw(st.sampled_from(DTYPES))}"')


@st.composite
def break_syntax(draw: Any, src: str) -> str:
    """One character deleted, or a stray bracket or punctuation inserted."""
    at = draw(st.integers(0, len(src) - 1))
    if draw(st.booleans()):
        return src[:at] + src[at + 1 :]
    return src[:at] + draw(st.sampled_from(list("()[]:,=\"'"))) + src[at:]


@st.composite
def wrong_arity(draw: Any, src: str) -> str:
    """A compute's lambda with a parameter too many or too few."""
    m = _pick(draw, list(re.finditer(r"lambda ([a-z, ]*):", src)))
    if m is None:  # an earlier mutation (a broken bracket) left no such spot
        return src
    params = [p for p in m.group(1).split(", ") if p]
    params = params[:-1] if draw(st.booleans()) else [*params, "extra"]
    return _replace(src, m, 1, ", ".join(params))


MUTATIONS = {
    "shift_index": shift_index,
    "change_shape": change_shape,
    "change_dtype": change_dtype,
    "break_syntax": break_syntax,
    "wrong_arity": wrong_arity,
}


@st.composite
def mutated_op_file(draw: Any, kinds: tuple[str, ...]) -> str:
    src = TEMPLATES[draw(st.sampled_from(sorted(TEMPLATES)))]
    for _ in range(draw(st.integers(1, 2))):
        src = draw(MUTATIONS[draw(st.sampled_from(kinds))](src))
    return src


# The worker process ----------------------------------------------------------------------------

HANG_S = 60.0  # one example: load, build and run a tiny kernel (seconds when the machine is busy)


def _check_op_file(source: str) -> tuple[str, str]:
    """("error", what) for a clear error, ("ok", "") for a correct kernel, ("bad", why) otherwise."""
    import numpy as np

    import autosched
    from autosched.errors import AutoschedError
    from autosched.search_space.default import default_schedule
    from autosched.te.reference import random_inputs, reference_for
    from autosched.te.workload import load_op_file
    from autosched.testing import tolerance

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "op.py"
        path.write_text(source)
        try:
            workloads = load_op_file(path)
            for wl in workloads:
                inst = wl.instantiate()
                fn = autosched.build(default_schedule(list(inst.outputs), cores=1), list(inst.tensors))
                ins = random_inputs(inst.inputs, seed=1, int_high=5)
                try:
                    expected = reference_for(inst.tensors, ins)
                except IndexError as e:  # the reference read out of bounds, yet the build passed
                    return "bad", f"built a program that reads out of bounds: {e}"
                outs = [np.empty(t.shape, t.dtype) for t in inst.outputs]
                fn(*ins, *outs)
                for t, got, exp in zip(inst.outputs, outs, expected):
                    rtol, atol = tolerance(t.dtype, exp)
                    if not np.allclose(got, exp, rtol=rtol, atol=atol, equal_nan=True):
                        return "bad", f"output {t.name} differs from the reference"
        except (AutoschedError, TypeError, ValueError, IndexError) as e:
            if not str(e).strip():
                return "bad", f"{type(e).__name__} without a message"
            return "error", f"{type(e).__name__}: {e}"
        except Exception as e:
            return "bad", f"unexpected {type(e).__name__}: {e}"
    return "ok", ""


def _serve(conn: Any) -> None:
    while True:
        try:
            source = conn.recv()
        except EOFError:
            return
        conn.send(_check_op_file(source))


class _Worker:
    def __init__(self) -> None:
        self.proc: Any = None

    def run(self, source: str) -> tuple[str, str]:
        if self.proc is None or not self.proc.is_alive():
            ctx = multiprocessing.get_context("spawn")
            self.conn, child = ctx.Pipe()
            self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
            self.proc.start()
            child.close()
        self.conn.send(source)
        if self.conn.poll(HANG_S):
            try:
                return self.conn.recv()  # type: ignore[no-any-return]
            except EOFError:
                pass
        else:
            self.stop()
            return "bad", f"hung for over {HANG_S:g} s"
        self.proc.join(5)
        code = self.proc.exitcode
        self.proc = None
        return "bad", f"the process died (exit code {code}: a crash)"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
            self.proc = None


@pytest.fixture(scope="module")
def worker():
    w = _Worker()
    yield w
    w.stop()


def _assert_clear_or_correct(worker: _Worker, source: str) -> None:
    outcome, detail = worker.run(source)
    assert outcome in ("ok", "error"), f"{detail}\n--- op file ---\n{source}"


FAST = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_mutated_op_files_give_a_clear_error_or_a_correct_kernel(worker, kind):
    @FAST
    @given(mutated_op_file((kind,)))
    def check(source: str) -> None:
        _assert_clear_or_correct(worker, source)

    check()


def test_out_of_bounds_mutations_are_refused_with_a_named_read(worker):
    src = TEMPLATES["scale"].replace("A[i] * 2", "A[(i) * 10000000] * 2")
    outcome, detail = worker.run(src)
    assert outcome == "error" and "LowerError" in detail and "A[i * 10000000]" in detail, detail
    outcome, detail = worker.run(TEMPLATES["shift_pad"].replace("A[i - 2]", "A[i + 2]"))
    assert outcome == "error" and "reaches [4, 21]" in detail, detail


def test_the_templates_themselves_build_and_match(worker):
    for name, src in TEMPLATES.items():
        assert worker.run(src) == ("ok", ""), name


@pytest.mark.slow
def test_many_mutations(worker):
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated_op_file(tuple(MUTATIONS)))
    def check(source: str) -> None:
        _assert_clear_or_correct(worker, source)

    check()
