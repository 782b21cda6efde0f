"""The oracle interface: a source of d bits for input vectors of one instruction.

Every oracle kind (identify/oracle.py: variants, files, programs, the GPU; identify/cpu.py:
the CPU's dot-product instruction; validation/mmasim.py) implements it; the kinds import
this module, and identify/oracle.py chooses among them. It lives in the validation layer,
below identify, so that an oracle implemented here (MMA-Sim) needs nothing above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..model.params import ModelParams


class OracleError(UserError):
    """An oracle that could not answer, or answered something malformed."""


@dataclass
class Oracle:
    """A source of d bits for input vectors of one instruction."""

    spec: str
    p: ModelParams
    calls: int = 0
    vectors: int = 0

    can_ask: bool = True

    def ask(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """d bits for the rows (a: (N, K), b: (N, K), c: (N,)); counts calls and vectors."""
        d = self._answer(a, b, c)
        self.calls += 1
        self.vectors += len(c)
        return d

    def _answer(self, a, b, c) -> np.ndarray:
        raise NotImplementedError

    def recorded(self) -> list[tuple[list[int], list[int], int, int]]:
        """Rows answered before any question was asked (a, b, c, d): file oracles."""
        return []
