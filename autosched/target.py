"""Targets: which adapter runs the code, and for which chip (``llvm-cpu -mcpu=haswell``).

The kinds and the options each accepts are what the registered adapters declare (:class:`AdapterSpec`,
defined here, below every layer that reads it); nothing here names an adapter. The adapters live
above (``hai``): ``autosched.hai.registry`` hands this module its lookup with :func:`register_kinds`
when it is imported (``import autosched`` does), so this module never imports upwards.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .errors import TargetError

STYLES = ("cpu", "gpu")


@dataclass(frozen=True)
class AdapterSpec:
    """An adapter's declaration, the class attribute ``spec`` of every adapter.

    ``style`` picks the lowering passes and sketch rules: ``"cpu"`` (cores and vector lanes) or
    ``"gpu"`` (blocks, threads and shared memory; barriers and cross-thread reductions lowered).
    ``can_export``: ``compile_object(func) -> bytes`` gives a linkable object for ``autosched build``;
    such kernels also run in any process that loads the library. ``can_run``: ``launch`` and ``time``
    really run (False for compile-only devices). ``measures_facts``: ``measure_facts(info)`` times
    peak and bandwidth (see :mod:`.chip_facts`). ``check_options`` validates option values (for
    example an ``-mcpu`` LLVM does not know) and raises a TargetError. ``runs_on_host``: its kernels
    are host code run in the runner's process (an exported object always is), so the runner's
    address-space limit and workspace pre-check apply. ``simulated``: ``time`` returns modeled, not
    measured, seconds: the runner never stops other candidates early by them, and they never teach a
    real chip (no farm peer; not offered by ``--target all``).

    Example::

        spec = AdapterSpec("mychip", options=("cores",), style="cpu", description="MyChip NPU")
    """

    kind: str
    options: tuple[str, ...] = ()
    style: str = "cpu"
    can_export: bool = False
    can_run: bool = True
    measures_facts: bool = False
    runs_on_host: bool = False
    simulated: bool = False
    description: str = ""
    source_label: str = "code"  # what render() gives, for reports: "LLVM IR", "OpenCL C"...
    aliases: tuple[str, ...] = ()  # other spellings of the kind ("llvm" for "llvm-cpu")
    check_options: Callable[[Mapping[str, str]], None] | None = None

    def __post_init__(self) -> None:
        if not self.kind or any(c.isspace() for c in self.kind):
            raise TargetError(f"AdapterSpec: kind {self.kind!r} must be one word, such as 'mychip'")
        if self.style not in STYLES:
            raise TargetError(
                f"AdapterSpec {self.kind}: style {self.style!r} is not one of {', '.join(STYLES)}"
            )


class KindRegistry(Protocol):
    """What target parsing asks of the adapter registry (``autosched.hai.registry`` is one)."""

    def kinds(self) -> list[str]: ...

    def resolve_kind(self, word: str) -> str | None: ...

    def spec_of(self, kind: str) -> AdapterSpec: ...


_registry: KindRegistry | None = None


def register_kinds(registry: KindRegistry) -> None:
    """Called once by ``autosched.hai.registry`` at import: the kinds the installed adapters declare."""
    global _registry
    _registry = registry


def _kinds() -> KindRegistry:
    if _registry is None:
        raise TargetError("no target kinds are registered: import autosched (its adapter registry) first")
    return _registry


@dataclass(frozen=True)
class Target:
    """A parsed target string. ``str(target)`` is canonical and is what logs record."""

    kind: str
    options: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    def __str__(self) -> str:
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.options)])


def parse_target(text: str | Target) -> Target:
    """Parse ``"llvm-cpu -mcpu=haswell"``; an unknown kind or option is a :class:`TargetError`."""
    if isinstance(text, Target):
        return text
    registry = _kinds()
    words = shlex.split(str(text))
    if not words:
        raise TargetError("empty target; expected one of: " + ", ".join(registry.kinds()))
    kind = registry.resolve_kind(words[0])
    if kind is None:
        raise TargetError(
            f"unknown target kind {words[0]!r} in {text!r} (no adapter for target kind {words[0]!r} is "
            f"installed); expected one of: {', '.join(registry.kinds())}"
        )
    spec = registry.spec_of(kind)
    options: dict[str, str] = {}
    for word in words[1:]:
        if not word.startswith("-") or "=" not in word:
            raise TargetError(f"target {text!r}: option {word!r} is not of the form -key=value")
        key, value = word.lstrip("-").split("=", 1)
        if key not in spec.options:
            known = ", ".join(spec.options) or "none"
            raise TargetError(f"target {text!r}: unknown option {key!r} for {kind}; known: {known}")
        options[key] = value
    if spec.check_options is not None:
        try:
            spec.check_options(options)
        except TargetError as e:
            raise TargetError(f"target {text!r}: {e}") from None
    return Target(kind, tuple(sorted(options.items())))


def is_simulated(target: str | Target) -> bool:
    """Whether ``target``'s times are modeled (its adapter declares ``simulated``), not measured."""
    return _kinds().spec_of(parse_target(target).kind).simulated


def style_of(target: str | Target) -> str:
    """``"cpu"`` or ``"gpu"``: which lowering passes, sketch rules and measurer ``target`` gets."""
    return _kinds().spec_of(parse_target(target).kind).style
