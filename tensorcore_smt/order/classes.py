"""Many pair probes a GEMM call, for a library whose outputs do not all sum alike.

One M x N call probes pair (P[m], Q[n]) in output (m, n) (probes.pair_inputs). A library
may sum different outputs of one call in different trees (a kernel's edge tiles, the
blocks each thread takes), so the outputs are sorted into *classes*: outputs that answer
alike wherever every output was asked the same pair. The tree of each class is rebuilt
from every answer its outputs gave, pivot by pivot (tree.build), its questions asked many
at once: each round gives each row of the call a pivot (the pivots the builds wait for,
a row where the class has the most of the leaves wanted; the other rows a pivot not yet
asked) and every column a leaf, and every output answers for its own class.

The classes are found as they show, not guessed: all outputs start in one class; where
two answers of one class disagree (a pair asked twice, or an answer the class's tree
contradicts), one call asks every output that pair, and the class splits by the answers.
When every class's tree agrees with every answer its outputs gave, the result is final;
the random check (core.py) tests it on other inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .tree import NotATree, Pending, Tree, build, size_matrix

MAX_SPLITS = 24
"""Calls that split classes, at most (each asks every output one pair)."""
MAX_CALLS = 1 << 15
"""Calls in all, at most, before the rebuild gives up (NotATree): a guard, not a budget."""

Call = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""call(P, Q) -> the pair sizes of an M x N probe call (entries where P[m] = Q[n] unread)."""


@dataclass
class Classes:
    """The classes of output positions and each one's tree. `labels` (M x N) is the class
    of each output, `trees[c]` that of class c; classes are numbered in the order of their
    first output (row-major), so output (0, 0) is in class 0."""

    labels: np.ndarray
    trees: list[Tree]
    calls: int = 0
    splits: int = 0

    def mask(self, c: int) -> np.ndarray:
        return self.labels == c

    def blocks(self, c: int) -> list[list[int]]:
        """Class c as half-open rectangles [m_lo, m_hi, n_lo, n_hi] (rows m_lo..m_hi-1,
        columns n_lo..n_hi-1) whose union is the class: runs of columns row by row, with
        consecutive rows of the same runs merged."""
        return blocks_of(self.labels == c)


def blocks_of(mask: np.ndarray) -> list[list[int]]:
    runs_by_row = []
    for row in mask:
        d = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
        runs_by_row.append(tuple(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1))))
    out: list[list[int]] = []
    m = 0
    while m < len(mask):
        runs = runs_by_row[m]
        end = m + 1
        while end < len(mask) and runs_by_row[end] == runs:
            end += 1
        out += [[m, end, int(lo), int(hi)] for lo, hi in runs]
        m = end
    return out


@dataclass
class _Obs:
    """Every call made: its P, Q and sizes (-1 where P[m] = Q[n]); `uniform` the calls
    that asked every output one pair."""

    p: list[np.ndarray] = field(default_factory=list)
    q: list[np.ndarray] = field(default_factory=list)
    s: list[np.ndarray] = field(default_factory=list)
    uniform: list[int] = field(default_factory=list)


def reveal_classes(call: Call, k: int, m: int, n: int) -> Classes:
    """The classes of the M x N outputs of `call` and the tree over K products of each.
    NotATree when the answers are not those of one tree per class (after MAX_SPLITS
    splits or MAX_CALLS calls, or a class whose outputs agree on every pair asked of all
    but whose answers contradict every tree)."""
    obs = _Obs()

    def ask(p: np.ndarray, q: np.ndarray, uniform: bool = False) -> None:
        if len(obs.s) >= MAX_CALLS:
            raise NotATree(f"no tree per class of outputs after {MAX_CALLS} calls")
        s = np.asarray(call(p, q), np.int64)
        obs.p.append(p)
        obs.q.append(q)
        obs.s.append(s)
        if uniform:
            obs.uniform.append(len(obs.s) - 1)

    asked_all: set[tuple[int, int]] = set()
    ask(np.arange(m) % k, np.arange(n) % k)
    n_uniform, folded = -1, 0
    while True:
        if len(obs.uniform) != n_uniform:  # new classes: fold every call in again
            n_uniform, folded = len(obs.uniform), 0
            labels = _labels(obs, m, n)
            n_cls = int(labels.max()) + 1
            known = [_empty(k) for _ in range(n_cls)]
        clash = None
        for c in range(n_cls):
            clash = clash or _fold(obs, folded, labels == c, known[c])
        folded = len(obs.s)
        if clash is None:
            trees, pending = [], []
            for c in range(n_cls):
                trees.append(_try_build(k, known[c], c, pending))
            if not pending:
                clash = _contradiction(trees, known, k)
                if clash is None:
                    return Classes(labels, trees, len(obs.s), len(obs.uniform))
            else:
                p, q = _plan(pending, labels, obs, k, m, n)
                ask(p, q)
                continue
        pair = (min(clash), max(clash))
        if pair in asked_all or len(obs.uniform) >= MAX_SPLITS:
            raise NotATree(
                f"pair {pair}: the outputs that answer it alike do not sum in one tree"
                if pair in asked_all
                else f"no tree per class of outputs after {MAX_SPLITS} splits"
            )
        asked_all.add(pair)
        ask(np.full(m, pair[0]), np.full(n, pair[1]), uniform=True)


