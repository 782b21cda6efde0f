"""Each constraint kind's meaning as a numpy mask over bit patterns.

The samplers of certify/ (random rows, extreme rows) and the audit draw inputs and keep
those of the class by these masks. They are written on the values the patterns stand
for (sign, significand, exponent read off the bits with numpy), not on the bit-vector
terms of symbolic.py, so that the two meanings check each other
(tests/test_input_classes.py). The class-wide kinds sum the exact magnitudes
|c| + sum |a_k b_k| as Python integers on a common grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ..formats import Format, Specials, max_finite_bits, value_of
from ..model.params import ModelParams
from .kinds import GLOBAL_KINDS, ZERO_KINDS, ConstraintKind
from .operands import Operand

if TYPE_CHECKING:
    from .constraints import Constraint


@dataclass
class Fields:
    """Patterns of one format read as values: (-1)^sign sig 2^(exp - mbits), with the
    format's special patterns flagged. `exp` is e_min for zeros and subnormals; an
    integer format reads as a significand of w bits whose top bit weighs 2^(w-1), as
    formats.decode reads it (exp = mbits = w - 1)."""

    sign: np.ndarray
    exp: np.ndarray
    sig: np.ndarray
    mbits: int
    zero: np.ndarray
    inf: np.ndarray
    nan: np.ndarray

    @property
    def finite(self) -> np.ndarray:
        return ~self.inf & ~self.nan

    @property
    def lsb(self) -> np.ndarray:
        """The exponent of the significand's last bit: value = +-sig 2^lsb."""
        return self.exp - self.mbits

    @property
    def lead(self) -> np.ndarray:
        """floor(log2 |value|) of the nonzero values (meaningless at zero)."""
        return self.lsb + bit_length(self.sig) - 1

    @property
    def trailing(self) -> np.ndarray:
        """The trailing zero bits of the significand (meaningless at zero)."""
        s = self.sig
        return bit_length(s & -s) - 1


