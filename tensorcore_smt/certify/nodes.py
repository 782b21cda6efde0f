"""The node algebra of composed bounds (compose.py's module docstring, (N)): a node's
error |r - sum v_i| <= delta sum |v_i| + b, composed into g M + A over a tree, every
figure an exact rational rounded upward."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

ROUND_BITS = 60
"""Significant bits kept (rounded upward) by every step of the composition."""


def up(x: Fraction) -> Fraction:
    """x rounded upward to a dyadic rational of ROUND_BITS significant bits."""
    if x <= 0:
        return Fraction(0)
    e = math.floor(math.log2(x)) - ROUND_BITS
    q = Fraction(2) ** e
    return math.ceil(x / q) * q


@dataclass(frozen=True)
class NodeBound:
    """(N) for one node: |r - sum v_i| <= delta sum |v_i| + b."""

    delta: Fraction
    b: Fraction


@dataclass
class Composed:
    """The error of a computation: <= g M + A (M: sum of the exact terms' magnitudes)."""

    g: Fraction = Fraction(0)
    A: Fraction = Fraction(0)

    def node(self, children: list[Composed], n: NodeBound) -> Composed:
        """The bound after a node combining `children` (self unused: a constructor)."""
        gmax = max((c.g for c in children), default=Fraction(0))
        return Composed(
            up((1 + n.delta) * (1 + gmax) - 1),
            up((1 + n.delta) * sum((c.A for c in children), Fraction(0)) + n.b),
        )

    def normwise(self, e_min: int) -> Fraction:
        """U on |d - exact| / M over the class M >= 2^e_min."""
        return up(self.g + self.A * Fraction(2) ** (-e_min))


LEAF = Composed()


__all__ = ["LEAF", "ROUND_BITS", "Composed", "NodeBound", "up"]
