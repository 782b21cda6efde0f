"""The kinds of input constraint, and the families the readers of a class treat alike."""

from __future__ import annotations

from enum import Enum


class ConstraintKind(Enum):
    """Input restrictions a class may carry."""

    POSITIVE = "positive"  # sign bit clear
    NEGATIVE = "negative"  # sign bit set
    FINITE = "finite"  # no Inf, no NaN
    NORMAL_ONLY = "normal-only"  # zero or a normal finite number
    NONZERO = "nonzero"  # not zero
    EXPONENT_WINDOW = "exponent-window"  # zero, or 2^lo <= |x| < 2^(hi+1)
    FIX = "fix"  # one input has a given bit pattern
    # only products 0..lo-1 are free; a_k = b_k = +0 for k >= lo (a sparse query: for k
    # >= hi, the position just after the lo-th product the metadata keeps)
    TERMS = "terms"
    ZERO_K = "zero-k"  # a_k = b_k = +0 for lo <= k < hi (a GEMM's K: blocks left out)
    REPRESENTABLE = "representable"  # zero or a normal number of the narrower format `fmt`
    INTEGER = "integer"  # an integer of at most `lo` bits: |x| <= 2^lo - 1 (Ozaki slices)
    # |c| + sum |a_k b_k| at most the output format's largest finite number: no exact
    # magnitude overflows (a constraint on all inputs together)
    NO_OVERFLOW = "no-overflow"
    # |c| + sum |a_k b_k| at least the output format's smallest normal number (or every
    # input zero): the exact magnitudes do not lie in the output's underflow range
    NO_UNDERFLOW = "no-underflow"
    # a_k = +0 at the positions `positions` the metadata of a structured-sparse
    # instruction does not select (Query.meta: the uncompressed row of A)
    UNSELECTED = "unselected"


GLOBAL_KINDS = frozenset({ConstraintKind.NO_OVERFLOW, ConstraintKind.NO_UNDERFLOW})
"""Constraints on the inputs together, not on each operand."""

ZERO_KINDS = frozenset({ConstraintKind.TERMS, ConstraintKind.ZERO_K, ConstraintKind.UNSELECTED})
"""Constraints that fix the inputs they apply to at +0."""

NORMAL_KINDS = frozenset({ConstraintKind.NORMAL_ONLY, ConstraintKind.INTEGER})
"""Constraints that keep every nonzero value they restrict normal in its own format (an
integer of P bits is normal in every float format it is given in)."""
