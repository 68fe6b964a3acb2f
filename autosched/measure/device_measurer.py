"""``DeviceMeasurer``, kept for callers written before every target was measured one way.

It is :class:`~.measure.LocalMeasurer`: builders lower and render each candidate in worker processes,
and the runner's worker compiles it with the target's adapter, checks it and times it (see
:mod:`.runner`). There is no second worker loop.

Example::

    with DeviceMeasurer("opencl", timeout_s=10) as m:
        results = m.measure(task, traces)
"""

from __future__ import annotations

from ..target import parse_target
from .builder import LocalBuilder
from .measure import LocalMeasurer
from .runner import LocalRunner


class DeviceMeasurer(LocalMeasurer):
    """A LocalMeasurer for ``target`` with one build worker; ``build_timeout_s`` also bounds a compile."""

    def __init__(
        self,
        target: str,
        repeat: int = 5,
        warmup: int = 1,
        timeout_s: float = 10.0,
        build_timeout_s: float = 60.0,
    ):
        self.target = str(parse_target(target))
        runner = LocalRunner(timeout_s, repeat, warmup=warmup, compile_timeout_s=build_timeout_s)
        super().__init__(LocalBuilder(n_workers=1, timeout_s=build_timeout_s), runner)
