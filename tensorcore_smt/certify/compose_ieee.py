"""The composed bound (N) of units built from IEEE operations: SEQUENTIAL (references,
the x86 VDPBF16PS lane) and GPS (CDNA2's group pairwise sums), as trees of rounded
operations in the node algebra of nodes.py (compose.py chains them like the others).

Each IEEE operation (a product rounded into acc_fmt, an addition, an FMA, the
conversion of the result into d) rounds an exact value s: |r - s| <= u |s| + b with
u the unit roundoff of its rounding (2^-p to nearest, 2^(1-p) directed), b = u 2^e_min
for a result that may be subnormal, or 2^e_min when the unit flushes it (a flushed
subnormal loses |s| < 2^e_min), and b = 0 for the operation that returns the whole
computation's result (relative to M >= 2^e_min as in compose.fda_group; with
flush_outputs it keeps 2^e_min). A product that acc_fmt always holds exactly
(ieee.products_exact_in: fp16 x fp16 in fp32) is a leaf; an FMA takes its product
unrounded, so its node has the running value and a leaf as children. The tree follows
the model's own order (model/sequential.py): c first, reversed, c last, c plus a
pairwise tree (split at the middle, as _pairwise splits), and GPS's groups of G
products summed pairwise, each added to the running value.

No overflow: compose.small_steps (every rounding adds terms far below half an ulp of
the largest finite value to a finite running value) or compose.far_from_overflow."""

from __future__ import annotations

from fractions import Fraction

from ..formats import Format, Rounding
from ..model import ieee
from ..model.params import Algorithm, ModelParams, Order
from .analytic import unit_roundoff
from .nodes import LEAF, Composed, NodeBound, up


def rounding_node(
    fmt: Format, rounding: Rounding, flush: bool, root: bool, normal: bool = False
) -> NodeBound:
    """(N) of one IEEE rounding into `fmt` (module docstring); `normal`: the value
    rounded is 0 or at least 2^e_min (normal_sums), so neither a subnormal part nor a
    flush applies."""
    u = unit_roundoff(fmt, rounding)
    if normal:
        return NodeBound(up(u), Fraction(0), fmt.spec.emin)
    tiny = Fraction(2) ** fmt.spec.emin
    b = tiny if flush else Fraction(0) if root else u * tiny
    return NodeBound(up(u), up(b), None if flush else fmt.spec.emin)


def normal_sums(p: ModelParams, acc: Format, c_normal: bool) -> bool:
    """Whether every sum the unit rounds into `acc` is 0 or at least 2^e_min(acc) in
    magnitude, so that no subnormal part arises and no flush acts. Sufficient: c normal
    in the class and already in acc; every product exact in acc with its lowest bit at
    2^L, L = (e_min - m)_a + (e_min - m)_b, and L >= e_min(acc) + m(acc) + 2. Then every
    sum of products is a multiple of 2^L (a rounding keeps a multiple of 2^L one, or
    makes it a multiple of its own ulp above 2^L), so 0 or at least 2^L; a c at least
    T = 2^(e_min + m) (acc's) is a multiple of 2^e_min and so is every later sum; a
    smaller c stays alone (normal) until a nonzero sum of products g arrives, and then
    |c + g| >= 2^L - T >= 2^(e_min + m + 1), whose rounding is a multiple of 2^e_min
    again. fp16 and FP8 products in fp32 (L = -48, -18) pass; bf16 ones (L = -266) do
    not."""
    fa, fb = p.unpack or p.a_fmt, p.unpack or p.b_fmt
    if not c_normal or _conversion(p.c_fmt, acc) or not ieee.products_exact_in(fa, fb, acc):
        return False
    L = (fa.spec.emin - fa.spec.mbits) + (fb.spec.emin - fb.spec.mbits)
    return L >= acc.spec.emin + acc.spec.mbits + 2


def _conversion(src: Format, dst: Format) -> bool:
    """Whether converting a value of `src` into `dst` can change it."""
    s, d = src.spec, dst.spec
    return not (
        s.precision <= d.precision and s.emax <= d.emax and s.emin - s.mbits >= d.emin - d.mbits
    )


def _product(p: ModelParams, acc: Format, rounding: Rounding, normal: bool) -> Composed:
    """A product of a and b as the child of an addition: exact, or rounded into acc
    (`normal`: no nonzero product is below 2^e_min(acc), so no flush acts on one)."""
    fa, fb = p.unpack or p.a_fmt, p.unpack or p.b_fmt
    if ieee.products_exact_in(fa, fb, acc) and (normal or not p.flush_products):
        return LEAF
    return LEAF.node([LEAF], rounding_node(acc, rounding, p.flush_products, False))


