"""Checking the arrays of a kernel call: dtype, shape, layout, writable outputs, no aliasing.

Shared by ``autosched.build`` kernels and loaded libraries. A kernel reads its inputs while it writes
its outputs, so an output that overlaps any other argument (``f(a, b, a)``) is refused rather than
computed wrong; copying into a temporary would hide a bug and double the memory, silently. An output
must be writable: numpy's read-only flag is honoured, also for arrays that come through DLPack (numpy
marks a view read-only when the exporter says so, or when it predates DLPack 1.0 and cannot say).

Example::

    arrays = check_call("matmul", [("A", (4, 8), f32, False), ..., ("C", (4, 4), f32, True)], [a, b, c])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import AutoschedError

_DLPACK_CPU = 1  # kDLCPU

ArgSpec = tuple[str, tuple[int, ...], np.dtype, bool]  # name, shape, dtype, is_output


class ArgumentError(AutoschedError, ValueError):
    """An array that does not fit a kernel's parameter (dtype, shape, layout, aliasing, read-only)."""


class ArgumentTypeError(ArgumentError, TypeError):
    """A call with the wrong number of arguments, or an argument that is not an array."""


def as_numpy(label: str, a: Any) -> np.ndarray:
    """A numpy view of ``a`` (a numpy array, or anything with DLPack on the CPU), sharing its memory."""
    if isinstance(a, np.ndarray):
        return a
    if not hasattr(a, "__dlpack__"):
        raise ArgumentTypeError(
            f"{label} must be a numpy array, got {type(a).__name__}: pass a numpy array or an array that "
            "supports DLPack (on the CPU)"
        )
    if hasattr(a, "__dlpack_device__"):
        dev = a.__dlpack_device__()
        if int(dev[0]) != _DLPACK_CPU:
            raise ArgumentError(f"{label} lives on DLPack device {tuple(dev)}; this kernel runs on the CPU")
    try:
        return np.from_dlpack(a)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        raise ArgumentError(f"{label}: numpy cannot view it through DLPack: {e}") from None


def check_call(name: str, specs: Sequence[ArgSpec], arrays: Sequence[Any]) -> list[np.ndarray]:
    """The arrays as numpy arrays, checked against ``specs``; an ArgumentError names the misfit."""
    if len(arrays) != len(specs):
        expected = ", ".join(f"{n}: {d}{list(s)}" for n, s, d, _ in specs)
        raise ArgumentTypeError(f"{name}: expected {len(specs)} arrays ({expected}), got {len(arrays)}")
    out = []
    spans = []  # (start, end) byte addresses of each array, for the aliasing check
    for i, (a, (arg, shape, dtype, is_output)) in enumerate(zip(arrays, specs)):
        label = f"{name}: argument {i} ({arg!r})"
        if type(a) is not np.ndarray:
            a = as_numpy(label, a)
        if a.dtype != dtype or a.shape != shape:
            raise ArgumentError(f"{label} expects {dtype}{list(shape)}, got {a.dtype}{list(a.shape)}")
        if not a.flags.c_contiguous:
            raise ArgumentError(f"{label} must be C-contiguous (use numpy.ascontiguousarray)")
        if is_output and not a.flags.writeable:
            raise ArgumentError(
                f"{label} is an output but read-only (a read-only numpy array, or a DLPack export that is "
                "read-only or too old to say); pass a writable array, e.g. numpy.empty_like"
            )
        start = a.ctypes.data
        spans.append((start, start + a.nbytes))
        out.append(a)
    for i, (arg, _shape, _dtype, is_output) in enumerate(specs):
        if not is_output or spans[i][0] == spans[i][1]:
            continue
        for j, (lo, hi) in enumerate(spans):
            if j != i and lo < spans[i][1] and spans[i][0] < hi:
                raise ArgumentError(
                    f"{name}: output argument {i} ({arg!r}) shares memory with argument {j} "
                    f"({specs[j][0]!r}); the kernel reads its inputs while it writes its outputs, so pass "
                    "an output array of its own (e.g. numpy.empty_like)"
                )
    return out
