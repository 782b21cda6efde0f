"""The dot-product-add model: parameters, algorithms and their dispatch."""

from __future__ import annotations

from ..bv.core import BV
from .cdna3 import fdrda, gfdrda
from .fda import fda
from .params import Algorithm, ModelParams, Split
from .sequential import gps, sequential, sfma
from .split import split_dot

_ALGORITHMS = {
    Algorithm.FDA: fda,
    Algorithm.SFMA: sfma,
    Algorithm.GPS: gps,
    Algorithm.FDRDA: fdrda,
    Algorithm.GFDRDA: gfdrda,
    Algorithm.SEQUENTIAL: sequential,
}


def dot_add(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams) -> BV:
    """d = c + sum_k a_k b_k as the unit described by `p` computes it (bits of d)."""
    if len(a_bits) != p.K or len(b_bits) != p.K:
        raise ValueError(f"expected {p.K} a and b entries, got {len(a_bits)} and {len(b_bits)}")
    if p.split != Split.NONE:
        return split_dot(a_bits, b_bits, c_bits, p, dot_add)
    return _ALGORITHMS[p.algorithm](a_bits, b_bits, c_bits, p)


__all__ = ["Algorithm", "ModelParams", "dot_add"]