def bit_length(x: np.ndarray) -> np.ndarray:
    """Python's int.bit_length, element-wise, for nonnegative int64 values."""
    x = np.asarray(x, dtype=np.int64).copy()
    n = np.zeros(x.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = x >= (1 << step)
        n = np.where(big, n + step, n)
        x = np.where(big, x >> step, x)
    return n + (x > 0)


def fields(bits: np.ndarray, fmt: Format) -> Fields:
    """The patterns `bits` (any integer array) of `fmt` read as values."""
    s = fmt.spec
    x = np.asarray(bits).astype(np.uint64)
    shape = x.shape
    no = np.zeros(shape, dtype=bool)
    if s.is_integer:
        w = s.storage
        neg = ((x >> np.uint64(w - 1)) & np.uint64(1)).astype(bool) if s.signed else no
        v = x.astype(np.int64)
        mag = np.where(neg, (1 << w) - v, v)
        return Fields(neg, np.full(shape, w - 1, dtype=np.int64), mag, w - 1, v == 0, no, no)

    def field(lo: int, width: int) -> np.ndarray:
        return ((x >> np.uint64(lo)) & np.uint64((1 << width) - 1)).astype(np.int64)

    m = s.mbits
    mant = field(s.ignored_low, m)
    e = field(s.ignored_low + m, s.ebits)
    sign = field(s.ignored_low + m + s.ebits, 1).astype(bool) if s.signed else no
    ones = e == (1 << s.ebits) - 1
    if s.specials == Specials.E8M0:
        return Fields(sign, e - s.bias, np.ones(shape, dtype=np.int64), 0, no, no, ones)
    sub = e == 0
    sig = np.where(sub, mant, mant | (1 << m))
    exp = np.where(sub, s.emin, e - s.bias)
    blank = sub & (mant == 0)  # the zero pattern, unless a format spends it on NaN
    if s.specials == Specials.IEEE:
        inf, nan = ones & (mant == 0), ones & (mant != 0)
    elif s.specials == Specials.FN:
        inf, nan = no, ones & (mant == (1 << m) - 1)
    elif s.specials == Specials.FNUZ:
        inf, nan = no, sign & blank
    else:
        inf, nan = no, no
    return Fields(sign, exp.astype(np.int64), sig.astype(np.int64), m, blank & ~nan, inf, nan)


def mask(cn: Constraint, bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Which patterns `bits` of `fmt` satisfy the per-input constraint `cn`."""
    f = fields(bits, fmt)
    kind = cn.kind
    if kind == ConstraintKind.POSITIVE:
        return ~f.sign
    if kind == ConstraintKind.NEGATIVE:
        return f.sign
    if kind in ZERO_KINDS:
        return np.asarray(bits).astype(np.uint64) == 0
    if kind == ConstraintKind.FIX:
        return np.asarray(bits).astype(np.uint64) == np.uint64(cn.bits)
    if kind == ConstraintKind.FINITE:
        return f.finite
    if kind == ConstraintKind.NONZERO:
        return ~f.zero
    nonzero = ~f.zero & (f.sig > 0)
    if kind == ConstraintKind.NORMAL_ONLY:
        # the leading one at or above the format's e_min (an integer format: its top bit)
        floor = fmt.spec.storage - 1 if fmt.spec.is_integer else fmt.spec.emin
        return f.finite & (f.zero | (nonzero & (f.lead >= floor)))
    if kind == ConstraintKind.EXPONENT_WINDOW:
        return f.finite & (f.zero | (nonzero & (cn.lo <= f.lead) & (f.lead <= cn.hi)))
    if kind == ConstraintKind.INTEGER:
        whole = f.lsb + f.trailing >= 0
        return f.finite & (f.zero | (nonzero & (f.lead < cn.lo) & whole))
    if kind == ConstraintKind.REPRESENTABLE:
        return f.finite & (f.zero | (nonzero & _representable(f, cn.fmt)))
    raise AssertionError(kind)


def _representable(f: Fields, t: Format) -> np.ndarray:
    """Which nonzero values of `f` are normal numbers of `t`, by value: exponent in t's
    normal range, a multiple of t's ulp there, at most t's largest finite magnitude, and
    not negative for an unsigned t."""
    s = t.spec
    lead = f.lead
    ok = (s.emin <= lead) & (lead <= s.emax) & (f.lsb + f.trailing >= lead - s.mbits)
    top = value_of(max_finite_bits(t), t)
    # at e_max: the value in units of t's ulp there, against the largest's
    shift = np.clip(f.lsb - (s.emax - s.mbits), -63, 62)
    units = np.where(shift >= 0, f.sig << np.maximum(shift, 0), f.sig >> np.maximum(-shift, 0))
    top_units = int(top / 2 ** (s.emax - s.mbits))
    ok &= (lead < s.emax) | (units <= top_units)
    if not s.signed:
        ok &= ~f.sign
    return ok


def min_lsb(fmt: Format) -> int:
    """The exponent of the last bit of the smallest nonzero magnitude of `fmt`."""
    s = fmt.spec
    return 0 if s.is_integer else s.emin - s.mbits


def magnitudes(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    c: np.ndarray,
    fmts: tuple[Format, Format, Format],
) -> tuple[np.ndarray, int, np.ndarray]:
    """(M, lsb, finite) per row: M = |c| + sum |a_k b_k| as Python integers in units of
    2^lsb (an object array, exact), and whether every input of the row is finite (M
    leaves the non-finite inputs out)."""
    lsb = min(min_lsb(fmts[0]) + min_lsb(fmts[1]), min_lsb(fmts[2]))
    fc = fields(c, fmts[2])
    finite = fc.finite.copy()

    def term(sig: np.ndarray, e: np.ndarray, ok: np.ndarray) -> np.ndarray:
        s = np.where(ok, sig, 0).astype(object)
        return np.left_shift(s, (e - lsb).astype(object))

    M = term(fc.sig, fc.lsb, fc.finite)
    for x, y in zip(a, b):
        fx, fy = fields(x, fmts[0]), fields(y, fmts[1])
        ok = fx.finite & fy.finite
        finite &= ok
        M = M + term(fx.sig, fx.lsb + fy.lsb, ok) * fy.sig.astype(object)
    return M, lsb, finite


def class_mask(
    cn: Constraint,
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    c: np.ndarray,
    p: ModelParams,
) -> np.ndarray:
    """Which rows (columns a_k, b_k, c of patterns) satisfy the class-wide constraint
    `cn`, stated for M = |c| + sum |a_k b_k| in d's format (a row with a non-finite
    input: M is taken as infinite)."""
    M, lsb, finite = magnitudes(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt))
    unit = Fraction(2) ** lsb
    if cn.kind == ConstraintKind.NO_OVERFLOW:
        top = value_of(max_finite_bits(p.d_fmt), p.d_fmt) / unit
        return finite & (M <= top).astype(bool)
    if cn.kind == ConstraintKind.NO_UNDERFLOW:
        smallest = Fraction(2) ** p.d_fmt.spec.emin / unit
        return ~finite | (M == 0).astype(bool) | (M >= smallest).astype(bool)
    raise AssertionError(cn.kind)


def rows_mask(
    constraints: Sequence[Constraint],
    operands: Sequence[Operand],
    p: ModelParams,
    columns: Mapping[str, np.ndarray],
) -> np.ndarray:
    """Which rows of `columns` (input name -> one pattern per row) lie in the class: every
    per-input constraint on the inputs it applies to, and the class-wide ones on the
    row's a0.., b0.., c."""
    rows = len(next(iter(columns.values())))
    ok = np.ones(rows, dtype=bool)
    for cn in constraints:
        if cn.kind in GLOBAL_KINDS:
            a = [columns[f"a{k}"] for k in range(p.K)]
            b = [columns[f"b{k}"] for k in range(p.K)]
            ok &= class_mask(cn, a, b, columns["c"], p)
            continue
        for o in operands:
            if cn.applies_to(o.name):
                ok &= mask(cn, columns[o.name], o.fmt)
    return ok
