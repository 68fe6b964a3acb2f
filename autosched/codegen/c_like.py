"""Loop IR -> C-like GPU kernels, in two dialects (CUDA C and OpenCL C). Pure: text out, no device.

A PrimFunc becomes one kernel per root statement (one per root stage, as in TVM's host/device
split): a global intermediate computed by one stage and read by the next needs a grid-wide sync,
which a kernel boundary gives. Such intermediates become ``temps`` the host allocates. Inside a
kernel:

- a ``thread_binding`` loop is the thread or block index; the largest extent bound to a tag sets
  that launch dimension, and a loop with a smaller extent is guarded (``vthread`` runs serially);
- guards are pushed below barriers, so every thread of a block reaches every barrier;
- a store to shared or global memory outside the loops bound to some launch dimension of size > 1
  runs on index 0 of it only, since those threads would all write (and race on) the same element;
- a ``vectorized`` loop of contiguous float32 accesses becomes OpenCL ``vloadN``/``vstoreN``
  (:mod:`.c_like_vector`); otherwise, and always in CUDA, it stays a scalar unrolled loop;
- ``local`` buffers are private arrays, ``shared`` ones ``__local``/``__shared__`` arrays;
- a reduction loop bound to threads is refused: GPU_PASSES rewrite it into per-thread partials and
  a shared-memory tree first (:mod:`autosched.lower.cross_thread`).

Example::

    prog = render_c_like(func, CUDA)
    prog.source, [(k.name, k.grid, k.block) for k in prog.kernels]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError
from ..lower.ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..lower.stmt_visit import walk_stmts
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, IterVar, Logical, Not, Select, Var, is_float
from ..te.tensor import walk
from .c_like_vector import vector_store

ITEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}
TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class Dialect:
    name: str
    kernel: str  # prefix of a kernel definition
    param: str  # a buffer parameter, from {t} (element type) and {n} (name)
    shared: str  # a shared array declaration
    helper: str  # prefix of a helper function
    barrier: str
    index: dict[str, str]  # thread tag -> expression
    types: dict[str, str]  # dtype -> C type
    math_suffix: dict[str, str]  # dtype -> suffix of libm names (CUDA: expf)
    preamble: str = ""


OPENCL = Dialect(
    name="opencl",
    kernel="__kernel void",
    param="__global {t}* restrict {n}",
    shared="__local {t} {n}[{size}];",
    helper="inline",
    barrier="barrier(CLK_LOCAL_MEM_FENCE);",
    index={t: f"(int)get_{'group' if t[0] == 'b' else 'local'}_id({'xyz'.index(t[-1])})" for t in TAGS},
    types={"float32": "float", "float64": "double", "int32": "int", "int64": "long", "bool": "uchar"},
    math_suffix={"float32": "", "float64": ""},
)
CUDA = Dialect(
    name="cuda",
    kernel='extern "C" __global__ void',
    param="{t}* __restrict__ {n}",
    shared="__shared__ {t} {n}[{size}];",
    helper="__device__ __forceinline__",
    barrier="__syncthreads();",
    index={t: f"(int){t}" for t in TAGS},
    types={
        "float32": "float",
        "float64": "double",
        "int32": "int",
        "int64": "long long",
        "bool": "unsigned char",
    },
    math_suffix={"float32": "f", "float64": ""},
)
DIALECTS = {"opencl": OPENCL, "cuda": CUDA}
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "erf": "erf",
         "pow": "pow", "floor": "floor", "ceil": "ceil"}  # fmt: skip


# Names a buffer or loop must not take: C keywords and the built-ins the kernels call (a local array
# named ``max`` would hide the function).
_RESERVED = frozenset(
    "auto bool break case char const continue default do double else enum extern float for goto if int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while half kernel global local constant private inline abs fabs min max fmin fmax exp log "
    "sqrt rsqrt tanh erf pow floor ceil barrier vload2 vload4 vload8 vload16 vstore2 vstore4 vstore8 "
    "vstore16 threadIdx blockIdx blockDim gridDim".split()
)


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a program: its name, the global buffers it takes (in order) and its launch shape."""

    name: str
    params: tuple[Buffer, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return math.prod(self.block)


@dataclass(frozen=True)
class DeviceProgram:
    """The rendered source; kernels run in order on ``params`` (the PrimFunc's) and ``temps``."""

    source: str
    kernels: tuple[KernelLaunch, ...]
    params: tuple[Buffer, ...]
    temps: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]  # the params some kernel writes
    dialect: str = ""

    def __str__(self) -> str:
        return self.source


