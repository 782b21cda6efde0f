"""Inputs on which two recipes give row 0 of a call different bits, found by running
seeded inputs (library_inputs: normal, cancelling and wide values) through tc.matmul under
each recipe, and re-checked there. Only row 0 of A matters to row 0 of D, so each try is
one row of A against a few columns of B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hardware.library_calls import ALPHA, BETA, CallClass, Op
from ..hardware.library_inputs import BITS_DTYPE, Kind, Operand, block
from .sources import Recipe

COLUMNS = 8
"""Columns of B per try."""

KINDS = (Kind.CANCEL, Kind.NORMAL, Kind.WIDE)


@dataclass(frozen=True)
class Witness:
    """Row 0 of A and column `col` of B, regenerated from (kind, seed) by
    library_inputs.block (A: rows [0], B: columns [col]), and what each recipe gives."""

    kind: Kind
    seed: int
    col: int
    bits: tuple[int, int]
    width: int

    def as_dict(self) -> dict:
        return {
            "kind": self.kind.value,
            "seed": self.seed,
            "column": self.col,
            "row": 0,
            "d": [f"0x{b:0{self.width // 4}x}" for b in self.bits],
            "inputs": "tensorcore_smt.hardware.library_inputs.block(kind, format, seed, "
            "Operand.A, [0], range(K)) and block(..., Operand.B, range(K), [column])",
        }


def row0(recipe: Recipe, cls: CallClass, a: np.ndarray, b: np.ndarray, extra) -> np.ndarray:
    """Row 0 of D (a: 1 x K, b: K x C) under a recipe, as bits."""
    from ..gemm.emulate import matmul

    kw: dict = {"out_dtype": cls.output_format.spec.name, "instr": recipe.instr}
    if cls.op == Op.ADDMM:
        kw |= {"alpha": ALPHA, "beta": BETA}
    d = matmul(recipe.hypothesis, a, b, extra, **kw)
    return np.asarray(d).view(BITS_DTYPE[cls.output_format]).reshape(-1)


def search(
    r1: Recipe, r2: Recipe, cls: CallClass, n: int, k: int, tries: int, seed: int = 0
) -> Witness | None:
    """A witness that r1 and r2 give row 0 different bits, or None after `tries` tries
    (each try: COLUMNS columns of one seeded input, the kinds in turn)."""
    fmt = cls.operand_format
    cols = np.arange(min(COLUMNS, n))
    for t in range(tries):
        kind = KINDS[t % len(KINDS)]
        s = seed + t
        a = block(kind, fmt, s, Operand.A, np.array([0]), np.arange(k))
        b = block(kind, fmt, s, Operand.B, np.arange(k), cols)
        extra = None
        if cls.extra == "bias":
            extra = block(kind, fmt, s, Operand.EXTRA, np.array([0]), cols)
        elif cls.extra == "c":
            extra = block(kind, fmt, s, Operand.EXTRA, np.array([0]), cols)
        d1, d2 = row0(r1, cls, a, b, extra), row0(r2, cls, a, b, extra)
        diff = np.flatnonzero(d1 != d2)
        if diff.size:
            c = int(diff[0])
            width = cls.output_format.spec.storage
            return Witness(kind, s, int(cols[c]), (int(d1[c]), int(d2[c])), width)
    return None


def confirm(w: Witness, r1: Recipe, r2: Recipe, cls: CallClass, k: int) -> bool:
    """Re-run the witness alone (one row, one column) under both recipes: bits differ and
    are those reported."""
    fmt = cls.operand_format
    a = block(w.kind, fmt, w.seed, Operand.A, np.array([0]), np.arange(k))
    b = block(w.kind, fmt, w.seed, Operand.B, np.arange(k), np.array([w.col]))
    extra = None
    if cls.extra is not None:
        extra = block(w.kind, fmt, w.seed, Operand.EXTRA, np.array([0]), np.array([w.col]))
    got = (int(row0(r1, cls, a, b, extra)[0]), int(row0(r2, cls, a, b, extra)[0]))
    return got == w.bits and got[0] != got[1]


__all__ = ["Witness", "confirm", "row0", "search"]
