"""The exceptions autosched raises on purpose. The tuner catches exactly these, nothing broader."""


class AutoschedError(Exception):
    """Base of autosched's own errors."""


class ScheduleError(AutoschedError):
    """An illegal schedule step; the message starts with the primitive's name."""


class LowerError(AutoschedError):
    """A schedule that cannot be turned into loops (the message says which stage and why)."""


class CompileError(AutoschedError):
    """Generated code that a compiler refused."""


class RunError(AutoschedError):
    """A kernel that failed, hung, or computed a wrong result when run."""


class TargetError(AutoschedError):
    """An unknown or unavailable target."""


class WorkloadError(AutoschedError):
    """A malformed op file or workload, or arguments that do not fit it."""


class OnnxImportError(AutoschedError):
    """An ONNX model the frontend cannot import: the message names the node, input or op, and why."""
