"""The batch-invariance report of one call (class, N, K) over a set of M.

`scan`: the M at which row 0's recipe changes; for each change, a witness input whose row
0 changes bits between the M before and the M after (the two recipes run through
tc.matmul and the witness re-checked alone), or "no witness found in T tries".
`against`: for each M, whether the call gives the same bits under two sources: equal
recipes give the same bits (the same computation: proved by identity), different recipes
are searched for a witness.

Verdicts (`Verdict`): invariant / same (no recipe changes), varies / differs (a witness
shows different bits), unknown (recipes change, no witness found).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..hardware.library_calls import CallClass
from .sources import Recipe, RecipeSource
from .witness import Witness, confirm, search


class Verdict(str, Enum):
    INVARIANT = "invariant"  # one recipe for every M (scan), or every M's recipes equal (against)
    VARIES = "varies"  # some change has a witness
    UNKNOWN = "unknown"  # recipes change; no witness found for some change, none for others


class Step(str, Enum):
    """What one change (scan) or one run of M (against) shows."""

    SAME_RECIPE = "same-recipe"  # identical recipes: the same bits on every input
    DIFFERS = "differs"  # a witness gives different bits, confirmed through tc.matmul
    NO_WITNESS = "no-witness"  # recipes differ; no input of the tries tells them apart


@dataclass
class Segment:
    """A run of consecutive asked M with the same recipe(s) and step."""

    lo: int
    hi: int
    recipe: Recipe
    other: Recipe | None = None
    step: Step = Step.SAME_RECIPE
    witness: Witness | None = None

    def as_dict(self) -> dict:
        d: dict = {
            "m": [self.lo, self.hi],
            "recipe": self.recipe.hypothesis,
            "instr": self.recipe.instr,
            "how": self.recipe.how,
        }
        if self.other is not None:
            d |= {
                "against": self.other.hypothesis,
                "against_instr": self.other.instr,
                "against_how": self.other.how,
                "step": self.step.value,
                "witness": self.witness.as_dict() if self.witness else None,
            }
        return d


@dataclass
class Change:
    """Row 0's recipe changes between two consecutive asked M."""

    m_before: int
    m: int
    before: Recipe
    after: Recipe
    step: Step
    witness: Witness | None

    def as_dict(self) -> dict:
        return {
            "m_before": self.m_before,
            "m": self.m,
            "recipe_before": self.before.hypothesis,
            "recipe": self.after.hypothesis,
            "step": self.step.value,
            "witness": self.witness.as_dict() if self.witness else None,
        }


@dataclass
class Report:
    cls: CallClass
    n: int
    k: int
    source: str
    against: str | None
    ms: list[int]
    tries: int
    segments: list[Segment] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        steps = (
            [c.step for c in self.changes]
            if self.against is None
            else [s.step for s in self.segments]
        )
        if Step.DIFFERS in steps:
            return Verdict.VARIES
        if Step.NO_WITNESS in steps:
            return Verdict.UNKNOWN
        return Verdict.INVARIANT

    def as_dict(self) -> dict:
        return {
            "call": self.cls.name,
            "n": self.n,
            "k": self.k,
            "source": self.source,
            "against": self.against,
            "m": {"count": len(self.ms), "min": self.ms[0], "max": self.ms[-1]},
            "tries": self.tries,
            "verdict": self.verdict.value,
            "segments": [s.as_dict() for s in self.segments],
            "changes": [c.as_dict() for c in self.changes],
        }


class _Pairs:
    """Witness searches, once per pair of recipes."""

    def __init__(self, cls: CallClass, n: int, k: int, tries: int):
        self.cls, self.n, self.k, self.tries = cls, n, k, tries
        self.done: dict[tuple, tuple[Step, Witness | None]] = {}

    def compare(self, r1: Recipe, r2: Recipe) -> tuple[Step, Witness | None]:
        if r1.key == r2.key:
            return Step.SAME_RECIPE, None
        key = (r1.key, r2.key)
        if key not in self.done:
            w = search(r1, r2, self.cls, self.n, self.k, self.tries)
            if w is not None and not confirm(w, r1, r2, self.cls, self.k):
                raise RuntimeError(
                    f"a witness of {r1.hypothesis} vs {r2.hypothesis} did not re-run"
                )
            self.done[key] = (Step.NO_WITNESS, None) if w is None else (Step.DIFFERS, w)
        return self.done[key]


def scan(
    source: RecipeSource, cls: CallClass, n: int, k: int, ms: list[int], tries: int = 6
) -> Report:
    """Where row 0's recipe changes over `ms`, with a witness for each change."""
    rep = Report(cls, n, k, source.name, None, ms, tries)
    pairs = _Pairs(cls, n, k, tries)
    prev_m, prev = None, None
    for m in ms:
        r = source.recipe(m)
        if prev is not None and r.key == prev.key:
            rep.segments[-1].hi = m
        else:
            if prev is not None:
                step, w = pairs.compare(prev, r)
                rep.changes.append(Change(prev_m, m, prev, r, step, w))
            rep.segments.append(Segment(m, m, r))
        prev_m, prev = m, r
    return rep


def against(
    source: RecipeSource,
    other: RecipeSource,
    cls: CallClass,
    n: int,
    k: int,
    ms: list[int],
    tries: int = 6,
) -> Report:
    """For each M: the same bits under both sources, or a witness, or no witness found."""
    rep = Report(cls, n, k, source.name, other.name, ms, tries)
    pairs = _Pairs(cls, n, k, tries)
    for m in ms:
        r1, r2 = source.recipe(m), other.recipe(m)
        step, w = pairs.compare(r1, r2)
        last = rep.segments[-1] if rep.segments else None
        if last is not None and (last.recipe.key, last.other.key) == (r1.key, r2.key):
            last.hi = m
        else:
            rep.segments.append(Segment(m, m, r1, r2, step, w))
    return rep


__all__ = ["Change", "Report", "Segment", "Step", "Verdict", "against", "scan"]
