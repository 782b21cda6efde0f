"""Hypotheses run on rows with the vector interpreter, and the oracle's answers they face.

`Evaluator` runs each hypothesis once on every row known so far (the pool and the
solver's witnesses) and keeps the predictions: a later question about the hypothesis
costs an array lookup, and a row added later is run through it on demand. `Evidence` is
the oracle's answers (row index -> d); a hypothesis *survives* when it predicts every
answered row bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..formats import Format
from .pool import Rows
from .space import Hypothesis, Space


class Evaluator:
    """Predictions of hypotheses on the rows of `rows` (cached, extended as rows grow)."""

    def __init__(self, space: Space, rows: Rows) -> None:
        self.space = space
        self.rows = rows
        self.cache: dict[Hypothesis, np.ndarray] = {}
        self.answered_cache: dict[Hypothesis, np.ndarray] = {}
        self.failed: dict[Hypothesis, str] = {}
        self.calls = 0

    def predict(self, h: Hypothesis) -> np.ndarray | None:
        """d bits of `h` on every row (None if the model cannot run this hypothesis)."""
        if h in self.failed:
            return None
        n = len(self.rows)
        pred = self.cache.get(h)
        have = 0 if pred is None else len(pred)
        if have < n:
            new = self._run(h, slice(have, n))
            if new is None:
                self.cache.pop(h, None)
                return None
            pred = new if pred is None else np.concatenate([pred, new])
            self.cache[h] = pred
        return pred

    def known_refuted(self, h: Hypothesis, evidence: Evidence) -> bool:
        """Whether predictions already made (no model run here) mispredict an answered
        row: such a hypothesis can never survive, whatever rows are answered later."""
        if h in self.failed:
            return True
        idx, d = evidence.arrays()
        full = self.cache.get(h)
        if full is not None:
            seen = idx < len(full)
            return bool(np.any(full[idx[seen]] != d[seen]))
        got = self.answered_cache.get(h)
        if got is None:
            return False
        n = min(len(got), len(d))
        return bool(np.any(got[:n] != d[:n]))

    def answered(self, h: Hypothesis, evidence: Evidence) -> np.ndarray | None:
        """d bits of `h` on the answered rows only, in the evidence's order: what the
        search climbs on. Most hypotheses a climb meets are refuted by these few rows,
        so they are never run on the whole pool (None if the model cannot run `h`)."""
        idx = evidence.index
        full = self.cache.get(h)
        if full is not None and (not idx or len(full) > max(idx)):
            return full[idx]
        if h in self.failed:
            return None
        got = self.answered_cache.get(h)
        have = 0 if got is None else len(got)
        if have < len(idx):
            new = self._run(h, idx[have:])
            if new is None:
                self.answered_cache.pop(h, None)
                return None
            got = new if got is None else np.concatenate([got, new])
            self.answered_cache[h] = got
        return got

    def _run(self, h: Hypothesis, rows: slice | list[int]) -> np.ndarray | None:
        """`h` on the rows `rows` with the vector interpreter (None, noted in `failed`,
        when the model cannot run this hypothesis)."""
        try:
            new = self.space.run(h, self.rows.a[rows], self.rows.b[rows], self.rows.c[rows])
        except (ValueError, TypeError, AssertionError, KeyError, IndexError) as e:
            self.failed[h] = f"{type(e).__name__}: {e}"
            return None
        self.calls += 1
        return new.astype(np.uint64)


@dataclass
class Evidence:
    """The oracle's answers: for each answered row, the d it returned."""

    d_fmt: Format
    index: list[int] = field(default_factory=list)
    d: list[int] = field(default_factory=list)

    def add(self, rows: list[int], d: list[int]) -> None:
        for i, x in zip(rows, d):
            if i not in self.index:
                self.index.append(i)
                self.d.append(int(x))

    def __len__(self) -> int:
        return len(self.index)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.index, dtype=np.int64), np.asarray(self.d, dtype=np.uint64)

    def first_miss(self, pred: np.ndarray) -> int | None:
        """The first answered row (position in the evidence) that `pred` mispredicts."""
        idx, d = self.arrays()
        bad = np.nonzero(pred[idx] != d)[0]
        return int(bad[0]) if len(bad) else None

    def score(self, pred: np.ndarray | None) -> tuple[int, float]:
        """(rows matched, minus the summed log2 distance of the misses in ulps): how close
        a hypothesis comes, for the search to climb on. `pred` covers every row."""
        if pred is None:
            return (-1, float("-inf"))
        return self.score_answered(pred[self.arrays()[0]])

    def score_answered(self, got: np.ndarray | None) -> tuple[int, float]:
        """`score` of predictions on the answered rows only (in the evidence's order)."""
        if got is None:
            return (-1, float("-inf"))
        if not self.index:
            return (0, 0.0)
        d = self.arrays()[1]
        hit = got == d
        miss = ~hit
        if not miss.any():
            return (int(hit.sum()), 0.0)
        dist = np.abs(_order(got[miss], self.d_fmt) - _order(d[miss], self.d_fmt))
        return (int(hit.sum()), -float(np.log2(1.0 + dist).sum()))


def _order(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Encodings as signed integers ordered like the values they stand for (float64)."""
    w = fmt.spec.storage
    b = bits.astype(np.uint64)
    sign = (b >> np.uint64(w - 1)) & np.uint64(1)
    mag = (b & np.uint64((1 << (w - 1)) - 1)).astype(np.float64)
    return np.where(sign == 1, -mag, mag)
