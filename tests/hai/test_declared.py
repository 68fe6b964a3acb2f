"""The adapters declare what they are; nothing outside hai/ and codegen/ names one (issue 13)."""

import re
from pathlib import Path

import pytest

import autosched
from autosched import te
from autosched.errors import CompileError, RunError, TargetError
from autosched.hai import registry
from autosched.hai.spec import AdapterSpec
from autosched.lower.pipeline import GPU_PASSES, PASSES, lower, passes_for
from autosched.search_space.schedule import create_schedule
from autosched.target import parse_target

PACKAGE = Path(autosched.__file__).parent
ALLOWED = ("hai", "codegen")


def _adapter_name_uses(text: str, names: list[str]) -> list[str]:
    """Comparisons with an adapter name, dict keys named after one, and imports of adapter modules."""
    alt = "|".join(re.escape(n) for n in names)
    quoted = rf"""["'](?:{alt})["']"""
    patterns = [
        rf"(?:==|!=)\s*{quoted}",
        rf"{quoted}\s*(?:==|!=)",
        rf"\bin\s*[\(\[{{][^)\]}}]*{quoted}",
        rf"{quoted}\s*:\s*\S",
        r"hai\.(?:llvm_cpu|opencl|cuda|null)\b|from\s+\.+(?:hai\.)?(?:llvm_cpu|opencl|cuda|null)\s+import",
    ]
    return [m.group(0) for p in patterns for m in re.finditer(p, text)]


def test_no_file_outside_hai_and_codegen_names_an_adapter():
    names = list(registry.BUILTIN)
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] in ALLOWED:
            continue
        found += [
            f"{path.relative_to(PACKAGE)}: {hit}" for hit in _adapter_name_uses(path.read_text(), names)
        ]
    assert found == []


def test_the_grep_finds_what_it_looks_for():
    names = ["llvm-cpu", "opencl"]
    assert _adapter_name_uses('if t.kind == "opencl":', names) == ['== "opencl"']
    assert _adapter_name_uses("if kind in ('opencl', 'cuda'):", names)
    assert _adapter_name_uses('label = {"llvm-cpu": "LLVM IR"}', names)
    assert _adapter_name_uses("from ..hai.llvm_cpu import check_cpu_options", names)
    assert not _adapter_name_uses('parser.add_argument("--target", default="llvm-cpu")', names)
    assert not _adapter_name_uses('"""f = build(s, args, "opencl")"""', names)


def test_parse_target_validates_against_the_declarations():
    assert str(parse_target("llvm -mcpu=haswell")) == "llvm-cpu -mcpu=haswell"  # an alias
    with pytest.raises(TargetError, match="unknown option 'arch' for opencl; known: device"):
        parse_target("opencl -arch=sm_90")
    with pytest.raises(TargetError, match=r"unknown target kind 'tpu'.*expected one of: llvm-cpu, opencl"):
        parse_target("tpu")
    with pytest.raises(TargetError, match="-dialect=metal: the null device renders one of opencl, cuda"):
        parse_target("null -dialect=metal")


def test_every_builtin_adapter_declares_itself():
    for kind in registry.BUILTIN:
        spec = registry.spec_of(kind)
        assert isinstance(spec, AdapterSpec) and spec.kind == kind
    assert registry.spec_of("llvm-cpu").can_export and registry.spec_of("llvm-cpu").style == "cpu"
    assert {registry.spec_of(k).style for k in ("opencl", "cuda", "null")} == {"gpu"}
    with pytest.raises(TargetError, match="style 'fpga' is not one of cpu, gpu"):
        AdapterSpec("mychip", style="fpga")


def test_lower_picks_the_passes_by_the_targets_style():
    assert passes_for("cpu") == PASSES and passes_for("gpu") == [*PASSES, *GPU_PASSES]
    x = te.placeholder((4, 16), name="x")
    k = te.reduce_axis((0, 16), name="k")
    out = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="out")
    s = create_schedule(out)
    s[out].bind(out.op.axis[0], "blockIdx.x")
    s[out].bind(k, "threadIdx.x")  # a reduction over threads: GPU_PASSES make it a shared-memory tree
    null = registry.get_adapter("null")
    with pytest.raises(CompileError, match="run GPU_PASSES"):
        null.render(lower(s, [x, out], "r"))  # lowered for no target: the CPU-style passes only
    # the adapter only renders: lower(target=...) ran the GPU passes its declared style asks for
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in null.render(lower(s, [x, out], "r", target="null")).source


def test_a_spec_that_does_not_match_its_kind_is_refused(monkeypatch):
    monkeypatch.setitem(registry.ADAPTERS, "mychip", "autosched.hai.null:NullAdapter")
    with pytest.raises(TargetError, match=r"must declare spec = AdapterSpec\('mychip'"):
        parse_target("mychip")
    monkeypatch.setitem(registry.ADAPTERS, "broken", "no_such_module_here:Adapter")
    with pytest.raises(
        TargetError, match="kind 'broken': its adapter no_such_module_here:Adapter cannot be loaded"
    ):
        parse_target("broken")
    assert str(parse_target("llvm-cpu")) == "llvm-cpu"  # one broken adapter spoils only its own kind


def test_export_needs_an_adapter_that_emits_objects():
    from autosched.runtime.export import ExportError, export_library

    with pytest.raises(ExportError, match="cannot emit object files; libraries need one of: llvm-cpu"):
        export_library([object()], "/nonexistent/lib", target="null")


def test_a_compile_only_target_is_not_tuned(tmp_path):
    from autosched.te.workload import WorkloadInstance
    from autosched.topi.workloads import make_matmul
    from autosched.tune import OptionError, TuneOptions, Tuner

    inst = WorkloadInstance("matmul", {}, tuple(make_matmul(M=8, N=8, K=8)))
    with pytest.raises(OptionError, match=r"target null compiles only.*autosched.hai.conformance"):
        Tuner([inst], "null", tmp_path / "n.jsonl", TuneOptions(trials=1, baseline=False))


def test_the_null_device_says_it_only_compiles():
    null = registry.get_adapter("null -dialect=cuda")
    assert "compile-only" in null.info().extra["note"] and not null.spec.can_run
    line = next(x for x in registry.list_devices() if x.startswith("null"))
    assert "compile-only: launch does nothing, time returns zeros" in line
    x = te.placeholder((64,), name="x")
    y = te.compute((64,), lambda i: x[i] * 2.0, name="y")
    s = create_schedule(y)
    s[y].bind(y.op.axis[0], "threadIdx.x")
    kernel = null.compile(lower(s, [x, y], "double", target="null -dialect=cuda"))
    assert "__global__" in kernel.source  # CUDA C, rendered and checked without a GPU
    assert null.time(kernel, [None, None], repeat=3) == [0.0, 0.0, 0.0]
    with pytest.raises(RunError, match="expected 2 arguments, got 1"):
        null.launch(kernel, [None])
