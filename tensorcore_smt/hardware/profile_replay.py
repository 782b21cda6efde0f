"""Recorded GEMM calls (hardware/recordings.py) as the calls of a library profile: the
call class each recording is, its shapes grouped by (M, N, K), and the replay of one
recorded shape through `tc.matmul` (a recipe, or a profile deciding it) against the
recorded bits.

A recording's call is a profile call class: torch.matmul and torch.mm(out_dtype=...)
are `mm` on row-major A and B; torch._scaled_mm is `scaled_mm` with B column-major (what
the recorder passes); the flags are what the recorder set (allow_tf32 per call,
use_fast_accum) and torch's defaults for the others; no epilogue (unit scales).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..gemm.emulate import call_key_of, matmul
from ..gemm.hypothesis import GemmHypothesis
from ..gemm.profile_call import Decision, call_key, decide
from ..gemm.profiles import DEFAULT_FLAGS, CallKey, Epilogue, Flag, Function, Major, Profile
from .gemm_fit import OUT_DTYPE
from .recordings import CALLS, Call, How, Kind, inputs

HOW: dict[How, tuple[Function, tuple[Major, Major]]] = {
    How.MATMUL: (Function.MM, (Major.ROW, Major.ROW)),
    How.MM_FP32: (Function.MM, (Major.ROW, Major.ROW)),
    How.SCALED: (Function.SCALED_MM, (Major.ROW, Major.COL)),
}
"""The function and operand layouts of each way the recorder asks torch."""

OUT_FORMAT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
"""A recording's output dtype as a format name."""


def input_format(call: Call) -> str:
    """The format of the recorded operands (TF32 calls take fp32 tensors)."""
    return "fp32" if call.fmt == Format.TF32 else call.fmt.spec.name


def recorded_flags(call: Call) -> dict[Flag, bool]:
    """torch's flags when the call was recorded."""
    return {**DEFAULT_FLAGS, Flag.TF32: call.tf32, Flag.FAST_ACCUM: call.fast}


def class_key(call: Call) -> CallKey:
    """The profile call class of a recorded call."""
    fn, layout = HOW[call.how]
    a = input_format(call)
    return call_key(fn, a, a, OUT_FORMAT[call.out], recorded_flags(call), layout, Epilogue.NONE)


def call_named(name: str) -> Call:
    c = next((c for c in CALLS if c.name == name), None)
    if c is None:
        raise UserError(f"no recorded call {name!r}; calls: {', '.join(c.name for c in CALLS)}")
    return c


@dataclass
class Recording:
    """One call's recording: its npz, seed and recorded shape tags."""

    call: Call
    z: Any
    seed: int
    tags: list[str]

    def by_shape(self) -> dict[tuple[int, int, int], list[str]]:
        """(M, N, K) -> its recorded tags (random and pair probes), in recording order."""
        out: dict[tuple[int, int, int], list[str]] = {}
        for t in self.tags:
            _kind, m, n, k = t.split("_")
            out.setdefault((int(m), int(n), int(k)), []).append(t)
        return out


def open_recording(gemm: Path, call: Call) -> Recording:
    path = Path(gemm) / f"{call.name}.npz"
    try:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{path}: not a GEMM recording ({e})") from None
    return Recording(call, z, int(meta["seed"]), [e["shape"] for e in meta["shapes"]])


def recordings(gemm: Path) -> Iterator[Recording]:
    """Every call recorded in `gemm` (the folder of <call>.npz), in the order of CALLS."""
    for c in CALLS:
        if (Path(gemm) / f"{c.name}.npz").is_file():
            yield open_recording(gemm, c)


def _spread(n: int, most: int | None) -> np.ndarray:
    if most is None or n <= most:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, most).round().astype(int))


def operands(rec: Recording, tag: str, most: int | None = None):
    """A (kept rows), B (kept columns) laid out as the recorder passed them, and the
    recorded bits of D, at most `most` rows and columns of them (spread), else all."""
    kind, m, n, k = tag.split("_")
    a, b = inputs(Kind(kind), rec.call.fmt, int(m), int(n), int(k), rec.seed)
    rows, cols, d = rec.z[f"{tag}_rows"], rec.z[f"{tag}_cols"], rec.z[f"{tag}_d"]
    r, q = _spread(len(rows), most), _spread(len(cols), most)
    A, B = np.ascontiguousarray(a[rows[r]]), np.ascontiguousarray(b[:, cols[q]])
    if HOW[rec.call.how][1][1] == Major.COL:
        B = np.asfortranarray(B)
    return A, B, d[np.ix_(r, q)]


@dataclass(frozen=True)
class Replay:
    """Elements of one recorded shape reproduced bit for bit."""

    elements: int
    reproduced: int
    decision: Decision | None = None

    @property
    def exact(self) -> bool:
        return self.elements > 0 and self.reproduced == self.elements


def shape_of(tag: str) -> tuple[int, int, int]:
    """(M, N, K) of a recorded shape tag (kind_M_N_K)."""
    _kind, m, n, k = tag.split("_")
    return int(m), int(n), int(k)


def replay(
    rec: Recording,
    tag: str,
    how: GemmHypothesis | Profile,
    most: int | None = None,
    engine: str | None = "compiled",
) -> Replay:
    """Run the recorded shape `tag` through `how` and count the kept elements whose bits
    equal the recording's. `how` a profile: it decides as for any call, the class from
    the operands (formats, layouts) and the recorded flags, the shape the recorded call's
    (only the kept rows and columns of D are computed)."""
    A, B, d = operands(rec, tag, most)
    out = OUT_DTYPE[rec.call.out]
    decision = None
    if isinstance(how, Profile):
        key, _ = call_key_of(None, A, B, out_dtype=out, flags=recorded_flags(rec.call))
        decision = decide(how, key, *shape_of(tag))
        how = decision.hypothesis()
    got = matmul(how, A, B, out_dtype=out, engine=engine)
    bits = np.ascontiguousarray(got).view(d.dtype)
    return Replay(int(d.size), int((bits == d).sum()), decision)


__all__ = [
    "HOW",
    "Recording",
    "Replay",
    "call_named",
    "class_key",
    "input_format",
    "open_recording",
    "operands",
    "recorded_flags",
    "recordings",
    "replay",
    "shape_of",
]
