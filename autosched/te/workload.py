"""The workload registry: operators that users write once, as functions whose defaults give the shapes.

Example::

    @autosched.workload
    def matmul(M=1024, N=1024, K=1024, dtype="float32"):
        ...
        return [A, B, C]                       # inputs first, then outputs

    inst = REGISTRY["matmul"].instantiate(M=64)
    inst.inputs, inst.outputs, inst.key, inst.flop_count()

An op file (``op.py``) holds one or more of these; :func:`load_op_file` runs it and returns them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import itertools
import math
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WorkloadError
from .expr import Binary, Call, Cast, Expr, Select
from .graph import topo_order
from .key import workload_key
from .tensor import ComputeOp, PlaceholderOp, Reduce, Tensor

__all__ = ["REGISTRY", "Workload", "WorkloadInstance", "load_op_file", "workload", "workload_key"]

REGISTRY: dict[str, Workload] = {}  # name -> workload; a later registration of a name replaces it
_collecting: list[list[Workload]] = []  # open load_op_file calls, innermost last
_module_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class WorkloadInstance:
    """A workload built with concrete arguments: its tensors, split into inputs and outputs."""

    name: str
    args: dict[str, Any]
    tensors: tuple[Tensor, ...]
    inputs: tuple[Tensor, ...] = field(init=False)
    outputs: tuple[Tensor, ...] = field(init=False)

    def __post_init__(self) -> None:
        n = sum(1 for _ in itertools.takewhile(lambda t: isinstance(t.op, PlaceholderOp), self.tensors))
        object.__setattr__(self, "inputs", self.tensors[:n])
        object.__setattr__(self, "outputs", self.tensors[n:])

    @functools.cached_property
    def key(self) -> str:
        """The structural key of the whole tensor list (so argument order counts too)."""
        return workload_key(self.tensors)

    def flop_count(self) -> int:
        """Arithmetic operations of one run: points (spatial x reduce) x ops per point, summed over computes.

        Index arithmetic and conditions are not counted; a select counts its costlier branch.
        Example: a matmul (M, N, K) gives ``M * N * K * 2`` (a multiply and the sum's add).
        """
        return count_flops(self.outputs)


def count_flops(outputs: Sequence[Tensor]) -> int:
    """Arithmetic operations of one run of the computes ``outputs`` depend on (see ``flop_count``)."""
    total = 0
    for op in topo_order(outputs):
        if isinstance(op, ComputeOp):
            points = math.prod(op.shape) * math.prod(a.extent for a in op.reduce_axis)
            total += points * _ops(op.body)
    return total


def _ops(e: Expr) -> int:
    if isinstance(e, Reduce):
        return _ops(e.source) + _ops(e.reducer.combined)
    if isinstance(e, (Binary, Call)):
        args = (e.a, e.b) if isinstance(e, Binary) else e.args
        return 1 + sum(_ops(a) for a in args)
    if isinstance(e, Select):
        return max(_ops(e.t), _ops(e.f))
    if isinstance(e, Cast):
        return _ops(e.value)
    return 0  # constants, variables, reads (their indices are address arithmetic), conditions


@dataclass(frozen=True, eq=False)
class Workload:
    """A registered operator: its function and the default arguments that give its shapes."""

    name: str
    function: Callable[..., Any]
    defaults: dict[str, Any]
    # Optional numpy implementation (inputs -> outputs) that tuning reports compare against.
    baseline: Callable[..., Any] | None = None

    @property
    def source_file(self) -> str:
        return inspect.getsourcefile(self.function) or self.function.__code__.co_filename

    def _where(self) -> str:
        return f"workload {self.name!r} (in {self.source_file})"

    def instantiate(self, **overrides: Any) -> WorkloadInstance:
        """Build the tensors with the defaults, some replaced. Example: ``wl.instantiate(M=64, N=64)``."""
        unknown = sorted(set(overrides) - set(self.defaults))
        if unknown:
            raise WorkloadError(
                f"{self._where()}: unknown argument(s) {', '.join(unknown)}; "
                f"valid: {', '.join(self.defaults)}"
            )
        args = {**self.defaults, **overrides}
        try:
            result = self.function(**args)
        except Exception as e:
            raise WorkloadError(f"{self._where()} raised {type(e).__name__}: {e} (args {args})") from e
        return WorkloadInstance(self.name, args, self._check_result(result))

    def _check_result(self, result: Any) -> tuple[Tensor, ...]:
        if not isinstance(result, (list, tuple)) or not all(isinstance(t, Tensor) for t in result):
            raise WorkloadError(
                f"{self._where()} must return a list of tensors, inputs first then outputs; "
                f"got {type(result).__name__} {result!r:.200}"
            )
        tensors = tuple(result)
        inst = WorkloadInstance(self.name, {}, tensors)
        if not inst.outputs:
            raise WorkloadError(f"{self._where()} returned no computed tensor (outputs come last)")
        late = [t.name for t in inst.outputs if isinstance(t.op, PlaceholderOp)]
        if late:
            raise WorkloadError(
                f"{self._where()}: placeholder(s) {', '.join(late)} come after a computed tensor; "
                "return the inputs (placeholders) first, then the outputs"
            )
        given = {id(t.op) for t in inst.inputs}
        missing = [
            op.name
            for op in topo_order(inst.outputs)
            if isinstance(op, PlaceholderOp) and id(op) not in given
        ]
        if missing:
            raise WorkloadError(
                f"{self._where()}: the outputs read placeholder(s) {', '.join(missing)} "
                "that are not among the returned tensors"
            )
        return tensors


def workload(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    numpy: Callable[..., Any] | None = None,
) -> Any:
    """Register ``fn`` as a workload; ``@workload`` or ``@workload(name="gemm", numpy=np.matmul)``.

    ``numpy``, when given, computes the outputs from the input arrays with numpy (OpenBLAS for
    matmul): tuning reports the tuned kernel's speed against it, measured in the same run.

    Every parameter needs a default (the shapes tuned by default). The returned wrapper is called like
    ``fn`` and returns its tensors; ``wrapper.workload`` is the registered :class:`Workload`.
    """
    if fn is None:
        return functools.partial(workload, name=name, numpy=numpy)
    wl = Workload(name or fn.__name__, fn, _defaults(fn), numpy)
    REGISTRY[wl.name] = wl
    for found in _collecting:
        found.append(wl)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    wrapper.workload = wl  # type: ignore[attr-defined]
    return wrapper


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    defaults = {}
    for p in inspect.signature(fn).parameters.values():
        where = f"workload {fn.__name__!r}: parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise WorkloadError(f"{where}: *args and **kwargs are not allowed; name every argument")
        if p.default is p.empty:
            raise WorkloadError(f"{where} needs a default value (the shape tuned by default)")
        defaults[p.name] = p.default
    return defaults


def load_op_file(path: str | Path) -> list[Workload]:
    """Run a user's op file and return the workloads it registers, in order of definition.

    Example: ``[matmul] = load_op_file("ops/matmul.py")``.
    """
    path = Path(path)
    if path.is_dir():
        raise WorkloadError(f"op file {path}: is a directory; pass a Python file with @autosched.workload")
    if not path.is_file():
        raise WorkloadError(f"op file {path}: not found")
    source = path.read_bytes()
    try:
        compile(source, str(path), "exec")
    except SyntaxError as e:
        raise WorkloadError(f"op file {path}, line {e.lineno}: syntax error: {e.msg}") from None
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"_autosched_op_{digest}_{next(_module_ids)}"  # unique: a file may be loaded twice
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a file path always gives a loader
    module = importlib.util.module_from_spec(spec)
    found: list[Workload] = []
    _collecting.append(found)
    sys.modules[module_name] = module  # dataclasses and pickling inside the op file look it up here
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        line = _line_in(e, path)
        raise WorkloadError(f"op file {path}{line}: importing raised {type(e).__name__}: {e}") from e
    finally:
        _collecting.remove(found)
    if not found:
        raise WorkloadError(
            f"op file {path}: defines no workloads (decorate a function with @autosched.workload)"
        )
    return list({wl.name: wl for wl in found}.values())  # a name defined twice: the last one


def _line_in(e: BaseException, path: Path) -> str:
    """``, line N`` for the deepest frame of the traceback that is in the op file."""
    here = path.resolve()
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == here]
    return f", line {lines[-1]}" if lines else ""
