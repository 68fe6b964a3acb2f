"""Printed loop IR and emitted LLVM IR for canonical op and schedule pairs; refactors must not change
them unless on purpose (``pytest --update-golden``)."""

from autosched import te
from autosched.hai.registry import get_adapter
from autosched.lower.pipeline import lower
from autosched.lower.printer import format_func
from autosched.search_space.default import default_schedule
from autosched.search_space.schedule import create_schedule
from tests.unit.test_schedule_primitives import _mm_cache_write, conv_padded, matmul, softmax


def test_matmul_cache_write_tiled(golden):
    args = matmul(16, 32, 8)
    s = create_schedule(args[-1])
    _mm_cache_write(s, args[-1])
    golden("matmul_cache_write.loops.txt", format_func(lower(s, args, "matmul")) + "\n")


def test_conv2d_default(golden):
    args, _ = conv_padded()
    golden("conv2d_default.loops.txt", format_func(lower(default_schedule(args[-1]), args, "conv2d")) + "\n")


def test_softmax_default(golden):
    args, _ = softmax(4, 16)
    golden(
        "softmax_default.loops.txt", format_func(lower(default_schedule(args[-1]), args, "softmax")) + "\n"
    )


def test_vector_add_llvm(golden):
    A = te.placeholder((64,), name="A")
    B = te.placeholder((64,), name="B")
    C = te.compute((64,), lambda i: A[i] + B[i], name="C")
    s = create_schedule(C)
    _, ii = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(ii)
    ir = get_adapter("llvm-cpu -mcpu=x86-64").render(lower(s, [A, B, C], "vadd"))
    golden("vadd_x86_64.ll", ir)
