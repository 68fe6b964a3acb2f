"""Chip files: a chip described as data (JSON), validated field by field, the input of the time model.

A chip file names its cores, vector width, FMA units and vector registers per core, clock, FMA latency,
cache levels (size, line, bandwidth per core), memory bandwidth and the cost of starting a parallel
region, and optionally load and store ports, store forwarding and what an AVX masked store costs
(fields added later are written only when set, so older files keep their content hash). A GPU-like
chip (``"kind": "gpu"``) adds a ``"gpu"`` section (SMs, warp size, threads, registers and shared
memory per SM). ``"source"`` names the public figures the numbers come from.
Every error names the file and the field. Seven chips ship in ``autosched/sim/chips/``; a shipped one
is named by its file stem (``sim -chip=avx2-desktop``).

Example::

    chip = load_chip("rocketlake")            # or a path: load_chip("chips/mychip.json")
    chip.peak_gflops_core                      # clock x lanes x 2 x FMA units
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TargetError

CHIP_FORMAT = "autosched-chip"
CHIP_VERSION = 1
CHIPS_DIR = Path(__file__).resolve().parent / "chips"


class ChipFileError(TargetError):
    """A chip file that is missing, unreadable or has a field out of range; the message names both."""


@dataclass(frozen=True)
class CacheLevel:
    level: int
    size_bytes: int
    line_bytes: int
    bandwidth_gbs: float  # per core (for a shared level, what one core can draw from it)
    shared: bool = False  # one cache for all cores (its size is split among the active ones)
    ways: int = 8  # associativity: lines a power-of-two stride can keep in the few sets it maps to


@dataclass(frozen=True)
class GPUFacts:
    sms: int
    warp_size: int
    max_threads_per_sm: int
    registers_per_sm: int
    shared_memory_per_sm_bytes: int
    max_threads_per_block: int = 1024


@dataclass(frozen=True)
class ChipSpec:
    """The facts of one chip file (see the module docstring); ``sha`` identifies its content."""

    name: str
    kind: str  # "cpu" | "gpu"
    isa: str  # "x86-64", "aarch64", "ptx"
    cores: int
    simd_bits: int
    fma_units: int
    vector_registers: int
    clock_ghz: float
    fma_latency_cycles: int
    caches: tuple[CacheLevel, ...]
    memory_bandwidth_gbs: float
    parallel_overhead_us: float
    source: str
    llvm_cpu: str = ""  # the LLVM cpu name of this chip, when LLVM has one
    features: tuple[str, ...] = ()
    load_ports: int = 2
    store_ports: int = 1
    store_forward_cycles: int = 5  # a value stored then loaded again: the latency it adds to a chain
    single_core_memory_bandwidth_gbs: float = 0.0  # 0: the whole memory bandwidth
    # store-unit cycles of one AVX masked store (vmaskmovps; LLVM stores a pool's max accumulator so, the
    # lanes that grew): unset, a plain store's 1; 13 measured on Zen 3, where it is microcoded
    masked_store_cycles: float = 1.0
    gpu: GPUFacts | None = None
    path: str = ""
    sha: str = field(default="", compare=False)

    @property
    def lanes(self) -> int:
        """fp32 lanes of one vector register."""
        return max(1, self.simd_bits // 32)

    @property
    def peak_gflops_core(self) -> float:
        return self.clock_ghz * self.lanes * 2 * self.fma_units

    @property
    def peak_gflops(self) -> float:
        return self.peak_gflops_core * self.cores

    def to_json(self) -> dict[str, Any]:
        """The chip file's content (what :func:`write_chip` writes)."""
        out: dict[str, Any] = {"format": CHIP_FORMAT, "version": CHIP_VERSION}
        for k in _FIELDS:
            v = getattr(self, k)
            if k == "caches":
                v = [c.__dict__.copy() for c in v]
            elif k == "features":
                v = list(v)
            elif k in _LATER and v == _LATER[k]:
                continue  # unset: the content, and so the sha, of files written before it stay as they were
            out[k] = v
        if self.gpu is not None:
            out["gpu"] = self.gpu.__dict__.copy()
        return out


_FIELDS = ("name", "kind", "isa", "llvm_cpu", "features", "cores", "simd_bits", "fma_units",
           "vector_registers", "clock_ghz", "fma_latency_cycles", "load_ports", "store_ports",
           "store_forward_cycles", "caches", "memory_bandwidth_gbs", "single_core_memory_bandwidth_gbs",
           "parallel_overhead_us", "masked_store_cycles", "source")  # fmt: skip
# optional fields added since version 1, with their defaults: written only when set
_LATER = {"masked_store_cycles": 1.0}
_REQUIRED = ("name", "kind", "isa", "cores", "simd_bits", "fma_units", "vector_registers", "clock_ghz",
             "fma_latency_cycles", "caches", "memory_bandwidth_gbs", "parallel_overhead_us",
             "source")  # fmt: skip
