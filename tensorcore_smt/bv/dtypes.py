"""The unsigned numpy dtypes that hold bit patterns, by width in bits: the one table every
layer uses to store, view and widen patterns (8, 16, 32 and 64 bits)."""

from __future__ import annotations

import numpy as np

UNSIGNED: dict[int, np.dtype] = {w: np.dtype(f"uint{w}") for w in (8, 16, 32, 64)}
"""Width in bits -> the unsigned dtype of exactly that width."""


def unsigned_holding(bits: int) -> np.dtype:
    """The narrowest unsigned dtype with at least `bits` bits (ValueError beyond 64)."""
    for w, dt in UNSIGNED.items():
        if bits <= w:
            return dt
    raise ValueError(f"no unsigned dtype holds {bits} bits")


def bit_view(a: np.ndarray) -> np.ndarray:
    """The bit patterns of `a`: `a` itself when it is unsigned, else a view of it as the
    unsigned dtype of its width (float16, bfloat16, float32 values as their bits)."""
    return a if a.dtype.kind == "u" else a.view(UNSIGNED[8 * a.dtype.itemsize])
