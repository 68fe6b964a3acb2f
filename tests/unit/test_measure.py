"""Safe measurement: fault injection with hand-written C kernels (independent of the codegen), the
builder's error handling, and one end-to-end measurement through the llvm-cpu adapter."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from autosched import te
from autosched.errors import CompileError, RunError, ScheduleError
from autosched.measure.builder import BuildJob, LocalBuilder
from autosched.measure.fake import FakeMeasurer
from autosched.measure.measure import measure_batch
from autosched.measure.result import BuildResult, MeasureResult
from autosched.measure.runner import LocalRunner
from autosched.measure.task import MeasureTask
from autosched.runtime.link import link_shared, load_function
from autosched.search_space.trace import Step

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="needs a C compiler")

N = 256
HEADER = "#include <stdlib.h>\n#include <stddef.h>\n"


def _loop(n: int, op: str) -> str:
    return (
        f"void add(float* A, float* B, float* C) {{ for (int i = 0; i < {n}; i++) C[i] = A[i] {op} B[i]; }}"
    )


KERNELS = {
    "good": _loop(N, "+"),
    "wrong": _loop(N, "-"),
    "skip": _loop(N - 1, "+"),  # skips the last element: passes only if the garbage fill happens to match
    "segv": "void add(float* A, float* B, float* C) { *(volatile float*)0 = A[0]; }",
    "hang": "void add(float* A, float* B, float* C) { volatile int x = 1; while (x) {} }",
    # malloc(1 TiB) returns NULL (over the address-space limit); the write then segfaults.
    "malloc": "void add(float* A, float* B, float* C) {\n"
    "  float* volatile p = malloc((size_t)1 << 40); p[12345] = A[0]; C[0] = p[12345]; }",
    # 64 GiB of zero-filled static data: loading the library exceeds the memory limit.
    "bss": "char big[(size_t)64 << 30];\n"
    "void add(float* A, float* B, float* C) { big[12345] = 1; C[0] = big[12345]; }",
}


def _cc(src: str, out: Path) -> Path:
    c = out.with_suffix(".c")
    c.write_text(HEADER + src + "\n")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O1", "-fPIC", "-mcmodel=large", "-c", str(c), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuildResult]:
    d = tmp_path_factory.mktemp("kernels")
    out = {}
    for name, src in KERNELS.items():
        obj = _cc(src, d / f"{name}.o").read_bytes()
        so = link_shared([obj], d / name / "add.so", openmp=False)
        out[name] = BuildResult(str(so), "add", 3)
    return out


def test_link_and_load(libs: dict[str, BuildResult], tmp_path: Path) -> None:
    f = load_function(libs["good"].path, "add", 3)
    a, b, c = np.ones(N, "float32"), np.full(N, 2, "float32"), np.zeros(N, "float32")
    f(a.ctypes.data, b.ctypes.data, c.ctypes.data)
    assert (c == 3).all()
    with pytest.raises(RunError, match="no function 'sub'"):
        load_function(libs["good"].path, "sub", 3)
    with pytest.raises(CompileError, match="link_shared"):
        link_shared([b"not an object"], tmp_path / "x.so")
    obj = _cc("void f(void); void g(void) { f(); }", tmp_path / "undef.o").read_bytes()
    with pytest.raises(CompileError, match="undefined reference"):  # caught at link time, not at load
        link_shared([obj], tmp_path / "undef.so")


def test_runner_survives_faults(add_task: MeasureTask, libs: dict[str, BuildResult]) -> None:
    order = ["good", "segv", "good", "hang", "wrong", "skip", "malloc", "bss", "good"]
    failed_build = BuildResult(None, "add", error="compile", error_msg="cc: no", build_s=0.5)
    too_big = BuildResult(libs["good"].path, "add", 3, workspace_bytes=1 << 50)
    near_limit = dataclasses.replace(libs["malloc"], workspace_bytes=2 << 30)
    with LocalRunner(timeout_s=1.5, repeat=3, min_repeat_ms=1, memory_limit_bytes=4 << 30) as runner:
        t0 = time.perf_counter()
        res = runner.run(add_task, [libs[k] for k in order] + [failed_build, too_big, near_limit])
        elapsed = time.perf_counter() - t0
    kinds = [r.error for r in res]
    expected = [None, "crash", None, "timeout", "wrong_result", "wrong_result", "crash", "memory", None]
    assert kinds == [*expected, "compile", "memory", "crash"]
    assert "SIGSEGV" in res[1].error_msg
    assert "max abs error" in res[4].error_msg and "output 'C'" in res[4].error_msg
    assert "at (255,)" in res[5].error_msg  # the skipped element, still garbage (NaN)
    for r in (res[0], res[2], res[8]):
        assert r.ok and len(r.costs) == 3 and all(c > 0 for c in r.costs) and r.median < 1e-3
        assert r.timing is not None and r.timing["alignment_bytes"] == 64  # what the buffers were timed on
    assert "possibly out of memory" in res[11].error_msg and "possibly" not in res[6].error_msg
    assert res[9].build_s == 0.5 and res[9].costs == ()
    assert elapsed < 15, f"fault injection took {elapsed:.1f} s"


def _spinning_add(seconds: float) -> str:
    """A correct add that first spins for ``seconds`` of wall time."""
    return (
        "#include <time.h>\n"
        "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
        " return t.tv_sec + 1e-9 * t.tv_nsec; }\n"
        f"void add(float* A, float* B, float* C) {{ double end = now() + {seconds};"
        " while (now() < end) {} for (int i = 0; i < 256; i++) C[i] = A[i] + B[i]; }"
    )


def test_runner_cuts_short_hopeless_candidates(
    add_task: MeasureTask, libs: dict[str, BuildResult], tmp_path: Path
) -> None:
    built = {}
    for name, seconds in [("slow", 0.02), ("crawl", 30.0)]:
        so = link_shared(
            [_cc(_spinning_add(seconds), tmp_path / f"{name}.o").read_bytes()], tmp_path / name / "add.so"
        )
        built[name] = BuildResult(str(so), "add", 3)
    with LocalRunner(timeout_s=60, repeat=5, min_repeat_ms=1) as runner:
        (first_slow,) = runner.run(add_task, [built["slow"]])  # nothing timed yet: timed in full
        t0 = time.perf_counter()
        good, slow, crawl, again = runner.run(
            add_task, [libs["good"], built["slow"], built["crawl"], libs["good"]]
        )
        elapsed = time.perf_counter() - t0
    assert len(first_slow.costs) == 5 and first_slow.median >= 0.02
    assert good.ok and len(good.costs) == 5
    assert slow.ok and len(slow.costs) == 1 and slow.costs[0] >= 0.02  # over 3x the best: one run kept
    assert crawl.error == "timeout" and "stopped early" in crawl.error_msg, crawl.error_msg
    # A fresh worker took over (its first repeats of a 1 us kernel may run 3x the best on a loaded
    # machine, and be cut short as hopeless: the count of costs is not asserted).
    assert again.ok and again.costs
    assert elapsed < 20, f"the 30 s kernel was not stopped early ({elapsed:.1f} s)"


def test_runner_thread_count_reaches_worker(add_task: MeasureTask, tmp_path: Path) -> None:
    # A kernel that reports omp_get_max_threads() through its output fails the check, with the count.
    src = (
        "int omp_get_max_threads(void);\n"
        "void add(float* A, float* B, float* C) {\n"
        "  for (int i = 0; i < 256; i++) C[i] = omp_get_max_threads(); }"
    )
    so = link_shared([_cc(src, tmp_path / "omp.o").read_bytes()], tmp_path / "omp" / "add.so")
    with LocalRunner(timeout_s=5, num_threads=3) as runner:
        (r,) = runner.run(add_task, [BuildResult(str(so), "add", 3)])
    assert r.error == "wrong_result" and "got 3.0" in r.error_msg, r.error_msg


# Builder hooks: run in the spawned build workers, so they live at module level.
def _segfault(job: BuildJob) -> BuildResult:
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")


def _by_trace(job: BuildJob) -> BuildResult:
    """Hang, crash or succeed (with no library) as the first step's stage name says."""
    what = job.trace[0].stage if job.trace else "ok"
    if what == "hang":
        time.sleep(60)
    if what == "crash":
        _segfault(job)
    if what == "schedule":
        raise ScheduleError("split: no axis 'q'")
    if what == "link":
        link_shared([b"\x7fELF garbage"], job.out_path)
    return BuildResult(None, job.func_name, error="compile", error_msg="ok: " + what)