def _pairwise(vals: list[Composed], add) -> Composed:
    if len(vals) == 1:
        return vals[0]
    mid = len(vals) // 2
    return add(_pairwise(vals[:mid], add), _pairwise(vals[mid:], add))


def sequential_tree(p: ModelParams, root: bool, c_normal: bool) -> tuple[Composed, list[str]]:
    """SEQUENTIAL: the IEEE sum of c and the K products in p.order (fused products: a
    chain of FMAs), then the conversion into d. `c_normal`: the class keeps c normal."""
    acc, mode = p.acc_fmt, p.acc_rounding
    convert = _conversion(acc, p.d_fmt)
    last_root = root and not convert
    normal = normal_sums(p, acc, c_normal)

    def add(x: Composed, y: Composed, last: bool = False) -> Composed:
        flush = p.flush_sums and not last
        fl = flush or (last and p.flush_outputs and not convert)
        return LEAF.node([x, y], rounding_node(acc, mode, fl, last and last_root, normal))

    c = LEAF
    if _conversion(p.c_fmt, acc):
        c = LEAF.node([LEAF], rounding_node(acc, mode, False, False))
    if p.fused_products:
        d = c
        for i in range(p.K):
            d = add(d, LEAF, last=i == p.K - 1)
        what = f"{p.K} FMAs in {acc.spec.name}"
    else:
        prods = [_product(p, acc, mode, normal) for _ in range(p.K)]
        if p.order in (Order.C_FIRST, Order.REVERSE):
            d = c
            for i, q in enumerate(prods):
                d = add(d, q, last=i == p.K - 1)
        elif p.order == Order.C_LAST:
            d = prods[0]
            for q in prods[1:]:
                d = add(d, q)
            d = add(d, c, last=True)
        else:
            d = add(c, _pairwise(prods, add), last=True)
        what = f"{p.K} products {p.order.value} in {acc.spec.name}"
    if convert:
        d = LEAF.node([d], rounding_node(p.d_fmt, p.rounding, p.flush_outputs, root))
        what += f", converted into {p.d_fmt.spec.name}"
    return d, [f"{what}: u = 2^-{acc.spec.precision} per operation ({mode.value})"]


def gps_tree(p: ModelParams, root: bool, c_normal: bool) -> tuple[Composed, list[str]]:
    """GPS (model/sequential.gps): products rounded into fp32, each group of G summed
    pairwise and added to the running value, every operation RNE in fp32."""
    acc, mode = Format.FP32, Rounding.RNE
    normal = normal_sums(p, acc, c_normal)
    c = LEAF
    if _conversion(p.c_fmt, acc):
        c = LEAF.node([LEAF], rounding_node(acc, mode, False, False))
    prods = [_product(p, acc, mode, normal) for _ in range(p.K)]

    def add(x: Composed, y: Composed) -> Composed:
        return LEAF.node([x, y], rounding_node(acc, mode, p.flush_sums, False, normal))

    d = c
    starts = list(range(0, p.K, p.G))
    for lo in starts:
        last = lo == starts[-1]
        flush = p.flush_outputs if last else p.flush_sums
        d = LEAF.node(
            [d, _pairwise(prods[lo : lo + p.G], add)],
            rounding_node(acc, mode, flush, root and last, normal),
        )
    lines = [f"{len(starts)} groups of G = {p.G} products, pairwise sums in fp32 (RNE)"]
    if normal:
        lines.append("every sum is 0, c or at least 2^e_min: no subnormal part, no flush acts")
    return d, lines


IEEE_TREES = {Algorithm.SEQUENTIAL: sequential_tree, Algorithm.GPS: gps_tree}
"""The algorithms built from IEEE operations and the tree of each."""


def largest_step(p: ModelParams) -> int:
    """How many products one rounding can add to the running value at most: 1 for a
    chain that takes them one at a time, G for GPS, K where the products are summed
    before c joins (c last, pairwise)."""
    if p.algorithm == Algorithm.GPS:
        return p.G
    if p.algorithm == Algorithm.SEQUENTIAL and not p.fused_products:
        if p.order in (Order.C_LAST, Order.PAIRWISE):
            return p.K
    return 1


__all__ = [
    "IEEE_TREES",
    "gps_tree",
    "largest_step",
    "normal_sums",
    "rounding_node",
    "sequential_tree",
]
