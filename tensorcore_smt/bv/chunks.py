"""Rows in chunks: the one loop by which every batch is cut into bounded pieces, and the
one by which an array interpreter runs a row function over them.

Memory stays bounded by the chunk whatever the batch: the numpy interpreter's arrays
stay cache-sized (`CHUNK_ROWS`), a GPU's big enough to keep it busy, a compiled runner's
tiles short enough to stop at a Ctrl-C (engine/tiles.py), a streamed batch within memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .core import BV

CHUNK_ROWS = 32768
"""Rows per vector-interpreter pass: keeps arrays cache-sized (measured optimum here)."""


def spans(n: int, size: int) -> Iterator[tuple[int, int]]:
    """The chunks [lo, hi) of [0, n), `size` items each (the last may be shorter)."""
    size = max(1, size)
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


def host_bits(be: Any, d: BV, n: int) -> np.ndarray:
    """A result of the interpreter `be` for n rows as a numpy array (uint64, or object
    above 64 bits), a constant broadcast to every row."""
    to_host = getattr(be, "to_host", None)
    if to_host is not None:
        return to_host(d.v, n)
    v = d.v
    if isinstance(v, np.ndarray) and v.ndim == 1:
        return v
    return np.full(n, int(v), dtype=object if d.w > 64 else np.uint64)


def run_rows_on(
    be: Any,
    fn: Callable[..., BV],
    operands: Sequence[tuple[np.ndarray | None, int]],
    out: np.ndarray,
    step: int = CHUNK_ROWS,
) -> np.ndarray:
    """out[r] = fn(*operands of row r) on the array interpreter `be`, chunk by chunk:
    each operand is (array, width): an (N, k) array becomes a list of k BVs (its
    columns), an (N,) array one BV, None stays None. Returns `out`."""
    for lo, hi in spans(len(out), step):
        args = []
        for x, w in operands:
            if x is None:
                args.append(None)
            elif np.ndim(x) == 2:
                args.append([BV(be, col, w) for col in be.columns(x[lo:hi], w)])
            else:
                args.append(BV(be, be.lanes(x[lo:hi], w), w))
        out[lo:hi] = host_bits(be, fn(*args), hi - lo)
    return out
