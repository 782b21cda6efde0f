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
    # floor(log2 x) from the integers (a float would underflow below 2^-1074: fp64 units)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    e -= ROUND_BITS
    q = Fraction(2) ** e
    return math.ceil(x / q) * q


@dataclass(frozen=True)
class NodeBound:
    """(N) for one node: |r - sum v_i| <= delta sum |v_i| + b.

    `tiny_emin`: set when b is nothing but the subnormal part of a rounding into a
    format of that e_min, so that the node also satisfies the max form
    |r - sum v_i| <= delta max(sum |v_i|, 2^tiny_emin) (an IEEE rounding, or a fused
    group whose only loss besides its rounding is relative, without a flush)."""

    delta: Fraction
    b: Fraction
    tiny_emin: int | None = None


@dataclass
class Composed:
    """The error of a computation: <= g M + A (M: sum of the exact terms' magnitudes),
    and, where every node is a chain step in max form (`h` not None), also
    <= h max(M, 2^h_emin).

    The max form of a chain. A node whose children are exact leaves but for one, r, with
    |v_r - V_r| <= h_r max(M_r, 2^e), and which errs by at most delta max(|s|, 2^e) on
    its sum s: |s| <= M + h_r max(M_r, 2^e) <= (1 + h_r) max(M, 2^e), so its result errs
    by at most h_r max(M_r, 2^e) + delta (1 + h_r) max(M, 2^e) <= ((1 + delta)(1 + h_r) -
    1) max(M, 2^e). Over a class with M >= 2^e that is h M: the subnormal parts of the
    intermediate roundings (u 2^e_min each, in A) cost nothing, where the plain form
    charges each u relative to M. Two inexact children break it (their max(M_i, 2^e)
    do not add up to max(M, 2^e)): h becomes None."""

    g: Fraction = Fraction(0)
    A: Fraction = Fraction(0)
    h: Fraction | None = Fraction(0)
    h_emin: int | None = None

    def node(self, children: list[Composed], n: NodeBound) -> Composed:
        """The bound after a node combining `children` (self unused: a constructor)."""
        gmax = max((c.g for c in children), default=Fraction(0))
        inexact = [c for c in children if c.g or c.A or c.h]
        h: Fraction | None = None
        h_emin = None
        if n.tiny_emin is not None and len(inexact) <= 1 and all(c.h is not None for c in children):
            h_r = inexact[0].h if inexact else Fraction(0)
            h = up((1 + n.delta) * (1 + h_r) - 1)
            emins = [n.tiny_emin] + [c.h_emin for c in inexact if c.h_emin is not None]
            h_emin = max(emins)
        return Composed(
            up((1 + n.delta) * (1 + gmax) - 1),
            up((1 + n.delta) * sum((c.A for c in children), Fraction(0)) + n.b),
            h,
            h_emin,
        )

    def normwise(self, e_min: int) -> Fraction:
        """U on |d - exact| / M over the class M >= 2^e_min."""
        plain = up(self.g + self.A * Fraction(2) ** (-e_min))
        if self.h is not None and (self.h_emin is None or self.h_emin <= e_min):
            return min(plain, self.h)
        return plain


LEAF = Composed()


__all__ = ["LEAF", "ROUND_BITS", "Composed", "NodeBound", "up"]
