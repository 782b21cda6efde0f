"""Replay library recordings (library_read.py) through a library profile: for every
recorded call, the recipe the profile decides for its class and shape (gemm/profile_call.py,
as for any user call) run on the kept elements by RecordedCall.model against the recorded
bits; calls and elements reproduced per class and per decision source.

The figures reported for a profile are those of the calls held out from building it
(library_fit.heldout_calls: seeds 2, 3, 4 and the holdout parts).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..gemm.library_profile import class_key
from ..gemm.profile_call import Decision, decide
from ..gemm.profiles import Profile, Source
from .library_read import RecordedCall
from .profile_check import ClassCheck


@dataclass
class CallResult:
    """One replayed call: its decision and its kept elements reproduced."""

    call: RecordedCall
    decision: Decision
    elements: int
    reproduced: int

    @property
    def exact(self) -> bool:
        return self.elements > 0 and self.reproduced == self.elements


def tag(c: RecordedCall) -> str:
    """A recorded call's label: part, seed, shape and input kind."""
    return f"{c.part} input-seed {c.seed} {c.m}x{c.n}x{c.k} {c.kind.value}"


def decision_of(profile: Profile, call: RecordedCall) -> Decision:
    """The profile's decision for a recorded call (its class as torch made it)."""
    key = class_key(call.cls.name)
    batch = (call.batch,) if call.batch > 1 else ()
    return decide(profile, key, call.m, call.n, call.k, batch)


def replay(profile: Profile, call: RecordedCall) -> CallResult:
    """`call` through the profile's decision, against its recorded bits."""
    dec = decision_of(profile, call)
    got = call.model(dec.recipe, dec.instr)
    assert call.d is not None
    return CallResult(call, dec, int(call.d.size), int(np.count_nonzero(got == call.d)))


def check_library(
    profile: Profile,
    calls: Iterable[RecordedCall],
    classes: str = "*",
    parts: tuple[str, ...] = (),
    progress: Callable[[CallResult], None] | None = None,
) -> list[ClassCheck]:
    """Replay `calls` (recorded, not refused) whose class matches the glob `classes` and
    whose part is among `parts` (none: every part); one ClassCheck per class, sorted."""
    out: dict[str, ClassCheck] = {}
    for c in calls:
        if c.d is None or not fnmatch.fnmatchcase(c.cls.name, classes):
            continue
        if parts and c.part not in parts:
            continue
        r = replay(profile, c)
        res = out.setdefault(c.cls.name, ClassCheck(c.cls.name))
        res.count(tag(c), r.decision.source, r.decision.recipe, r.reproduced, r.elements)
        if progress:
            progress(r)
    return [out[k] for k in sorted(out)]


def totals(res: list[ClassCheck]) -> dict:
    """Calls and elements reproduced over all classes, and per decision source."""
    by: dict[str, list[int]] = {s.value: [0, 0] for s in Source}
    for r in res:
        for s, (n, ok) in r.by_source.items():
            by[s.value][0] += n
            by[s.value][1] += ok
    return {
        "calls": sum(r.calls for r in res),
        "calls_reproduced": sum(r.calls_exact for r in res),
        "elements": sum(r.elements for r in res),
        "elements_reproduced": sum(r.reproduced for r in res),
        "by_source": {s: {"calls": v[0], "calls_reproduced": v[1]} for s, v in by.items() if v[0]},
    }


__all__ = ["CallResult", "check_library", "decision_of", "replay", "tag", "totals"]
