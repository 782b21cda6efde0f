"""FPRev's rebuild for large K and skinny calls: questions batched into calls, answers
kept per pivot (no K x K matrix), and the structure of common orders used.

`build` (tree.py) asks pivot g about a set of leaves; here each round collects every
question the rebuild can ask at once (tree.Pending) and packs them into calls: a call's
rows are pivots and its columns the union of the leaves they are asked about, as many
as the call's shape holds (a library's own M x N; a model's calls sized to the
questions, their inputs kept under MAX_INPUT elements). An N = 1 call is asked with its
rows and columns swapped (one pivot a call either way).

Blocks of a fixed size and the slices of a split repeat one shape along K: a small
question (at most SMALL leaves) that is a translate of one answered already (the same
leaves relative to its pivot) is predicted from that answer instead of asked. After the
rebuild a sample of the predictions (CONFIRM) is asked; if any differs, the rebuild
runs again with every question asked. The tree returned is then the one the answers
give, with the count of predicted questions and of those confirmed.

The outputs of a call are taken to sum alike (one class): where they do not, answers
contradict each other or the tree (NotATree), and the check on discriminating inputs
(core.py) compares every output with the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .tree import NotATree, Pending, Tree, TreeIndex, build

SMALL = 256
"""Questions of at most this many leaves may be predicted from a translate."""
CONFIRM = 64
"""Predicted questions asked afterwards to confirm the predictions, at most."""
MAX_INPUT = 1 << 25
"""Elements of A or B of one probe call, at most (float64 inputs: 256 MiB)."""
MAX_CALLS = 1 << 16
"""Calls in all, at most: a guard, not a budget."""

Ask = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""ask(P, Q) -> pair sizes (len(P) x len(Q)), -1 where P[m] = Q[n]."""


@dataclass
class Structured:
    """The tree and what it took: calls, outputs (elements of D) and multiply-adds
    (outputs x K) computed, questions asked and predicted, predictions confirmed."""

    tree: Tree
    calls: int = 0
    outputs: int = 0
    asked: int = 0
    predicted: int = 0
    confirmed: int = 0


