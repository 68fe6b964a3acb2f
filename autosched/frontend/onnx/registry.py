"""The converter table: one function per ONNX op and opset version it implements.

``@converter("Conv", since=11)`` registers the implementation valid from opset 11 on; for a model of
opset ``v`` the importer uses the newest implementation whose ``since`` is <= ``v`` (TVM Relax's
``_impl_vN``, tinygrad's ``OpSetId`` table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_DOMAINS = ("", "ai.onnx")
# The newest default-domain opset the converters were checked at (onnx 1.23's node tests reach 28).
MAX_OPSET = 28

ConverterFn = Callable[..., Any]


@dataclass(frozen=True)
class Converter:
    op_type: str
    domain: str
    since: int
    fn: ConverterFn


_TABLE: dict[tuple[str, str], list[Converter]] = {}


def canonical_domain(domain: str) -> str:
    return "" if domain in DEFAULT_DOMAINS else domain


def converter(op_type: str, since: int = 1, domain: str = "") -> Callable[[ConverterFn], ConverterFn]:
    """Register ``fn`` as the converter of ``op_type`` from opset ``since`` on.

    Example: ``@converter("Relu", since=6)`` over ``def relu(node): ...``.
    """

    def register(fn: ConverterFn) -> ConverterFn:
        key = (canonical_domain(domain), op_type)
        entries = _TABLE.setdefault(key, [])
        if any(c.since == since for c in entries):
            raise ValueError(f"converter {op_type} since opset {since} is registered twice")
        entries.append(Converter(op_type, key[0], since, fn))
        entries.sort(key=lambda c: c.since)
        return fn

    return register


def lookup(op_type: str, domain: str, opset: int) -> Converter | None:
    """The newest converter of ``op_type`` whose ``since`` is <= ``opset``, or None."""
    entries = _TABLE.get((canonical_domain(domain), op_type), [])
    usable = [c for c in entries if c.since <= opset]
    return usable[-1] if usable else None


def versions(op_type: str, domain: str = "") -> list[int]:
    """The opsets from which ``op_type`` has an implementation (empty when it has none)."""
    return [c.since for c in _TABLE.get((canonical_domain(domain), op_type), [])]


def supported_ops(domain: str = "") -> list[str]:
    return sorted(op for dom, op in _TABLE if dom == canonical_domain(domain))
