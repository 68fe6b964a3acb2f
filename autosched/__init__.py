"""autosched: an ML-guided auto-scheduling tensor compiler."""

__version__ = "0.1.0"
