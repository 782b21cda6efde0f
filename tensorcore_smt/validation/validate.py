"""Validation of a model against an oracle on many rows, in chunks that run as tasks.

A run compares the model `p` (a preset or any variant, on the vector interpreter) with
an oracle (`tensorcore_smt.identify.oracle`: a hidden variant, a program, the local GPU,
recorded answers; or MMA-Sim) on rows that are either random or read from a file.

Random rows are drawn by `tensorcore_smt.validation.rows.random_rows` chunk by chunk: chunk i
(rows i*CHUNK_ROWS .. (i+1)*CHUNK_ROWS-1) uses the seed (S, i), so row r of a run
depends only on the seed and r, not on the number of workers or the order in which
chunks finish: the same seed gives the same rows, and a run of N rows is the prefix of a
run of more.

Each chunk returns its row count, its number of mismatches and the first `keep`
mismatching rows (inputs, the model's d, the oracle's d, the row number); `Tally` merges
chunk results in any order and keeps the first `keep` mismatches by row number, so the
file written is the same whatever the schedule.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import Engine
from ..model.params import ModelParams
from ..spec.formats import format_hex
from .rows import random_rows

CHUNK_ROWS = 100_000
"""Rows per task: large enough that scheduling costs little, small enough to stream."""

KEEP = 1000
"""Mismatching rows written to the mismatch file by default (all are counted)."""


def chunk_seed(seed: int, index: int) -> int:
    """The seed of random chunk `index` of a run with seed `seed`."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


@dataclass(frozen=True)
class Chunk:
    """One task's rows: random (`seed` set) or given (`a`, `b`, `c`, and for recorded
    answers `d`)."""

    index: int
    start: int
    n: int
    seed: int | None = None
    draw: int = 0  # random rows drawn (the chunk size; a last, shorter chunk keeps n)
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    c: np.ndarray | None = None
    d: np.ndarray | None = None

    def describe(self) -> str:
        what = f"seed {self.seed}" if self.seed is not None else "rows from the input"
        return f"chunk {self.index} (rows {self.start}..{self.start + self.n - 1}, {what})"


@dataclass
class ChunkResult:
    """What a chunk found: its row count, mismatch count and the first mismatches."""

    index: int
    rows: int
    mismatches: int
    row: np.ndarray  # row numbers of the kept mismatches
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d_model: np.ndarray
    d_oracle: np.ndarray
    seconds: float


@dataclass(frozen=True)
class Job:
    """What every chunk of a run shares: the model, the oracle, the device, the cap."""

    p: ModelParams
    oracle: Any  # identify.oracle.Oracle (or MmasimOracle)
    keep: int = KEEP
    device: str | None = None
    nan_class: bool = False  # two NaN outputs agree whatever their payloads
    engine: Engine | None = None  # None: chosen per chunk (engine/choice.py)


def random_chunks(n_rows: int, seed: int, chunk_rows: int = CHUNK_ROWS) -> list[Chunk]:
    """The chunks of a run of `n_rows` random rows with seed `seed`."""
    out = []
    for i, start in enumerate(range(0, n_rows, chunk_rows)):
        n = min(chunk_rows, n_rows - start)
        out.append(Chunk(i, start, n, seed=chunk_seed(seed, i), draw=chunk_rows))
    return out


