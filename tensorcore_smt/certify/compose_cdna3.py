"""The composed bound (N) of CDNA3's round-down units, FDRDA (xf32/fp16/bf16) and GFDRDA
(fp8) of model/cdna3.py: the figures of one group as exact rationals. compose.py turns
them into nodes and chains the groups (fdrda_preconditions, fdrda_instruction there);
this module needs nothing of it but the class's smallest significands (rho_bits: log2 of
1/rho for a and b, as inputs/implications.product_rho_bits gives them).

One group: products p_1..p_n (exact, unnormalised exponent e_k = e_a + e_b, fb = mbits_a
+ mbits_b fraction bits), c (format c_fmt, exponent e_c; a zero or subnormal c has
e_c = emin(c_fmt)), e = e_dot the largest exponent of a nonzero product, G = 2^(e - F).
A = |c| + sum |p_k| is the node's sum |v_i|. Every product is a multiple of
Q = 2^(emin_a - mbits_a + emin_b - mbits_b), c of Q_c = 2^(emin_c - mbits_c).

 1. the products are truncated toward zero to G: each loses less than one step and no
    more than itself, |loss_k| <= min(|p_k|, lam(e)), lam(e) = max(0, G - Q) (a multiple
    of Q below G); the product at e is exact when fb <= F.
 2. case e_c <= e: the dot product is exact on the grid of F2 + 1 fraction bits at e
    (F2 + 1 >= F); c is floored to G, one-sided toward -inf: |loss_c| <= lam_c(e) =
    max(0, G - Q_c), however small a negative c is. With X = lam_c (+ lam(e) for the top
    product when fb > F) and y = the losses of the other m = n - 1 products,
        |a| <= X + y,   A >= R(e) + sum_losing |p_k| >= R(e) + y,
    R(e) the smallest nonzero product of exponent e in the class (2^e with normal
    factors, 2^(e - mbits) with a subnormal one). (X + y) / (R + y) is monotone in y, so
        |a| / A <= alpha(e) = max(X / R, (X + m lam) / (R + m lam)).
    Case e_c > e: the dot product is floored to 2^(e_c - F2 - 1) <= 2^-(F2+1) |c| (c
    normal; c itself exact when mbits_c <= F, else floored by < 2^(e_c - F) <= 2^-F |c|);
    with the products as above, by the mediant |a| / A <= max(2^-(F2+1) [+ 2^-F],
    alpha(e)). A zero or subnormal c above every product (only when emin_a + emin_b <
    emin_c) adds 2^(emin_c - F2 - 1) absolute, a subnormal c floored at its own exponent
    (mbits_c > F; also when every product is zero) 2^(emin_c - F), a flushed subnormal c
    (flush_inputs) 2^emin_c. alpha is the maximum over every exponent e the formats
    allow: an exact finite maximum, which the formats' range keeps far below FDA's
    m 2^-F / rho (with fp16 factors no product can lose bits while G <= 2^-48).
    GFDRDA: the even and the odd products are truncated at their own maxima e and
    e' <= e (each half's top product exact), the half without e is floored to G (one
    loss X-type, lam(e)); its other products lose at most lam(e') each, and its top
    R(e') adds to A: |a| / A <= (X + y + y') / (R(e) + R(e') + y + y') with X = lam_c +
    lam(e), y <= m1 lam(e), y' <= m2 lam(e') (m1 = m2 = ceil(n/2) - 1), maximised over
    both ends and every e' <= e (and the FDRDA form when the other half is empty); its
    c dropped when e_c < e - F - 1 loses |c| < G / 2 <= lam_c.
 3. the fixed-point sum T = D + C is exact; |T| <= A (1 + alpha) + b_a.
 4. T floored to 32 significant bits of its own exponent (E8M31, toward -inf): less than
    one ulp, |r1| <= u1 max(|T|, 2^emin), u1 = 2^-31.
 5. rounded to fp32 (RNE): |r2| <= u max(|mid|, 2^emin), u = 2^-24 (a flushed output:
    2^emin absolute).
So delta = alpha + (1 + alpha)((1 + u1)(1 + u) - 1) and b = b_a (1 + u1)(1 + u) plus,
below the root, the subnormal parts u1 2^emin (1 + u) + u 2^emin (at the root they are
relative to M >= 2^emin, as in compose.fda_group).

No overflow: truncation toward zero never grows a value and floors lower positive values,
so only a negative sum can grow past sum |v_i|, by less than the floor steps (G for c,
G per GFDRDA half, 2^(e_c - F2 - 1) for the dot product) and one E8M31 ulp. A group
whose c is any finite fp32 value (the previous group's result in a chain, or of the
previous instruction in a GEMM chain) and whose n products are at most P_max each stays
below the fp32 overflow threshold, max + ulp/2, when
    max + n P_max + growth + ulp_E8M31(top) < max + ulp_fp32(top) / 2,
which holds for fp16 and fp8 factors (products below 2^36 beside a half ulp of 2^103).
With bf16 or xf32 factors it fails, rightly: in a chain, c = max - 2 ulp and first
products summing to 2^103 (a tie, rounded up to max - ulp), then products of 1.5 ulp,
have M = max and give Inf. Those units are refused.
"""

