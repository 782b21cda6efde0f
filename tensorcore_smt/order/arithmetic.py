"""The element arithmetic of a revealed tree, learnt from the library's outputs on inputs
that tell arithmetics apart, and those inputs.

The pair probe (probes.py) gives the order; how each addition rounds it cannot see. Here
the library is run on *discriminating* inputs (`discriminating`): signs and mantissas at
random with exponents spread over a wide range, pairs of products that nearly cancel, and
subnormal inputs, where fma and a separate multiply, an fp32 and an fp64 accumulator,
keeping and flushing subnormals give different bits. `learn` takes the first uniform
arithmetic (evaluate.UNIFORM) under which the tree reproduces every output; failing that,
each child of the root is run alone (the inputs of the other products zero, which add
nothing) and given its own, and the root's addition a width (a kernel's main loop in
fp32 and a tail summed in a C `double`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .evaluate import (
    UNIFORM,
    Arithmetic,
    Products,
    TreeArithmetic,
    Width,
    evaluate_model,
    supported,
)
from .tree import Tree, leaves

Sample = Callable[[np.ndarray | None, int], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""sample(keep, seed) -> (A rows, B columns, outputs), T x K, T x K, T: one class's outputs
on discriminating inputs, the products outside `keep` (a boolean mask over K, None: all
kept) zero."""

WIDE_EXP = {"fp32": 24, "bf16": 24, "tf32": 24, "fp16": 6}
"""Exponents of the discriminating inputs lie in [-E, E] (fp16: products stay normal)."""
SUBNORMAL_EXP = {
    "fp32": (-149, -127),
    "bf16": (-133, -127),
    "tf32": (-136, -127),
    "fp16": (-24, -15),
}
"""Exponents of the subnormal inputs mixed in, per input format."""


def discriminating(fmt, m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N) in float64, exact in input format `fmt`: a quarter of the
    rows of A wide-range, a quarter whose products cancel in pairs (A's k and pi(k) opposite
    to within a few ulps, B's rows k and pi(k) equal), a quarter with subnormal entries
    (one in eight), the rest wide-range with one product in K far larger; B wide-range."""
    from .oracles import np_dtype

    name = fmt.spec.name
    e = WIDE_EXP.get(name, 6)
    rng = np.random.Generator(np.random.PCG64([seed, m, n, k, 7]))

    def wide(shape):
        mant = rng.uniform(1.0, 2.0, shape)
        return rng.choice([-1.0, 1.0], shape) * mant * np.exp2(rng.integers(-e, e + 1, shape))

    a = wide((m, k))
    b = wide((k, n))
    q = m // 4
    perm = rng.permutation(k)
    half = k // 2
    i, j = perm[:half], perm[half : 2 * half]
    b[j] = b[i]
    rows = np.arange(q, 2 * q)
    a[np.ix_(rows, j)] = -a[np.ix_(rows, i)] * (
        1 + rng.integers(-4, 5, (len(rows), half)) * 2.0**-20
    )
    lo, hi = SUBNORMAL_EXP.get(name, (-24, -15))
    sub = np.zeros((m, k), bool)
    sub[2 * q : 3 * q] = rng.random((q, k)) < 0.125
    a[sub] = np.sign(a[sub]) * np.exp2(rng.integers(lo, hi + 1, int(sub.sum())))
    big = rng.integers(0, k, m - 3 * q)
    a[np.arange(3 * q, m), big] *= 2.0 ** min(e, 12)
    dt = np_dtype(fmt)
    with np.errstate(over="ignore", under="ignore"):
        return a.astype(dt).astype(np.float64), b.astype(dt).astype(np.float64)


def matches(tree: Tree, model: TreeArithmetic, a, b, want: np.ndarray, out_dtype) -> np.ndarray:
    """Whether each output of `model` over `tree` has the bits of `want` (after the one
    conversion to the output format)."""
    got = evaluate_model(tree, model, a, b).astype(out_dtype)
    want = np.asarray(want).astype(out_dtype)
    u = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    return got.view(u) == want.view(u)


MAX_DEPTH = 4
"""Levels below the root a part's own arithmetic is sought at, at most."""


def learn(tree: Tree, sample: Sample, out_dtype, seed: int = 0) -> TreeArithmetic | None:
    """The arithmetic of `tree` (module docstring), or None when none tried reproduces
    the outputs of `sample` (or the tree has fused adds of more than two members)."""
    if isinstance(tree, int) or not supported(tree):
        return None
    return _learn(tree, None, sample, out_dtype, seed, 0)


def _learn(tree, keep, sample, out_dtype, seed, depth) -> TreeArithmetic | None:
    a, b, want = sample(keep, seed)
    for ar in UNIFORM:
        model = TreeArithmetic((ar,))
        if matches(tree, model, a, b, want, out_dtype).all():
            return model
    if depth >= MAX_DEPTH:
        return None
    k = len(keep) if keep is not None else a.shape[1]
    parts: list = []
    for i, child in enumerate(tree):
        if isinstance(child, int):
            parts.append(Arithmetic(Products.ROUNDED, Width.FP32))
            continue
        sub = np.zeros(k, bool)
        sub[leaves(child)] = True
        got = _learn(child, sub, sample, out_dtype, seed + 1 + i, depth + 1)
        if got is None:
            return None
        parts.append(got.parts[0] if got.uniform else got)
    daz = any(p.daz for p in parts)
    parts = [
        Arithmetic(p.products, p.width, daz) if isinstance(p, Arithmetic) else p for p in parts
    ]
    # a part summed in a C double is joined in that double (sdot's tail: `dot += y[i] *
    # x[i]` in double, then `dot += mydot`, one rounding to fp32 at the end): tried first,
    # since a double rounding differs from one rounding in few outputs (about 1 in 10^4)
    wide = any(isinstance(p, Arithmetic) and p.width == Width.FP64 for p in parts)
    for root in (Width.FP64, Width.FP32) if wide else (Width.FP32, Width.FP64):
        model = TreeArithmetic(tuple(parts), root)
        if matches(tree, model, a, b, want, out_dtype).all():
            return model
    return None
