"""Features of a lowered candidate for the cost model, in the spirit of Ansor's per-store features.

Each ``Store`` of the loop IR gets :data:`STORE_FEATURES` numbers: its arithmetic mix, the loops
around it (extents and kinds of the innermost few, vector/unroll/parallel structure), per accessed
buffer the bytes, unique bytes, reuse and stride at each of the innermost loop levels, footprints,
arithmetic intensity and a small cache-traffic model. Counts are ``log2(1 + x)``. A candidate's
vector is the execution-weighted mean and the max of its stores' vectors, then a few program-wide
numbers and the chip facts, so one model can learn across workloads and chips. Same IR in, same
vector out; the length is :data:`FEATURE_COUNT` whatever the program.

Example::

    x = candidate_features(lower(sch, args), chip)      # shape (FEATURE_COUNT,)
    X = extract_features([f1, f2, f3], chip)            # shape (3, FEATURE_COUNT)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..chip import ChipInfo
from ..lower.ir import Allocate, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var

LEVELS = 4  # innermost loop levels described one by one
SLOTS = 4  # buffers described per store: the stored one, then the loads with the largest footprint
KINDS = ("parallel", "vectorized", "unrolled", "thread_binding")  # serial: all zero
DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}
LINE = 64  # cache line bytes

OPS = ("f_addsub", "f_mul", "f_div", "f_minmax", "f_cmp", "f_math", "i_addsub", "i_mul", "i_divmod",
       "i_cmp", "select", "cast")  # fmt: skip
_SLOT_NAMES = (
    ["read", "write", "elem_bytes"]
    + [f"{w}_l{k}" for k in range(1, LEVELS + 1) for w in ("unique_bytes", "reuse", "stride")]
    + ["unique_bytes", "bytes", "lines", "reuse_level", "reuse_dist_bytes"]
)
STORE_FEATURE_NAMES: tuple[str, ...] = tuple(
    [f"ops_{o}" for o in OPS]
    + ["executions", "num_loops", "flops_per_iter"]
    + [f"loop{k}_{w}" for k in range(1, LEVELS + 1) for w in ("extent", *KINDS)]
    + ["vec_len", "vec_loops", "vec_pos", "vec_over_lanes", "vec_aligned"]
    + ["unroll_len", "unroll_loops", "auto_unroll_max_step"]
    + ["par_extent", "par_loops", "par_balance", "par_depth", "work_per_thread"]
    + ["blockIdx", "threadIdx", "vthread", "guards", "selects"]
    + ["scope_global", "scope_local", "scope_shared", "out_bytes", "alloc_bytes", "alloc_over_l1"]
    + [f"intensity_l{k}" for k in range(1, LEVELS + 1)]
    + ["intensity"]
    + [f"footprint_l{k}" for k in range(1, LEVELS + 1)]
    + [f"{c}_{w}" for c in ("l1", "l2", "l3") for w in ("traffic", "intensity")]
    + [f"buf{b}_{n}" for b in range(SLOTS) for n in _SLOT_NAMES]
)
STORE_FEATURES = len(STORE_FEATURE_NAMES)
PROGRAM_FEATURE_NAMES = ("num_stores", "total_flops", "total_executions", "parallel_regions",
                         "total_alloc_bytes", "max_depth")  # fmt: skip
CHIP_FEATURE_NAMES = ("chip_cores", "chip_lanes", "chip_l1", "chip_l2", "chip_l3", "chip_peak_gflops",
                      "chip_bandwidth", "chip_is_gpu", "chip_shared_mem", "chip_max_threads")  # fmt: skip
FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"mean_{n}" for n in STORE_FEATURE_NAMES)
    + tuple(f"max_{n}" for n in STORE_FEATURE_NAMES)
    + PROGRAM_FEATURE_NAMES
    + CHIP_FEATURE_NAMES
)
FEATURE_COUNT = len(FEATURE_NAMES)
DEFAULT_CHIP = ChipInfo("generic", "cpu", "generic", cores=1, vector_bits=128)


def _lg(x: float) -> float:
    return math.log2(1.0 + x) if x > 0 else 0.0


class _Access:
    """One buffer touched by a store: per dimension, the coefficient of each loop variable."""

    __slots__ = ("buffer", "coefs", "read", "write")

    def __init__(self, buffer: Any, coefs: list[dict[int, float]]):
        self.buffer = buffer
        self.coefs = coefs
        self.read = False
        self.write = False


class _Extractor:
    def __init__(self, chip: ChipInfo):
        self.chip = chip
        self.lanes = max(1, chip.vector_bits // 32)
        self.rows: list[list[float]] = []
        self.weights: list[float] = []
        self.linear_memo: dict[int, dict[int, float]] = {}
        self.parallel_regions = 0
        self.max_depth = 0
        self.total_flops = 0.0
        self.total_alloc = 0.0

    # Statements -------------------------------------------------------------------------------
    def visit(self, s: Stmt, loops: list[For], guards: int, allocs: list[Any], unroll_step: int) -> None:
        if isinstance(s, For):
            if s.kind == "parallel" and not any(lp.kind == "parallel" for lp in loops):
                self.parallel_regions += 1
            step = dict(s.annotations).get("auto_unroll_max_step", unroll_step)
            loops.append(s)
            self.visit(s.body, loops, guards, allocs, step)
            loops.pop()
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.visit(x, loops, guards, allocs, unroll_step)
        elif isinstance(s, IfThenElse):
            self.visit(s.then, loops, guards + 1, allocs, unroll_step)
            if s.otherwise is not None and not s.likely:  # a likely test's else is a tail tile's copy
                self.visit(s.otherwise, loops, guards + 1, allocs, unroll_step)
        elif isinstance(s, Allocate):
            self.total_alloc += s.buffer.size * DTYPE_BYTES.get(s.buffer.dtype, 4)
            allocs.append(s.buffer)
            self.visit(s.body, loops, guards, allocs, unroll_step)
            allocs.pop()
        elif isinstance(s, Store):
            self.store(s, loops, guards, allocs, unroll_step)

    # Expressions ------------------------------------------------------------------------------
    def linear(self, e: Expr) -> dict[int, float]:
        """Coefficients of the loop variables in an index (``//`` scales, ``%`` keeps)."""
        got = self.linear_memo.get(id(e))
        if got is not None:
            return got
        if isinstance(e, Var):
            out: dict[int, float] = {id(e): 1.0}
        elif isinstance(e, Binary):
            a = self.linear(e.a)
            b_const = e.b.value if isinstance(e.b, Const) else None
            if e.op in ("+", "-", "min", "max"):
                out = dict(a)
                sign = -1.0 if e.op == "-" else 1.0
                for v, c in self.linear(e.b).items():
                    out[v] = out.get(v, 0.0) + sign * c
            elif e.op == "*":
                if b_const is None and isinstance(e.a, Const):
                    out = {v: c * e.a.value for v, c in self.linear(e.b).items()}
                elif b_const is not None:
                    out = {v: c * b_const for v, c in a.items()}
                else:
                    out = {**a, **self.linear(e.b)}
            elif e.op == "//" and b_const:
                out = {v: c / b_const for v, c in a.items()}
            else:  # "%" and anything opaque: the variables still move the index
                out = a
        elif isinstance(e, Cast):
            out = self.linear(e.value)
        else:
            out = {}
        self.linear_memo[id(e)] = out
        return out

    def scan(self, e: Expr, ops: list[float], loads: list[Load]) -> int:
        """Count operations into ``ops`` and collect loads; returns the number of selects."""
        stack, selects = [e], 0
        while stack:
            n = stack.pop()
            if isinstance(n, Binary):
                fl = n.dtype.startswith("float")
                op = n.op
                if op in ("+", "-"):
                    ops[0 if fl else 6] += 1
                elif op == "*":
                    ops[1 if fl else 7] += 1
                elif op in ("/", "//", "%"):
                    ops[2 if fl else 8] += 1
                else:
                    ops[3 if fl else 6] += 1
                stack.append(n.a)
                stack.append(n.b)
            elif isinstance(n, Load):
                loads.append(n)
                stack.extend(n.indices)
            elif isinstance(n, Compare):
                ops[4 if n.a.dtype.startswith("float") else 9] += 1
                stack.append(n.a)
                stack.append(n.b)
            elif isinstance(n, Call):
                ops[5] += 1
                stack.extend(n.args)
            elif isinstance(n, Select):
                ops[10] += 1
                selects += 1
                stack.extend((n.cond, n.t, n.f))
            elif isinstance(n, Cast):
                ops[11] += 1
                stack.append(n.value)
            elif isinstance(n, Logical):
                ops[9] += 1
                stack.append(n.a)
                stack.append(n.b)
            elif isinstance(n, Not):
                stack.append(n.a)
        return selects

    # One store --------------------------------------------------------------------------------
    def store(self, s: Store, loops: list[For], guards: int, allocs: list[Any], unroll_step: int) -> None:
        chip = self.chip
        ops = [0.0] * len(OPS)
        loads: list[Load] = []
        selects = self.scan(s.value, ops, loads)
        for i in s.indices:
            self.scan(i, ops, [])
        inner = loops[::-1]  # innermost first
        ext = [lp.extent for lp in inner]
        n_exec = float(math.prod(ext)) if ext else 1.0
        flops = sum(ops[:6])
        self.total_flops += flops * n_exec
        self.max_depth = max(self.max_depth, len(loops))
        row: list[float] = [_lg(c * n_exec) for c in ops]
        row += [_lg(n_exec), float(len(loops)), _lg(flops)]
        for k in range(LEVELS):
            if k < len(inner):
                lp = inner[k]
                row += [_lg(lp.extent), *(1.0 if lp.kind == kd else 0.0 for kd in KINDS)]
            else:
                row += [0.0] * (1 + len(KINDS))
        # Annotations.
        vec = [(d, lp.extent) for d, lp in enumerate(inner) if lp.kind == "vectorized"]
        vlen = math.prod(x for _, x in vec) if vec else 1
        row += [_lg(vlen), float(len(vec)), float(vec[0][0] + 1) if vec else 0.0,
                math.log2(vlen / self.lanes) if vec else 0.0,
                1.0 if vec and (vlen % self.lanes == 0 or self.lanes % vlen == 0) else 0.0]  # fmt: skip
        unr = [lp.extent for lp in inner if lp.kind == "unrolled"]
        row += [_lg(math.prod(unr)) if unr else 0.0, float(len(unr)), _lg(unroll_step)]
        par = [(d, lp.extent) for d, lp in enumerate(loops) if lp.kind == "parallel"]
        pext = math.prod(x for _, x in par) if par else 1
        cores = max(1, chip.cores)
        balance = pext / (math.ceil(pext / cores) * cores) if par else 0.0
        row += [_lg(pext) if par else 0.0, float(len(par)), balance, float(par[0][0]) if par else 0.0,
                _lg(n_exec / pext)]  # fmt: skip
        tags: dict[str, int] = {"b": 1, "t": 1, "v": 1}
        for lp in loops:
            if lp.kind == "thread_binding":
                key = "v" if lp.thread_tag == "vthread" else lp.thread_tag[0]
                tags[key] = tags.get(key, 1) * lp.extent
        row += [_lg(tags["b"] - 1), _lg(tags["t"] - 1), _lg(tags["v"] - 1), float(guards), float(selects)]
        sc = s.buffer.scope
        alloc_bytes = sum(b.size * DTYPE_BYTES.get(b.dtype, 4) for b in allocs)
        row += [float(sc == "global"), float(sc == "local"), float(sc == "shared"),
                _lg(s.buffer.size * DTYPE_BYTES.get(s.buffer.dtype, 4)), _lg(alloc_bytes),
                math.log2((1 + alloc_bytes) / max(1, chip.l1_bytes))]  # fmt: skip
        row += self.memory(s, loads, inner, ext, flops, n_exec)
        self.rows.append(row)
        self.weights.append(n_exec)

    def memory(
        self, s: Store, loads: list[Load], inner: list[For], ext: list[int], flops: float, n_exec: float
    ) -> list[float]:
        """Footprints, intensities, cache traffic, and the per-buffer slots."""
        accesses: dict[int, _Access] = {}
        touched = [(s.buffer, s.indices, True), *((ld.buffer, ld.indices, False) for ld in loads)]
        for buf, idx, is_write in touched:
            acc = accesses.get(id(buf))
            if acc is None:
                acc = accesses[id(buf)] = _Access(buf, [self.linear(i) for i in idx])
            if is_write:
                acc.write = True
            else:
                acc.read = True
        nl = len(inner)
        var_ids = [id(lp.var) for lp in inner]
        iters = [1.0] * (nl + 1)  # iters[k]: iterations of the k innermost loops
        for k in range(nl):
            iters[k + 1] = iters[k] * ext[k]
        infos = []
        footprint = [0.0] * (nl + 1)  # bytes of all buffers touched by the k innermost loops
        for acc in accesses.values():
            shape = acc.buffer.shape or (1,)
            eb = DTYPE_BYTES.get(acc.buffer.dtype, 4)
            coefs = acc.coefs or [{}]
            row_stride, st = [], 1
            for d in reversed(shape):
                row_stride.append(st)
                st *= d
            row_stride.reverse()
            dims = len(coefs)
            by_var: dict[int, list[tuple[int, float]]] = {}
            for d, cd in enumerate(coefs):
                for v, c in cd.items():
                    if c:
                        by_var.setdefault(v, []).append((d, c))
            spans = [1.0] * dims
            caps = [float(shape[d]) if d < len(shape) else 1.0 for d in range(dims)]
            unique = [1.0] * (nl + 1)
            strides = [0.0] * nl
            prod = 1.0
            for k, v in enumerate(var_ids):
                hits = by_var.get(v)
                if hits:
                    e1 = ext[k] - 1
                    addr = 0.0
                    for d, c in hits:
                        addr += c * row_stride[d]
                        before = min(spans[d], caps[d])
                        spans[d] += abs(c) * e1
                        prod *= min(spans[d], caps[d]) / before
                    strides[k] = abs(addr)
                unique[k + 1] = prod
            for k in range(nl + 1):
                footprint[k] += unique[k] * eb
            last = min(spans[-1], shape[-1])
            lines = unique[nl] / max(1.0, last) * math.ceil(last * eb / LINE)
            reuse_level = next((k for k in range(nl) if strides[k] == 0 and ext[k] > 1), -1)
            infos.append((acc, eb, unique, strides, lines, reuse_level))
        out: list[float] = []
        top = min(LEVELS, nl)
        for k in range(1, LEVELS + 1):
            kk = min(k, nl)
            out.append(_lg(flops * iters[kk] / max(1.0, footprint[kk])) if k <= top else 0.0)
        out.append(_lg(flops * n_exec / max(1.0, footprint[nl])))
        out += [_lg(footprint[min(k, nl)]) if k <= top else 0.0 for k in range(1, LEVELS + 1)]
        chip = self.chip
        for cap in (chip.l1_bytes, chip.l2_bytes, chip.l3_bytes or 8 * chip.l2_bytes):
            k = max((k for k in range(nl + 1) if footprint[k] <= cap), default=0)
            traffic = footprint[k] * n_exec / iters[k]
            out += [_lg(traffic), _lg(flops * n_exec / max(1.0, traffic))]
        # Slots: the stored buffer first, then loads by full-nest footprint.
        first = [i for i in infos if i[0].write]
        rest = sorted((i for i in infos if not i[0].write), key=lambda i: -i[2][nl] * i[1])
        for slot in range(SLOTS):
            chosen = (first + rest)[slot] if slot < len(first) + len(rest) else None
            if chosen is None:
                out += [0.0] * len(_SLOT_NAMES)
                continue
            acc, eb, unique, strides, lines, reuse_level = chosen
            out += [float(acc.read), float(acc.write), float(eb)]
            for k in range(1, LEVELS + 1):
                if k <= nl:
                    out += [_lg(unique[k] * eb), math.log2(iters[k] / unique[k]), _lg(strides[k - 1])]
                else:
                    out += [0.0, 0.0, 0.0]
            dist = footprint[reuse_level] if reuse_level >= 0 else 0.0
            out += [_lg(unique[nl] * eb), _lg(n_exec * eb), _lg(lines), float(reuse_level + 1), _lg(dist)]
        return out


def store_features(func: PrimFunc, chip: ChipInfo | None = None) -> np.ndarray:
    """One row of :data:`STORE_FEATURES` numbers per store of ``func``, in program order."""
    ex = _Extractor(chip or DEFAULT_CHIP)
    ex.visit(func.body, [], 0, [], 0)
    return np.asarray(ex.rows, dtype=np.float64).reshape(len(ex.rows), STORE_FEATURES)


def chip_features(chip: ChipInfo | None) -> list[float]:
    c = chip or DEFAULT_CHIP
    return [_lg(c.cores), _lg(c.vector_bits / 32), _lg(c.l1_bytes), _lg(c.l2_bytes), _lg(c.l3_bytes),
            _lg(c.peak_gflops), _lg(c.bandwidth_gbs), float(c.kind == "gpu"), _lg(c.shared_mem_bytes),
            _lg(c.max_threads_per_block)]  # fmt: skip


def candidate_features(func: PrimFunc, chip: ChipInfo | None = None) -> np.ndarray:
    """The fixed-length vector of one lowered candidate (:data:`FEATURE_NAMES` says what each is)."""
    ex = _Extractor(chip or DEFAULT_CHIP)
    ex.visit(func.body, [], 0, [], 0)
    out = np.zeros(FEATURE_COUNT, dtype=np.float64)
    if ex.rows:
        rows = np.asarray(ex.rows, dtype=np.float64)
        w = np.asarray(ex.weights, dtype=np.float64)
        out[:STORE_FEATURES] = w @ rows / w.sum()
        out[STORE_FEATURES : 2 * STORE_FEATURES] = rows.max(axis=0)
    p = 2 * STORE_FEATURES
    out[p : p + len(PROGRAM_FEATURE_NAMES)] = [
        float(len(ex.rows)), _lg(ex.total_flops), _lg(sum(ex.weights)), float(ex.parallel_regions),
        _lg(ex.total_alloc), float(ex.max_depth),
    ]  # fmt: skip
    out[p + len(PROGRAM_FEATURE_NAMES) :] = chip_features(chip)
    return out


def extract_features(funcs: Sequence[PrimFunc], chip: ChipInfo | None = None) -> np.ndarray:
    """A ``(len(funcs), FEATURE_COUNT)`` matrix, one candidate a row."""
    out = np.zeros((len(funcs), FEATURE_COUNT), dtype=np.float64)
    for i, f in enumerate(funcs):
        out[i] = candidate_features(f, chip)
    return out
