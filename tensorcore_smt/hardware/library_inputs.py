"""Operands of a library recording, regenerated bit for bit on any CPU from a seed.

Each operand element is drawn from a pool of `POOL` values by an integer hash of its
position: X[i, j] = pool[mix(i, j, salt)]. The pool comes from numpy's PCG64 stream (stable
across numpy versions) seeded with (seed, operand, kind); `mix` uses only integer
multiply, add, and, xor and right shift on non-negative int64 values below 2^63, which
numpy and torch (CPU and CUDA) compute identically. So a GPU builds a 16384 x 16384
operand in milliseconds on the device, and a CPU regenerates any row of A or column of B
without the rest: a recording stores the seed, never the matrices.

Kinds of values (`Kind`):
- ``normal``: standard normal, rounded to the operand format;
- ``wide``: random sign, exponent uniform over a wide range of the format (subnormals
  included for fp16), random significand: alignment and rounding show at every step;
- ``cancel``: one element in eight is +-2^BIG, the others normal times 2^-SMALL: large
  products cancel in an order-dependent way and expose the small ones to each partial
  sum's rounding (the idea of Xie et al., USENIX ATC 2025, spread over random positions).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import ml_dtypes
import numpy as np

from ..formats import Format

POOL = 1 << 16
"""Values in each operand's pool."""

MASK32 = 0xFFFFFFFF


class Kind(str, Enum):
    """What the operands' values are drawn from."""

    NORMAL = "normal"
    WIDE = "wide"
    CANCEL = "cancel"


class Operand(int, Enum):
    """Which operand a pool feeds (its salt)."""

    A = 1
    B = 2
    EXTRA = 3  # the bias (N) or C (M x N)


KIND_CODE = {Kind.NORMAL: 0, Kind.WIDE: 1, Kind.CANCEL: 2}

WIDE_EXPONENTS: dict[Format, tuple[int, int]] = {
    Format.FP16: (-20, 3),  # down into fp16's subnormals; K = 16384 sums stay finite
    Format.BF16: (-40, 20),
    Format.FP32: (-40, 20),
    Format.E4M3: (-6, 4),
}
"""Exponent range of the `wide` kind per operand format."""

CANCEL_SCALES: dict[Format, tuple[int, int]] = {
    Format.FP16: (3, 4),
    Format.BF16: (12, 8),
    Format.FP32: (12, 8),
    Format.E4M3: (3, 2),
}
"""(BIG, SMALL) exponents of the `cancel` kind per operand format."""

NP_DTYPE: dict[Format, Any] = {
    Format.FP16: np.float16,
    Format.BF16: ml_dtypes.bfloat16,
    Format.FP32: np.float32,
    Format.E4M3: ml_dtypes.float8_e4m3fn,
}
BITS_DTYPE: dict[Format, Any] = {
    Format.FP16: np.uint16,
    Format.BF16: np.uint16,
    Format.FP32: np.uint32,
    Format.E4M3: np.uint8,
}
E4M3_MAX = 448.0


def mix(i: Any, j: Any, salt: int) -> Any:
    """Pool index of position (i, j) for a salt: a 32-bit integer hash (murmur-style
    finaliser) taken modulo POOL. `i` and `j` are non-negative int64 numpy arrays or torch
    tensors below 2^20 (broadcast against each other); the same bits on every backend."""
    h = (i * 0x9E3779B1 + j * 0x85EBCA77 + salt * 0x27D4EB2F) & MASK32
    h = h ^ (h >> 15)
    h = (h * 0x2C1B3C6D) & MASK32
    h = h ^ (h >> 12)
    h = (h * 0x297A2D39) & MASK32
    h = h ^ (h >> 15)
    return h & (POOL - 1)


def pool(kind: Kind, fmt: Format, seed: int, operand: Operand) -> np.ndarray:
    """The POOL values of one operand as bit patterns (unsigned, the format's width)."""
    rng = np.random.Generator(np.random.PCG64([seed, int(operand), KIND_CODE[kind]]))
    if kind == Kind.NORMAL:
        x = rng.standard_normal(POOL)
    elif kind == Kind.WIDE:
        lo, hi = WIDE_EXPONENTS[fmt]
        sign = rng.choice(np.array([-1.0, 1.0]), POOL)
        x = sign * np.ldexp(1.0 + rng.random(POOL), rng.integers(lo, hi + 1, POOL))
    else:
        big, small = CANCEL_SCALES[fmt]
        sign = rng.choice(np.array([-1.0, 1.0]), POOL)
        x = np.where(
            rng.random(POOL) < 0.125, sign * 2.0**big, rng.standard_normal(POOL) * 2.0**-small
        )
    if fmt == Format.E4M3:
        x = np.clip(x, -E4M3_MAX, E4M3_MAX)
    return x.astype(np.float32).astype(NP_DTYPE[fmt]).view(BITS_DTYPE[fmt])


def salt(operand: Operand, batch: int = 0) -> int:
    """The hash salt of an operand in batch `batch` of a bmm."""
    return int(operand) * 64 + batch


def block(
    kind: Kind,
    fmt: Format,
    seed: int,
    operand: Operand,
    rows: np.ndarray,
    cols: np.ndarray,
    batch: int = 0,
) -> np.ndarray:
    """Elements [rows][:, cols] of an operand, as values of the format's numpy dtype (A:
    rows of M, columns of K; B: rows of K, columns of N; C: M x N; the bias: one row 0)."""
    p = pool(kind, fmt, seed, operand)
    i = np.asarray(rows, np.int64)[:, None]
    j = np.asarray(cols, np.int64)[None, :]
    return p[mix(i, j, salt(operand, batch))].view(NP_DTYPE[fmt])


def device_operand(
    kind: Kind,
    fmt: Format,
    seed: int,
    operand: Operand,
    shape: tuple[int, int],
    batch: int,
    device: str,
) -> Any:
    """The whole operand as a torch tensor (batch, rows, cols) of the format's dtype on
    `device`, built there from the pool (the same bits as `block`)."""
    import torch

    from .library_calls import TORCH_DTYPE

    signed = {np.uint8: np.int8, np.uint16: np.int16, np.uint32: np.int32}[BITS_DTYPE[fmt]]
    p = torch.from_numpy(pool(kind, fmt, seed, operand).view(signed)).to(device)
    i = torch.arange(shape[0], dtype=torch.int64, device=device)[:, None]
    j = torch.arange(shape[1], dtype=torch.int64, device=device)[None, :]
    mats = [p[mix(i, j, salt(operand, b))] for b in range(batch)]
    return torch.stack(mats).view(getattr(torch, TORCH_DTYPE[fmt]))


__all__ = ["Kind", "Operand", "POOL", "block", "device_operand", "mix", "pool"]
