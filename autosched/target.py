"""Targets: which adapter runs the code, and for which chip (``llvm-cpu -mcpu=haswell``).

The kinds and the options each accepts are what the registered adapters declare
(:class:`autosched.hai.spec.AdapterSpec`); nothing here names an adapter.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .errors import TargetError


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
    from .hai import registry  # the adapters declare the kinds; imported late: hai sits above target

    if isinstance(text, Target):
        return text
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
