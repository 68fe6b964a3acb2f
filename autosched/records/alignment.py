"""What a record's timing says of alignment: the boundary its buffers started on, and the misaligned case.

The runner times host kernels on buffers aligned to ``timing["alignment_bytes"]`` (64) and, for each
new best, once more with every buffer ``offset_bytes`` past it (``timing["misaligned"]``, see
:mod:`autosched.measure.runner`). Older records lack either; both are optional. The tune summary and
the library manifest say what was measured through :func:`alignment_of`.

Why a built library's call path does not copy misaligned arguments to aligned scratch: where the
penalty was measured (inputs 16 bytes off: layer norm +11%, max pooling +18%), the kernels are
memory-bound, and a copy reads and writes each input once more, more traffic than the penalty costs.
For compute-bound kernels a copy is small against the work (a 1024^3 GEMM's 8 MB of inputs: about
0.6 ms at 28 GB/s against 4.5 ms), so it pays only if their penalty is over ~13%. A tuned 256^3 GEMM
(one thread, loaded machine) ran 1.05x misaligned and 1.06x copied then aligned: no gain there, and
larger ones have not been timed on a quiet machine. The manifest keeps both times per kernel, so that
choice can be made per kernel once they are; meanwhile a caller who cares passes arrays made by
``aligned_empty`` (:mod:`autosched.measure.worker`).

Example::

    a = alignment_of(rec.timing)
    a.describe(rec.mean_cost)   # 'timed on 64-byte-aligned buffers: 1.2 ms; 16 bytes past: 1.33 ms (1.11x)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..runtime.manifest import is_seconds

MISALIGNED = "misaligned"  # the key in a record's timing


@dataclass(frozen=True)
class Alignment:
    """``alignment_bytes``: the boundary the costs were timed on; ``offset_bytes`` and ``misaligned_s``:
    the misaligned case's offset past it and median seconds. None where the record does not say."""

    alignment_bytes: int | None = None
    offset_bytes: int | None = None
    misaligned_s: float | None = None

    def describe(self, aligned_s: float) -> str:
        """One line for a kernel whose aligned median is ``aligned_s`` seconds."""
        if self.alignment_bytes is None:
            return "timed on buffers of unrecorded alignment (an older record)"
        text = f"timed on {self.alignment_bytes}-byte-aligned buffers: {_ms(aligned_s)}"
        if self.misaligned_s is None:
            return text + "; misaligned case not measured"
        ratio = self.misaligned_s / aligned_s if aligned_s > 0 else math.inf
        return f"{text}; {self.offset_bytes} bytes past: {_ms(self.misaligned_s)} ({ratio:.2f}x)"


def misaligned_problem(value: Any) -> str | None:
    """What is wrong with a ``timing["misaligned"]`` value read from a log, or None when it is well formed."""
    if not isinstance(value, dict):
        return f"expected an object, got {type(value).__name__}"
    offset, median = value.get("offset_bytes"), value.get("median_s")
    if type(offset) is not int or not 0 < offset <= 1 << 20:
        return f"offset_bytes: expected a whole number of bytes > 0, got {offset!r:.40}"
    if not is_seconds(median):
        return f"median_s: expected finite seconds >= 0, got {median!r:.40}"
    return None


def alignment_of(timing: dict[str, Any] | None) -> Alignment:
    """The alignment facts of a record's ``timing`` (None, or one without them, gives an empty Alignment)."""
    if not timing:
        return Alignment()
    boundary = timing.get("alignment_bytes")
    boundary = boundary if type(boundary) is int and boundary > 0 else None
    mis = timing.get(MISALIGNED)
    if mis is None or misaligned_problem(mis) is not None:
        return Alignment(boundary)
    return Alignment(boundary, mis["offset_bytes"], float(mis["median_s"]))


def manifest_fields(timing: dict[str, Any] | None) -> dict[str, Any]:
    """What a library manifest's record keeps of it: ``alignment_bytes`` and ``misaligned`` where known."""
    a = alignment_of(timing)
    fields: dict[str, Any] = {}
    if a.alignment_bytes is not None:
        fields["alignment_bytes"] = a.alignment_bytes
    if a.misaligned_s is not None:
        fields[MISALIGNED] = {"offset_bytes": a.offset_bytes, "median_s": a.misaligned_s}
    return fields


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"
