"""Hardware adapters, found by target kind."""

from .registry import detect, get_adapter

__all__ = ["detect", "get_adapter"]
