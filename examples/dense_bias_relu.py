"""A fully connected layer: relu(data @ weight.T + bias), the matmul and its epilogue as two computes
so the tuner can fuse the epilogue into the matmul's tiles.

    autosched tune examples/dense_bias_relu.py --trials 200
"""

import numpy as np

import autosched
from autosched import te


@autosched.workload(numpy=lambda x, w, b: [np.maximum(x @ w.T + b, 0)])
def dense_bias_relu(M=512, N=1024, K=1024, dtype="float32"):
    data = te.placeholder((M, K), dtype, name="data")
    weight = te.placeholder((N, K), dtype, name="weight")
    bias = te.placeholder((N,), dtype, name="bias")
    k = te.reduce_axis((0, K), name="k")
    dense = te.compute((M, N), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k), name="dense")
    out = te.compute((M, N), lambda i, j: te.max(dense[i, j] + bias[j], 0.0), name="bias_relu")
    return [data, weight, bias, out]
