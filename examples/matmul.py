"""A dense matrix multiplication, C = A @ B: the first op to tune.

autosched tune examples/matmul.py --trials 200
autosched tune examples/matmul.py --args M=512 N=512 K=512 --trials 64
"""

import numpy as np

import autosched
from autosched import te


@autosched.workload(numpy=lambda a, b: [np.matmul(a, b)])
def matmul(M=1024, N=1024, K=1024, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]
