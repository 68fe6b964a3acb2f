"""What an adapter declares about itself: the one place the rest of autosched learns about a chip.

Lowering passes, sketch rules, the measurer, ``autosched build`` and target parsing are all chosen
from this declaration, so no code outside ``hai/`` and ``codegen/`` names a particular adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import TargetError

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
    example an ``-mcpu`` LLVM does not know) and raises a TargetError.

    Example::

        spec = AdapterSpec("mychip", options=("cores",), style="cpu", description="MyChip NPU")
    """

    kind: str
    options: tuple[str, ...] = ()
    style: str = "cpu"
    can_export: bool = False
    can_run: bool = True
    measures_facts: bool = False
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
