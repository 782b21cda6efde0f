"""Floating-point formats: their parameters, and exact decode/encode of bit patterns.

`decode` (on the BV interface) is what the model algorithms use. `value_of`,
`encode_exact` and `round_fraction` work on Python ints and Fractions: they display
results and serve as an independent, rational-arithmetic oracle in the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from .bv.core import BV, Bool

EXP_W = 16
"""Width of the signed exponent bit-vectors the model uses (products of any format fit)."""


class Specials(Enum):
    """How a format encodes non-finite values."""

    IEEE = "ieee"  # all-ones exponent: Inf (mantissa 0) or NaN
    FN = "fn"  # no Inf; all-ones exponent and mantissa is NaN (E4M3FN, UE4M3)
    NONE = "none"  # every pattern is finite (FP6, FP4)
    E8M0 = "e8m0"  # 0xFF is NaN; no zero, no subnormals (UE8M0)
    FNUZ = "fnuz"  # no Inf, no -0; the pattern of -0 (0x80) is the only NaN (AMD fp8/bf8)
    # an integer: two's complement when signed, else unsigned; every pattern is a finite
    # integer (PTX .s32/.s8/.u8/.s4/.u4/.b1, AMD i8/i32); `mbits` holds its magnitude bits
    INTEGER = "integer"


class Rounding(Enum):
    """Rounding directions (IEEE 754 names)."""

    RNE = "rne"  # to nearest, ties to even
    RZ = "rz"  # toward zero
    RTP = "rtp"  # toward +infinity
    RTN = "rtn"  # toward -infinity
    RNA = "rna"  # to nearest, ties away from zero


@dataclass(frozen=True)
class FormatSpec:
    """Parameters of one binary floating-point format.

    `storage` is the width of the bit pattern a user writes; `ignored_low` low bits of it
    are dropped before decoding (TF32 lives in 32 bits but has a 10-bit mantissa).
    """

    name: str
    ebits: int
    mbits: int
    storage: int
    specials: Specials = Specials.IEEE
    signed: bool = True
    ignored_low: int = 0
    ignored_high: int = 0

    @property
    def is_integer(self) -> bool:
        """An integer format (no exponent: value = the pattern read as an integer)."""
        return self.specials == Specials.INTEGER

    @property
    def int_range(self) -> tuple[int, int]:
        """The least and the largest value of an integer format."""
        if self.signed:
            return -(1 << (self.storage - 1)), (1 << (self.storage - 1)) - 1
        return 0, (1 << self.storage) - 1

    @property
    def bias(self) -> int:
        if self.specials == Specials.INTEGER:
            return 0
        if self.specials == Specials.E8M0:
            return 127
        if self.specials == Specials.FNUZ:
            return 1 << (self.ebits - 1)
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number (and of every subnormal)."""
        return 1 - self.bias if self.specials != Specials.E8M0 else -127

    @property
    def emax(self) -> int:
        top = (1 << self.ebits) - 1
        if self.specials == Specials.IEEE:
            return top - 1 - self.bias
        if self.specials == Specials.E8M0:
            return top - 1 - self.bias
        return top - self.bias

    @property
    def hex_digits(self) -> int:
        return (self.storage + 3) // 4

    @property
    def precision(self) -> int:
        """Significand bits including the hidden bit (p in IEEE 754)."""
        return self.mbits + 1

    @property
    def payload_bits(self) -> int:
        return self.storage - self.ignored_low - self.ignored_high