_INTS = {"cores": (1, 1 << 20), "simd_bits": (32, 1 << 16), "fma_units": (1, 64),
         "vector_registers": (1, 1 << 16), "fma_latency_cycles": (1, 1000), "load_ports": (1, 64),
         "store_ports": (1, 64), "store_forward_cycles": (0, 1000)}  # fmt: skip
_FLOATS = {"clock_ghz": (0.01, 100.0), "memory_bandwidth_gbs": (0.01, 1e6),
           "single_core_memory_bandwidth_gbs": (0.0, 1e6), "parallel_overhead_us": (0.0, 1e6),
           "masked_store_cycles": (1.0, 1000.0)}  # fmt: skip
_GPU_INTS = ("sms", "warp_size", "max_threads_per_sm", "registers_per_sm", "shared_memory_per_sm_bytes")


def _fail(where: str, field_name: str, why: str) -> ChipFileError:
    return ChipFileError(f"chip file {where}: field {field_name!r}: {why}")


def _int(d: dict[str, Any], key: str, where: str, lo: int, hi: int, prefix: str = "") -> int:
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(where, prefix + key, f"expected a whole number, got {v!r:.40}")
    if not lo <= v <= hi:
        raise _fail(where, prefix + key, f"expected {lo}..{hi}, got {v}")
    return v


def _float(d: dict[str, Any], key: str, where: str, lo: float, hi: float, prefix: str = "") -> float:
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise _fail(where, prefix + key, f"expected a number, got {v!r:.40}")
    if not lo <= v <= hi:
        raise _fail(where, prefix + key, f"expected {lo:g}..{hi:g}, got {v:g}")
    return float(v)


def _str(d: dict[str, Any], key: str, where: str, allow_empty: bool = False) -> str:
    v = d[key]
    if not isinstance(v, str) or (not v.strip() and not allow_empty):
        raise _fail(where, key, f"expected a non-empty string, got {v!r:.40}")
    return v


def _caches(raw: Any, where: str) -> tuple[CacheLevel, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "caches", f"expected a non-empty list of cache levels, got {raw!r:.40}")
    out: list[CacheLevel] = []
    for i, c in enumerate(raw):
        p = f"caches[{i}]."
        if not isinstance(c, dict):
            raise _fail(where, f"caches[{i}]", f"expected an object, got {c!r:.40}")
        for key in ("level", "size_bytes", "line_bytes", "bandwidth_gbs"):
            if key not in c:
                raise _fail(where, p + key, "missing")
        unknown = set(c) - {"level", "size_bytes", "line_bytes", "bandwidth_gbs", "shared", "ways"}
        if unknown:
            raise _fail(where, p + sorted(unknown)[0], "unknown field (level, size_bytes, line_bytes, "
                        "bandwidth_gbs, shared, ways)")  # fmt: skip
        level = _int(c, "level", where, 1, 8, p)
        if level != i + 1:
            raise _fail(where, p + "level", f"levels must be listed 1, 2, ... in order; got {level} at {i}")
        size = _int(c, "size_bytes", where, 256, 1 << 40, p)
        line = _int(c, "line_bytes", where, 8, 4096, p)
        bw = _float(c, "bandwidth_gbs", where, 0.01, 1e6, p)
        shared = c.get("shared", False)
        if not isinstance(shared, bool):
            raise _fail(where, p + "shared", f"expected true or false, got {shared!r:.20}")
        if out and size <= out[-1].size_bytes:
            raise _fail(where, p + "size_bytes", f"{size} is not larger than level {level - 1}'s")
        ways = _int(c, "ways", where, 1, 1 << 16, p) if "ways" in c else 8
        if size % (line * ways):
            raise _fail(where, p + "size_bytes", f"{size} is not a whole number of sets of {ways} x {line} B")
        out.append(CacheLevel(level, size, line, bw, shared, ways))
    return tuple(out)


def _gpu(raw: Any, where: str) -> GPUFacts:
    if not isinstance(raw, dict):
        raise _fail(where, "gpu", 'a chip of kind "gpu" needs a "gpu" object (' + ", ".join(_GPU_INTS) + ")")
    for key in _GPU_INTS:
        if key not in raw:
            raise _fail(where, f"gpu.{key}", "missing")
    vals = {k: _int(raw, k, where, 1, 1 << 40, "gpu.") for k in _GPU_INTS}
    mtb = 1024
    if "max_threads_per_block" in raw:
        mtb = _int(raw, "max_threads_per_block", where, 1, 1 << 20, "gpu.")
    return GPUFacts(**vals, max_threads_per_block=mtb)


