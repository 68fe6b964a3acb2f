"""Targets: which adapter runs the code, and for which chip (``llvm-cpu -mcpu=haswell``)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .errors import TargetError

KINDS = ("llvm-cpu", "opencl", "cuda")
# Options each kind accepts; values are strings.
OPTIONS = {"llvm-cpu": ("mcpu", "mattr", "num-threads"), "opencl": ("device",), "cuda": ("arch",)}


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
    words = shlex.split(str(text))
    if not words:
        raise TargetError("empty target; expected one of: " + ", ".join(KINDS))
    kind, rest = words[0], words[1:]
    if kind == "llvm":
        kind = "llvm-cpu"
    if kind not in KINDS:
        raise TargetError(f"unknown target kind {kind!r} in {text!r}; expected one of: {', '.join(KINDS)}")
    options: dict[str, str] = {}
    for word in rest:
        if not word.startswith("-") or "=" not in word:
            raise TargetError(f"target {text!r}: option {word!r} is not of the form -key=value")
        key, value = word.lstrip("-").split("=", 1)
        if key not in OPTIONS[kind]:
            raise TargetError(
                f"target {text!r}: unknown option {key!r} for {kind}; known: {', '.join(OPTIONS[kind])}"
            )
        options[key] = value
    if kind == "llvm-cpu" and ("mcpu" in options or "mattr" in options):
        from .hai.llvm_cpu import check_cpu_options  # needs llvmlite: only for llvm-cpu targets

        try:
            check_cpu_options(options.get("mcpu"), options.get("mattr"))
        except TargetError as e:
            raise TargetError(f"target {text!r}: {e}") from None
    return Target(kind, tuple(sorted(options.items())))
