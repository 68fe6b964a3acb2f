"""autosched.ops: every op against numpy, cold (compiled), warm on disk (no compile) and warm in memory."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import autosched
from autosched import ops
from tests.dlpack import DLPackOnly
from tests.unit.test_topi import np_gelu as gelu_ref
from tests.unit.test_topi import np_pool as pool_ref
from tests.unit.test_topi import np_softmax as softmax_ref

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def conv2d_ref(x, w, stride=1, padding=0, dilation=1, groups=1):
    (sh, sw), (dh, dw) = [(v, v) if isinstance(v, int) else v for v in (stride, dilation)]
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    oh = (H - dh * (R - 1) - 1) // sh + 1
    ow = (W - dw * (S - 1) - 1) // sw + 1
    out = np.zeros((N, K, oh, ow), np.float64)
    kg = K // groups
    for g in range(groups):
        xs = x[:, g * Cg : (g + 1) * Cg]
        for r in range(R):
            for s in range(S):
                patch = xs[
                    :, :, r * dh : r * dh + sh * (oh - 1) + 1 : sh, s * dw : s * dw + sw * (ow - 1) + 1 : sw
                ]
                out[:, g * kg : (g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg : (g + 1) * kg, :, r, s]
                )
    return out


def attention_ref(q, k, v, causal=False):
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        S, L = s.shape[-2:]
        mask = np.arange(L)[None, :] <= np.arange(S)[:, None] + (L - S)
        s = np.where(mask, s, -np.inf)
    return softmax_ref(s) @ v


def layer_norm_ref(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def cases():
    a, b = rand(5, 12), rand(12, 7)
    ba, bb, bt = rand(3, 4, 8), rand(3, 8, 5), rand(1, 5, 8)
    x, w, bias = rand(6, 16), rand(10, 16), rand(10)
    img, kern, w3 = rand(1, 4, 9, 10), rand(6, 2, 3, 3), rand(3, 4, 3, 3)
    dw_w = rand(4, 2, 3, 3)
    q, k, v = rand(1, 2, 5, 8), rand(1, 2, 7, 8), rand(1, 2, 7, 4)
    t3, g, beta = rand(2, 3, 16), rand(16), rand(16)
    e1, e2 = rand(4, 1, 6), rand(3, 1)
    pos = np.abs(rand(3, 5)) + 0.5
    return {
        "matmul": (lambda: ops.matmul(a, b), lambda: a @ b),
        "batch_matmul": (lambda: ops.batch_matmul(ba, bb), lambda: ba @ bb),
        "batch_matmul_nt_broadcast": (
            lambda: ops.batch_matmul(ba, bt, transpose_b=True),
            lambda: ba @ bt.transpose(0, 2, 1),
        ),
        "dense": (lambda: ops.dense(x, w), lambda: x @ w.T),
        "dense_bias_relu": (
            lambda: ops.dense(x, w, bias, activation="relu"),
            lambda: np.maximum(x @ w.T + bias, 0),
        ),
        "dense_bias_gelu": (
            lambda: ops.dense(x, w, bias, activation="gelu"),
            lambda: gelu_ref(x @ w.T + bias),
        ),
        "conv2d_grouped_strided_dilated": (
            lambda: ops.conv2d(img, kern, stride=2, padding=2, dilation=2, groups=2),
            lambda: conv2d_ref(img, kern, 2, 2, 2, groups=2),
        ),
        "conv2d": (lambda: ops.conv2d(img, w3, padding=1), lambda: conv2d_ref(img, w3, 1, 1)),
        "depthwise_conv2d": (
            lambda: ops.depthwise_conv2d(img, dw_w, stride=1, padding=1),
            lambda: conv2d_ref(img, dw_w.reshape(8, 1, 3, 3), 1, 1, 1, groups=4),
        ),
        "max_pool2d": (lambda: ops.max_pool2d(img, 3, 2, 1), lambda: pool_ref(img, 3, 2, 1, "max")),
        "avg_pool2d": (lambda: ops.avg_pool2d(img, 3, 2, 1), lambda: pool_ref(img, 3, 2, 1, "avg")),
        "avg_pool2d_include_pad": (
            lambda: ops.avg_pool2d(img, 2, 2, 1, count_include_pad=True),
            lambda: pool_ref(img, 2, 2, 1, "avg", True),
        ),
        "softmax": (lambda: ops.softmax(t3), lambda: softmax_ref(t3)),
        "softmax_axis1": (lambda: ops.softmax(t3, axis=1), lambda: softmax_ref(t3, axis=1)),
        "layer_norm": (lambda: ops.layer_norm(t3, g, beta), lambda: layer_norm_ref(t3, g, beta)),
        "attention": (lambda: ops.attention(q, k, v), lambda: attention_ref(q, k, v)),
        "attention_causal": (
            lambda: ops.attention(q, k, v, causal=True),
            lambda: attention_ref(q, k, v, True),
        ),
        "add_broadcast": (lambda: ops.add(e1, e2), lambda: e1 + e2),
        "subtract": (lambda: ops.subtract(e1, e2), lambda: e1 - e2),
        "multiply_scalar": (lambda: ops.multiply(e1, 3.0), lambda: e1 * 3.0),
        "divide": (lambda: ops.divide(e1, pos[:1, :1]), lambda: e1 / pos[:1, :1]),
        "scalar_divide": (lambda: ops.divide(1.0, pos), lambda: 1.0 / pos),
        "maximum": (lambda: ops.maximum(e1, e2), lambda: np.maximum(e1, e2)),
        "minimum": (lambda: ops.minimum(e1, 0.0), lambda: np.minimum(e1, 0.0)),
        "relu": (lambda: ops.relu(t3), lambda: np.maximum(t3, 0)),
        "exp": (lambda: ops.exp(t3), lambda: np.exp(t3)),
        "tanh": (lambda: ops.tanh(t3), lambda: np.tanh(t3)),
        "sigmoid": (lambda: ops.sigmoid(t3), lambda: 1 / (1 + np.exp(-t3))),
        "gelu": (lambda: ops.gelu(t3), lambda: gelu_ref(t3)),
        "sum": (lambda: ops.sum(t3, axis=(0, 2)), lambda: t3.sum(axis=(0, 2))),
        "max_keepdims": (lambda: ops.max(t3, axis=-1, keepdims=True), lambda: t3.max(axis=-1, keepdims=True)),
        "min_all": (lambda: ops.min(t3), lambda: np.array([t3.min()])),
        "mean": (lambda: ops.mean(t3, axis=1), lambda: t3.mean(axis=1)),
    }


CASES = cases()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    d = tmp_path_factory.mktemp("kernels")
    mp.setenv("AUTOSCHED_CACHE_DIR", str(d))
    mp.setenv("AUTOSCHED_SHIPPED_LOGS", "0")
    mp.delenv("AUTOSCHED_LOGS", raising=False)
    ops.clear_memory_cache()
    yield d
    ops.clear_memory_cache()
    mp.undo()


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_numpy_cold_and_warm(name, cache):
    call, ref = CASES[name]
    expected = ref()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ops.UntunedWarning)
        before = dict(ops.STATS)
        cold = call()
        assert ops.STATS["compiled"] == before.get("compiled", 0) + 1, "the first call compiles once"
        np.testing.assert_allclose(cold, expected, rtol=1e-4, atol=1e-4)
        warm = call()  # memory
        assert ops.STATS["memory_hits"] == before.get("memory_hits", 0) + 1
        ops.clear_memory_cache()
        disk = call()  # a fresh start: the kernel comes from the disk cache
        assert ops.STATS["compiled"] == before.get("compiled", 0) + 1, "warm disk cache: no compile"
        assert ops.STATS["disk_hits"] >= before.get("disk_hits", 0) + 1
    assert isinstance(cold, np.ndarray) and cold.dtype == np.float32
    np.testing.assert_array_equal(warm, cold)
    np.testing.assert_array_equal(disk, cold)


def test_untuned_warns_once_per_shape(cache):
    a, b = rand(3, 5), rand(5, 2)
    ops.clear_memory_cache()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        ops.matmul(a, b)
        ops.matmul(a, b)
        ops.clear_memory_cache()  # even a fresh lookup of the same shape stays quiet ...
        ops.matmul(a, b)
        ops.matmul(rand(4, 5), b)  # ... while another shape warns
    msgs = [str(w.message) for w in got if issubclass(w.category, ops.UntunedWarning)]
    assert len(msgs) == 2, msgs
    assert "ops_matmul" in msgs[0] and "autosched tune" in msgs[0] and "M=3" in msgs[0]


def test_tuned_record_is_used(cache, tmp_path):
    """A record in a log passed with logs= is used (no warning), and its trace decides the kernel."""
    from autosched.hai.registry import get_adapter
    from autosched.ops.workloads import ops_matmul
    from autosched.records.log import append_records
    from autosched.records.record import make_record
    from autosched.target import parse_target

    inst = ops_matmul.workload.instantiate(M=4, N=16, K=8)
    target = parse_target("llvm-cpu")
    s = autosched.create_schedule(inst.outputs[0])
    C = s[inst.outputs[0]]
    io, ii = C.split(C.op.axis[0], factor=2)
    C.unroll(ii)
    append_records(
        tmp_path / "log.jsonl", [make_record(inst, target, get_adapter(target).info(), s.trace, [1e-6])]
    )
    a, b = rand(4, 8), rand(8, 16)
    ops.clear_memory_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ops.UntunedWarning)
        out = ops.matmul(a, b, logs=tmp_path / "log.jsonl")
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(FileNotFoundError, match="not found"):
        ops.matmul(a, b, logs=tmp_path / "missing.jsonl")


def test_dlpack_input_and_bad_input(cache):
    a, b = rand(2, 3), rand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ops.UntunedWarning)
        np.testing.assert_allclose(ops.matmul(DLPackOnly(a), b), a @ b, rtol=1e-5, atol=1e-5)
        with pytest.raises(TypeError, match="numpy array or support DLPack"):
            ops.matmul([[1.0]], b)
        with pytest.raises(ValueError, match="columns must equal"):
            ops.matmul(a, a)


def test_second_process_loads_without_compiling(cache):
    code = (
        "import warnings, numpy as np, autosched\n"
        "warnings.simplefilter('ignore')\n"
        "a = np.ones((3, 7), 'float32'); b = np.ones((7, 5), 'float32')\n"
        "assert (autosched.ops.matmul(a, b) == 7).all()\n"
        "print(dict(autosched.ops.STATS))\n"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'compiled': 1" in first.stdout, first.stdout
    # (the cache name hashes the compiler's source: editing lower/ or codegen/ meanwhile recompiles)
    assert "'disk_hits': 1" in second.stdout and "compiled" not in second.stdout, second.stdout