def reveal_structured(ask: Ask, k: int, m: int, n: int, free: bool, seed: int = 0) -> Structured:
    """The tree over K products that `ask` answers (module docstring). `m`, `n`: the
    call's shape (free: the largest the calls may take, sized per call)."""
    if n == 1 and m > 1:  # one column: its leaf is the pivot, the rows the leaves asked

        def swapped(p: np.ndarray, q: np.ndarray) -> np.ndarray:
            return ask(q, p).T

        return reveal_structured(swapped, k, n, m, free, seed)
    rows_max = max(1, min(m, MAX_INPUT // k))
    cols_max = max(1, min(n, MAX_INPUT // k))
    st = Structured(tree=0)
    for predict in (True, False):
        known: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        guessed: list[tuple[int, np.ndarray]] = []
        tree = _rebuild(ask, k, rows_max, cols_max, m, n, free, predict, known, guessed, st)
        check_tree(tree, k, known)
        if not guessed:
            st.tree = tree
            return st
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(guessed), min(CONFIRM, len(guessed)), replace=False)
        check = {guessed[i][0]: guessed[i][1] for i in sorted(pick)}
        got: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        _ask_all(ask, check, got, rows_max, cols_max, m, n, free, st)
        if all(np.array_equal(_lookup(got, g, o), _lookup(known, g, o)) for g, o in check.items()):
            st.tree = tree
            st.predicted = len(guessed)
            st.confirmed = len(check)
            return st
    raise NotATree("the rebuild without predictions did not settle")  # not reached


def _lookup(known: dict, g: int, others: np.ndarray) -> np.ndarray | None:
    if g not in known:
        return None
    leaves, sizes = known[g]
    at = np.searchsorted(leaves, others)
    at = np.minimum(at, len(leaves) - 1)
    if not (leaves[at] == others).all():
        return None
    return sizes[at]


def _rebuild(ask, k, rows_max, cols_max, m, n, free, predict, known, guessed, st) -> Tree:
    templates: dict[bytes, tuple[np.ndarray, int]] = {}
    tops: dict[int, int] = {}
    while True:
        pending: dict[int, np.ndarray] = {}
        waiting: set[bytes] = set()

        def query(
            g: int, others: np.ndarray, top: int, pending=pending, waiting=waiting
        ) -> np.ndarray:
            s = _lookup(known, g, others)
            tops[g] = top
            if s is not None:
                return s
            if predict and len(others) <= SMALL:
                key = (others - g).tobytes()
                if key in templates:  # sizes below the enclosing subtree's translate
                    t_s, t_top = templates[key]
                    s = np.where(t_s == t_top, top, t_s)
                    known[g] = (others.copy(), s)
                    guessed.append((g, others.copy()))
                    return s
                if key in waiting:  # asked this round for another pivot: predicted next
                    raise Pending
                waiting.add(key)
            pending[g] = others
            raise Pending

        query.takes_top = True  # type: ignore[attr-defined]
        try:
            return build(k, query)
        except Pending:
            pass
        if st.calls >= MAX_CALLS:
            raise NotATree(f"no tree after {MAX_CALLS} calls")
        _ask_all(ask, pending, known, rows_max, cols_max, m, n, free, st)
        for g, others in pending.items():
            if len(others) <= SMALL:
                templates.setdefault((others - g).tobytes(), (_lookup(known, g, others), tops[g]))


def _ask_all(ask, questions, known, rows_max, cols_max, m, n, free, st) -> None:
    """Ask every question (pivot -> leaves), packed into calls; answers into `known`."""
    parts: list[tuple[int, np.ndarray]] = []
    for g, others in sorted(questions.items()):
        for lo in range(0, len(others), cols_max):
            parts.append((g, others[lo : lo + cols_max]))
    st.asked += len(questions)
    i = 0
    while i < len(parts):
        rows = [parts[i][0]]
        cols = set(parts[i][1].tolist())
        need = len(parts[i][1])
        j = i + 1
        while j < len(parts) and len(rows) < rows_max and parts[j][0] not in rows:
            more = cols | set(parts[j][1].tolist())
            if len(more) > cols_max:
                break
            if free and (len(rows) + 1) * len(more) > 2 * (need + len(parts[j][1])) + 4096:
                break
            rows.append(parts[j][0])
            cols = more
            need += len(parts[j][1])
            j += 1
        p = np.array(rows, np.int64)
        q = np.array(sorted(cols), np.int64)
        if not free:  # the library's own shape: fill it
            p = np.resize(p, m)
            q = np.resize(q, n)
        s = np.asarray(ask(p, q), np.int64)
        st.calls += 1
        st.outputs += s.size
        for r, g in enumerate(rows):
            ok = s[r] >= 0
            leaves, sizes = q[ok], s[r][ok]
            if g in known:
                leaves = np.concatenate([known[g][0], leaves])
                sizes = np.concatenate([known[g][1], sizes])
            order = np.argsort(leaves, kind="stable")
            leaves, sizes = leaves[order], sizes[order]
            keep = np.concatenate([[True], leaves[1:] != leaves[:-1]])
            dup = ~keep
            if dup.any() and (sizes[dup] != sizes[np.flatnonzero(dup) - 1]).any():
                raise NotATree(
                    f"pivot {g}: a pair answered two ways (the outputs of a call do not "
                    "all sum alike)"
                )
            known[g] = (leaves[keep], sizes[keep])
        i = j


def check_tree(tree: Tree, k: int, known: dict) -> None:
    """NotATree when an answer kept differs from the tree's size of that pair."""
    idx = TreeIndex(tree, k)
    for g, (leaves, sizes) in known.items():
        want = idx.sizes(np.full(len(leaves), g), leaves)
        bad = np.flatnonzero(want != sizes)
        if len(bad):
            j = int(leaves[bad[0]])
            raise NotATree(
                f"pair ({g}, {j}) answered {sizes[bad[0]]}, the tree says {want[bad[0]]}"
            )
