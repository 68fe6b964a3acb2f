"""How a measured kernel's outputs are checked, by the runner's worker for every target.

Outputs are filled with garbage before the run (NaN for floats, 0xA5 bytes for integers), so a kernel
that skips an element cannot pass by luck, and compared with NaN equal to NaN (a reference may hold
NaN where the workload makes one, as a log of a negative number does).
"""

from __future__ import annotations

import numpy as np


def fill_garbage(a: np.ndarray) -> None:
    """Fill ``a`` in place with values no correct kernel leaves behind: NaN, or 0xA5 bytes."""
    if a.dtype.kind in "fc":
        a.fill(np.nan)
    else:
        a.view(np.uint8).fill(0xA5)


def outputs_match(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether ``got`` is within the tolerances of ``expected`` (NaN where the reference has NaN)."""
    return bool(np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True))