def _labels(obs: _Obs, m: int, n: int) -> np.ndarray:
    """Class of each output: outputs with the same answers to every uniform call, numbered
    in row-major order of their first output."""
    labels = np.zeros(m * n, np.int64)
    for i in obs.uniform:
        code = labels * (int(obs.s[i].max()) + 2) + obs.s[i].reshape(-1) + 1
        _, labels = np.unique(code, return_inverse=True)
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[labels].reshape(m, n)


def _empty(k: int) -> np.ndarray:
    known = np.full((k, k), -1, np.int64)
    np.fill_diagonal(known, 1)
    return known


def _fold(obs: _Obs, start: int, mask: np.ndarray, known: np.ndarray) -> tuple[int, int] | None:
    """Write into `known` (K x K, -1 unknown) the sizes the outputs of `mask` answered in
    calls `start` on (both orders of each pair); a pair answered two ways, if any."""
    k = len(known)
    flat = known.reshape(-1)
    clash = None
    for p, q, s in zip(obs.p[start:], obs.q[start:], obs.s[start:]):
        rows, cols = np.nonzero(mask & (s >= 0))
        i, j = p[rows], q[cols]
        val = s[rows, cols]
        for idx in (i * k + j, j * k + i):
            old = flat[idx]
            flat[idx] = val
            bad = np.flatnonzero(((old >= 0) & (old != val)) | (flat[idx] != val))
            if clash is None and len(bad):
                clash = divmod(int(idx[bad[0]]), k)
    return clash


def _try_build(k: int, known: np.ndarray, c: int, pending: list) -> Tree | None:
    """The tree of one class from what is known, or None with the questions it waits
    for appended to `pending` as (class, pivot, leaves)."""

    def query(g: int, others: np.ndarray) -> np.ndarray:
        s = known[g, others]
        if (s < 0).any():
            pending.append((c, g, others[s < 0]))
            raise Pending
        return s

    try:
        return build(k, query)
    except Pending:
        return None


def _contradiction(trees: list[Tree], known: list[np.ndarray], k: int) -> tuple[int, int] | None:
    """A pair some class answered otherwise than its tree says, if any."""
    for t, kn in zip(trees, known):
        bad = np.argwhere((kn >= 0) & (size_matrix(t, k) != kn))
        if len(bad):
            return int(bad[0][0]), int(bad[0][1])
    return None


def _plan(
    pending: list, labels: np.ndarray, obs: _Obs, k: int, m: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """P and Q of the next call: column n takes leaf (n + shift) mod K, the shift that lets
    the columns of each waiting class hold most of the leaves it waits for; each pivot
    asked gets the free rows where its class holds most of those leaves, until they are
    all held; the rows left take the pivots asked least so far."""
    masks: dict[int, np.ndarray] = {}
    for c, _, _ in pending:
        if c not in masks:
            masks[c] = labels == c
    q = (np.arange(n) + _shift(pending, masks, k, n)) % k
    p = np.full(m, -1)
    for c, g, leaves in pending:
        mask = masks[c]
        need = np.zeros(k, bool)
        need[leaves] = True
        while need.any():
            cols = need[q] & (q != g)
            cover = mask[:, cols].sum(axis=1)
            cover[p >= 0] = -1
            row = int(np.argmax(cover))
            if cover[row] <= 0:
                break
            p[row] = g
            need[q[mask[row] & cols]] = False
    free = np.flatnonzero(p < 0)
    if len(free):
        used = np.zeros(k, np.int64)
        for pp in obs.p:
            np.add.at(used, pp, 1)
        np.add.at(used, p[p >= 0], 1)
        order = np.argsort(used, kind="stable")
        p[free] = order[np.arange(len(free)) % k]
    return p, q


def _shift(pending: list, masks: dict[int, np.ndarray], k: int, n: int) -> int:
    """The shift s (column n holds leaf (n + s) mod K) under which the columns of the
    waiting classes hold the most of the leaves they wait for (the smallest such s):
    for each class, the circular correlation of the leaves it waits for with the leaves
    its columns hold at shift 0."""
    score = np.zeros(k)
    for c, mask in masks.items():
        need = np.zeros(k)
        for cc, _, leaves in pending:
            if cc == c:
                need[leaves] += 1
        held = np.zeros(k)
        np.add.at(held, np.arange(n)[mask.any(axis=0)] % k, 1)
        held = np.minimum(held, 1)
        # score[s] += sum_j need[j] * held[(j - s) mod K]
        score += np.round(np.fft.ifft(np.fft.fft(need) * np.conj(np.fft.fft(held))).real)
    return int(np.argmax(score))
