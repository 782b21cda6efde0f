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


Outputs = OutputGrid | OutputList
