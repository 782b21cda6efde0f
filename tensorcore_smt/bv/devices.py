"""Device names and the array-API interpreter for one (bv/xp.py on torch or numpy): what
simulate, validate and matmul run on when a device is given."""

from __future__ import annotations

import re

from ..errors import UserError
from .xp import ArrayBackend, backend_for

DEVICE_NAMES = "numpy, cpu, cuda, cuda:N"
"""The devices `device=` / --device name (cpu and cuda are torch's)."""


def check_device(device: str) -> None:
    """UserError unless `device` is a device name this program knows (before asking
    whether torch is installed: a misspelt name is the first thing to say)."""
    if not isinstance(device, str) or not re.fullmatch(r"numpy|cpu|cuda(:\d+)?", device):
        raise UserError(f"unknown device {device!r}; expected one of: {DEVICE_NAMES}")


def array_backend(device: str) -> ArrayBackend:
    """The array-API interpreter for `device` (UserError if the name is unknown, or torch
    or the device is absent)."""
    check_device(device)
    try:
        be = backend_for(device)
    except ImportError:
        raise UserError(
            f"device {device!r} needs torch: pip install 'tensorcore-smt[torch]'"
        ) from None
    except (RuntimeError, ValueError) as e:
        raise UserError(f"device {device!r}: {e}") from None
    dev = getattr(be.device, "type", None)
    if dev == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError(f"device {device!r}: torch sees no CUDA device")
    return be
