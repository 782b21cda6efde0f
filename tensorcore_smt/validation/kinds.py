"""The one vocabulary of random-row kinds, shared by validation (`validation.rows`), the
identify pool (`identify.pool`) and the tests' generators (tests/strategies.py).

A *kind* names what a row is built to exercise; each generator realises the kinds it
draws (rows.py the validation mix `MIX`, identify/pool.py the `TARGETED` kinds on top of
it, the tests' numpy and hypothesis generators `TESTS`). A kind is a `str` (its value),
so it prints, compares and serialises (JSON reports, identify's vectors) as its name.
"""

from __future__ import annotations

from enum import Enum


class RowKind(str, Enum):
    """A kind of random dot-product row; `RowKind.X.__doc__` says what it exercises."""

    def __new__(cls, value: str, doc: str) -> RowKind:
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.__doc__ = doc
        return obj

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    # --- the validation mix (rows.py), in the order its stream draws them ---------------
    NORMAL = (
        "normal",
        "Operands whose exponents lie in a window around a centre (rows.py: normal numbers, "
        "a window of 0, 2, 6 or 12 binades; the tests' 'window' rows: a few binades, c near "
        "the products): the products overlap and alignment truncates some of them.",
    )
    CANCEL = (
        "cancel",
        "As NORMAL, then the second half of the products repeats the first with the sign "
        "flipped and one ulp of noise, so the sum cancels massively (carries, normalisation, "
        "the sign of a zero result).",
    )
    WIDE = (
        "wide",
        "Exponents uniform over the format's whole range, subnormals included: most terms "
        "fall far below the largest (alignment, e_zero).",
    )
    SUBNORMAL = (
        "subnormal",
        "About half of the operands subnormal, the rest small normals (subnormal inputs, "
        "products and outputs).",
    )
    ZEROS = ("zeros", "About half of the operands +-0 (zero terms, signed zeros).")
    SPECIAL = (
        "special",
        "Special values among finite operands: one or two operands Inf or NaN with random "
        "payloads in rows.py (NaN and Inf rules, canonical NaNs); the tests' rows sprinkle "
        "every edge pattern of the format (signed zeros, extreme subnormals and normals, "
        "Inf, NaNs, TF32 patterns with ignored low bits set).",
    )
    BITS = (
        "bits",
        "Uniform random bit patterns: anything, including the bits a format ignores (TF32's "
        "13 low bits); NaN, Inf, zeros and subnormals at their natural rates.",
    )
    # --- aimed at single parameters (identify's pool, identify/pool.py) ----------------
    ONE_BIG = (
        "one-big",
        "One product near 1 and the others 2^-1 .. 2^-40 below it (alignment: F, truncation "
        "vs rounding, normalised products).",
    )
    EQUAL = (
        "equal",
        "Products of one sign near the top of their binade, c likewise (carry bits).",
    )
    C_ROUND = (
        "c-round",
        "c near 1 and one or two products around its last bit (output rounding).",
    )
    TINY = (
        "tiny",
        "Every product far below 1, c zero or tiny (e_zero, subnormal outputs).",
    )
    MIXED_SIGNS = (
        "mixed-signs",
        "As ONE_BIG with c of the other sign (cancellation at the top).",
    )
    SPREAD = (
        "spread",
        "Products of one sign, half near the top of their binade and the others 1 .. 29 "
        "binades below with random bits, c likewise: the sum overflows the carry bits while "
        "its last aligned bits are live (carry bits with renormalisation, alignment).",
    )


MIX: tuple[RowKind, ...] = (
    RowKind.NORMAL,
    RowKind.CANCEL,
    RowKind.WIDE,
    RowKind.SUBNORMAL,
    RowKind.ZEROS,
    RowKind.SPECIAL,
    RowKind.BITS,
)
"""The validation mix (rows.py), each row one of these, uniformly; the index of a kind here
is the kind number `random_rows` returns."""

TARGETED: tuple[RowKind, ...] = (
    RowKind.ONE_BIG,
    RowKind.EQUAL,
    RowKind.C_ROUND,
    RowKind.TINY,
    RowKind.MIXED_SIGNS,
    RowKind.SPREAD,
)
"""The kinds aimed at single parameters, added by identify's pool to the validation mix."""

POOL: tuple[RowKind, ...] = MIX + TARGETED
"""identify's pool: the 13 kinds."""

TESTS: tuple[RowKind, ...] = (RowKind.BITS, RowKind.NORMAL, RowKind.CANCEL, RowKind.SPECIAL)
"""The kinds of the tests' generators (tests/strategies.py), in the order they draw them."""


__all__ = ["MIX", "POOL", "TARGETED", "TESTS", "RowKind"]
