"""Layout operators: pad, transpose, reshape, take/gather and concatenate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import te
from ..te import Tensor
from ..te.expr import is_int
from .checks import check_int, check_tensor, normalize_axis
from .index import axis_names, named, offset


def lowest(dtype: str) -> float | int:
    """The identity of max for ``dtype``: -inf for floats, the smallest integer otherwise."""
    return -(2 ** (31 if dtype == "int32" else 63)) if is_int(dtype) else -math.inf


def pad(
    data: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    pad_value: float = 0.0,
    name: str = "pad",
) -> Tensor:
    """``data`` padded with ``pad_value``; out-of-range reads are guarded by te.if_then_else.

    Example: ``pad(x, (0, 0, 1, 1), (0, 0, 1, 1))`` pads H and W of an NCHW tensor by one.
    """
    fn = "pad"
    check_tensor(fn, "data", data)
    after = pad_before if pad_after is None else pad_after
    for arg, pads in (("pad_before", pad_before), ("pad_after", after)):
        if not isinstance(pads, Sequence) or len(pads) != data.ndim:
            raise ValueError(f"{fn}: {arg} must have {data.ndim} ints (one per dim), got {pads!r}")
        for p in pads:
            check_int(fn, arg, p)
    if is_int(data.dtype) and isinstance(pad_value, float) and pad_value.is_integer():
        pad_value = int(pad_value)  # 0.0 is the default; accept it for integer data
    if is_int(data.dtype) and not float(pad_value).is_integer():
        raise TypeError(f"{fn}: pad_value {pad_value!r} is not an integer but data is {data.dtype}")
    value = te.const(pad_value, data.dtype)
    shape = tuple(d + b + a for d, b, a in zip(data.shape, pad_before, after, strict=True))

    def body(*idx: Any) -> Any:
        conds = []
        for i, d, b, a in zip(idx, data.shape, pad_before, after, strict=True):
            if b > 0:
                conds.append(i >= b)
            if a > 0:
                conds.append(i < b + d)
        src = data[tuple(offset(i, -b) for i, b in zip(idx, pad_before, strict=True))]
        return te.if_then_else(te.all(*conds), src, value) if conds else src

    return te.compute(shape, named(body, axis_names(data.ndim)), name=name)


def transpose(data: Tensor, axes: Sequence[int] | None = None, name: str = "transpose") -> Tensor:
    """Permute dims as ``numpy.transpose``: output dim ``d`` is input dim ``axes[d]``.

    Example: ``transpose(x, (0, 2, 1))`` swaps the last two dims of a 3-d tensor.
    """
    fn = "transpose"
    check_tensor(fn, "data", data)
    n = data.ndim
    perm = (
        tuple(reversed(range(n))) if axes is None else tuple(normalize_axis(fn, a, n, "axes") for a in axes)
    )
    if sorted(perm) != list(range(n)):
        raise ValueError(f"{fn}: axes must be a permutation of 0..{n - 1}, got {axes!r}")
    shape = tuple(data.shape[a] for a in perm)

    def body(*idx: Any) -> Any:
        src: list[Any] = [None] * n
        for out_dim, in_dim in enumerate(perm):
            src[in_dim] = idx[out_dim]
        return data[tuple(src)]

    return te.compute(shape, named(body, axis_names(n)), name=name)


def reshape(data: Tensor, newshape: Sequence[int], name: str = "reshape") -> Tensor:
    """Row-major reshape; one dim may be -1. Example: ``reshape(x, (4, -1))``."""
    fn = "reshape"
    check_tensor(fn, "data", data)
    shape = list(newshape)
    size = math.prod(data.shape)
    if shape.count(-1) > 1:
        raise ValueError(f"{fn}: newshape may hold one -1, got {newshape!r}")
    for d in shape:
        if d != -1:
            check_int(fn, "newshape", d, minimum=1)
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if size % known:
            raise ValueError(f"{fn}: cannot reshape {data.shape} ({size} elements) to {tuple(newshape)}")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise ValueError(f"{fn}: cannot reshape {data.shape} ({size} elements) to {tuple(newshape)}")

    def body(*idx: Any) -> Any:
        flat = idx[0]
        for i, d in zip(idx[1:], shape[1:], strict=True):
            flat = flat * d + i
        src = []
        stride = 1
        for dim, d in reversed(list(enumerate(data.shape))):
            # The outermost index needs no modulo: flat // stride is already below its extent.
            q = flat if stride == 1 else flat // stride
            src.append(0 if d == 1 else q if dim == 0 else q % d)
            stride *= d
        return data[tuple(reversed(src))]

    return te.compute(tuple(shape), named(body, axis_names(len(shape))), name=name)


def _clip_index(indices: Tensor, n: int, idx: Any) -> Any:
    # Out-of-range indices are clipped (TVM's default mode) so a kernel never reads out of bounds.
    return te.max(te.min(indices[idx], n - 1), 0)


def _check_indices(fn: str, indices: Any) -> Tensor:
    check_tensor(fn, "indices", indices)
    if indices.dtype != "int32":
        raise TypeError(f"{fn}: indices must be int32, got {indices.dtype}")
    return indices


def take(data: Tensor, indices: Tensor, axis: int = 0, name: str = "take") -> Tensor:
    """``numpy.take(data, indices, axis)`` with indices clipped into range.

    The output shape is ``data.shape[:axis] + indices.shape + data.shape[axis + 1:]``.
    Example: ``take(embedding, token_ids, axis=0)``.
    """
    fn = "take"
    check_tensor(fn, "data", data)
    _check_indices(fn, indices)
    ax = normalize_axis(fn, axis, data.ndim)
    shape = data.shape[:ax] + indices.shape + data.shape[ax + 1 :]
    k = indices.ndim

    def body(*idx: Any) -> Any:
        pos = _clip_index(indices, data.shape[ax], tuple(idx[ax : ax + k]))
        return data[(*idx[:ax], pos, *idx[ax + k :])]

    return te.compute(shape, named(body, axis_names(len(shape))), name=name)


def gather(data: Tensor, axis: int, indices: Tensor, name: str = "gather") -> Tensor:
    """``numpy.take_along_axis``: ``out[..., i, ...] = data[..., indices[..., i, ...], ...]``, clipped.

    ``indices`` has data's rank; its dims other than ``axis`` must equal data's.
    Example: ``gather(x, 1, idx)`` with x (4, 8) and idx (4, 3) int32.
    """
    fn = "gather"
    check_tensor(fn, "data", data)
    _check_indices(fn, indices)
    ax = normalize_axis(fn, axis, data.ndim)
    if indices.ndim != data.ndim:
        raise ValueError(f"{fn}: indices has {indices.ndim} dims, expected {data.ndim} (data's rank)")
    for d, (a, b) in enumerate(zip(data.shape, indices.shape, strict=True)):
        if d != ax and a != b:
            raise ValueError(
                f"{fn}: indices dim {d} is {b}, expected {a} (data's, all dims but axis {ax} must match)"
            )

    def body(*idx: Any) -> Any:
        pos = _clip_index(indices, data.shape[ax], idx)
        return data[(*idx[:ax], pos, *idx[ax + 1 :])]

    return te.compute(indices.shape, named(body, axis_names(data.ndim)), name=name)


def concatenate(tensors: Sequence[Tensor], axis: int = 0, name: str = "concatenate") -> Tensor:
    """Join tensors along ``axis``; each read is guarded so none goes out of bounds.

    Example: ``concatenate([a, b], axis=1)`` with a (2, 3) and b (2, 5) gives (2, 8).
    """
    fn = "concatenate"
    if not isinstance(tensors, Sequence) or not tensors:
        raise ValueError(f"{fn}: tensors must be a non-empty list of te.Tensor, got {tensors!r}")
    for i, t in enumerate(tensors):
        check_tensor(fn, f"tensors[{i}]", t)
    first = tensors[0]
    ax = normalize_axis(fn, axis, first.ndim)
    for i, t in enumerate(tensors):
        if t.dtype != first.dtype:
            raise TypeError(f"{fn}: tensors[{i}] is {t.dtype}, tensors[0] is {first.dtype}")
        if t.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if d != ax
        ):
            raise ValueError(
                f"{fn}: tensors[{i}] has shape {t.shape}, expected {first.shape} except along axis {ax}"
            )
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[ax])
    shape = (*first.shape[:ax], offsets[-1], *first.shape[ax + 1 :])

    def body(*idx: Any) -> Any:
        # Build the select chain from the last tensor back, so each branch reads only in range.
        i = idx[ax]
        expr: te.Expr = tensors[-1][(*idx[:ax], offset(i, -offsets[-2]), *idx[ax + 1 :])]
        for t, off, end in reversed(list(zip(tensors[:-1], offsets[:-2], offsets[1:-1], strict=True))):
            expr = te.if_then_else(i < end, t[(*idx[:ax], offset(i, -off), *idx[ax + 1 :])], expr)
        return expr

    return te.compute(shape, named(body, axis_names(len(shape))), name=name)