class Format(Enum):
    """Every operand format the model knows."""

    FP64 = FormatSpec("fp64", 11, 52, 64)
    FP32 = FormatSpec("fp32", 8, 23, 32)
    TF32 = FormatSpec("tf32", 8, 10, 32, ignored_low=13)
    FP16 = FormatSpec("fp16", 5, 10, 16)
    BF16 = FormatSpec("bf16", 8, 7, 16)
    E4M3 = FormatSpec("e4m3", 4, 3, 8, Specials.FN)
    E5M2 = FormatSpec("e5m2", 5, 2, 8)
    E3M2 = FormatSpec("e3m2", 3, 2, 6, Specials.NONE)
    E2M3 = FormatSpec("e2m3", 2, 3, 6, Specials.NONE)
    E2M1 = FormatSpec("e2m1", 2, 1, 4, Specials.NONE)
    UE8M0 = FormatSpec("ue8m0", 8, 0, 8, Specials.E8M0, signed=False)
    UE4M3 = FormatSpec("ue4m3", 4, 3, 8, Specials.FN, signed=False, ignored_high=1)
    E4M3FNUZ = FormatSpec("e4m3fnuz", 4, 3, 8, Specials.FNUZ)
    E5M2FNUZ = FormatSpec("e5m2fnuz", 5, 2, 8, Specials.FNUZ)
    E8M13 = FormatSpec("e8m13", 8, 13, 32, ignored_low=10)
    E8M31 = FormatSpec("e8m31", 8, 31, 40)
    # integer formats (PTX ISA: mma integer types .s8/.u8/.s4/.u4, single bit .b1, the
    # .s32 accumulator; AMD CDNA ISA: i8 operands, i32 accumulators)
    S32 = FormatSpec("s32", 0, 31, 32, Specials.INTEGER)
    S8 = FormatSpec("s8", 0, 7, 8, Specials.INTEGER)
    U8 = FormatSpec("u8", 0, 8, 8, Specials.INTEGER, signed=False)
    S4 = FormatSpec("s4", 0, 3, 4, Specials.INTEGER)
    U4 = FormatSpec("u4", 0, 4, 4, Specials.INTEGER, signed=False)
    B1 = FormatSpec("b1", 0, 1, 1, Specials.INTEGER, signed=False)

    @property
    def spec(self) -> FormatSpec:
        return self.value

    @classmethod
    def parse(cls, name: str) -> Format:
        for f in cls:
            if f.spec.name == name.lower():
                return f
        raise ValueError(f"unknown format {name!r}; known: {', '.join(f.spec.name for f in cls)}")


@dataclass
class Unpacked:
    """A decoded operand: value = (-1)^sign * sig * 2^(exp - mbits), plus its class."""

    sign: Bool
    exp: BV  # signed, EXP_W bits; emin for subnormals and zero
    sig: BV  # mbits + 1 bits, hidden bit included
    mbits: int
    is_zero: Bool
    is_inf: Bool
    is_nan: Bool


def payload(bits: BV, fmt: Format) -> BV:
    """The bits of `bits` the format actually reads (TF32 drops its 13 low bits)."""
    s = fmt.spec
    return bits.extract(s.storage - 1 - s.ignored_high, s.ignored_low)


_MEMO: dict[tuple[int, Format], tuple[BV, Unpacked]] | None = None
"""While `decode_memo` is active: (id of a bit vector, format) -> (the vector, its
decoding). The vector is held, so its id is not reused while the memo lives."""


@contextmanager
def decode_memo(memo: dict | None = None) -> Iterator[None]:
    """Within the block, a bit vector decoded twice in one format (the same object: the
    same inputs run through many models) is decoded once; `memo` (a dict the caller
    keeps) carries the decodings from one block to the next. `decode` is pure and its
    results are never changed in place, so the memo changes no result."""
    global _MEMO
    outer = _MEMO
    _MEMO = memo if memo is not None else (outer if outer is not None else {})
    try:
        yield
    finally:
        _MEMO = outer


def decode(bits: BV, fmt: Format) -> Unpacked:
    """Split a bit pattern into sign, exponent, significand and class flags (an integer
    format: its sign and magnitude, exponent 0, never special)."""
    if _MEMO is not None:
        hit = _MEMO.get((id(bits), fmt))
        if hit is not None and hit[0] is bits:
            return hit[1]
        u = _decode(bits, fmt)
        _MEMO[(id(bits), fmt)] = (bits, u)
        return u
    return _decode(bits, fmt)


