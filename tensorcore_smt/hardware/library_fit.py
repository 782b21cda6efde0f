"""Which recipes reproduce a library recording's calls: the shared tools of the fit
(library recordings, library_read.py): the recordings of a GPU by seed, the split into
the calls a profile is built from and the calls held out from it, and the count of kept
elements a hypothesis gets wrong.

Split (fixed before any fit): a profile of GPU g is built from the non-holdout parts of
seeds `FIT_SEEDS`; every call of the seeds `HELDOUT_SEEDS` (2, recorded with 0 and 1;
3 and 4, recorded later on the same GPUs and never fitted) and the ``holdout`` parts of
every seed are held out, and the figures reported are theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np

from ..spec.datadirs import data_dir
from .library_calls import Precision
from .library_read import RecordedCall, Recording, load

FIT_SEEDS = (0, 1)
HELDOUT_SEEDS = (2, 3, 4)


def recording_dir(gpu: str, seed: int) -> Path:
    """results/hardware/<gpu>/library/seed<seed> of the repository."""
    return data_dir("results") / "hardware" / gpu / "library" / f"seed{seed}"


@cache
def recording(gpu: str, seed: int) -> Recording:
    return load(recording_dir(gpu, seed))


def fit_calls(gpu: str) -> Iterator[RecordedCall]:
    """The calls a profile of `gpu` may be built from."""
    for s in FIT_SEEDS:
        yield from (c for c in recording(gpu, s).calls if not c.holdout and c.d is not None)


def heldout_calls(gpu: str) -> Iterator[RecordedCall]:
    """The calls held out from every fit: all of HELDOUT_SEEDS, the holdout parts of the
    others."""
    for s in FIT_SEEDS:
        yield from (c for c in recording(gpu, s).calls if c.holdout and c.d is not None)
    for s in HELDOUT_SEEDS:
        yield from (c for c in recording(gpu, s).calls if c.d is not None)


def default_instr(call: RecordedCall) -> str | None:
    """The instruction of a call: the full-fp32 FFMA chain for fp32 at "highest", else
    the library default for the operand format (None)."""
    if call.cls.precision == Precision.FP32:
        return "full-fp32"
    return None


def mismatches(call: RecordedCall, hypothesis: str, instr: str | None = "default") -> int:
    """Kept elements of `call` whose bits differ from `hypothesis`'s (0: reproduced)."""
    if instr == "default":
        instr = default_instr(call)
    if instr == "full-fp32":
        from ..gemm.hypothesis import full_fp32_instruction

        instr = full_fp32_instruction(hypothesis.split("/")[0].split("[")[0])
    got = call.model(hypothesis, instr)
    assert call.d is not None
    return int(np.count_nonzero(got != call.d))


__all__ = [
    "FIT_SEEDS",
    "HELDOUT_SEEDS",
    "default_instr",
    "fit_calls",
    "heldout_calls",
    "mismatches",
    "recording",
    "recording_dir",
]
