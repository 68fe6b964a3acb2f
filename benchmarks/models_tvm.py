"""TVM MetaSchedule on a whole ONNX model through Relax: the third contender of ``models.py --tvm``.

The ONNX file is imported by TVM's own Relax frontend (weights bound as constants), tuned by
``relax.pipeline.static_shape_tuning_pipeline`` (MetaSchedule's task extraction, gradient task
scheduler and evolutionary search, the database in a work directory of its own) and compiled for the
Relax VM. Budgets continue: tuning to 500 after 200 spends 300 more trials on the same database, as
autosched's budgets continue its log; what MetaSchedule prints goes to ``tuning.txt`` there. The
compiled VM is checked against onnxruntime on the race's inputs before it is timed; a TVM failure is
reported in its column and the race goes on without it. A model TVM's importer rejects as exported (a
transformers BERT's mask-building shape chains) is imported from onnxruntime's constant-folded copy
of it (basic level: standard ONNX ops), and the table says so.

MetaSchedule spends its first trials round-robin, 64 per task (its ``num_trials_per_iter``), so at a
budget below 64 x tasks some tasks have no tuned schedule at all and run TVM's unscheduled loops:
its column at 200 trials is not a tuned model for ResNet-18's 18 tasks. Its tuning wall time counts
MetaSchedule's task extraction, not the final compile (as autosched's counts its tuning only).

Needs ``pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1`` (and xgboost, psutil,
cloudpickle, tornado for MetaSchedule); ``TVM_NUM_THREADS`` is set to the race's threads before TVM
is first imported.

MetaSchedule builds candidates in worker processes, a fresh pool for every batch, and its default build
first imports TVM's tensor intrinsics (thousands of TVMScript functions parsed). Where that takes
longer than the builder's 30 s timeout (50 s on an Emerald Rapids core), every build is killed and no
trial finishes. Its builders here build with :func:`tvm_build`, the same build without that import
(vs_tvm.py's operators too).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


def tvm_installed() -> bool:
    try:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401
    except ImportError:
        return False
    return True


def _host_target(threads: int) -> Any:
    import llvmlite.binding as llvm
    import tvm

    return tvm.target.Target({"kind": "llvm", "mcpu": llvm.get_host_cpu_name(), "num-cores": threads})


def tvm_build(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's ``default_build`` without its ``import tvm.s_tir.tensor_intrin``, which registers
    tensorize intrinsics that no float32 CPU schedule uses (see the module docstring)."""
    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def send_by_value() -> None:
    """Let MetaSchedule's build workers receive :func:`tvm_build`: they cannot import this directory's
    files, so its functions are pickled by value."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


@contextlib.contextmanager
def _builds_without_intrinsics() -> Iterator[None]:
    """MetaSchedule's local builders made while this is open build with :func:`tvm_build` (the Relax
    pipeline makes its own builder and takes none)."""
    from tvm.s_tir.meta_schedule.builder import LocalBuilder

    send_by_value()
    init = LocalBuilder.__init__

    def with_build(self, *args, f_build=None, **kwargs):
        init(self, *args, f_build=f_build or tvm_build, **kwargs)

    LocalBuilder.__init__ = with_build
    try:
        yield
    finally:
        LocalBuilder.__init__ = init


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Standard output and error, C++'s too, into ``path``: MetaSchedule prints its tables as it tunes."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _constant_folded(src: Path, dst: Path) -> Path:
    """``src`` through onnxruntime's basic graph optimizations (constant folding, shapes of static inputs
    computed, redundant nodes removed: standard ONNX ops only), written to ``dst``. A transformers export
    builds its attention mask with ``Shape`` / ``ConstantOfShape`` / ``Expand`` chains that TVM's Relax
    importer rejects (BERT: "broadcast_to expects the input shape to have the number of ndim at least as
    the input tensor's"); folded for the static input shapes, the same model imports (users run onnxsim
    for this)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return dst


class RelaxModel:
    """One ONNX model under MetaSchedule: ``tune_to(budget)``, then ``max_rel_err`` and ``runner``."""

    def __init__(self, onnx_path: str | Path, work_dir: str | Path, threads: int):
        os.environ.setdefault("TVM_NUM_THREADS", str(threads))
        import onnx
        from tvm.relax.frontend.onnx import from_onnx

        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.target = _host_target(threads)
        model = onnx.load(str(onnx_path))
        self.note: str | None = None  # how the model was imported, when not as it is
        try:
            self.module = from_onnx(model, keep_params_in_input=False)
        except Exception as e:  # TVM's importer raises what it likes
            model = onnx.load(str(_constant_folded(Path(onnx_path), self.work_dir / "folded.onnx")))
            self.module = from_onnx(model, keep_params_in_input=False)
            why = (str(e).splitlines() or [""])[0][:80]
            self.note = f"TVM imported onnxruntime's constant-folded copy (the export failed: {why})"
        weights = {w.name for w in model.graph.initializer}  # bound as constants, not arguments of main
        self.input_names = [i.name for i in model.graph.input if i.name not in weights]
        self.trials = 0
        self.wall_s = 0.0
        self.vm: Any = None

    def tune_to(self, budget: int) -> None:
        """Spend ``budget - trials`` more MetaSchedule trials, then compile the database's bests."""
        import tvm
        from tvm import relax

        t0 = time.perf_counter()
        with _output_to(self.work_dir / "tuning.txt"), _builds_without_intrinsics():
            mod = relax.pipeline.static_shape_tuning_pipeline(
                total_trials=max(0, budget - self.trials), target=self.target, work_dir=str(self.work_dir)
            )(self.module)
        self.wall_s += time.perf_counter() - t0
        self.trials = max(self.trials, budget)
        self.vm = relax.VirtualMachine(tvm.compile(mod, target=self.target), tvm.cpu())

    def runner(self, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
        """One call of the compiled model on ``inputs`` (converted once, as the race times calls only)."""
        import tvm

        args = [tvm.runtime.tensor(np.ascontiguousarray(inputs[n]), tvm.cpu()) for n in self.input_names]
        main = self.vm["main"]
        return lambda: main(*args)

    def max_rel_err(self, inputs: dict[str, np.ndarray], expected: list[np.ndarray]) -> float:
        """The largest error of the compiled model's outputs on ``inputs``, relative to each expected output's
        largest magnitude."""
        import tvm

        got = self.runner(inputs)()
        outs = [got] if isinstance(got, tvm.runtime.Tensor) else list(got)  # one output, or a tuple of them
        errs = []
        for g, e in zip(outs, expected, strict=True):
            value = g.numpy()
            if value.shape != e.shape:
                raise ValueError(f"TVM's output has shape {value.shape}, onnxruntime's {e.shape}")
            errs.append(float(np.abs(value - e).max() / max(float(np.abs(e).max()), 1e-30)))
        return max(errs)
