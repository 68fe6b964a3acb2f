import os

os.environ.setdefault("AUTOSCHED_VERIFY", "1")