def render_c_like(func: PrimFunc, dialect: Dialect) -> DeviceProgram:
    """``func`` as a :class:`DeviceProgram` in ``dialect`` (:data:`CUDA` or :data:`OPENCL`)."""
    temps: list[Buffer] = []
    body = func.body
    while isinstance(body, Allocate) and body.buffer.scope == "global":
        temps.append(body.buffer)
        body = body.body
    roots = body.stmts if isinstance(body, Seq) else (body,)
    r = _Renderer(func, dialect)
    kernels = [r.kernel(f"{_ident(func.name)}_k{i}", s, [*func.params, *temps]) for i, s in enumerate(roots)]
    head = [dialect.preamble]
    if dialect.name == "opencl" and r.uses_double:
        head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    head.extend(r.helpers[k] for k in sorted(r.helpers))
    source = "\n".join([*filter(None, head), *r.out]) + "\n"
    written = {id(x.buffer) for x in walk_stmts(func.body) if isinstance(x, Store)}
    outputs = tuple(p for p in func.params if id(p) in written)
    return DeviceProgram(source, tuple(kernels), tuple(func.params), tuple(temps), outputs, dialect.name)


def _parallel_to_groups(s: Stmt) -> For | None:
    """A CPU-style schedule's parallel loop, to run as work-groups of one item (blockIdx.x): the
    outermost one, in a kernel with no bound loop, reached through loops alone (a private buffer
    allocated above it would be one per group, not one shared). Left a plain loop, the whole kernel
    would run on one work-item: one core of PoCL's."""
    if any(isinstance(x, For) and x.kind == "thread_binding" for x in walk_stmts(s)):
        return None
    while isinstance(s, For):
        if s.kind == "parallel":
            reduce = isinstance(s.var, IterVar) and s.var.kind == "reduce"
            return None if reduce else s
        s = s.body
    return None


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"v_{s}"


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(x, Barrier) for x in walk_stmts(s))


@dataclass
class _Scope:
    """What encloses the statement being rendered."""

    guards: dict[str, str] = field(default_factory=dict)  # tag -> condition still to apply
    bound: frozenset[str] = frozenset()  # tags of enclosing bound loops
    private: frozenset[int] = frozenset()  # local buffers allocated outside the innermost bound loop


