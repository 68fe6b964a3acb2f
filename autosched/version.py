"""The tool version, written into every log record, library manifest and cache key.

Its own module so that the lowest layers (records) can read it without importing the package's API.
"""

__version__ = "0.1.0"
