"""Value ranges of bit-vector terms, for folding while the symbolic DAG is built.

Every bit-vector node of the symbolic interpreter carries a `Range`: an unsigned interval
and a signed (two's complement) interval that both contain every value the node can take.
They are computed bottom-up from the arguments' ranges with sound transfer functions
(a result that might wrap gets the full interval). The symbolic backend uses them to fold
a node whose range is one value into a constant and a comparison whose answer the ranges
decide into true or false. Both are ordinary constant folding, only with more knowledge:
the model code is the same, the DAG just loses the parts no input can reach (the
exponent of a product that is known to be the largest, the leading-zero count of a value
known to be narrow, a clamp that is never active), so each solver gets a smaller query.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Unsigned [ulo, uhi] and signed [slo, shi] bounds of a `w`-bit value."""

    w: int
    ulo: int
    uhi: int
    slo: int
    shi: int

    @property
    def const(self) -> int | None:
        """The one value the term can take (as unsigned), or None."""
        return self.ulo if self.ulo == self.uhi else None


def full(w: int) -> Range:
    """Every `w`-bit value."""
    return Range(w, 0, (1 << w) - 1, -(1 << (w - 1)), (1 << (w - 1)) - 1)


def _signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) else v


def exact(v: int, w: int) -> Range:
    """The constant `v` (unsigned, < 2^w)."""
    s = _signed(v, w)
    return Range(w, v, v, s, s)


def make(w: int, u: tuple[int, int] | None, s: tuple[int, int] | None) -> Range:
    """A range from optional unsigned and signed bounds, each tightened by the other.

    Bounds outside the width's range are treated as unknown (the operation may wrap)."""
    top, half = (1 << w) - 1, 1 << (w - 1)
    ulo, uhi = u if u is not None and 0 <= u[0] <= u[1] <= top else (0, top)
    slo, shi = s if s is not None and -half <= s[0] <= s[1] < half else (-half, half - 1)
    # unsigned from signed: one side of the sign boundary maps to one unsigned interval
    if slo >= 0:
        ulo, uhi = max(ulo, slo), min(uhi, shi)
    elif shi < 0:
        ulo, uhi = max(ulo, slo + (1 << w)), min(uhi, shi + (1 << w))
    # signed from unsigned
    if uhi < half:
        slo, shi = max(slo, ulo), min(shi, uhi)
    elif ulo >= half:
        slo, shi = max(slo, ulo - (1 << w)), min(shi, uhi - (1 << w))
    if ulo > uhi or slo > shi:  # contradictory bounds: unreachable node, keep it sound
        return full(w)
    return Range(w, ulo, uhi, slo, shi)


def _pow2_ceil_mask(x: int) -> int:
    """The all-ones value with as many bits as `x` (an upper bound of x | y, x ^ y)."""
    return (1 << x.bit_length()) - 1


def add(x: Range, y: Range) -> Range:
    w = x.w
    return make(w, (x.ulo + y.ulo, x.uhi + y.uhi), (x.slo + y.slo, x.shi + y.shi))


def sub(x: Range, y: Range) -> Range:
    w = x.w
    return make(w, (x.ulo - y.uhi, x.uhi - y.ulo), (x.slo - y.shi, x.shi - y.slo))


def mul(x: Range, y: Range) -> Range:
    w = x.w
    corners = [a * b for a in (x.slo, x.shi) for b in (y.slo, y.shi)]
    return make(w, (x.ulo * y.ulo, x.uhi * y.uhi), (min(corners), max(corners)))


def and_(x: Range, y: Range) -> Range:
    return make(x.w, (0, min(x.uhi, y.uhi)), None)


def or_(x: Range, y: Range) -> Range:
    return make(x.w, (max(x.ulo, y.ulo), _pow2_ceil_mask(max(x.uhi, y.uhi))), None)


def xor(x: Range, y: Range) -> Range:
    return make(x.w, (0, _pow2_ceil_mask(max(x.uhi, y.uhi))), None)


def not_(x: Range) -> Range:
    top = (1 << x.w) - 1
    return make(x.w, (top - x.uhi, top - x.ulo), (-1 - x.shi, -1 - x.slo))


def shl(x: Range, n: Range) -> Range:
    w = x.w
    if n.ulo >= w:
        return exact(0, w)
    if n.uhi >= w:
        return make(w, (0, x.uhi << (w - 1)), None)
    return make(w, (x.ulo << n.ulo, x.uhi << n.uhi), None)


def lshr(x: Range, n: Range) -> Range:
    return make(x.w, (x.ulo >> n.uhi, x.uhi >> n.ulo), None)


def ashr(x: Range, n: Range) -> Range:
    w = x.w
    lo_n, hi_n = min(n.ulo, w - 1), min(n.uhi, w - 1)
    ends = [v >> k for v in (x.slo, x.shi) for k in (lo_n, hi_n)]
    return make(w, None, (min(ends), max(ends)))


def hull(x: Range, y: Range) -> Range:
    """Values of either range (an if-then-else of the two)."""
    return make(
        x.w,
        (min(x.ulo, y.ulo), max(x.uhi, y.uhi)),
        (min(x.slo, y.slo), max(x.shi, y.shi)),
    )


def extract(x: Range, hi: int, lo: int) -> Range:
    w = hi - lo + 1
    a, b = x.ulo >> lo, x.uhi >> lo
    if a >> w == b >> w:  # the bits above the field are the same for every value
        mask = (1 << w) - 1
        return make(w, (a & mask, b & mask), None)
    return full(w)


def concat(x: Range, y: Range) -> Range:
    wy = y.w
    w = x.w + wy
    if x.ulo == x.uhi:
        return make(w, ((x.ulo << wy) + y.ulo, (x.ulo << wy) + y.uhi), None)
    return make(w, (x.ulo << wy, (x.uhi << wy) + (1 << wy) - 1), None)


def zext(x: Range, n: int) -> Range:
    return make(x.w + n, (x.ulo, x.uhi), (x.ulo, x.uhi))


def sext(x: Range, n: int) -> Range:
    return make(x.w + n, None, (x.slo, x.shi))


def intersect(x: Range, u: tuple[int, int] | None, s: tuple[int, int] | None) -> Range:
    """`x` narrowed by extra unsigned and/or signed bounds (facts known on one path)."""
    nu = (max(x.ulo, u[0]), min(x.uhi, u[1])) if u else (x.ulo, x.uhi)
    ns = (max(x.slo, s[0]), min(x.shi, s[1])) if s else (x.slo, x.shi)
    if nu[0] > nu[1] or ns[0] > ns[1]:
        return x  # the path is unreachable; keep the plain bounds
    return make(x.w, nu, ns)


def ult(x: Range, y: Range) -> bool | None:
    """x < y (unsigned) when the ranges decide it, else None."""
    if x.uhi < y.ulo:
        return True
    if x.ulo >= y.uhi:
        return False
    return None


def slt(x: Range, y: Range) -> bool | None:
    """x < y (signed) when the ranges decide it, else None."""
    if x.shi < y.slo:
        return True
    if x.slo >= y.shi:
        return False
    return None


def eq(x: Range, y: Range) -> bool | None:
    """x == y when the ranges decide it (disjoint: False), else None."""
    if x.uhi < y.ulo or y.uhi < x.ulo or x.shi < y.slo or y.shi < x.slo:
        return False
    return None
