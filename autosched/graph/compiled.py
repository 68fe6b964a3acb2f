"""A compiled model: every task's kernel, run in plan order on one arena of intermediates.

``autosched.compile_model(graph_or_onnx)`` builds the kernels in memory: each task on its best record
of the log for this chip, or on the default schedule (one warning counts those). A model loaded from
a built directory (``autosched.load(DIR)``) is the same :class:`CompiledModel` over the library's
functions, so both run the same plan the same way.

Example::

    model = autosched.compile_model("resnet18.onnx")
    outputs = model.run({"input": x})              # {"output": array}
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AutoschedError
from ..measure.runner import aligned_empty
from ..runtime.arrays import ArgumentError, ArgumentTypeError, as_numpy
from .ir import Graph
from .memory import ALIGNMENT

Kernel = Callable[..., Any]  # takes the task's arrays: inputs, then the output it fills


class ModelInputError(AutoschedError):
    """Inputs that do not fit the model: a missing or unknown name, a wrong shape or dtype."""


class CompiledModel:
    """A model ready to run: ``model.run({name: array}) -> {name: array}``."""

    def __init__(
        self,
        plan: dict[str, Any],
        weights: Sequence[np.ndarray],
        kernels: Sequence[Kernel],
        sources: Sequence[str],
        *,
        manifest: dict[str, Any] | None = None,
        library: Any = None,
    ):
        self.plan = plan
        self.name: str = plan["graph"]
        self._values = plan["values"]
        # Cache-line aligned, as the runner measured the kernels: numpy's large arrays start 16 bytes
        # past a page, so every vector load of such a weight spanned two lines (BERT, one thread:
        # 210 ms -> 204 ms).
        self._weights = {vid: _aligned(w) for vid, w in zip(plan["weights"], weights, strict=True)}
        self._kernels = list(kernels)
        self.sources = list(sources)  # per task: "log" (a tuned record) or "default"
        self.manifest = manifest  # a loaded model's manifest.json
        self.library = library  # a loaded model's kernel library (keeps it mapped)
        # The direct path (see run): each step's C function and value ids, where every task has one.
        entries = [_c_entry(k) for k in self._kernels]
        self._calls: list[tuple[Any, tuple[int, ...]]] | None = None
        if all(e is not None for e in entries):
            self._calls = [(entries[s["task"]], tuple(s["args"])) for s in plan["steps"]]
        self._checked = False  # one run through the checked calls has passed
        self._fresh = [
            (vid, v["shape"], v["dtype"]) for vid, v in enumerate(self._values) if v["kind"] == "output"
        ]
        self._free: list[_Arena] = []  # arenas not in use by a run, kept: no allocation per run

    @property
    def inputs(self) -> list[dict[str, Any]]:
        """``[{"name", "shape", "dtype"}]`` in the graph's order."""
        return [{"name": i["name"], "shape": i["shape"], "dtype": i["dtype"]} for i in self.plan["inputs"]]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self.plan["outputs"]]

    @property
    def memory(self) -> dict[str, int]:
        """``arena_bytes``, ``peak_live_bytes`` and ``total_bytes`` of the intermediates."""
        return dict(self.plan["memory"])

    def __repr__(self) -> str:
        return (
            f"<autosched model {self.name!r}: {len(self.plan['tasks'])} tasks, {len(self.plan['steps'])} "
            f"steps, inputs {', '.join(i['name'] for i in self.plan['inputs'])}>"
        )

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the model; ``inputs`` maps each input name to a numpy array (or anything with DLPack)."""
        arrays = self._check_inputs(inputs)
        slot = self._free.pop() if self._free else self._new_arena()  # one per concurrent run
        try:
            if self._calls is not None and self._checked:
                self._run_direct(arrays, slot)
            else:
                for step in self.plan["steps"]:
                    args = [self._array(vid, arrays, slot.arena) for vid in step["args"]]
                    self._kernels[step["task"]](*args)
                self._checked = True
            outputs = {}
            for out in self.plan["outputs"]:
                value = self._array(out["value"], arrays, slot.arena)
                if self._values[out["value"]]["kind"] != "output" or out["name"] in outputs:
                    value = value.copy()  # never hand out an input, a weight or one array twice
                outputs[out["name"]] = value.astype(out["dtype"], copy=False).reshape(out["shape"])
        finally:
            self._free.append(slot)
        return outputs

    def _run_direct(self, arrays: dict[int, np.ndarray], slot: _Arena) -> None:
        """Every step's C function on addresses. The checked run before proved each step's arguments
        fit its kernel; the same plan binds the same shapes every run, and the inputs are checked. The
        checks and views cost ~25 us a call warm, ~90 us between large kernels (BERT: 100 calls)."""
        ptrs = list(slot.pointers)  # the weights' and intermediates' addresses
        for vid, a in arrays.items():
            ptrs[vid] = a.ctypes.data
        for vid, shape, dtype in self._fresh:
            arrays[vid] = a = np.empty(shape, dtype)
            ptrs[vid] = a.ctypes.data
        for entry, args in self._calls or ():
            entry(*[ptrs[v] for v in args])

    def _new_arena(self) -> _Arena:
        arena = aligned_empty((self.plan["memory"]["arena_bytes"],), np.uint8, ALIGNMENT)
        base = arena.ctypes.data
        ptrs = [0] * len(self._values)
        for vid, v in enumerate(self._values):
            if v["kind"] == "weight":
                ptrs[vid] = self._weights[vid].ctypes.data
            elif v["kind"] == "intermediate":
                ptrs[vid] = base + v["offset"]
        return _Arena(arena, tuple(ptrs))

    __call__ = run

    def bound_steps(self, inputs: Mapping[str, Any]) -> list[tuple[int, Callable[[], Any]]]:
        """``(task, call)`` per step in plan order: ``call()`` runs that step's kernel on buffers of its
        own (an arena, these inputs), so a step can be timed in place (``graph.task_race.in_model``)."""
        self.run(inputs)  # one checked run first, as the direct path needs
        arrays = self._check_inputs(inputs)
        slot = self._new_arena()
        bound: list[tuple[int, Callable[[], Any]]] = []
        for step in self.plan["steps"]:
            args = [self._array(vid, arrays, slot.arena) for vid in step["args"]]
            bound.append((step["task"], _bind(self._kernels[step["task"]], args, slot)))
        return bound

    def _array(self, vid: int, arrays: dict[int, np.ndarray], arena: np.ndarray) -> np.ndarray:
        hit = arrays.get(vid)
        if hit is not None:
            return hit
        v = self._values[vid]
        kind = v["kind"]
        if kind == "weight":
            return self._weights[vid]
        if kind == "output":
            arrays[vid] = np.empty(v["shape"], v["dtype"])
        else:  # an intermediate: a view of the arena at its planned offset
            dtype = np.dtype(v["dtype"])
            n = int(np.prod(v["shape"], dtype=np.int64))
            offset = v["offset"]
            arrays[vid] = arena[offset : offset + n * dtype.itemsize].view(dtype).reshape(v["shape"])
        return arrays[vid]

    def _check_inputs(self, inputs: Mapping[str, Any]) -> dict[int, np.ndarray]:
        if not isinstance(inputs, Mapping):
            raise ModelInputError(
                f"model {self.name!r}: run() takes a dict of input name -> array, got {type(inputs).__name__}"
            )
        expected = {i["name"]: i for i in self.plan["inputs"]}
        unknown = sorted(set(inputs) - set(expected))
        missing = [n for n in expected if n not in inputs]
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f"unknown input(s) {', '.join(map(repr, unknown))}")
            if missing:
                parts.append(f"missing input(s) {', '.join(map(repr, missing))}")
            raise ModelInputError(
                f"model {self.name!r}: {'; '.join(parts)}. It takes: "
                + ", ".join(f"{n} {i['dtype']}{i['shape']}" for n, i in expected.items())
            )
        arrays: dict[int, np.ndarray] = {}
        for name, spec in expected.items():
            label = f"model {self.name!r}: input {name!r}"
            try:
                a = as_numpy(label, inputs[name])  # DLPack on the CPU only
            except ArgumentTypeError:
                raise ModelInputError(
                    f"{label} must be a numpy array or support DLPack, got {type(inputs[name]).__name__}"
                ) from None
            except ArgumentError as e:
                raise ModelInputError(str(e)) from None
            if a.dtype != np.dtype(spec["dtype"]) or list(a.shape) != list(spec["shape"]):
                raise ModelInputError(
                    f"model {self.name!r}: input {name!r} expects {spec['dtype']}{spec['shape']}, "
                    f"got {a.dtype}{list(a.shape)}"
                )
            held = self._values[spec["value"]]  # bool inputs are held as int32, scalars as (1,)
            arrays[spec["value"]] = np.ascontiguousarray(a, dtype=held["dtype"]).reshape(held["shape"])
        return arrays


@dataclass(frozen=True)
class _Arena:
    arena: np.ndarray
    pointers: tuple[int, ...]  # per value id: a weight's or an intermediate's address, else 0


def _c_entry(kernel: Kernel) -> Any:
    """The kernel's C function on one address per argument, where it is a host kernel that does
    nothing else per call (no thread count to set); else None, and the model keeps the checked calls."""
    from ..build import BuiltFunction
    from ..measure.isolated import IsolatedFunction
    from ..runtime.load import LibraryFunction

    if isinstance(kernel, IsolatedFunction) and kernel._set_threads is None:
        return kernel.kernel.cfunc
    if isinstance(kernel, LibraryFunction):
        return kernel._cfunc  # as report/profile.py times it
    if not isinstance(kernel, BuiltFunction):
        return None
    target = getattr(kernel.adapter, "target", None)
    if target is None or target.get("num-threads"):
        return None
    return getattr(kernel.kernel, "cfunc", None)  # a host adapter's kernel (LLVMKernel) has one


def _bind(kernel: Kernel, args: list[np.ndarray], keep: Any) -> Callable[[], Any]:
    entry = _c_entry(kernel)
    if entry is None:
        return lambda: kernel(*args)
    ptrs = [a.ctypes.data for a in args]

    def call(_held: Any = (keep, args)) -> None:  # holds what the addresses point into
        entry(*ptrs)

    return call


def _aligned(w: np.ndarray) -> np.ndarray:
    if w.ctypes.data % ALIGNMENT == 0 and w.flags.c_contiguous:
        return w
    out = aligned_empty(w.shape, w.dtype, ALIGNMENT)
    out[...] = w
    return out


def as_graph(
    model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None, *, winograd: bool = True
) -> Graph:
    """A :class:`Graph`, or an ONNX model (path or ModelProto) through the ONNX frontend, with its conv
    weights stored output-channel last (:func:`.weight_layout.channels_last_weights`), its GEMM
    weights in column panels (:func:`.gemm_layout.panel_weights`), a CNN's activations in channel
    blocks (:func:`.channel_blocks.blocked_channels`) and its 3x3 stride-1 convs by Winograd's
    F(2x2, 3x3) (:func:`.winograd.winograd_convs`, unless ``winograd`` is false): done once here, so
    that tuning, compiling and exporting see the same tasks; idempotent."""
    from .channel_blocks import blocked_channels
    from .gemm_layout import panel_weights
    from .weight_layout import channels_last_weights
    from .winograd import winograd_convs

    graph = model if isinstance(model, Graph) else _import(model, input_shapes)
    graph = blocked_channels(panel_weights(channels_last_weights(graph)))
    return winograd_convs(graph) if winograd else graph


def _import(model: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Graph:
    try:
        from ..frontend.onnx import from_onnx
    except ImportError as e:
        raise AutoschedError(
            f"compile_model: {model!r:.80} is not a Graph, and the ONNX frontend cannot be imported ({e}); "
            "install the [onnx] extra"
        ) from e
    if isinstance(model, (str, os.PathLike)):
        model = Path(model)
    if input_shapes:
        return from_onnx(model, input_shapes=dict(input_shapes))
    return from_onnx(model)


def warn_untuned(names: Sequence[str], total: int, log: Any) -> None:
    """The one warning for tasks without a tuned record (they run on the default schedule)."""
    if not names:
        return
    where = f"in {log}" if log is not None else "(no log given)"
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    warnings.warn(
        f"{len(names)} of {total} tasks have no tuned record for this chip {where} and use the default "
        f"schedule: {shown}. Tune them with `autosched tune` for speed.",
        stacklevel=3,
    )


def compile_model(
    model: Any,
    target: str = "llvm-cpu",
    log: str | os.PathLike[str] | None = None,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> CompiledModel:
    """Compile a model in memory: a :class:`Graph`, an ``.onnx`` path or an ONNX ``ModelProto``.

    Example: ``model = autosched.compile_model("m.onnx", log="tuning_logs/m.jsonl"); model.run({...})``.
    """
    from ..build import build
    from ..hai.registry import get_adapter
    from ..measure.isolated import build_isolated, compile_isolated, render_source_job
    from ..records.record import fingerprint_of
    from ..runtime.export import choose_schedules
    from ..search_space.schedule import replay
    from ..target import parse_target
    from .plan import build_plan, used_weights
    from .tasks import extract_tasks

    if log is not None and not Path(log).is_file():
        raise AutoschedError(f"compile_model: tuning log {log} not found")
    graph = as_graph(model, input_shapes)
    tg = extract_tasks(graph)
    plan = build_plan(tg)
    t = parse_target(target)
    adapter = get_adapter(t)
    chip = adapter.info()
    chosen = choose_schedules(
        [task.instance for task in tg.tasks],
        None if log is None else Path(log),
        fingerprint_of(t, chip),
        target=adapter,
        cores=chip.cores,
        allow_default=True,
    )
    warn_untuned([fn.name for fn in chosen if fn.record is None], len(chosen), log)
    # A logged record is untrusted: compiled in a worker with a time and memory limit where the target
    # emits objects (issue 19); where it does not (OpenCL, CUDA: the kernel lives in this process), the
    # record is first lowered and rendered in that worker, where a trace that would hang the code
    # generator stops, then built here. Default schedules are ours and compile here.
    isolate = adapter.spec.can_export
    kernels: list[Any] = []  # IsolatedFunction or BuiltFunction: both callable on checked arrays
    for fn in chosen:
        if fn.record is not None and isolate:
            kernels.append(build_isolated(fn.instance.tensors, fn.trace, t, fn.name))
            continue
        if fn.record is not None:
            n_in = len(fn.instance.inputs)
            compile_isolated(fn.instance.tensors, n_in, str(t), fn.trace, fn.name, build_fn=render_source_job)
        kernels.append(build(replay(list(fn.instance.outputs), fn.trace), fn.instance.tensors, t, fn.name))
    weights = [graph.weights[op] for op in used_weights(graph)]
    return CompiledModel(plan, weights, kernels, [fn.source for fn in chosen])
