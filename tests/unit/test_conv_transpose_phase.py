"""Strided transposed convolutions read only the taps that meet a real input row (no zeros)."""

from __future__ import annotations

import numpy as np
import pytest

from autosched import topi
from autosched.te import placeholder
from autosched.te.reference import evaluate, random_inputs
from autosched.te.tensor import Reduce

from .test_topi import np_conv2d_transpose


@pytest.mark.parametrize(
    "shape, stride, padding, output_padding, groups",
    [
        ((1, 4, 5, 6, 4, 4), 2, 1, 0, 1),  # the DCGAN layer: 4x4, stride 2
        ((2, 4, 4, 3, 3, 3), (3, 2), (0, 2), (1, 0), 2),  # grouped, uneven strides and padding
        ((1, 2, 3, 3, 5, 1), (2, 1), 0, (1, 0), 1),  # a 5-tap kernel of stride 2: the last group short
    ],
)
def test_matches_the_scatter_definition(shape, stride, padding, output_padding, groups) -> None:
    N, C, H, W, R, S = shape
    x, w = placeholder((N, C, H, W), name="x"), placeholder((C, 6 // groups, R, S), name="w")
    out = topi.conv2d_transpose(x, w, stride, padding, output_padding, groups=groups)
    a, b = random_inputs([x, w], seed=3)
    (got,) = evaluate([out], {x: a, w: b})
    want = np_conv2d_transpose(a, b, stride, padding, output_padding, groups=groups)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reads_a_quarter_of_the_taps_for_stride_2() -> None:
    x, w = placeholder((1, 8, 6, 6), name="x"), placeholder((8, 8, 4, 4), name="w")
    out = topi.conv2d_transpose(x, w, stride=2, padding=1)
    body = out.op.body
    assert isinstance(body, Reduce)
    assert [a.extent for a in out.op.reduce_axis] == [8, 2, 2]  # channels, then 2 x 2 of the 4 x 4 taps
    assert {t.op.name for t in out.op.input_tensors} == {"x", "w"}  # no zero-inserted pad stage
