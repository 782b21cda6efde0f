"""The `tcsmt` command line. Each module holds one command (or group) and registers it on
the root group of base.py; the modules import base.py and options.py, never each other."""

from . import find, identify, listing, simulate, solve, vectors  # noqa: F401  (registration)
from .base import main

__all__ = ["main"]