from __future__ import annotations

from fractions import Fraction

from ..formats import Format
from ..model.params import Algorithm, ModelParams, Split
from ..model.sequential import _fmt

MID = Format.E8M31
"""The format of the round-down step (model/cdna3.py: the sum floored to E8M31)."""

OUT = Format.FP32
"""The format the unit rounds to (model/cdna3.py: fp32, RNE)."""


def _two(e: int) -> Fraction:
    return Fraction(2) ** e


def _max_finite(fmt: Format) -> Fraction:
    s = fmt.spec
    return (2 - _two(-s.mbits)) * _two(s.emax)


def unit_formats(p: ModelParams) -> tuple[Format, Format]:
    """The formats the unit decodes a and b in (model/cdna3.py's _products)."""
    return _fmt(p.a_fmt, p), _fmt(p.b_fmt, p)


def smallest_products(p: ModelParams, rho_bits: tuple[int, int]) -> dict[int, Fraction]:
    """R(e) for every unnormalised product exponent e the formats allow: the smallest
    nonzero |a b| of exponent e, a significand at emin as small as 2^-rho_bits."""
    af, bf = unit_formats(p)
    sa, sb = af.spec, bf.spec
    ra, rb = _two(-rho_bits[0]), _two(-rho_bits[1])
    out: dict[int, Fraction] = {}
    for e in range(sa.emin + sb.emin, sa.emax + sb.emax + 1):
        # only the splits at a's or b's emin can hold a significand below 1: the ends
        ends = {max(sa.emin, e - sb.emax), min(sa.emax, e - sb.emin)}
        out[e] = min(
            (ra if ea == sa.emin else 1) * (rb if e - ea == sb.emin else 1) for ea in ends
        ) * _two(e)
    return out


def _ends(X: Fraction, R: Fraction, y_max: Fraction) -> Fraction:
    """max of (X + y) / (R + y) over 0 <= y <= y_max (monotone in y: an end)."""
    return max(X / R, (X + y_max) / (R + y_max))


def group_alpha(
    p: ModelParams, n: int, c_fmt: Format, rho_bits: tuple[int, int]
) -> tuple[Fraction, int | None]:
    """(alpha, e): the largest relative alignment error of a group of n products and c in
    c_fmt (steps 1-2 of the module docstring), and the exponent e of the dot product that
    attains it (None: c above the products)."""
    af, bf = unit_formats(p)
    sa, sb, sc = af.spec, bf.spec, c_fmt.spec
    F, F2 = p.F, p.F2
    exact_top = sa.mbits + sb.mbits <= F
    Q = _two(sa.emin - sa.mbits + sb.emin - sb.mbits)
    Qc = _two(sc.emin - sc.mbits)
    R = smallest_products(p, rho_bits)

    def lam(e: int) -> Fraction:
        return max(Fraction(0), _two(e - F) - Q)

    best: tuple[Fraction, int | None] = (_two(-(F2 + 1)) + (_two(-F) if sc.mbits > F else 0), None)
    gfdrda = p.algorithm == Algorithm.GFDRDA and n >= 2
    for e in sorted(R):
        lam_c = max(Fraction(0), _two(e - F) - Qc)
        X = lam_c + (0 if exact_top else lam(e))
        if not gfdrda:
            a = _ends(X, R[e], (n - 1) * lam(e))
        else:
            m = (n + 1) // 2 - 1
            a = _ends(X, R[e], m * lam(e))  # the other half empty
            for e2 in (x for x in R if x <= e):
                X2 = X + lam(e) + (0 if exact_top else lam(e2))
                a = max(a, _ends(X2, R[e] + R[e2], m * lam(e) + m * lam(e2)))
        if a > best[0]:
            best = (a, e)
    return best


