"""An array seen only through DLPack: for the entry points that take any object speaking DLPack."""

from __future__ import annotations

from typing import Any

import numpy as np


class DLPackOnly:
    """Wraps a numpy array and offers only ``__dlpack__`` and ``__dlpack_device__``, no array protocol,
    so a caller that reads it must go through DLPack."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr

    def __dlpack__(self, **kw: Any) -> Any:
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.arr.__dlpack_device__()