def test_builder_errors_are_data(add_task: MeasureTask) -> None:
    names = ("a", "crash", "b", "hang", "schedule", "link", "c")
    traces = [(Step("split", name, ("i", 4, None)),) for name in names]
    # The timeout also covers starting a worker (importing llvmlite): generous, for a loaded machine.
    with LocalBuilder(n_workers=2, timeout_s=10, build_fn=_by_trace) as b:
        res = b.build(add_task, traces)
        again = b.build(add_task, traces[:1])  # the pool was replaced and still works
    kinds = [r.error for r in res]
    assert kinds == ["compile", "crash", "compile", "timeout", "schedule", "compile", "compile"]
    assert [r.error_msg for r in res if r.error_msg.startswith("ok")] == ["ok: a", "ok: b", "ok: c"]
    assert "build worker died" in res[1].error_msg and "link_shared" in res[5].error_msg
    assert again[0].error_msg == "ok: a"


def test_fake_measurer_is_deterministic(add_task: MeasureTask) -> None:
    traces = [(Step("split", "C", ("i", f, None)),) for f in (2, 4, 8, 16, 32, 64, 128, 1)]
    m = FakeMeasurer(lambda t: 1e-3 / t[0].args[1], errors={"crash": 0.25}, noise=0.1, seed=3)
    r1, r2 = (
        m.measure(add_task, traces),
        FakeMeasurer(m.cost_fn, errors=m.errors, noise=0.1, seed=3).measure(add_task, traces),
    )
    assert r1 == r2 and m.calls == len(traces)
    assert {r.error for r in r1} <= {None, "crash"} and any(r.ok for r in r1)
    ok = [(t, r) for t, r in zip(traces, r1) if r.ok]
    assert all(abs(r.median - 1e-3 / t[0].args[1]) <= 0.1 * 1e-3 / t[0].args[1] for t, r in ok)
    assert MeasureResult((), "timeout", "x").median == 1e10


def test_measure_matmul_end_to_end() -> None:
    pytest.importorskip("llvmlite")
    from autosched.search_space.default import default_schedule
    from autosched.search_space.schedule import create_schedule

    M = 32
    A, B = te.placeholder((M, M), name="A"), te.placeholder((M, M), name="B")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((M, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    task = MeasureTask.create("matmul", [A, B, C])
    s = create_schedule(C)
    jo, ji = s[C].split(s[C].op.axis[1], factor=8)
    s[C].reorder(s[C].op.axis[0], jo, s[C].op.reduce_axis[0], ji)
    s[C].vectorize(ji)
    illegal = (Step("split", "C", ("no_such_axis", 4, None)),)
    traces = [default_schedule(C, cores=2).trace, s.trace, illegal]
    with LocalBuilder(n_workers=2) as builder, LocalRunner(timeout_s=10, num_threads=1) as runner:
        res = measure_batch(task, traces, builder, runner)
    assert [r.error for r in res[:2]] == [None, None], [str(r) for r in res]
    assert all(r.median > 0 and r.build_s > 0 for r in res[:2])
    assert res[2].error == "schedule" and "no_such_axis" in res[2].error_msg
