"""Softmax over the last axis: a max, an exp-sum and a normalisation, in separate computes.

autosched tune examples/softmax.py --trials 100
"""

import numpy as np

import autosched
from autosched import te


def _softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return [e / e.sum(axis=-1, keepdims=True)]


@autosched.workload(numpy=_softmax_np)
def softmax(M=4096, N=1024, dtype="float32"):
    X = te.placeholder((M, N), dtype, name="X")
    k = te.reduce_axis((0, N), name="k")
    row_max = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="row_max")
    expx = te.compute((M, N), lambda i, j: te.exp(X[i, j] - row_max[i]), name="exp")
    k2 = te.reduce_axis((0, N), name="k2")
    row_sum = te.compute((M,), lambda i: te.sum(expx[i, k2], axis=k2), name="row_sum")
    out = te.compute((M, N), lambda i, j: expx[i, j] / row_sum[i], name="softmax")
    return [X, out]