class _Renderer:
    def __init__(self, func: PrimFunc, d: Dialect):
        self.func, self.d = func, d
        self.par: For | None = None  # the kernel's parallel loop run as work-groups
        self.names: dict[int, str] = {}
        self.taken: set[str] = set(_RESERVED)
        self.helpers: dict[str, str] = {}
        self.out: list[str] = []
        self.uses_double = False

    def fail(self, msg: str) -> CompileError:
        return CompileError(f"{self.d.name}: {self.func.name}: {msg}")

    def name(self, obj: Var | Buffer) -> str:
        key = id(obj)
        if key not in self.names:
            base = _ident(obj.name)
            n, cand = 0, base
            while cand in self.taken:
                n += 1
                cand = f"{base}_{n}"
            self.taken.add(cand)
            self.names[key] = cand
        return self.names[key]

    def ctype(self, dtype: str) -> str:
        self.uses_double |= dtype == "float64"
        return self.d.types[dtype]

    # Kernels ----------------------------------------------------------------------------------------
    def kernel(self, name: str, s: Stmt, buffers: list[Buffer]) -> KernelLaunch:
        used = {id(x.buffer) for x in walk_stmts(s) if isinstance(x, Store)}
        for x in walk_stmts(s):
            for e in _stmt_exprs(x):
                used.update(id(n.buffer) for n in walk(e) if isinstance(n, Load))
        params = tuple(b for b in buffers if id(b) in used)
        self.dims = {t: 1 for t in TAGS}
        self.par = _parallel_to_groups(s)
        if self.par is not None:
            self.dims["blockIdx.x"] = self.par.extent
        shared: list[Buffer] = []
        for x in walk_stmts(s):
            if isinstance(x, For) and x.kind == "thread_binding" and x.thread_tag in TAGS:
                reduce = isinstance(x.var, IterVar) and x.var.kind == "reduce"  # a plain Var is no axis
                if reduce and x.thread_tag.startswith("threadIdx"):
                    raise self.fail(
                        f"reduction loop {x.var.name!r} is bound to {x.thread_tag}: threads would race on "
                        "its accumulator; run GPU_PASSES (lower_cross_thread_reductions) before rendering"
                    )
                self.dims[x.thread_tag] = max(self.dims[x.thread_tag], x.extent)
            elif isinstance(x, Allocate) and x.buffer.scope == "shared":
                shared.append(x.buffer)
        args = ", ".join(self.d.param.format(t=self.ctype(b.dtype), n=self.name(b)) for b in params)
        self.out.append(f"{self.d.kernel} {name}({args}) {{")
        for b in shared:
            self.out.append("  " + self.d.shared.format(t=self.ctype(b.dtype), n=self.name(b), size=b.size))
        self.stmt(s, _Scope(), 1)
        self.out.append("}")
        dims = self.dims
        grid = (dims["blockIdx.x"], dims["blockIdx.y"], dims["blockIdx.z"])
        block = (dims["threadIdx.x"], dims["threadIdx.y"], dims["threadIdx.z"])
        smem = sum(b.size * ITEM_BYTES[b.dtype] for b in shared)
        return KernelLaunch(name, params, grid, block, smem)

    # Statements -------------------------------------------------------------------------------------
    def emit(self, depth: int, line: str) -> None:
        self.out.append("  " * depth + line)

    def stmt(self, s: Stmt, sc: _Scope, depth: int) -> None:
        if sc.guards and not _has_barrier(s):
            self.emit(depth, f"if ({' && '.join(sc.guards.values())}) {{")
            self.stmt(s, _Scope({}, sc.bound, sc.private), depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, sc, depth)
        elif isinstance(s, For):
            self.loop(s, sc, depth)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "local":
                self.emit(depth, "{")
                self.emit(depth + 1, f"{self.ctype(b.dtype)} {self.name(b)}[{b.size}];")
                self.stmt(s.body, _Scope(sc.guards, sc.bound, sc.private | {id(b)}), depth + 1)
                self.emit(depth, "}")
            elif b.scope == "shared":
                self.stmt(s.body, sc, depth)
            else:
                raise self.fail(f"global buffer {b.name!r} allocated inside a kernel")
        elif isinstance(s, IfThenElse):
            if _has_barrier(s):
                raise self.fail("a barrier under a condition: some threads would skip it")
            self.emit(depth, f"if ({self.expr(s.cond)}) {{")
            self.stmt(s.then, sc, depth + 1)
            if s.otherwise is not None:
                self.emit(depth, "} else {")
                self.stmt(s.otherwise, sc, depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, Store):
            self.store(s, sc, depth)
        elif isinstance(s, Barrier):
            self.emit(depth, self.d.barrier)
        else:
            raise self.fail(f"no codegen for statement {type(s).__name__}")

    def loop(self, s: For, sc: _Scope, depth: int) -> None:
        v = self.name(s.var)
        if (s.kind == "thread_binding" and s.thread_tag in TAGS) or s is self.par:
            tag = "blockIdx.x" if s is self.par else s.thread_tag
            guards = dict(sc.guards)
            guards.pop(tag, None)  # an inner loop on the same tag re-partitions the threads
            if s.extent < self.dims[tag]:
                guards[tag] = f"{self.d.index[tag]} < {s.extent}"
            # Thread indices change the element a thread owns: its private buffers stay its own only
            # when allocated inside this loop.
            private = frozenset() if tag.startswith("threadIdx") else sc.private
            self.emit(depth, "{")
            self.emit(depth + 1, f"int {v} = {self.d.index[tag]};")
            self.stmt(s.body, _Scope(guards, sc.bound | {tag}, private), depth + 1)
            self.emit(depth, "}")
            return
        if s.thread_tag and s.thread_tag != "vthread":
            raise self.fail(f"unknown thread tag {s.thread_tag!r}")
        if s.extent == 1:
            self.emit(depth, f"{{ int {v} = 0;")
            self.stmt(s.body, sc, depth + 1)
            self.emit(depth, "}")
            return
        if s.kind == "vectorized" and isinstance(s.body, Store):
            line = vector_store(self, s, s.body)
            if line is not None:
                self.emit_store(s.body.buffer, line, sc, depth)
                return
        if s.kind in ("unrolled", "vectorized") or s.thread_tag == "vthread":
            self.emit(depth, "#pragma unroll")
        self.emit(depth, f"for (int {v} = 0; {v} < {s.extent}; ++{v}) {{")
        self.stmt(s.body, sc, depth + 1)
        self.emit(depth, "}")

    def store(self, s: Store, sc: _Scope, depth: int) -> None:
        b = s.buffer
        line = f"{self.name(b)}[{self.flat(b, s.indices)}] = {self.value(s.value, b.dtype)};"
        self.emit_store(b, line, sc, depth)

    def emit_store(self, b: Buffer, line: str, sc: _Scope, depth: int) -> None:
        if b.scope == "local":
            if id(b) not in sc.private and any(t.startswith("threadIdx") for t in sc.bound):
                raise self.fail(
                    f"local buffer {b.name!r} is written by loops bound to threads inside its allocation; "
                    "each thread would fill its own copy in part (use a shared stage)"
                )
            self.emit(depth, line)
            return
        # Threads (or blocks) that do not own this store would all perform it: only index 0 does.
        # (Shared memory is per block: there only the threads matter.)
        tags = [t for t in TAGS if self.dims[t] > 1 and t not in sc.bound]
        conds = [f"{self.d.index[t]} == 0" for t in tags if b.scope == "global" or t.startswith("threadIdx")]
        self.emit(depth, f"if ({' && '.join(conds)}) {line}" if conds else line)

    def value(self, e: Expr, dtype: str) -> str:
        text = self.expr(e)
        return f"({self.ctype(dtype)})({text})" if dtype == "bool" else text

    def flat(self, b: Buffer, indices: tuple[Expr, ...]) -> str:
        if len(indices) != len(b.shape):
            raise self.fail(f"buffer {b.name!r} of rank {len(b.shape)} indexed with {len(indices)} indices")
        text = ""
        for i, (idx, n) in enumerate(zip(indices, b.shape)):
            part = self.expr(idx)
            text = part if i == 0 else f"({text}) * {n} + {part}"
        return text or "0"

    # Expressions ------------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.const(e.value, e.dtype)
        if isinstance(e, Var):
            if id(e) not in self.names:
                raise self.fail(f"variable {e.name} is not bound by an enclosing loop")
            return self.names[id(e)]
        if isinstance(e, Load):
            text = f"{self.name(e.buffer)}[{self.flat(e.buffer, e.indices)}]"
            return f"({text} != 0)" if e.dtype == "bool" else text
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Compare):
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
        if isinstance(e, Logical):
            return f"({self.expr(e.a)} {'&&' if e.op == 'and' else '||'} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):  # C's ?: evaluates only the branch taken, as Select requires
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        if isinstance(e, Cast):
            return f"(({self.ctype(e.dtype) if e.dtype != 'bool' else 'bool'})({self.expr(e.value)}))"
        if isinstance(e, Call):
            return self.call(e)
        raise self.fail(f"no codegen for expression {type(e).__name__}")

    def const(self, value: Any, dtype: str) -> str:  # a Const's value: bool, int or float
        if dtype == "bool":
            return "true" if value else "false"
        if not is_float(dtype):
            v = int(value)
            if dtype == "int64" or not -(2**31) < v < 2**31 - 1:
                return f"{v}LL" if self.d.name == "cuda" else f"{v}L"
            return str(v)
        x = float(value)
        t = self.ctype(dtype)
        if math.isnan(x):
            return f"(({t})NAN)" if self.d.name == "opencl" else f"(({t})__int_as_float(0x7fc00000))"
        if math.isinf(x):
            inf = "INFINITY" if self.d.name == "opencl" else "__int_as_float(0x7f800000)"
            return f"(({t}){'-' if x < 0 else ''}{inf})"
        return repr(x) + ("f" if dtype == "float32" else "")

    def binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        t = e.dtype
        if e.op in ("+", "-", "*") or (e.op == "/" and is_float(t)):
            return f"({a} {e.op} {b})"
        if e.op in ("min", "max"):  # a NaN operand gives the other one, as the CPU codegen does
            cmp = "<" if e.op == "min" else ">"
            return self.helper(
                f"{e.op}_{t}", f"{self.ctype(t)} a, {self.ctype(t)} b", f"a {cmp} b ? a : b", t, a, b
            )
        if is_float(t):  # float // and % with floor semantics
            f = f"floor{self.d.math_suffix[t]}"
            if e.op == "//":
                return f"{f}({a} / {b})"
            return self.helper(
                f"fmod_{t}", f"{self.ctype(t)} a, {self.ctype(t)} b", f"a - {f}(a / b) * b", t, a, b
            )
        if e.op in ("//", "/"):
            body = "(a % b != 0 && ((a < 0) != (b < 0))) ? a / b - 1 : a / b"
            return self.helper(f"floordiv_{t}", f"{self.ctype(t)} a, {self.ctype(t)} b", body, t, a, b)
        if e.op == "%":
            body = "(a % b != 0 && ((a < 0) != (b < 0))) ? a % b + b : a % b"
            return self.helper(f"floormod_{t}", f"{self.ctype(t)} a, {self.ctype(t)} b", body, t, a, b)
        raise self.fail(f"unknown binary operator {e.op!r}")

    def helper(self, name: str, params: str, body: str, dtype: str, *args: str) -> str:
        if name not in self.helpers:
            self.helpers[name] = f"{self.d.helper} {self.ctype(dtype)} {name}({params}) {{ return {body}; }}"
        return f"{name}({', '.join(args)})"

    def call(self, e: Call) -> str:
        args = [self.expr(a) for a in e.args]
        t = e.dtype
        if not is_float(t):
            if e.name == "abs":
                return f"abs({args[0]})"
            raise self.fail(f"intrinsic {e.name} on {t}")
        sfx = self.d.math_suffix[t]
        if e.name == "abs":
            return f"fabs{sfx}({args[0]})"
        if e.name == "sigmoid":
            one = self.const(1.0, t)
            return self.helper(
                f"sigmoid_{t}", f"{self.ctype(t)} x", f"{one} / ({one} + exp{sfx}(-x))", t, args[0]
            )
        if e.name not in _MATH:
            raise self.fail(f"unknown intrinsic {e.name!r}")
        name = _MATH[e.name]
        if self.d.name == "cuda" and name == "rsqrt" and t == "float32":
            return f"rsqrtf({args[0]})"
        return f"{name}{sfx}({', '.join(args)})"


def _stmt_exprs(s: Stmt) -> list[Expr]:
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, IfThenElse):
        return [s.cond]
    return []