def parse_chip(data: Any, where: str = "<data>") -> ChipSpec:
    """A validated :class:`ChipSpec` from a chip file's JSON value; ``where`` names it in errors."""
    if not isinstance(data, dict):
        raise ChipFileError(f"chip file {where}: expected a JSON object, got {type(data).__name__}")
    if data.get("format", CHIP_FORMAT) != CHIP_FORMAT:
        raise _fail(where, "format", f"expected {CHIP_FORMAT!r}, got {data.get('format')!r:.40}")
    if data.get("version", CHIP_VERSION) != CHIP_VERSION:
        got = data.get("version")
        raise _fail(where, "version", f"this autosched reads version {CHIP_VERSION}, got {got!r}")
    for key in _REQUIRED:
        if key not in data:
            raise _fail(where, key, "missing")
    unknown = set(data) - {*_FIELDS, "gpu", "format", "version"}
    if unknown:
        raise _fail(where, sorted(unknown)[0], "unknown field; known: " + ", ".join((*_FIELDS, "gpu")))
    kind = _str(data, "kind", where)
    if kind not in ("cpu", "gpu"):
        raise _fail(where, "kind", f'expected "cpu" or "gpu", got {kind!r:.20}')
    feats = data.get("features", [])
    if not isinstance(feats, list) or not all(isinstance(f, str) for f in feats):
        raise _fail(where, "features", f"expected a list of ISA feature names, got {feats!r:.40}")
    opt: dict[str, Any] = {}
    for k, (lo, hi) in _INTS.items():
        if k in data:
            opt[k] = _int(data, k, where, lo, hi)
    for k, (flo, fhi) in _FLOATS.items():
        if k in data:
            opt[k] = _float(data, k, where, flo, fhi)
    if opt["simd_bits"] % 32:
        raise _fail(where, "simd_bits", f"expected a multiple of 32, got {opt['simd_bits']}")
    chip = ChipSpec(
        name=_str(data, "name", where), kind=kind, isa=_str(data, "isa", where),
        caches=_caches(data["caches"], where), source=_str(data, "source", where),
        llvm_cpu=_str(data, "llvm_cpu", where, allow_empty=True) if "llvm_cpu" in data else "",
        features=tuple(feats), gpu=_gpu(data.get("gpu"), where) if kind == "gpu" else None, path=where, **opt,
    )  # fmt: skip
    if kind == "cpu" and "gpu" in data:
        raise _fail(where, "gpu", 'only a chip of kind "gpu" has a "gpu" section')
    content = json.dumps(chip.to_json(), sort_keys=True)
    object.__setattr__(chip, "sha", hashlib.sha256(content.encode()).hexdigest()[:12])
    return chip


def chip_path(name_or_path: str) -> Path:
    """A shipped chip's file (by stem) or the path given; a ChipFileError if neither exists."""
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    shipped = CHIPS_DIR / f"{name_or_path}.json"
    if shipped.is_file():
        return shipped
    names = ", ".join(shipped_chips())
    raise ChipFileError(f"chip file {name_or_path}: no such file, and no shipped chip of that name ({names})")


def load_chip(name_or_path: str) -> ChipSpec:
    """Read and validate a chip file (path or shipped name)."""
    p = chip_path(name_or_path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise ChipFileError(f"chip file {p}: cannot read it: {e}") from None
    except ValueError as e:
        raise ChipFileError(f"chip file {p}: not valid JSON: {e}") from None
    return parse_chip(data, str(p))


def shipped_chips() -> list[str]:
    return sorted(p.stem for p in CHIPS_DIR.glob("*.json"))


def write_chip(chip: ChipSpec, path: str | Path) -> None:
    Path(path).write_text(json.dumps(chip.to_json(), indent=1) + "\n")


# What a core brings with it when its code runs on another machine (``-mcpu=haswell`` on a Xeon):
# the ISA and the vector unit. Cores, clock, caches and memory stay the machine's, and so does what a
# masked store costs: its instruction is the ISA's, but the store unit that runs it is the machine's.
_CORE_FIELDS = ("isa", "llvm_cpu", "features", "simd_bits", "fma_units", "vector_registers",
                "fma_latency_cycles", "load_ports", "store_ports", "store_forward_cycles")  # fmt: skip


def core_on_machine(core: ChipSpec, machine: ChipSpec) -> ChipSpec:
    """``core``'s ISA and vector unit (width, FMA units and latency, registers, ports) in ``machine``'s
    cores, clock, caches and memory: the chip that code built for another CPU runs on here.

    Example: ``core_on_machine(load_chip("avx2-desktop"), load_chip("emeraldrapids"))`` models
    ``llvm-cpu -mcpu=haswell`` on an Emerald Rapids host.
    """
    if core.kind != "cpu" or machine.kind != "cpu":
        raise ChipFileError(f"core_on_machine combines CPU chips; got {core.kind} and {machine.kind}")
    data = machine.to_json()
    data.update({k: v for k, v in core.to_json().items() if k in _CORE_FIELDS})
    data["name"] = f"{core.name}-on-{machine.name}"
    data["source"] = (
        f"core (ISA, vector unit, ports) of {core.name}; cores, clock, caches and memory of {machine.name}"
    )
    return parse_chip(data, f"<{core.name} core on {machine.name}>")
