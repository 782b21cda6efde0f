"""Batch invariance asked of torch directly (torch:cpu, or torch:cuda on a GPU): row 0 of
A[:M] @ B for every asked M, on seeded inputs (library_inputs, cancelling values by
default: they expose a change of summation order), and the M at which row 0's bits change.
Each change is its own witness: the inputs (kind, seed) and the first column whose bits
differ between the two M. No recipe is involved, so nothing is re-run through the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hardware.library_calls import CallClass, run
from ..hardware.library_inputs import Kind, Operand, device_operand
from ..hardware.library_record import Oracle, kept_bits


@dataclass
class LiveChange:
    m_before: int
    m: int
    column: int
    bits: tuple[int, int]
    width: int

    def as_dict(self) -> dict:
        return {
            "m_before": self.m_before,
            "m": self.m,
            "step": "differs",
            "witness": {
                "row": 0,
                "column": self.column,
                "d": [f"0x{b:0{self.width // 4}x}" for b in self.bits],
            },
        }


@dataclass
class LiveReport:
    cls: CallClass
    n: int
    k: int
    oracle: str
    kind: Kind
    seed: int
    ms: list[int]
    changes: list[LiveChange] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "varies" if self.changes else "invariant on these inputs"

    def as_dict(self) -> dict:
        return {
            "call": self.cls.name,
            "n": self.n,
            "k": self.k,
            "source": self.oracle,
            "inputs": {"kind": self.kind.value, "seed": self.seed},
            "m": {"count": len(self.ms), "min": self.ms[0], "max": self.ms[-1]},
            "verdict": self.verdict,
            "changes": [c.as_dict() for c in self.changes],
        }


def live_scan(
    oracle: Oracle, cls: CallClass, n: int, k: int, ms: list[int], kind: Kind, seed: int
) -> LiveReport:
    """Row 0 of the call at every M of `ms` on one seeded input; the M where it changes."""
    dev = oracle.device
    fmt, top = cls.operand_format, max(ms)
    A = device_operand(kind, fmt, seed, Operand.A, (top, k), cls.batch, dev)
    B = device_operand(kind, fmt, seed, Operand.B, (k, n), cls.batch, dev)
    extra = None
    if cls.extra == "bias":
        extra = device_operand(kind, fmt, seed, Operand.EXTRA, (1, n), 1, dev)[0, 0]
    rep = LiveReport(cls, n, k, oracle.value, kind, seed, ms)
    rows, cols = np.array([0]), np.arange(n)
    prev, prev_m = None, None
    for m in ms:
        x = extra
        if cls.extra == "c":
            x = device_operand(kind, fmt, seed, Operand.EXTRA, (m, n), 1, dev)[0]
        row = kept_bits(run(cls, A[:, :m], B, x), rows, cols)[0, 0]
        if prev is not None and not np.array_equal(row, prev):
            c = int(np.flatnonzero(row != prev)[0])
            width = cls.output_format.spec.storage
            rep.changes.append(LiveChange(prev_m, m, c, (int(prev[c]), int(row[c])), width))
        prev, prev_m = row, m
    return rep


__all__ = ["LiveReport", "live_scan"]
