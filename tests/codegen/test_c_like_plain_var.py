"""A thread-bound loop over a plain ``Var`` (the IR allows it; only IterVars carry a kind) renders and runs.

Before the fix the renderer read ``x.var.kind`` on every thread-bound loop and raised AttributeError here.
"""

import numpy as np
import pytest

from autosched.codegen.c_like import CUDA, render_c_like
from autosched.hai.registry import get_adapter
from autosched.lower.ir import Buffer, For, Load, PrimFunc, Store
from autosched.te.expr import Var, binary, const

from .test_opencl import _why as _no_opencl


def _double(n: int) -> PrimFunc:
    """``y[t] = 2 * x[t]`` with ``t`` a plain Var bound to threadIdx.x."""
    x, y = Buffer("x", (n,), "float32"), Buffer("y", (n,), "float32")
    t = Var("t", "int32")
    body = Store(y, (t,), binary("*", Load(x, (t,), "float32"), const(2.0, "float32")))
    return PrimFunc("double", (x, y), For(t, n, "thread_binding", body, "threadIdx.x"))


def test_plain_var_thread_loop_renders():
    prog = render_c_like(_double(32), CUDA)
    assert prog.kernels[0].block == (32, 1, 1)
    assert "threadIdx.x" in prog.source


@pytest.mark.skipif(_no_opencl is not None, reason=_no_opencl or "")
def test_plain_var_thread_loop_runs_on_opencl():
    adapter = get_adapter("opencl")
    func = _double(32)
    x = np.random.default_rng(0).standard_normal(32).astype("float32")
    kernel = adapter.compile(func)
    hx, hy = adapter.copy_in(x), adapter.alloc((32,), "float32")
    adapter.launch(kernel, [hx, hy])
    y = np.zeros(32, "float32")
    adapter.copy_out(hy, y)
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
