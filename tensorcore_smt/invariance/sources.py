"""Where the recipe of a call at batch size M comes from: a `RecipeSource` maps M (for a
fixed call class, N and K) to a `Recipe`, a GEMM hypothesis with its instruction.

- `HypothesisRanges`: one hypothesis for every M (`HYP`), or hypotheses on ranges of M
  (`HYP@1..127` `HYP2@128..`), to ask what-if questions and to test the scan;
- `ProfileSource`: a library profile's decision for the call (gemm/profiles.py and
  gemm/profile_call.py: recorded shape, rule, or default), so each M says where its recipe
  came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from ..errors import UserError
from ..hardware.library_calls import CallClass

M_LIMIT = 1 << 20


@dataclass(frozen=True)
class Recipe:
    """A GEMM hypothesis (ARCH/SCHEDULE[...]) and its instruction (None: the library
    default for the operands); `how`: where it came from, in words."""

    hypothesis: str
    instr: str | None = None
    how: str = ""

    @property
    def key(self) -> tuple[str, str | None]:
        """What decides the bits: the hypothesis and the instruction, not `how`."""
        return self.hypothesis, self.instr


class RecipeSource(Protocol):
    name: str

    def recipe(self, m: int) -> Recipe: ...


def parse_ms(text: str) -> list[int]:
    """`1..4096`, `1,2,8`, `1..64,127..129`: the M values, sorted, each once (UserError
    naming the piece that is wrong)."""
    out: set[int] = set()
    for piece in text.split(","):
        piece = piece.strip()
        m = re.fullmatch(r"(\d+)(?:\.\.(\d+))?", piece)
        if not m:
            raise UserError(f"--m {text!r}: {piece!r} is not M or LO..HI")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if lo < 1 or hi > M_LIMIT or lo > hi:
            raise UserError(f"--m {text!r}: {piece!r} must lie in 1..{M_LIMIT}, LO <= HI")
        out |= set(range(lo, hi + 1))
    return sorted(out)


@dataclass(frozen=True)
class _Range:
    lo: int
    hi: int
    recipe: Recipe


class HypothesisRanges:
    """Hypotheses on ranges of M: `HYP` alone covers every M; `HYP@LO..HI` or `HYP@LO..`
    a range. An M no range covers, or one two ranges cover, is refused."""

    def __init__(self, texts: list[str], instr: str | None = None):
        from ..gemm.emulate import resolve_hypothesis

        self.ranges: list[_Range] = []
        for t in texts:
            hyp, _, span = t.rpartition("@") if "@" in t else (t, "", "")
            if not span:
                lo, hi = 1, M_LIMIT
            else:
                m = re.fullmatch(r"(\d+)\.\.(\d*)", span)
                if not m:
                    raise UserError(f"--hypothesis {t!r}: the range after @ is LO..HI or LO..")
                lo, hi = int(m.group(1)), int(m.group(2) or M_LIMIT)
                if lo < 1 or lo > hi:
                    raise UserError(f"--hypothesis {t!r}: range {span} is empty or below 1")
            resolve_hypothesis(hyp, instr, None)  # refuse a bad hypothesis now, one line
            self.ranges.append(_Range(lo, hi, Recipe(hyp, instr, f"--hypothesis {t}")))
        self.name = " ".join(texts)

    def recipe(self, m: int) -> Recipe:
        hits = [r for r in self.ranges if r.lo <= m <= r.hi]
        if len(hits) != 1:
            what = "no --hypothesis covers" if not hits else "several --hypothesis ranges cover"
            raise UserError(f"{what} M = {m}")
        return hits[0].recipe


class ProfileSource:
    """A library profile's recipe for the call at each M (the profile's own decision:
    recorded shape, rule or default)."""

    def __init__(self, name: str, cls: CallClass, n: int, k: int):
        try:
            from ..gemm import profile_call, profiles
            from ..gemm.library_profile import class_key
        except ImportError:
            raise UserError(
                "--profile: library profiles are not available in this version"
            ) from None
        self.profile = profiles.load_profile(name)
        self.name = self.profile.name
        self.key = class_key(cls.name)  # the call as torch makes it, recorded or not
        self._decide = profile_call.decide
        self.n, self.k = n, k

    def recipe(self, m: int) -> Recipe:
        d = self._decide(self.profile, self.key, m, self.n, self.k)
        return Recipe(d.recipe, d.instr, f"{d.source.value}: {d.reason}")


__all__ = ["HypothesisRanges", "ProfileSource", "Recipe", "RecipeSource", "parse_ms"]