def _decode(bits: BV, fmt: Format) -> Unpacked:
    s = fmt.spec
    b = bits.b
    if s.specials == Specials.INTEGER:
        return _decode_integer(bits, s)
    p = payload(bits, fmt)
    m = s.mbits
    mant = p.extract(m - 1, 0) if m else None
    e_field = p.extract(m + s.ebits - 1, m)
    sign = p.bit(m + s.ebits) if s.signed else Bool.const(b, False)
    e_all_ones = e_field.eq((1 << s.ebits) - 1)
    mant_zero = mant.eq(0) if mant is not None else Bool.const(b, True)
    if s.specials == Specials.E8M0:
        is_nan = e_all_ones
        is_inf = Bool.const(b, False)
        is_zero = Bool.const(b, False)
        sig = BV.const(b, 1, 1)
        exp = e_field.zext(EXP_W - s.ebits) - s.bias
        return Unpacked(sign, exp, sig, 0, is_zero, is_inf, is_nan)
    e_zero = e_field.eq(0)
    hidden = (~e_zero).to_bv(1)
    sig = hidden.concat(mant) if mant is not None else hidden
    exp = e_zero.ite(BV.const(b, s.emin, EXP_W), e_field.zext(EXP_W - s.ebits) - s.bias)
    if s.specials == Specials.IEEE:
        is_inf = e_all_ones & mant_zero
        is_nan = e_all_ones & ~mant_zero
    elif s.specials == Specials.FN:
        is_inf = Bool.const(b, False)
        is_nan = e_all_ones & (mant.eq((1 << m) - 1) if m else Bool.const(b, True))
    elif s.specials == Specials.FNUZ:
        is_inf = Bool.const(b, False)
        is_nan = sign & e_zero & mant_zero
    else:
        is_inf = Bool.const(b, False)
        is_nan = Bool.const(b, False)
    is_zero = e_zero & mant_zero & ~is_nan
    return Unpacked(sign, exp, sig, m, is_zero, is_inf, is_nan)


def _decode_integer(bits: BV, s: FormatSpec) -> Unpacked:
    """An integer pattern as sign and magnitude (the magnitude of the least signed value,
    2^(w-1), fits the w bits unsigned), read as a significand of w bits whose top bit
    has weight 2^(w-1): exponent w - 1 and w - 1 fraction bits, so that value = sig
    2^(exp - mbits) and the leading one sits at exp - clz(sig), as for a float."""
    b = bits.b
    no = Bool.const(b, False)
    sign = bits.msb() if s.signed else no
    mag = sign.ite(-bits, bits) if s.signed else bits
    w = s.storage
    return Unpacked(sign, BV.const(b, w - 1, EXP_W), mag, w - 1, bits.eq(0), no, no)


def int_value(bits: int, fmt: Format) -> int:
    """The integer a pattern of an integer format holds."""
    s = fmt.spec
    if s.signed and bits >> (s.storage - 1):
        return bits - (1 << s.storage)
    return bits


def int_bits(value: int, fmt: Format) -> int:
    """The pattern of `value` in an integer format (ValueError outside its range)."""
    lo, hi = fmt.spec.int_range
    if not lo <= value <= hi:
        raise ValueError(f"{value} is outside {fmt.spec.name}'s range {lo}..{hi}")
    return value % (1 << fmt.spec.storage)


def flush_subnormal(u: Unpacked, fmt: Format, keep_sign: bool) -> Unpacked:
    """Replace a subnormal operand by zero (+0, or with its sign when `keep_sign`)."""
    b = u.sig.b
    subnormal = ~u.sig.bit(u.mbits) & ~u.is_zero & ~u.is_nan & ~u.is_inf
    sig = subnormal.ite(BV.const(b, 0, u.sig.w), u.sig)
    sign = u.sign if keep_sign else subnormal.ite(Bool.const(b, False), u.sign)
    return Unpacked(sign, u.exp, sig, u.mbits, u.is_zero | subnormal, u.is_inf, u.is_nan)


