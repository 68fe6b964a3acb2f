"""Hardware adapters, found by target kind; an adapter declares itself with an :class:`AdapterSpec`."""

from .registry import detect, get_adapter
from .spec import AdapterSpec

__all__ = ["AdapterSpec", "detect", "get_adapter"]
