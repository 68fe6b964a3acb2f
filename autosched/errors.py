"""The exceptions autosched raises on purpose (the tuner catches exactly these, nothing broader), and how a
failed candidate is written down: its error kind and what it costs. One place, below every layer that
reads them (measurement makes them, logs keep them, the cost model and the search weigh them)."""


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


# Why a candidate failed, from first to last stage:
ERROR_KINDS = (
    "schedule",  # the trace does not replay, or the schedule does not lower (ScheduleError, LowerError)
    "compile",  # the compiler or linker refused (CompileError), or the build took too long
    "timeout",  # the kernel did not finish within the runner's timeout
    "crash",  # the process died (a signal, e.g. SIGSEGV); the message names the signal
    "memory",  # an allocation failed or the memory limit was hit
    "wrong_result",  # outputs differ from the numpy reference (message: max abs/rel error)
    "run",  # any other failure while running (RunError)
)

FAILED_COST = 1e10  # seconds; what a failed candidate costs in a cost model's eyes (TVM's choice)