def inf_bits(fmt: Format, negative: bool = False) -> int:
    s = fmt.spec
    mag = ((1 << s.ebits) - 1) << s.mbits
    return ((int(negative) << (s.ebits + s.mbits)) | mag) << s.ignored_low


def max_finite_bits(fmt: Format, negative: bool = False) -> int:
    s = fmt.spec
    if s.specials == Specials.IEEE:
        mag = (((1 << s.ebits) - 2) << s.mbits) | ((1 << s.mbits) - 1)
    elif s.specials == Specials.FN:
        mag = (((1 << s.ebits) - 1) << s.mbits) | ((1 << s.mbits) - 2)
    else:
        mag = (1 << (s.ebits + s.mbits)) - 1
    return ((int(negative) << (s.ebits + s.mbits)) | mag) << s.ignored_low


def default_nan_bits(fmt: Format) -> int:
    """The IEEE default quiet NaN of a format (0x7FC00000 for fp32)."""
    s = fmt.spec
    if s.specials == Specials.IEEE:
        return ((((1 << s.ebits) - 1) << s.mbits) | (1 << (s.mbits - 1))) << s.ignored_low
    if s.specials in (Specials.FN, Specials.E8M0):
        return ((1 << (s.ebits + s.mbits)) - 1) << s.ignored_low
    if s.specials == Specials.FNUZ:
        return 1 << (s.storage - 1)
    raise ValueError(f"{s.name} has no NaN")


# --- concrete helpers (display and rational oracle) ------------------------------------


def check_bits(value: int, fmt: Format) -> None:
    if not 0 <= value < (1 << fmt.spec.storage):
        raise ValueError(f"{value:#x} does not fit in {fmt.spec.storage}-bit {fmt.spec.name}")


def classify(bits: int, fmt: Format) -> str:
    """'nan', 'inf', 'zero' or 'finite' for a concrete pattern."""
    from .bv.concrete import CONCRETE

    u = decode(BV(CONCRETE, bits, fmt.spec.storage), fmt)
    if u.is_nan.v:
        return "nan"
    if u.is_inf.v:
        return "inf"
    if u.is_zero.v:
        return "zero"
    return "finite"


def value_of(bits: int, fmt: Format) -> Fraction | float:
    """Exact value of a pattern: a Fraction for finite values, else +-inf or nan floats."""
    from .bv.concrete import CONCRETE

    u = decode(BV(CONCRETE, bits, fmt.spec.storage), fmt)
    if u.is_nan.v:
        return math.nan
    neg = bool(u.sign.v)
    if u.is_inf.v:
        return -math.inf if neg else math.inf
    e = u.exp.v - (1 << EXP_W) if u.exp.v >> (EXP_W - 1) else u.exp.v
    val = Fraction(u.sig.v) * Fraction(2) ** (e - u.mbits)
    return -val if neg else val


def is_negative(bits: int, fmt: Format) -> bool:
    s = fmt.spec
    return s.signed and bool((bits >> (s.storage - 1 - s.ignored_high)) & 1)


def to_float(bits: int, fmt: Format) -> float:
    """The pattern as a Python float (exact for every format up to fp64; -0.0 kept)."""
    v = value_of(bits, fmt)
    if isinstance(v, float):
        return v
    if v == 0:
        return -0.0 if is_negative(bits, fmt) else 0.0
    return float(v)


