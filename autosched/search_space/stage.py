"""A stage: how the loops of one computation are split, ordered, annotated and placed.

Primitives change the stage in place and record a :class:`Step`; each checks its arguments first
and raises :class:`ScheduleError` naming itself, so an illegal step changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ..errors import ScheduleError
from ..te.expr import IterVar
from ..te.tensor import ComputeOp, Operation, PlaceholderOp
from .trace import Step

if TYPE_CHECKING:
    from .schedule import Schedule

ANNOTATIONS = ("parallel", "vectorized", "unrolled", "thread_binding")
THREAD_TAGS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread",
)  # fmt: skip
PRAGMAS = ("auto_unroll_max_step", "unswitch_rows", "stream_stores")  # unswitch.py, llvm_stream.py


@dataclass(frozen=True)
class Split:
    """``parent = outer * factor + inner``; ``nparts`` splits are resolved to a factor when lowered."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True)
class Fuse:
    """``fused = outer * extent(inner) + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


Relation = Union[Split, Fuse]
AxisRef = Union[IterVar, str]


def split_extents(extent: int, factor: int | None, nparts: int | None) -> tuple[int, int]:
    """(outer, inner) extents of a split of ``extent``; a factor above the extent is clamped."""
    if factor is not None:
        inner = min(factor, extent)
    else:
        assert nparts is not None
        inner = -(-extent // min(nparts, extent))
    return -(-extent // inner), inner


class Stage:
    def __init__(self, schedule: Schedule, name: str, op: Operation, is_output: bool):
        self.schedule = schedule
        self.name = name
        self.is_output = is_output
        self.attach: tuple[str, ...] = ("root",)
        self.relations: list[Relation] = []
        self.annotations: dict[str, str] = {}
        self.thread_tags: dict[str, str] = {}
        self.pragmas: dict[str, tuple[tuple[str, int], ...]] = {}
        self.set_op(op)

    def set_op(self, op: Operation) -> None:
        """Start this stage afresh on ``op`` (used by cache_write and rfactor)."""
        self.op = op
        roots = (*op.axis, *op.reduce_axis) if isinstance(op, ComputeOp) else ()
        self.leaves: list[IterVar] = list(roots)
        self.axes: dict[str, IterVar] = {a.name: a for a in roots}
        self.relations = []
        self.annotations = {}
        self.thread_tags = {}
        self.pragmas = {}

    @property
    def is_compute(self) -> bool:
        return isinstance(self.op, ComputeOp)

    @property
    def leaf_iter_vars(self) -> tuple[IterVar, ...]:
        return tuple(self.leaves)

    def position(self, iv: IterVar) -> int | None:
        """Index of ``iv`` among the loops, by identity (``==`` on axes builds expressions)."""
        return next((i for i, a in enumerate(self.leaves) if a is iv), None)

    def __repr__(self) -> str:
        return f"Stage({self.name}, leaves=[{', '.join(a.name for a in self.leaves)}])"

    # Helpers ------------------------------------------------------------------------------------
    def _check_compute(self, primitive: str) -> None:
        if isinstance(self.op, PlaceholderOp):
            raise ScheduleError(
                f"{primitive}: stage {self.name!r} is an input placeholder, which has no loops"
            )

    def _leaf(self, primitive: str, axis: AxisRef, what: str = "axis") -> IterVar:
        name = axis if isinstance(axis, str) else getattr(axis, "name", None)
        if not isinstance(name, str):
            raise ScheduleError(f"{primitive}: {what} must be an axis of stage {self.name!r}, got {axis!r}")
        iv = self.axes.get(name)
        if iv is None or (isinstance(axis, IterVar) and iv is not axis):
            raise ScheduleError(
                f"{primitive}: {what} {name!r} is not an axis of stage {self.name!r} "
                f"(its loops are: {', '.join(a.name for a in self.leaves)})"
            )
        if self.position(iv) is None:
            raise ScheduleError(
                f"{primitive}: {what} {name!r} of stage {self.name!r} was already split or fused; "
                f"use one of its current loops: {', '.join(a.name for a in self.leaves)}"
            )
        return iv

    def _new_axis(self, primitive: str, name: str, extent: int, kind: str) -> IterVar:
        if name in self.axes:
            raise ScheduleError(f"{primitive}: stage {self.name!r} already has an axis named {name!r}")
        iv = IterVar(name, "int32", extent, kind)
        self.axes[name] = iv
        return iv

    def _record(self, primitive: str, *args: Any) -> None:
        self.schedule._record(Step(primitive, self.name, tuple(args)))

    @staticmethod
    def _positive(primitive: str, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ScheduleError(f"{primitive}: {name} must be a positive int, got {value!r}")
        return value

    # Loop structure -----------------------------------------------------------------------------
    def split(
        self, axis: AxisRef, factor: int | None = None, nparts: int | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split a loop in two. ``for i in range(10)`` with factor=4 becomes::

        for i.outer in range(3):
            for i.inner in range(4):
                if i.outer * 4 + i.inner < 10:   # guard: 4 does not divide 10
                    body(i = i.outer * 4 + i.inner)
        """
        self._check_compute("split")
        iv = self._leaf("split", axis)
        if (factor is None) == (nparts is None):
            raise ScheduleError("split: give exactly one of factor= and nparts=")
        if factor is not None:
            factor = self._positive("split", "factor", factor)
        else:
            nparts = self._positive("split", "nparts", nparts)
        outer_extent, inner_extent = split_extents(iv.extent, factor, nparts)
        outer = self._new_axis("split", f"{iv.name}.outer", outer_extent, iv.kind)
        inner = self._new_axis("split", f"{iv.name}.inner", inner_extent, iv.kind)
        self.relations.append(Split(iv, outer, inner, factor, nparts))
        pos = self.position(iv)
        assert pos is not None
        self.leaves[pos : pos + 1] = [outer, inner]
        self._record("split", iv.name, factor, nparts)
        return outer, inner

    def tile(
        self, x: AxisRef, y: AxisRef, x_factor: int, y_factor: int
    ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two loops and order them ``x.outer, y.outer, x.inner, y.inner``."""
        self._check_compute("tile")
        xv, yv = self._leaf("tile", x, "x"), self._leaf("tile", y, "y")
        if xv is yv:
            raise ScheduleError("tile: x and y are the same axis")
        self._positive("tile", "x_factor", x_factor)
        self._positive("tile", "y_factor", y_factor)
        with self.schedule._quiet():
            xo, xi = self.split(xv, factor=x_factor)
            yo, yi = self.split(yv, factor=y_factor)
            self.reorder(xo, yo, xi, yi)
        self._record("tile", xv.name, yv.name, x_factor, y_factor)
        return xo, yo, xi, yi

    def fuse(self, *axes: AxisRef) -> IterVar:
        """Fuse adjacent loops (outermost first) into one: ``i.j.fused`` runs i*extent(j) + j."""
        self._check_compute("fuse")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if len(axes) < 2:
            raise ScheduleError(f"fuse: needs at least two axes, got {len(axes)}")
        ivs = [self._leaf("fuse", a) for a in axes]
        pos = [self.position(iv) or 0 for iv in ivs]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(
                f"fuse: axes {', '.join(iv.name for iv in ivs)} of stage {self.name!r} must be adjacent "
                f"loops in order, outermost first (loops: {', '.join(a.name for a in self.leaves)})"
            )
        kinds = {iv.kind for iv in ivs}
        if len(kinds) > 1:
            raise ScheduleError(f"fuse: cannot fuse spatial and reduction axes of stage {self.name!r}")
        for iv in ivs:
            if iv.name in self.annotations:
                raise ScheduleError(f"fuse: axis {iv.name!r} is already {self.annotations[iv.name]}")
        fused = ivs[0]
        for iv in ivs[1:]:
            new = self._new_axis("fuse", f"{fused.name}.{iv.name}.fused", fused.extent * iv.extent, iv.kind)
            self.relations.append(Fuse(fused, iv, new))
            fused = new
        self.leaves[pos[0] : pos[-1] + 1] = [fused]
        self._record("fuse", tuple(iv.name for iv in ivs))
        return fused

    def reorder(self, *axes: AxisRef) -> None:
        """Put the given loops in this order, in the positions they occupy now."""
        self._check_compute("reorder")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        ivs = [self._leaf("reorder", a) for a in axes]
        if len(set(ivs)) != len(ivs):
            raise ScheduleError(f"reorder: an axis is named twice in {[iv.name for iv in ivs]}")
        slots = sorted(self.position(iv) or 0 for iv in ivs)
        for slot, iv in zip(slots, ivs):
            self.leaves[slot] = iv
        self._record("reorder", tuple(iv.name for iv in ivs))

    # Annotations --------------------------------------------------------------------------------
    def _annotate(self, primitive: str, axis: AxisRef, kind: str) -> IterVar:
        self._check_compute(primitive)
        iv = self._leaf(primitive, axis)
        if iv.name in self.annotations:
            raise ScheduleError(
                f"{primitive}: axis {iv.name!r} of stage {self.name!r} is already {self.annotations[iv.name]}"
            )
        self.annotations[iv.name] = kind
        return iv

    def parallel(self, axis: AxisRef) -> None:
        """Run the iterations of a loop on several threads (an OpenMP region on the CPU)."""
        self._check_compute("parallel")
        iv = self._leaf("parallel", axis)
        if iv.kind == "reduce":
            raise ScheduleError(
                f"parallel: axis {iv.name!r} of stage {self.name!r} is a reduction axis; threads would race "
                "on the accumulator (use rfactor first)"
            )
        self._annotate("parallel", iv, "parallel")
        self._record("parallel", iv.name)

    def vectorize(self, axis: AxisRef) -> None:
        """Run a loop as SIMD lanes; codegen emits explicit vectors where the body allows."""
        iv = self._annotate("vectorize", axis, "vectorized")
        self._record("vectorize", iv.name)

    def unroll(self, axis: AxisRef) -> None:
        """Replicate the loop body once per iteration."""
        iv = self._annotate("unroll", axis, "unrolled")
        self._record("unroll", iv.name)

    def bind(self, axis: AxisRef, thread: str) -> None:
        """Bind a loop to a GPU block or thread index (``"blockIdx.x"``, ``"threadIdx.x"``...)."""
        if thread not in THREAD_TAGS:
            raise ScheduleError(
                f"bind: unknown thread axis {thread!r}; expected one of {', '.join(THREAD_TAGS)}"
            )
        self._check_compute("bind")
        iv = self._leaf("bind", axis)
        if iv.kind == "reduce" and thread.startswith("blockIdx"):
            raise ScheduleError(f"bind: reduction axis {iv.name!r} cannot be bound to {thread}")
        for other, tag in self.thread_tags.items():
            if tag == thread:
                raise ScheduleError(
                    f"bind: {thread} is already bound to axis {other!r} of stage {self.name!r}"
                )
        self._annotate("bind", iv, "thread_binding")
        self.thread_tags[iv.name] = thread
        self._record("bind", iv.name, thread)

    def pragma(self, axis: AxisRef, key: str, value: int) -> None:
        """``pragma(axis, "auto_unroll_max_step", n)``: unroll loops inside ``axis`` of at most n steps;
        ``pragma(axis, "unswitch_rows", 1)``: padding tests leave a register tile's row loops inside it;
        ``pragma(axis, "stream_stores", 1)`` on a vectorized row loop: its aligned vectors are stored
        non-temporally, past the caches (an output not read again soon)."""
        self._check_compute("pragma")
        iv = self._leaf("pragma", axis)
        if key not in PRAGMAS:
            raise ScheduleError(f"pragma: unknown pragma {key!r}; known: {', '.join(PRAGMAS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScheduleError(f"pragma: {key} takes a non-negative int, got {value!r}")
        self.pragmas[iv.name] = (*self.pragmas.get(iv.name, ()), (key, value))
        self._record("pragma", iv.name, key, value)

    # Placement ----------------------------------------------------------------------------------
    def compute_at(self, parent: Stage, axis: AxisRef) -> None:
        """Compute this stage inside loop ``axis`` of ``parent``, just the part that loop needs."""
        self._check_compute("compute_at")
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at: parent must be a stage (s[T]), got {parent!r}")
        if parent is self:
            raise ScheduleError(f"compute_at: stage {self.name!r} cannot be computed at itself")
        parent._check_compute("compute_at")
        iv = parent._leaf("compute_at", axis)
        if self.schedule.depends_on(self, parent):
            raise ScheduleError(
                f"compute_at: stage {parent.name!r} is a producer of {self.name!r}, so {self.name!r} cannot "
                "be computed inside it"
            )
        if parent.attach[0] == "inline":
            raise ScheduleError(f"compute_at: stage {parent.name!r} is inlined and has no loops")
        self.attach = ("at", parent.name, iv.name)
        self._record("compute_at", parent.name, iv.name)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers; it gets no loops or storage."""
        self._check_compute("compute_inline")
        op = self.op
        assert isinstance(op, ComputeOp)
        if op.reduce_axis:
            raise ScheduleError(f"compute_inline: stage {self.name!r} is a reduction and cannot be inlined")
        if self.is_output:
            raise ScheduleError(f"compute_inline: stage {self.name!r} is an output of the schedule")
        for other in self.schedule.stages:
            if other.attach[:2] == ("at", self.name):
                raise ScheduleError(
                    f"compute_inline: stage {other.name!r} is computed at {self.name!r}; move it first"
                )
        self.attach = ("inline",)
        self._record("compute_inline")

    def compute_root(self) -> None:
        """Compute this whole stage at the top level of the function (the default)."""
        self._check_compute("compute_root")
        self.attach = ("root",)
        self._record("compute_root")
