"""The `tcsmt` command line. Each module holds one command (or group) and registers it on
the root group of base.py; the modules import base.py and options.py, never each other."""

from . import (  # noqa: F401  (registration)
    bound,
    exact,
    find,
    gemm,
    hardware,
    identify,
    invariance,
    listing,
    profile,
    profile_record,
    reveal,
    simulate,
    solve,
    validate,
    vectors,
)
from .base import main

__all__ = ["main"]
