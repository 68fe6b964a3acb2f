"""autosched: an ML-guided auto-scheduling tensor compiler.

Write an operator once as a tensor expression, schedule it by hand or let ``autosched tune`` search
for the fastest schedule on a chip, and run the result from Python or C.
"""

from . import ops, te
from .build import build
from .graph.compiled import compile_model
from .hai import registry as _registry  # noqa: F401  registers the adapters' target kinds with parse_target
from .lower.pipeline import lower
from .runtime.load import load
from .search_space.default import default_schedule
from .search_space.schedule import Schedule, create_schedule, replay
from .te.workload import workload
from .version import __version__

__all__ = [
    "Schedule", "__version__", "build", "compile_model", "create_schedule", "default_schedule", "load",
    "lower", "ops", "replay", "te", "workload",
]  # fmt: skip
