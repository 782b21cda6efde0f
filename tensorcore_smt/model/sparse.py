"""Structured-sparse dot products (PTX mma.sp, mma.sp::ordered_metadata) as dense units.

A sparse instruction of shape k = K takes K entries of b and K * keep / group entries of a,
the entries of A that are kept: of every `sparse_group` consecutive k of A's row, the
metadata names `sparse_keep` (PTX ISA, "Sparse matrix storage": 2:4 for .f16, .bf16 and
the 8-bit formats, two 2-bit indices per group of four; 1:2 for .tf32). Selected entry j
sits at position g * group + meta[j], g = j // keep. The indices of a group are distinct
and increasing (what mma.sp::ordered_metadata states; the unordered form's other
orders are refused rather than guessed).

Which dense unit runs is the hypothesis (params.Sparsity): COMPRESSED is the dense unit of
K * keep / group products on (a_j, b at the selected position), EXPANDED the dense unit of
K products on a with +0 at the unselected positions. The selection is data movement
ahead of the arithmetic, the same for every interpreter: the arithmetic is the dense
unit's own code, on the symbolic interpreter as on the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from .params import ModelParams, Sparsity

SPARSE_COMMANDS = (
    "`tcsmt simulate --meta`, `tcsmt diff --meta`, `tcsmt prove --meta`, `tcsmt find --meta` "
    "and tc.simulate(meta=...)"
)
"""Where a sparse instruction gets its metadata: what a refusal elsewhere points to."""


def refusal(name: str, p: ModelParams, why: str) -> str:
    """One line refusing the sparse instruction `name` where its metadata cannot be
    given (`why`: what this command or call runs instead), naming where it can."""
    return (
        f"{name} is structured-sparse ({p.sparse_keep} of every {p.sparse_group} k of A "
        f"kept, named by metadata): {why}; its metadata goes to {SPARSE_COMMANDS}"
    )


def dense_params(p: ModelParams) -> ModelParams:
    """The dense unit a sparse hypothesis runs (p itself for a dense instruction)."""
    if p.sparse == Sparsity.NONE:
        return p
    K = p.n_a if p.sparse == Sparsity.COMPRESSED else p.K
    return p.with_(sparse=Sparsity.NONE, K=K, L=min(p.L, K))


def check_metadata(meta: Sequence[int], p: ModelParams) -> list[int]:
    """The metadata as positions within their group, checked: one index per selected a,
    each in 0..group-1, increasing within its group (ValueError naming the first bad
    group otherwise)."""
    n, g, keep = p.n_a, p.sparse_group, p.sparse_keep
    if p.sparse == Sparsity.NONE:
        raise ValueError("metadata given to a dense instruction; allowed: none")
    idx = [int(x) for x in meta]
    if len(idx) != n:
        raise ValueError(f"metadata: expected {n} indices ({keep} of every {g} k), got {len(idx)}")
    for grp in range(n // keep):
        part = idx[grp * keep : (grp + 1) * keep]
        if any(not 0 <= x < g for x in part) or any(x >= y for x, y in zip(part, part[1:])):
            raise ValueError(
                f"metadata: group {grp} selects {part}; allowed: {keep} distinct "
                f"increasing indices in 0..{g - 1}"
            )
    return idx


def patterns(p: ModelParams) -> list[tuple[int, ...]]:
    """Every valid selection of one group: `sparse_keep` distinct increasing positions."""
    return list(combinations(range(p.sparse_group), p.sparse_keep))


def meta_indices(pattern: tuple[int, ...], p: ModelParams) -> list[int]:
    """The metadata (one index a kept element) of a row whose every group keeps
    `pattern`."""
    return list(pattern) * (p.n_a // p.sparse_keep)


def metadata_for(given: Sequence[int] | None, p: ModelParams) -> list[int]:
    """The metadata a question asks with: `given` in full (one index a kept element),
    one group's pattern (`sparse_keep` indices) that every group then keeps, or None
    for the first pattern in every group; checked (ValueError otherwise)."""
    if given is None:
        return meta_indices(patterns(p)[0], p)
    if len(given) == p.sparse_keep and p.n_a != p.sparse_keep:
        given = meta_indices(tuple(given), p)
    return check_metadata(given, p)


def describe_metadata(meta: Sequence[int], p: ModelParams) -> str:
    """The metadata as `--meta` takes it: one group's pattern when every group keeps
    the same, else every index."""
    keep = p.sparse_keep
    first = tuple(meta[:keep])
    if list(meta) == meta_indices(first, p):
        return ",".join(map(str, first))
    return ",".join(map(str, meta))


def positions(meta: Sequence[int], p: ModelParams) -> list[int]:
    """The k position of every selected a (metadata already checked)."""
    return [(j // p.sparse_keep) * p.sparse_group + int(m) for j, m in enumerate(meta)]


def select(a: list, b: list, meta: Sequence[int], p: ModelParams, zero) -> tuple[list, list]:
    """The dense unit's a and b (lists of one interpreter's values) for hypothesis
    `p.sparse`; `zero` is +0 of a's format in that interpreter."""
    pos = positions(meta, p)
    if p.sparse == Sparsity.COMPRESSED:
        return list(a), [b[k] for k in pos]
    full = [zero] * p.K
    for j, k in enumerate(pos):
        full[k] = a[j]
    return full, list(b)


def select_rows(
    a: np.ndarray, b: np.ndarray, meta: np.ndarray, p: ModelParams
) -> tuple[np.ndarray, np.ndarray]:
    """`select` on rows of bit patterns: a (rows, n_a), b (rows, K), meta (rows, n_a)
    or one metadata row for all (every row's metadata already checked)."""
    rows = a.shape[0]
    meta = np.broadcast_to(np.asarray(meta, dtype=np.int64), (rows, p.n_a))
    j = np.arange(p.n_a)
    pos = (j // p.sparse_keep) * p.sparse_group + meta
    r = np.arange(rows)[:, None]
    if p.sparse == Sparsity.COMPRESSED:
        return a, b[r, pos]
    full = np.zeros((rows, p.K), dtype=a.dtype)
    full[r, pos] = a
    return full, b