def group_node(
    p: ModelParams,
    n: int,
    c_fmt: Format,
    rho_bits: tuple[int, int],
    c_flushable: bool,
    root: bool,
) -> tuple[Fraction, Fraction, Fraction, int | None]:
    """(delta, b, alpha, e) of (N) for one group (module docstring, steps 1-5), exact
    (compose.py rounds them upward); `c_flushable`: a subnormal c may be flushed;
    `root`: the group's result is the whole computation's."""
    af, bf = unit_formats(p)
    sc = c_fmt.spec
    alpha, e = group_alpha(p, n, c_fmt, rho_bits)
    u1 = _two(1 - MID.spec.precision)  # a directed rounding: below one ulp
    u = _two(-OUT.spec.precision)
    b_a = Fraction(0)
    if af.spec.emin + bf.spec.emin < sc.emin:  # a zero or subnormal c above the products
        b_a += _two(sc.emin - p.F2 - 1)
    if sc.mbits > p.F:  # a subnormal c at or above the products, floored to F bits
        b_a += _two(sc.emin - p.F)
    if c_flushable:
        b_a += _two(sc.emin)
    b = b_a * (1 + u1) * (1 + u)
    if not root:
        b += u1 * _two(MID.spec.emin) * (1 + u) + u * _two(OUT.spec.emin)
    if p.flush_outputs or p.flush_sums:
        b += _two(OUT.spec.emin)
    delta = alpha + (1 + alpha) * ((1 + u1) * (1 + u) - 1)
    return delta, b, alpha, e


def overflow_margin(p: ModelParams, rho_bits: tuple[int, int]) -> Fraction:
    """The fp32 overflow threshold (max + ulp/2, RNE) less the largest |E8M31 sum| a group
    reaches with any finite c (module docstring, "No overflow"); > 0: no group overflows."""
    af, bf = unit_formats(p)
    top = _max_finite(OUT)
    p_max = min(_max_finite(af) * _max_finite(bf), top)
    e_top = max(e for e, r in smallest_products(p, rho_bits).items() if r <= top)
    n = max(hi - lo for lo, hi in p.groups())
    halves = 1 if p.algorithm == Algorithm.GFDRDA and n >= 2 else 0
    c_fmts = {p.c_fmt, p.d_fmt}
    growth = (1 + halves) * _two(e_top - p.F)
    growth += max(
        _two(f.spec.emax - p.F2 - 1) + (_two(f.spec.emax - p.F) if f.spec.mbits > p.F else 0)
        for f in c_fmts
    )
    c_max = max(_max_finite(f) for f in c_fmts)
    reach = c_max + n * p_max + growth + _two(OUT.spec.emax - MID.spec.mbits)
    return top + _two(OUT.spec.emax - OUT.spec.precision) - reach


def refusal(p: ModelParams, rho_bits: tuple[int, int], ab_normal: bool) -> str | None:
    """Why the argument does not cover `p` (compose.preconditions has checked the class:
    finite, no overflow, no underflow), or None; `ab_normal`: the class keeps a and b
    normal."""
    if p.scale_fmt is not None or p.split != Split.NONE:
        return "no composed bound for block-scaled or split instructions"
    if p.d_fmt != OUT or p.c_fmt.spec.precision > OUT.spec.precision:
        return "the FDRDA argument takes an fp32 d and a c no wider than fp32"
    if p.F2 + 1 < p.F:
        return f"F2 + 1 = {p.F2 + 1} < F = {p.F}: the model needs F2 >= F - 1"
    if p.flush_inputs and not ab_normal:
        return "flushed subnormal inputs: add --where normal-only:ab"
    if overflow_margin(p, rho_bits) <= 0:
        return (
            "round-down alignment can grow a term past the output range: with "
            f"{p.a_fmt.spec.name} products a chained sum near the largest fp32 number can "
            "round to Inf (covered: products far below its last ulp, fp16 and fp8)"
        )
    return None


__all__ = [
    "MID",
    "OUT",
    "group_alpha",
    "group_node",
    "overflow_margin",
    "refusal",
    "smallest_products",
    "unit_formats",
]
