"""See where the time goes: HTML reports of tuning logs (``autosched report``) and kernel profiles of
built libraries (``autosched profile``). Reads records and built libraries only; figures need the
optional ``report`` extra (matplotlib)."""
