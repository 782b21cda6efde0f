"""The rule of a library profile between its recorded shapes: the nearest recorded shape
of the same alignment class, in a weighted log2 distance.

A shape (M, N, K) is the point (log2 K, log2 M + log2 N, log2 M - log2 N): depth, output
size (which sets the number of output tiles, hence the split-K a library picks) and aspect.
The distance of two shapes is w_k |dK| + w_mn |dMN| + w_aspect |dAspect|; the neighbour is
the recorded shape that its recipe reproduces, of the query's alignment class, at the least
distance (ties: the smaller K, then the smaller M*N, then the smaller M). The K-split
boundaries fall where the neighbour changes: halfway between two recorded K in log2 when
w_k dominates. The weights are fitted on the recorded shapes (`fit_weights`: the grid
point whose leave-one-out neighbour has the shape's own recipe most often, first of the
grid on ties) and written in the profile.

A shape is *aligned* when N and K are each a multiple of `align_bytes` bytes of the input
format (16 bytes: 8 fp16 elements, 4 fp32, 16 fp8; the alignment cuBLAS's tensor-core
kernels want of leading dimensions); any other shape is *unaligned*, and the rule takes a
neighbour only from its own class. M is not a leading dimension of a row-major torch call:
cuBLAS, column-major, computes D^T = B^T A^T with leading dimensions N (B^T, D^T) and K
(A^T), so A[:M] @ B for any M reads memory of the same alignment (a class by M would
put every M not a multiple of 8 in a class with no recordings).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..formats import Format
from .profiles import Rule, Shape

WEIGHT_GRID: dict[str, tuple[float, ...]] = {
    "k": (1.0, 2.0, 4.0, 8.0),
    "mn": (1.0,),
    "aspect": (0.0, 0.25, 1.0),
}
"""The weights `fit_weights` chooses from (w_mn fixed: only the ratios matter)."""

RULE_TEXT = (
    "nearest recorded shape whose recipe reproduces it, of the same alignment class "
    "(N and K, the leading dimensions, each a multiple of {align} bytes of the input format, "
    "or not), in the distance "
    "{k:g}|dlog2 K| + {mn:g}|dlog2(M*N)| + {aspect:g}|dlog2(M/N)|; ties: the smaller K, "
    "then M*N, then M. Weights fitted by leave-one-out on the recorded shapes "
    "({hits} of {total} neighbours had the shape's own recipe)."
)


def aligned(fmt: str, m: int, n: int, k: int, align_bytes: int) -> bool:
    """Whether N and K (the leading dimensions of a row-major call; M is not one) are
    each a multiple of `align_bytes` bytes of `fmt`."""
    bits = Format.parse(fmt).spec.storage
    per = max(1, (align_bytes * 8) // bits)
    return n % per == 0 and k % per == 0


def _point(m: int, n: int, k: int) -> tuple[float, float, float]:
    return (math.log2(k), math.log2(m) + math.log2(n), math.log2(m) - math.log2(n))


def distance(rule: Rule, a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """The rule's distance between shapes a and b, each (M, N, K)."""
    pa, pb = _point(*a), _point(*b)
    w = (rule.k, rule.mn, rule.aspect)
    return sum(wi * abs(x - y) for wi, x, y in zip(w, pa, pb))


def nearest(rule: Rule, fmt: str, shapes: Iterable[Shape], m: int, n: int, k: int) -> Shape | None:
    """The recorded shape whose recipe the rule gives (M, N, K) of inputs in `fmt`; None
    when no reproduced shape of its alignment class is recorded."""
    want = aligned(fmt, m, n, k, rule.align_bytes)
    pool = [s for s in shapes if s.exact and aligned(fmt, *s.mnk, rule.align_bytes) == want]
    if not pool:
        return None
    return min(pool, key=lambda s: (distance(rule, (m, n, k), s.mnk), s.k, s.m * s.n, s.m, s.n))


@dataclass(frozen=True)
class Fitted:
    """The fitted rule and its leave-one-out count."""

    rule: Rule
    hits: int
    total: int


def _rule(w: dict[str, float], align: int, hits: int = 0, total: int = 0) -> Rule:
    text = RULE_TEXT.format(align=align, hits=hits, total=total, **w)
    return Rule(w["k"], w["mn"], w["aspect"], align, text)


def fit_weights(classes: Sequence[tuple[str, Sequence[Shape]]], align_bytes: int = 16) -> Fitted:
    """The weights of WEIGHT_GRID under which each reproduced recorded shape's nearest
    other shape (same class) most often has the same recipe; `classes`: (input format,
    recorded shapes) per call class."""
    best: Fitted | None = None
    names = list(WEIGHT_GRID)
    for values in itertools.product(*(WEIGHT_GRID[n] for n in names)):
        w = dict(zip(names, values))
        rule = _rule(w, align_bytes)
        hits = total = 0
        for fmt, shapes in classes:
            for s in shapes:
                if not s.exact:
                    continue
                others = [o for o in shapes if o is not s]
                near = nearest(rule, fmt, others, s.m, s.n, s.k)
                if near is None:
                    continue
                total += 1
                hits += near.recipe == s.recipe
        if best is None or hits > best.hits:
            best = Fitted(_rule(w, align_bytes, hits, total), hits, total)
    assert best is not None
    return best


__all__ = ["WEIGHT_GRID", "Fitted", "aligned", "distance", "fit_weights", "nearest"]
