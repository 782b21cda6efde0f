"""The dot-product-add model: parameters, algorithms and their dispatch."""

from __future__ import annotations

from ..bv.core import BV
from . import sparse
from .cdna3 import fdrda, gfdrda
from .fda import fda
from .gdfs import gdfs, unit_scales
from .integer import integer_dot
from .params import Algorithm, ModelParams, Sparsity, Split
from .sequential import gps, sequential, sfma
from .split import split_dot

_ALGORITHMS = {
    Algorithm.FDA: fda,
    Algorithm.SFMA: sfma,
    Algorithm.GPS: gps,
    Algorithm.FDRDA: fdrda,
    Algorithm.GFDRDA: gfdrda,
    Algorithm.GDFS: gdfs,
    Algorithm.SEQUENTIAL: sequential,
    Algorithm.INTEGER: integer_dot,
}


def dot_add(
    a_bits: list[BV],
    b_bits: list[BV],
    c_bits: BV,
    p: ModelParams,
    sa: list[BV] | None = None,
    sb: list[BV] | None = None,
    meta: list[int] | None = None,
) -> BV:
    """d = c + sum_k a_k b_k as the unit described by `p` computes it (bits of d).

    `sa`, `sb`: the block scale factors of a and b (`p.n_scales` each, in `p.scale_fmt`;
    PTX `.block_scale`), scale i applying to products i*scale_block .. (i+1)*scale_block-1.
    Left out, a block-scaled unit runs with every scale factor 1; a unit without
    `scale_fmt` takes none. `meta`: a structured-sparse instruction's metadata, the
    position within its group of each of the `p.n_a` entries of a (model/sparse.py)."""
    if p.sparse != Sparsity.NONE and (meta is None or len(a_bits) != p.n_a):
        raise ValueError(
            f"a sparse instruction (mma.sp) takes {p.n_a} a, {p.K} b and its metadata; "
            "`tcsmt simulate --meta`, `tcsmt diff --meta` and `tcsmt prove --meta` give them"
        )
    if len(a_bits) != p.n_a or len(b_bits) != p.K:
        raise ValueError(
            f"expected {p.n_a} a and {p.K} b entries, got {len(a_bits)} and {len(b_bits)}"
        )
    if p.sparse != Sparsity.NONE:
        if meta is None:
            raise ValueError("a sparse instruction needs its metadata (meta)")
        meta = sparse.check_metadata(meta, p)
        zero = BV.const(c_bits.b, 0, p.a_fmt.spec.storage)
        a_dense, b_dense = sparse.select(a_bits, b_bits, meta, p, zero)
        return dot_add(a_dense, b_dense, c_bits, sparse.dense_params(p), sa, sb)
    if meta is not None:
        raise ValueError("metadata given to a dense instruction")
    if (sa is None) != (sb is None):
        raise ValueError("scale factors: give both sa and sb, or neither")
    if p.scale_fmt is None:
        if sa is not None:
            raise ValueError("scale factors given to a unit without block scaling")
    else:
        if sa is None or sb is None:
            sa, sb = unit_scales(c_bits.b, p)
        if len(sa) != p.n_scales or len(sb) != p.n_scales:
            raise ValueError(
                f"expected {p.n_scales} sa and sb entries, got {len(sa)} and {len(sb)}"
            )
        scaled = _SCALED[p.algorithm]
        return scaled(a_bits, b_bits, c_bits, p, (sa, sb))
    if p.split != Split.NONE:
        return split_dot(a_bits, b_bits, c_bits, p, dot_add)
    return _ALGORITHMS[p.algorithm](a_bits, b_bits, c_bits, p)


_SCALED = {Algorithm.FDA: fda, Algorithm.GDFS: gdfs, Algorithm.GFDRDA: gfdrda}

__all__ = ["Algorithm", "ModelParams", "dot_add"]
