"""Batch invariance of library profiles against the recordings' batch part: row 0 of
A[:M] @ B at fixed (N, K) for M = 1..4096 (library_plan.batch_ms), recorded on each GPU.

A case is one (class, N, K, M). Every M of a series reads the same inputs (one seed; row 0
of A and B do not depend on M) and keeps row 0 at 16 columns, some of them drawn per M:
rows of two M are compared on the columns both kept (four: 0, 1, N/2, N - 1), and, more
finely, each M's recorded row 0 is compared with what the recipe the profile decides at
M = 1 computes at that M's columns (`base`; meaningful when that recipe reproduces M = 1's
recording). The recorded bits of row 0 say where it changes (the M at which they first
differ from M = 1's) and, between two GPUs, where they differ. A profile
answers a case correctly when the recipe it decides for the call reproduces the recorded
row 0 bit for bit (RecordedCall.model, as the profile check); its answer to "does row 0
at M equal row 0 at M = 1" and, for two profiles, "does this M give the same bits on both
GPUs" is then right too, and is counted on its own as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..gemm.profiles import Profile
from .library_profile_check import decision_of
from .library_read import RecordedCall

PART = "batch"


@dataclass
class Series:
    """One (class, N, K) of the batch part under one profile: per asked M, the recorded
    row 0, the profile's row 0 and its recipe."""

    cls: str
    n: int
    k: int
    ms: list[int] = field(default_factory=list)
    recorded: list[dict[int, int]] = field(default_factory=list)  # column -> bits
    predicted: list[dict[int, int]] = field(default_factory=list)
    base: list[dict[int, int]] = field(default_factory=list)  # M = 1's recipe at each M
    recipes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def dtype(self) -> str:
        return self.cls.split(".")[1]

    @property
    def based(self) -> bool:
        """Whether M = 1's recipe reproduces M = 1's recorded row 0 (`base` is usable)."""
        return self.base[0] == self.recorded[0]

    def changed(self, rows: list[dict[int, int]]) -> list[bool]:
        """Per M, whether `rows` at M differ from M = 1's row 0: against `base` on every
        kept column when it is usable, else on the columns both kept."""
        if self.based:
            return [r != b for r, b in zip(rows, self.base)]
        return [not same(r, rows[0]) for r in rows]

    @property
    def recorded_change(self) -> int | None:
        """The least M whose recorded row 0 differs from M = 1's (None: never)."""
        return next((m for m, c in zip(self.ms, self.changed(self.recorded)) if c), None)

    @property
    def predicted_change(self) -> int | None:
        """The least M whose row 0 under the profile differs from M = 1's."""
        return next((m for m, c in zip(self.ms, self.changed(self.predicted)) if c), None)

    @property
    def recipe_change(self) -> int | None:
        """The least M whose decided recipe differs from M = 1's."""
        return next((m for m, r in zip(self.ms, self.recipes) if r != self.recipes[0]), None)

    @property
    def bits_right(self) -> int:
        """Cases whose row 0 the profile reproduces bit for bit."""
        return sum(p == r for p, r in zip(self.predicted, self.recorded))

    @property
    def answers_right(self) -> int:
        """Cases where the profile's 'row 0 equals M = 1's' is the recordings'."""
        return sum(
            a == b for a, b in zip(self.changed(self.predicted), self.changed(self.recorded))
        )


def same(x: dict[int, int], y: dict[int, int]) -> bool:
    """Whether two rows agree on every column both kept."""
    return all(x[j] == y[j] for j in x.keys() & y.keys())


def _row(cols: np.ndarray, bits: np.ndarray) -> dict[int, int]:
    return {int(j): int(b) for j, b in zip(cols, bits)}


def series(profile: Profile, calls: Iterable[RecordedCall]) -> list[Series]:
    """The batch part's series among `calls` under `profile`, in recording order."""
    out: dict[tuple[str, int, int], Series] = {}
    first: dict[tuple[str, int, int], tuple[str, str | None]] = {}
    for c in sorted((c for c in calls if c.part == PART and c.d is not None), key=lambda c: c.m):
        key = (c.cls.name, c.n, c.k)
        s = out.setdefault(key, Series(*key))
        dec = decision_of(profile, c)
        assert c.d is not None
        mine = (dec.recipe, dec.instr)
        base = first.setdefault(key, mine)
        got = c.model(*mine)[0, 0]
        s.ms.append(c.m)
        s.recorded.append(_row(c.cols, c.d[0, 0]))
        s.predicted.append(_row(c.cols, got))
        s.base.append(_row(c.cols, got if base == mine else c.model(*base)[0, 0]))
        s.recipes.append(f"{dec.recipe} {dec.instr or ''}")
        s.sources.append(dec.source.value)
    return list(out.values())


@dataclass
class Across:
    """One series on two GPUs: per M, whether the recorded row 0 is the same on both, and
    whether the two profiles' row 0 is."""

    cls: str
    n: int
    k: int
    ms: list[int]
    recorded_same: list[bool]
    predicted_same: list[bool]

    @property
    def differ(self) -> list[int]:
        """The M at which the recordings of the two GPUs differ."""
        return [m for m, s in zip(self.ms, self.recorded_same) if not s]

    @property
    def answers_right(self) -> int:
        return sum(a == b for a, b in zip(self.recorded_same, self.predicted_same))


def across(x: list[Series], y: list[Series]) -> list[Across]:
    """The series of two GPUs side by side (those recorded on both, same M asked)."""
    by = {(s.cls, s.n, s.k): s for s in y}
    out = []
    for s in x:
        t = by.get((s.cls, s.n, s.k))
        if t is None or t.ms != s.ms:
            continue
        rec = [same(a, b) for a, b in zip(s.recorded, t.recorded)]
        pred = [same(a, b) for a, b in zip(s.predicted, t.predicted)]
        out.append(Across(s.cls, s.n, s.k, s.ms, rec, pred))
    return out


__all__ = ["Across", "Series", "across", "same", "series"]
