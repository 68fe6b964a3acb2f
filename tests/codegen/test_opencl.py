"""Every op kind on ``opencl`` (PoCL on this CPU): the default GPU schedule, sampled GPU sketches, and the
CPU sketches a CPU device is tuned with (their parallel loop as work-groups)."""

import random

import pytest

from autosched.codegen.c_like import OPENCL, render_c_like
from autosched.errors import CompileError
from autosched.hai.registry import get_adapter
from autosched.lower.ir import For
from autosched.lower.pipeline import lower
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.gpu_sketch import GPUSketchPolicy, default_gpu_schedule
from autosched.search_space.schedule import create_schedule
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import SMALL_CASES
from autosched.topi.workloads import case_inputs as inputs_for


def _opencl_or_skip():
    try:
        import pyopencl as cl

        if not [d for p in cl.get_platforms() for d in p.get_devices()]:
            return "no OpenCL device"
    except Exception as e:  # no pyopencl, or no ICD / platform: PoCL missing
        return f"pyopencl/PoCL unavailable: {e}"
    return None


_why = _opencl_or_skip()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_default_gpu_schedule(name):
    args = SMALL_CASES[name]()
    assert_matches_numpy(default_gpu_schedule([args[-1]]), args, "opencl", inputs=inputs_for(name, args, 0))


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_gpu_sketch_samples(name):
    args = SMALL_CASES[name]()
    policy = GPUSketchPolicy([args[-1]], max_threads=64)
    rng = random.Random(name)
    for i in range(2):
        s, decisions = policy.sample(rng)
        assert decisions == policy.sample(random.Random(0), decisions)[1]  # decisions rebuild it
        assert_matches_numpy(s, args, "opencl", inputs=inputs_for(name, args, i))


@pytest.mark.parametrize("name", ["matmul", "conv2d", "dense_bias_relu"])
def test_shared_memory_tiling(name):
    """Cooperative fetches into shared memory, with barriers, and vthreads."""
    args = SMALL_CASES[name]()
    policy = GPUSketchPolicy([args[-1]], max_threads=64)
    rng = random.Random(1)
    for i in range(2):
        s, d = policy.sample(rng, {k: True for k in policy.sample(rng)[1] if k.endswith("/shared")})
        assert any(st.name.endswith(".shared") for st in s.stages)
        source = str(get_adapter("opencl").render(lower(s, args, "k", target="opencl")))
        assert "__local float" in source and "barrier(CLK_LOCAL_MEM_FENCE);" in source
        assert_matches_numpy(s, args, "opencl", inputs=inputs_for(name, args, i))


def test_launch_shape_and_guards():
    """One kernel per root stage; the largest extent on a tag sets it, smaller loops are guarded."""
    args = SMALL_CASES["softmax"]()
    s = default_gpu_schedule([args[-1]], max_threads=16)
    prog = get_adapter("opencl").render(lower(s, args, "softmax", target="opencl"))
    assert len(prog.kernels) == len([st for st in s.stages if st.attach[0] == "root" and st.is_compute])
    assert all(k.block[0] <= 16 for k in prog.kernels)
    assert prog.temps  # the intermediates between kernels live in device buffers


def test_serial_nest_runs_with_one_work_item():
    args = SMALL_CASES["matmul"]()
    s = create_schedule(args[-1])
    prog = get_adapter("opencl").render(lower(s, args, "mm", target="opencl"))
    assert prog.kernels[0].grid == (1, 1, 1) and prog.kernels[0].block == (1, 1, 1)
    assert_matches_numpy(s, args, "opencl")


def test_thread_bound_reduction_runs_across_threads():
    """A reduction loop on threads: the GPU passes make it a shared tree; rendered raw, it is refused."""
    args = SMALL_CASES["reduce_sum"]()
    s = create_schedule(args[-1])
    s[args[-1]].bind(args[-1].op.reduce_axis[-1], "threadIdx.x")
    assert_matches_numpy(s, args, "opencl")
    with pytest.raises(CompileError, match="race"):
        render_c_like(lower(s, args, "r"), OPENCL)


def test_opencl_chip_facts():
    from autosched.hai.opencl import OpenCLAdapter

    adapter = get_adapter("opencl")
    assert isinstance(adapter, OpenCLAdapter)
    info = adapter.info()
    assert info.max_threads_per_block >= 1 and info.shared_mem_bytes > 0 and info.cores >= 1


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_cpu_sketch_samples_run_their_parallel_loop_as_work_groups(name):
    """An OpenCL CPU device (PoCL) is tuned with the CPU rules: a schedule's parallel loop becomes one
    work-group an iteration (on one work-item it would use one core), and the results still match."""
    from autosched.search_space.sketch import SketchPolicy

    args = SMALL_CASES[name]()
    policy = SketchPolicy([args[-1]], cores=2, lanes=16, flash=False)
    rng = random.Random(name)
    adapter = get_adapter("opencl")
    for i in range(3):
        s, _ = policy.sample(rng)
        func = lower(s, args, "k", target="opencl")
        prog = adapter.render(func)
        par = [x.extent for x in walk_stmts(func.body) if isinstance(x, For) and x.kind == "parallel"]
        if par and max(par) > 1:
            assert any(k.grid[0] > 1 for k in prog.kernels), prog.source
        assert_matches_numpy(s, args, "opencl", inputs=inputs_for(name, args, i))


def test_a_parallel_loop_under_a_private_buffer_stays_on_one_work_item():
    from autosched.codegen.c_like import _parallel_to_groups
    from autosched.lower.ir import Allocate, Buffer, Store
    from autosched.te.expr import Const, Var

    i = Var("i", "int64")
    buf = Buffer("t", (8,), "float32", scope="local")
    loop = For(i, 8, "parallel", Store(buf, (i,), Const(1.0, "float32")))
    assert _parallel_to_groups(loop) is loop
    assert _parallel_to_groups(Allocate(buf, loop)) is None


def test_the_tuner_gives_an_opencl_cpu_device_the_cpu_rules(tmp_path):
    from autosched.search_space.sketch import SketchPolicy
    from autosched.te.workload import WorkloadInstance
    from autosched.tune import TuneOptions, Tuner

    args = SMALL_CASES["matmul"]()
    tuner = Tuner(
        [WorkloadInstance("mm", {}, tuple(args))], "opencl", tmp_path / "log.jsonl", TuneOptions(trials=1)
    )
    if tuner.chip.kind != "cpu":
        pytest.skip(f"the OpenCL device here is a {tuner.chip.kind}")
    assert isinstance(tuner.tasks[0].strategy.inner.policy, SketchPolicy)


def test_pocl_worker_threads_are_pinned_unless_the_user_says_otherwise(monkeypatch):
    """PoCL's CPU threads unpinned often shared one core for a whole process (timings 2x apart from
    one runner process to the next): the adapter asks for pinning before the platform loads."""
    import os

    from autosched.hai.opencl import OpenCLAdapter

    monkeypatch.delenv("POCL_AFFINITY", raising=False)
    OpenCLAdapter()._open()
    assert os.environ["POCL_AFFINITY"] == "1"
    monkeypatch.setenv("POCL_AFFINITY", "0")
    OpenCLAdapter()._open()
    assert os.environ["POCL_AFFINITY"] == "0"