def round_fraction(
    value: Fraction,
    fmt: Format,
    mode: Rounding = Rounding.RNE,
    negative_zero: bool = False,
    overflow_to_inf: bool | None = None,
) -> int:
    """Correctly round an exact rational to `fmt` (rational-arithmetic test oracle)."""
    s = fmt.spec
    neg = value < 0 or (value == 0 and negative_zero)
    a = abs(value)
    sign_bit = (int(neg) << (s.ebits + s.mbits)) if s.signed else 0
    if a == 0:
        return sign_bit << s.ignored_low
    # floor(log2(a)) from the bit lengths (exact for every magnitude, unlike math.log2,
    # which converts to a float and overflows or underflows outside the float range).
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, s.emin)
    ulp = Fraction(2) ** (e - s.mbits)
    q, r = divmod(a, ulp)
    q = int(q)
    up = False
    if r:
        if mode == Rounding.RNE:
            up = r > ulp / 2 or (r == ulp / 2 and q % 2 == 1)
        elif mode == Rounding.RNA:
            up = r >= ulp / 2
        elif mode == Rounding.RTP:
            up = not neg
        elif mode == Rounding.RTN:
            up = neg
    q += int(up)
    if q >= (1 << (s.mbits + 1)):
        q >>= 1
        e += 1
    biased = (e + s.bias) if q >= (1 << s.mbits) else 0
    mag = (biased << s.mbits) | (q & ((1 << s.mbits) - 1))
    max_mag = (max_finite_bits(fmt) >> s.ignored_low) & ((1 << (s.ebits + s.mbits)) - 1)
    if mag > max_mag:
        to_inf = overflow_to_inf
        if to_inf is None:
            to_inf = (
                mode in (Rounding.RNE, Rounding.RNA)
                or (mode == Rounding.RTP and not neg)
                or (mode == Rounding.RTN and neg)
            )
        if to_inf and s.specials == Specials.IEEE:
            return (sign_bit | (((1 << s.ebits) - 1) << s.mbits)) << s.ignored_low
        return max_finite_bits(fmt, neg)
    return (sign_bit | mag) << s.ignored_low


def number(bits: int, fmt: Format) -> int | float:
    """The value of a pattern for display and JSON: an int for an integer format, else
    the float of `to_float`."""
    if fmt.spec.is_integer:
        return int_value(bits, fmt)
    return to_float(bits, fmt)


_DECIMAL = re.compile(r"[+-]?[0-9]+")
_FLOATLIKE = re.compile(r"[+-]?([0-9]*\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|inf|nan)")


def parse_hex(text: str, fmt: Format, field_name: str) -> int:
    """Parse a hex pattern for `fmt`; raises ValueError naming the field on bad input.
    An integer format also takes a decimal value (`-128`, `7`: without `0x` a number is
    a value, with it a pattern), range-checked; a float is refused."""
    t = text.strip().lower()
    if fmt.spec.is_integer and not t.startswith("0x"):
        if _DECIMAL.fullmatch(t):
            try:
                return int_bits(int(t), fmt)
            except ValueError as e:
                raise ValueError(f"{field_name}: {e}") from None
        if _FLOATLIKE.fullmatch(t):
            raise ValueError(
                f"{field_name}: {text!r} is not an integer; {fmt.spec.name} operands are "
                "integers (a decimal value or a 0x bit pattern)"
            )
    if t.startswith("0x"):
        t = t[2:]
    if not t or any(ch not in "0123456789abcdef" for ch in t):
        raise ValueError(f"{field_name}: {text!r} is not a hex bit pattern")
    v = int(t, 16)
    if v >= (1 << fmt.spec.storage):
        raise ValueError(
            f"{field_name}: {text!r} does not fit in {fmt.spec.storage}-bit {fmt.spec.name}"
            f" (at most {fmt.spec.hex_digits} hex digits)"
        )
    return v


def format_hex(bits: int, fmt: Format) -> str:
    return f"0x{bits:0{fmt.spec.hex_digits}x}"


__all__ = [
    "EXP_W",
    "Format",
    "FormatSpec",
    "Rounding",
    "Specials",
    "Unpacked",
    "check_bits",
    "classify",
    "decode",
    "default_nan_bits",
    "flush_subnormal",
    "format_hex",
    "inf_bits",
    "int_bits",
    "int_value",
    "is_negative",
    "max_finite_bits",
    "number",
    "parse_hex",
    "payload",
    "round_fraction",
    "to_float",
    "value_of",
]
