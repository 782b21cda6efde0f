"""Replay a GPU's GEMM recordings through a library profile: every recorded shape of
every call class the profile has, the profile deciding the recipe as for any call (the
class from the operands and the recorded flags, the recorded call's shape), against the
recorded bits; counts per class and per decision source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..gemm.profiles import Profile, Source
from .profile_replay import Recording, call_named, open_recording, replay


@dataclass
class Miss:
    """A recorded shape not reproduced bit for bit."""

    tag: str
    source: Source
    recipe: str
    reproduced: int
    elements: int


@dataclass
class ClassCheck:
    """The replay of one call class: calls (recorded shapes) and elements reproduced,
    per source of the recipe."""

    name: str
    calls: int = 0
    calls_exact: int = 0
    elements: int = 0
    reproduced: int = 0
    by_source: dict[Source, list[int]] = field(default_factory=dict)  # [calls, exact]
    misses: list[Miss] = field(default_factory=list)

    @property
    def all_reproduced(self) -> bool:
        return self.calls_exact == self.calls

    def count(self, tag: str, source: Source, recipe: str, reproduced: int, elements: int) -> None:
        """Add one replayed call: its decision's source and recipe, elements reproduced."""
        exact = reproduced == elements
        self.calls += 1
        self.calls_exact += exact
        self.elements += elements
        self.reproduced += reproduced
        tally = self.by_source.setdefault(source, [0, 0])
        tally[0] += 1
        tally[1] += exact
        if not exact:
            self.misses.append(Miss(tag, source, recipe, reproduced, elements))

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "calls": self.calls,
            "calls_reproduced": self.calls_exact,
            "elements": self.elements,
            "elements_reproduced": self.reproduced,
            "by_source": {
                s.value: {"calls": v[0], "calls_reproduced": v[1]}
                for s, v in self.by_source.items()
            },
            "not_reproduced": [m.__dict__ | {"source": m.source.value} for m in self.misses],
        }


def gemm_folder(path: Path) -> Path:
    """The folder of <call>.npz recordings: PATH/gemm, or PATH itself."""
    p = Path(path)
    if (p / "gemm").is_dir():
        return p / "gemm"
    if p.is_dir() and any(p.glob("*.npz")):
        return p
    raise UserError(f"--recordings {path}: no GEMM recordings (<call>.npz) there or in gemm/")


def check_profile(
    profile: Profile,
    folder: Path,
    classes: tuple[str, ...] = (),
    most: int | None = None,
    engine: str | None = "compiled",
    progress: Callable[[str], None] | None = None,
) -> list[ClassCheck]:
    """Replay the recordings under `folder` of every class of `profile` (or those named);
    `most`: at most this many rows and columns of each recorded D (spread)."""
    gemm = gemm_folder(folder)
    chosen = [profile.by_name(n) for n in classes] if classes else list(profile.classes)
    out: list[ClassCheck] = []
    for cls in chosen:
        if not (gemm / f"{cls.recording}.npz").is_file():
            continue
        rec: Recording = open_recording(gemm, call_named(cls.recording))
        res = ClassCheck(cls.name)
        for tag in rec.tags:
            r = replay(rec, tag, profile, most, engine)
            src = r.decision.source if r.decision else Source.DEFAULT
            recipe = r.decision.recipe if r.decision else "?"
            res.count(tag, src, recipe, r.reproduced, r.elements)
            if progress:
                progress(f"{cls.name:18s} {tag:24s} {src.value:8s} {r.reproduced}/{r.elements}")
        out.append(res)
    if not out:
        raise UserError(f"{gemm}: no recording of any call class of profile {profile.name}")
    return out


__all__ = ["ClassCheck", "Miss", "check_profile", "gemm_folder"]
