"""When two fused units that differ only in the zero-exponent threshold `e_zero` are
equal, stated as an argument over the model's own steps (model/fda.py), and the rows
that separate them where the argument does not apply.

In a fused group (FDA, model/fda.py step 3) every zero term counts as exponent e_zero
in the maximum e_max, and every term is aligned to the grid 2^(e_max - F). Take two
units X, Y equal but for e_zero = lo < hi (None: zero terms ignored, the lowest).
On one input, let M be the largest exponent of a nonzero term.
 - No zero term, or M >= hi: e_max is the same in X and Y, and so is every later step.
 - A zero term and M < hi: Y aligns to e_max = hi, X to max(M, lo) <= hi. Every nonzero
   term then has an exponent below hi: it is one of the group's terms S whose least
   possible exponent lies below hi (the products, c, or both; `kinds`), and since a
   zero term is one of the group's c and L products, at most n = min(|S|, L) of them
   are nonzero. If no term can lie below hi (S empty), every term is zero and both sums
   are zero with the same sign rule. Otherwise the argument needs
   (a) the register to hold n terms: each lies below 2^int_bits units of either unit's
       e_max, so n <= 2^carry_bits keeps every partial sum inside it (no wrap, no
       renormalising shift); and
   (b) one of: the grid 2^(hi - F) lies at or below the least bit any term of S can
       carry (its format's 2^(e_min - m); a product's is the sum of its operands'), so
       neither unit drops a bit (X's grid is finer still) and both round the exact sum;
       an exact register (align=exact), which drops none at any F; or n = 1, alignment
       by truncation and rounding toward zero with the grid 2^(hi - F) at or below the
       output's finest step: one term truncated to a grid finer than every step of the
       output rounds toward zero as the term itself does (the grids are nested powers
       of two), the "floor below what the output can show" case.
   Where terms of the other sign than c enter by their ones' complement
   (opposing=ones), each is one unit of the grid short of its negation, so the grid
   shows through a sum of two or more: the argument then needs n = 1 (a lone term's
   complement is read back exactly).
So X = Y whenever every group meets these conditions. Where they fail, the rows of
`separating_rows` put terms of S below the floor (a tiny c, products whose bits lie
between the two grids, pairs of them across the output's rounding steps, and many
large terms just below the floor that wrap a short register at their own e_max), with
zero products raising e_max to e_zero; run on both units they either separate them
or leave the question to the solvers. Tested against every input of tiny units over a
grid of variants (tests/test_zero_exponent.py). Hawkeye's FP8 floor of -139 against
the preset's -133 (Badash et al. 2026) and Ampere's -131 against -133 on fp16
products are equal this way: no term there has an exponent below hi (an fp32 c's
exponent is at least e_min = -126, an fp16 product's at least -28); bf16 and tf32
products reach far below fp32's floors, and rows separate those."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction

from ..formats import Format, Rounding, round_fraction, value_of
from .params import Algorithm, CAddend, ModelParams, Opposing, Sparsity, Tf32Input
from .terms import AlignMode, ProductExponent

Row = tuple[list[int], list[int], int]
"""(a bits, b bits, c bits): one input of the unit."""


@dataclass(frozen=True)
class TermKind:
    """One kind of a group's terms: the least exponent a nonzero one carries in the
    alignment's maximum, the exponent of the least bit it can have, and how many a
    group holds."""

    name: str
    min_exp: int
    low_bit: int
    count: int


def only_e_zero_differs(p1: ModelParams, p2: ModelParams) -> bool:
    """Whether `p1` and `p2` differ in e_zero and in nothing else."""
    return p1.e_zero != p2.e_zero and replace(p1, e_zero=p2.e_zero) == p2


def _operand(fmt: Format, p: ModelParams) -> tuple[int, int]:
    """(least exponent, least bit) of a nonzero a or b of format `fmt` as the unit reads
    it: its own value's bits, its exponent as decoded in the format the unit unpacks to
    (a subnormal read in a wider format is normal there, with its leading bit's exponent)."""
    own = Format.FP32 if fmt == Format.TF32 and p.tf32 == Tf32Input.FULL else fmt
    low = own.spec.emin - own.spec.mbits
    read = p.unpack if p.unpack is not None else own
    return max(low, read.spec.emin), low


def kinds(p: ModelParams, group: int) -> list[TermKind]:
    """The kinds of nonzero terms group `group` of `p` can hold: its products and its c
    (none in the first group when c is added after the chain; the previous group's
    result, in d's format, in a later one)."""
    lo, hi = p.groups()[group]
    ea, la = _operand(p.a_fmt, p)
    eb, lb = _operand(p.b_fmt, p)
    low = la + lb
    prod_exp = ea + eb if p.product_exponent == ProductExponent.UNNORMALIZED else low
    out = [TermKind("products", prod_exp, low, hi - lo)]
    if group == 0 and p.c_add == CAddend.AFTER:
        return out
    cf = p.c_fmt if group == 0 else p.d_fmt
    out.append(TermKind("c", cf.spec.emin, cf.spec.emin - cf.spec.mbits, 1))
    return out


def _floor(e: int | None) -> str:
    return "none (zeros ignored)" if e is None else str(e)


def equal_by_floor(p1: ModelParams, p2: ModelParams) -> list[str] | None:
    """The argument's steps (module docstring) when the FDA units `p1` and `p2`, equal
    but for e_zero, compute the same d on every input; None where it does not apply or
    its conditions fail (the units may still be equal)."""
    if not only_e_zero_differs(p1, p2) or p1.algorithm != Algorithm.FDA:
        return None
    if p1.scale_fmt is not None or p1.sparse != Sparsity.NONE:
        return None
    hi = max(e for e in (p1.e_zero, p2.e_zero) if e is not None)
    lo = min((e for e in (p1.e_zero, p2.e_zero) if e is not None), default=None)
    lo = lo if None not in (p1.e_zero, p2.e_zero) else None
    steps = [
        f"e_zero = {_floor(lo)} against {hi}: they differ only on inputs with a zero term "
        f"whose nonzero terms all lie below 2^{hi}"
    ]
    for g in range(len(p1.groups())):
        below = [k for k in kinds(p1, g) if k.min_exp < hi]
        where = f"group {g + 1}: " if len(p1.groups()) > 1 else ""
        if not below:
            steps.append(
                f"{where}no nonzero term has an exponent below {hi} ("
                + ", ".join(f"{k.name} >= 2^{k.min_exp}" for k in kinds(p1, g))
                + "): a zero term decides e_max only when every term is zero"
            )
            continue
        names = " and ".join(k.name for k in below)
        n = sum(k.count for k in below)
        least = min(k.low_bit for k in below)
        # a zero term is one of the group's terms (c and its products), so at most
        # `most` of them are nonzero when a zero term decides e_max
        most = min(n, p1.groups()[g][1] - p1.groups()[g][0])
        if p1.carry_bits is not None and most > 1 << p1.carry_bits:
            return None
        one = most <= 1
        step = p1.out_fmt.spec.emin - p1.out_fmt.spec.mbits
        if p1.opposing == Opposing.ONES and not one:
            return None
        if p1.align == AlignMode.EXACT:
            grid = "an exact register drops no bit"
        elif hi - p1.F <= least:
            grid = (
                f"the floor's grid 2^({hi} - F) = 2^{hi - p1.F} lies at or below their least "
                f"bit 2^{least}, so no bit is dropped"
            )
        elif (
            one
            and p1.align == AlignMode.TRUNCATE
            and p1.rounding == Rounding.RZ
            and (hi - p1.F <= step)
        ):
            grid = (
                f"beside a zero term at most one of them is nonzero, and its truncation to "
                f"the floor's grid 2^{hi - p1.F} (or a finer one) lies on or above every "
                f"step of the output, whose finest is 2^{step}: rounding toward zero gives "
                "the same d"
            )
        else:
            return None
        carry = (
            ""
            if p1.carry_bits is None
            else f"; at most {most} of them beside a zero term fit {p1.carry_bits} carry bits"
        )
        steps.append(f"{where}only {names} can lie below 2^{hi}: {grid}{carry}")
    steps.append("so both units give the same d on every input")
    return steps


def _shapes(fmt: Format) -> list[Fraction]:
    """Significands in [1, 2) that probe a grid: 1, one ulp above, the largest."""
    ulp = Fraction(1, 1 << fmt.spec.mbits)
    return sorted({Fraction(1), 1 + ulp, 2 - ulp})


def _exact(v: Fraction, fmt: Format) -> int | None:
    """The pattern of `v` in `fmt`, or None when `fmt` cannot hold it exactly."""
    bits = round_fraction(v, fmt)
    return bits if value_of(bits, fmt) == v else None


def _c_values(p: ModelParams, hi: int) -> list[int]:
    """Patterns of c below 2^(hi + 1): every binade's shapes from c's least bit up."""
    s = p.c_fmt.spec
    out = []
    for e in range(s.emin - s.mbits, min(hi, s.emax) + 1):
        for m in _shapes(p.c_fmt):
            bits = _exact(m * Fraction(2) ** e, p.c_fmt)
            if bits is not None and bits not in out:
                out.append(bits)
    return out


def _products(p: ModelParams, hi: int) -> list[tuple[int, int]]:
    """(a, b) patterns whose products lie below 2^(hi + 1): per binade 2^e from the least
    product bit up, a of each shape times a power-of-two b, both normal where they can
    be (the product's exponent in the alignment is then e itself; a subnormal operand
    counts as its format's e_min, which can lift the term above the floor)."""
    low = kinds(p, 0)[0].low_bit
    sa, sb = p.a_fmt.spec, p.b_fmt.spec
    out = []
    for e in range(low, hi + 1):
        normal = range(max(sa.emin, e - sb.emax), min(sa.emax, e - sb.emin) + 1)
        first = max(sa.emin - sa.mbits, e - sb.emax)
        least = range(first, min(sa.emax, e - sb.emin + sb.mbits, first + 3 + sa.mbits) + 1)
        for m in _shapes(p.a_fmt):
            for x in [*normal[:1], *least]:
                a = _exact(m * Fraction(2) ** x, p.a_fmt)
                b = _exact(Fraction(2) ** (e - x), p.b_fmt)
                if a is not None and b is not None:
                    out.append((a, b))
                    break
    return out


def _carry_rows(p: ModelParams, hi: int, n: int) -> list[tuple[list[tuple[int, int]], int]]:
    """(products, c) that fill the register where a zero term does not raise e_max: m =
    1..n largest products (every significand bit set) of one binade just below 2^hi and
    one sign, with c zero or the largest c of that binade. Aligned to their own e_max
    they can wrap a register of few carry bits; aligned to e_zero they fit."""
    sa, sb, sc = p.a_fmt.spec, p.b_fmt.spec, p.c_fmt.spec
    zc = round_fraction(Fraction(0), p.c_fmt)
    out: list[tuple[list[tuple[int, int]], int]] = []
    for e in range(hi - 4, hi):
        x = max(sa.emin, e - sb.emax)
        a = _exact(max(_shapes(p.a_fmt)) * Fraction(2) ** x, p.a_fmt)
        b = _exact(max(_shapes(p.b_fmt)) * Fraction(2) ** (e - x), p.b_fmt)
        if a is None or b is None or not sb.emin <= e - x:
            continue
        c = _exact(max(_shapes(p.c_fmt)) * Fraction(2) ** e, p.c_fmt)
        cs = [zc] if c is None or e < sc.emin or p.c_add == CAddend.AFTER else [zc, c]
        for neg in (False, True):
            q = (_neg(a, p.a_fmt), b) if neg else (a, b)
            for m in range(1, n + 1):
                out += [([q] * m, _neg(v, p.c_fmt) if neg and v != zc else v) for v in cs]
    return out


def _neg(bits: int, fmt: Format) -> int:
    return bits | 1 << (fmt.spec.storage - 1)


def separating_rows(
    p1: ModelParams, p2: ModelParams, limit: int = 100_000, top: int | None = None
) -> list[Row]:
    """Inputs that separate two units equal but for e_zero wherever the floor shows
    (module docstring): in the first group, one or two terms below 2^(hi + 1) (a tiny
    c, products with bits between the two grids), each of either sign, the other
    products zero (zero terms that raise e_max to e_zero); and the carry rows (many
    large terms just below 2^hi, which wrap a short register at their own e_max). `top`: the terms reach up to
    2^(top + 1) instead. At most `limit` rows (an even spread of them when there are
    more); [] where the units differ in more than e_zero or take scale factors."""
    if not only_e_zero_differs(p1, p2) or p1.scale_fmt is not None:
        return []
    hi = max(e for e in (p1.e_zero, p2.e_zero) if e is not None)
    hi = hi if top is None else top
    p = p1
    first = p.k_order()[: p.groups()[0][1]]
    za, zb = round_fraction(Fraction(0), p.a_fmt), round_fraction(Fraction(0), p.b_fmt)
    zc = round_fraction(Fraction(0), p.c_fmt)
    prods = _products(p, hi)
    prods += [(_neg(a, p.a_fmt), b) for a, b in prods]
    cs = [] if p.c_add == CAddend.AFTER else _c_values(p, hi)
    cs += [_neg(c, p.c_fmt) for c in cs]

    def row(pairs: list[tuple[int, int]], c: int) -> Row:
        a, b = [za] * p.K, [zb] * p.K
        for k, (x, y) in zip(first, pairs):
            a[k], b[k] = x, y
        return a, b, c

    rows = [row(pairs, c) for pairs, c in _carry_rows(p, hi, len(first))]
    singles = [([], c) for c in cs] + [([q], c) for c in [zc, *cs] for q in prods]
    n = len(prods) if len(first) >= 2 else 0
    total = len(singles) + n * n
    picks = range(total) if total <= limit else (int(i * total / limit) for i in range(limit))
    for i in picks:
        if i < len(singles):
            rows.append(row(*singles[i]))
        else:
            j = i - len(singles)
            rows.append(row([prods[j // n], prods[j % n]], zc))
    return rows


def floor_rows(p1: ModelParams, p2: ModelParams) -> Iterator[Row]:
    """The rows on which the argument is tightest (for `Argued.check`): the separating
    rows, with terms reaching two binades above the least exponent of each kind when
    none lies below the floor (where a zero term comes nearest to deciding e_max); the
    units it calls equal must agree on them."""
    hi = max(e for e in (p1.e_zero, p2.e_zero) if e is not None)
    least = max(k.min_exp for k in kinds(p1, 0))
    yield from separating_rows(p1, p2, limit=4096, top=max(hi, least + 2))


__all__ = [
    "Row",
    "TermKind",
    "equal_by_floor",
    "floor_rows",
    "kinds",
    "only_e_zero_differs",
    "separating_rows",
]