def given_chunks(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    d: np.ndarray | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> list[Chunk]:
    """The chunks of rows read from a file (with recorded answers `d` when given)."""
    out = []
    for i, start in enumerate(range(0, len(c), chunk_rows)):
        s = slice(start, start + chunk_rows)
        out.append(
            Chunk(
                i,
                start,
                len(c[s]),
                a=a[s],
                b=b[s],
                c=c[s],
                d=None if d is None else d[s],
            )
        )
    return out


def chunk_inputs(p: ModelParams, chunk: Chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (a, b, c) bit patterns of a chunk's rows."""
    if chunk.seed is None:
        return chunk.a, chunk.b, chunk.c
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, max(chunk.draw, chunk.n), chunk.seed)
    return a[: chunk.n], b[: chunk.n], c[: chunk.n]


def check_chunk(job: Job, chunk: Chunk) -> ChunkResult:
    """Run one chunk through the model and the oracle (this is the task body)."""
    from ..api import simulate_params

    t0 = time.perf_counter()
    a, b, c = chunk_inputs(job.p, chunk)
    d_model = np.asarray(
        simulate_params(job.p, a, b, c, device=job.device, engine=job.engine), dtype=np.uint64
    )
    if chunk.d is not None:
        d_oracle = np.asarray(chunk.d, dtype=np.uint64)
    else:
        d_oracle = np.asarray(job.oracle.ask(a, b, c), dtype=np.uint64)
    differ = d_model != d_oracle
    if job.nan_class:
        from .mmasim import is_nan

        differ &= ~(is_nan(d_model, job.p.d_fmt) & is_nan(d_oracle, job.p.d_fmt))
    bad = np.nonzero(differ)[0]
    kept = bad[: job.keep]
    return ChunkResult(
        index=chunk.index,
        rows=chunk.n,
        mismatches=len(bad),
        row=(kept + chunk.start).astype(np.int64),
        a=np.asarray(a)[kept],
        b=np.asarray(b)[kept],
        c=np.asarray(c)[kept],
        d_model=d_model[kept],
        d_oracle=d_oracle[kept],
        seconds=time.perf_counter() - t0,
    )


@dataclass
class Tally:
    """Chunk results merged in any order; the first `keep` mismatches by row number."""

    keep: int = KEEP
    rows: int = 0
    mismatches: int = 0
    chunks: int = 0
    kept: list[tuple[int, list[int], list[int], int, int, int]] = field(default_factory=list)

    def add(self, r: ChunkResult) -> None:
        self.rows += r.rows
        self.mismatches += r.mismatches
        self.chunks += 1
        for i in range(len(r.row)):
            self.kept.append(
                (
                    int(r.row[i]),
                    [int(x) for x in r.a[i]],
                    [int(x) for x in r.b[i]],
                    int(r.c[i]),
                    int(r.d_model[i]),
                    int(r.d_oracle[i]),
                )
            )
        self.kept.sort(key=lambda t: t[0])
        del self.kept[self.keep :]


def mismatch_file(
    tally: Tally,
    p: ModelParams,
    arch: str,
    instr: str,
    model: str,
    oracle_spec: str,
    hidden: str | None,
    meta: dict,
    path: Path,
) -> Path:
    """Write the kept mismatches as a test-vector file: `model`'s prediction for every
    vector, and the hidden variant's when the oracle is one (`variant:EXPR`); the
    oracle's own d is in each vector's note either way."""
    from . import vectors

    names = [model] + ([hidden] if hidden and hidden != model else [])
    vecs = []
    for row, a, b, c, dm, do in tally.kept:
        pred = {model: dm}
        if len(names) > 1:
            pred[names[1]] = do
        vecs.append(
            vectors.Vector(
                a=a,
                b=b,
                c=c,
                predicted=pred,
                note=f"validate: {model} gives {format_hex(dm, p.d_fmt)}, "
                f"oracle {oracle_spec} gives {format_hex(do, p.d_fmt)}",
                source=f"row {row}",
            )
        )
    vf = vectors.VectorFile(
        arch=arch,
        instruction=instr,
        variants=names,
        vectors=vecs,
        property=None,
        meta={"validate": meta},
    )
    vectors.save(vf, path)
    return path


def write_rows(tally: Tally, p: ModelParams, path: Path) -> Path:
    """The kept mismatches as JSONL rows (a, b, c, d: the model's, d_oracle, row)."""
    lines = []
    for row, a, b, c, dm, do in tally.kept:
        lines.append(
            json.dumps(
                {
                    "a": [format_hex(x, p.a_fmt) for x in a],
                    "b": [format_hex(x, p.b_fmt) for x in b],
                    "c": format_hex(c, p.c_fmt),
                    "d": format_hex(dm, p.d_fmt),
                    "d_oracle": format_hex(do, p.d_fmt),
                    "row": row,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def read_inputs(path: Path, p: ModelParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input rows from JSONL rows or a vector file (JSON or CSV), read by
    `validation.vectors.read_rows`: (a, b, c) arrays. UserError naming the line or field."""
    from .vectors import read_rows

    return read_rows(path, p).arrays(p)


def recorded_inputs(recorded: list) -> tuple[np.ndarray, ...]:
    """(a, b, c, d) arrays of a file oracle's recorded rows."""
    n = len(recorded)
    a = np.array([r[0] for r in recorded], dtype=np.uint64).reshape(n, -1)
    b = np.array([r[1] for r in recorded], dtype=np.uint64).reshape(n, -1)
    c = np.array([r[2] for r in recorded], dtype=np.uint64)
    d = np.array([r[3] for r in recorded], dtype=np.uint64)
    return a, b, c, d


__all__ = [
    "CHUNK_ROWS",
    "KEEP",
    "Chunk",
    "ChunkResult",
    "Job",
    "Tally",
    "check_chunk",
    "chunk_seed",
    "given_chunks",
    "mismatch_file",
    "random_chunks",
    "read_inputs",
    "recorded_inputs",
    "write_rows",
]
