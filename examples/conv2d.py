"""A 3x3 convolution of a ResNet stage (NCHW, stride 1, padding 1), with its padding as a stage.

autosched tune examples/conv2d.py --trials 200
"""

import autosched
from autosched import te, topi


@autosched.workload
def conv2d(N=1, C=64, H=56, W=56, K=64, R=3, S=3, stride=1, padding=1, dtype="float32"):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((K, C, R, S), dtype, name="weight")
    out = topi.conv2d(data, weight, stride=stride, padding=padding)
    return [data, weight, out]
