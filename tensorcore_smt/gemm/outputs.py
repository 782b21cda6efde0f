"""Which operand rows each output of a GEMM reads, handed out a range at a time.

A GEMM's outputs are numbered o = 0 .. n-1; output o reads row `ia[o]` of A's operand
table and column `ib[o]` of B's. `OutputGrid` is matmul's numbering (batch, row, column
in row-major order) computed for one range of outputs at a time, so no index array over
all M x N outputs is ever made; `OutputList` holds explicit index arrays (any order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OutputGrid:
    """Outputs of `batch` GEMMs of M x N, row-major: output o is (bi, m, n) with
    o = (bi * M + m) * N + n; it reads row bi * M + m of A and column bi * N + n of B."""

    batch: int
    M: int
    N: int

    def __len__(self) -> int:
        return self.batch * self.M * self.N

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(ia, ib) int64 for outputs [lo, hi)."""
        o = np.arange(lo, hi, dtype=np.int64)
        bi, rem = np.divmod(o, self.M * self.N)
        m, n = np.divmod(rem, self.N)
        return bi * self.M + m, bi * self.N + n


@dataclass(frozen=True)
class OutputList:
    """Outputs with explicit index arrays: output o reads row ia[o] of A, column ib[o]
    of B (any order)."""

    ia: np.ndarray
    ib: np.ndarray

    def __len__(self) -> int:
        return len(self.ia)

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(ia, ib) int64 for outputs [lo, hi)."""
        return (
            np.ascontiguousarray(self.ia[lo:hi], dtype=np.int64),
            np.ascontiguousarray(self.ib[lo:hi], dtype=np.int64),
        )


@dataclass(frozen=True)
class TileOutputs:
    """The outputs of some output tiles of an `OutputGrid` (a stream-K kernel's tiles that
    share a plan), tile after tile, row-major within a tile: index arrays are made one
    range at a time (`take`), never over all of them at once. `tiles`: tile numbers of
    `grid` (plan.TileGrid) in the order they are taken."""

    grid: object  # plan.TileGrid
    tiles: np.ndarray

    def __post_init__(self) -> None:
        g = self.grid
        bi, tm, tn = g.coords(self.tiles)
        m0, n0 = tm * g.tile_m, tn * g.tile_n
        rows = np.minimum(m0 + g.tile_m, g.M) - m0
        cols = np.minimum(n0 + g.tile_n, g.N) - n0
        starts = np.concatenate(([0], np.cumsum(rows * cols)))
        for k, v in dict(bi=bi, m0=m0, n0=n0, cols=cols, starts=starts).items():
            object.__setattr__(self, "_" + k, v)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def take(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ia, ib, flat) int64 for outputs [lo, hi): the row of A and column of B each
        reads (as OutputGrid numbers them) and its index in the row-major output."""
        g = self.grid
        o = np.arange(lo, hi, dtype=np.int64)
        k = np.searchsorted(self._starts, o, side="right") - 1
        dm, dn = np.divmod(o - self._starts[k], self._cols[k])
        bi = self._bi[k]
        ia = bi * g.M + self._m0[k] + dm
        ib = bi * g.N + self._n0[k] + dn
        return ia, ib, ia * g.N + (self._n0[k] + dn)


Outputs = OutputGrid | OutputList
