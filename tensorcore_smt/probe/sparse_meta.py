"""The metadata register of a structured-sparse (mma.sp) probe or runner.

Every thread passes the same 32-bit word, the metadata of one group repeated in each of
its eight 4-bit nibbles, so whichever thread and nibble the PTX ISA assigns to a row
and a group of A ("Sparse matrix storage", "Matrix fragments for sparse mma"), every
group of row 0 keeps the same positions: the selection needs no per-thread metadata
layout, only the nibble's encoding. A vector's selection is one `pattern` (the kept
positions of a group, increasing), the same for all of its groups.

The nibble (PTX ISA, sparse metadata): for the 2:4 formats (.f16, .bf16, 8-bit) two 2-bit
indices, the first kept position in bits 0-1 and the second in bits 2-3; for .tf32's 1:2
sparsity the kept element is named as a pair of 16-bit halves, 0b0100 for the first
element of the pair and 0b1110 for the second.
"""

from __future__ import annotations

import numpy as np

from ..model.params import ModelParams
from ..model.sparse import meta_indices, patterns

NIBBLES = 8
"""Nibbles of the 32-bit metadata register."""

TF32_NIBBLE = {0: 0b0100, 1: 0b1110}
"""The nibble of .tf32's 1:2 sparsity, by the kept element of the pair."""


def nibble(pattern: tuple[int, ...], p: ModelParams) -> int:
    """The 4-bit metadata of one group keeping `pattern`."""
    if p.sparse_keep == 1 and p.sparse_group == 2:
        return TF32_NIBBLE[pattern[0]]
    return sum(x << (2 * i) for i, x in enumerate(pattern))


def meta_word(pattern: tuple[int, ...], p: ModelParams) -> int:
    """The metadata register: `pattern`'s nibble in every nibble."""
    n = nibble(pattern, p)
    return sum(n << (4 * i) for i in range(NIBBLES))


def row_metadata(which: np.ndarray, p: ModelParams) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose selection is pattern number `which[i]` of `patterns(p)`: their (N, n_a)
    model metadata and (N,) metadata words."""
    pats = patterns(p)
    idx = np.array([meta_indices(x, p) for x in pats], dtype=np.int64)
    words = np.array([meta_word(x, p) for x in pats], dtype=np.uint64)
    return idx[which], words[which]


__all__ = [
    "NIBBLES",
    "TF32_NIBBLE",
    "meta_indices",
    "meta_word",
    "nibble",
    "patterns",
    "row_metadata",
]
