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
from ..formats import format_hex
from ..model.params import ModelParams
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
    others: dict[str, int] = field(default_factory=dict)  # Job.others' mismatches
    by_kind: dict[str, int] = field(default_factory=dict)  # mismatches per row kind


@dataclass(frozen=True)
class Job:
    """What every chunk of a run shares: the model, the oracle, the device, the cap."""

    p: ModelParams
    oracle: Any  # identify.oracle.Oracle (or MmasimOracle)
    keep: int = KEEP
    device: str | None = None
    nan_class: bool = False  # two NaN outputs agree whatever their payloads
    engine: Engine | None = None  # None: chosen per chunk (engine/choice.py)
    others: tuple[tuple[str, ModelParams], ...] = ()
    """Other hypotheses (name, model) whose mismatches with the oracle are counted too
    (the hardware campaign's named alternatives); their rows are not kept."""


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
    return _chunk_rows(p, chunk)[:3]


def _chunk_rows(p: ModelParams, chunk: Chunk):
    """(a, b, c, kind numbers into rows.KINDS, or None for given rows) of a chunk."""
    if chunk.seed is None:
        return chunk.a, chunk.b, chunk.c, None
    n = max(chunk.draw, chunk.n)
    a, b, c, kind = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, chunk.seed)
    return a[: chunk.n], b[: chunk.n], c[: chunk.n], kind[: chunk.n]


def check_chunk(job: Job, chunk: Chunk) -> ChunkResult:
    """Run one chunk through the model and the oracle (this is the task body)."""
    from ..api import simulate_params

    t0 = time.perf_counter()
    a, b, c, kind = _chunk_rows(job.p, chunk)
    if chunk.d is not None:
        d_oracle = np.asarray(chunk.d, dtype=np.uint64)
    else:
        d_oracle = np.asarray(job.oracle.ask(a, b, c), dtype=np.uint64)

    def differ_from_oracle(q: ModelParams) -> tuple[np.ndarray, np.ndarray]:
        d = simulate_params(q, a, b, c, device=job.device, engine=job.engine)
        d = np.asarray(d, dtype=np.uint64)
        differ = d != d_oracle
        if job.nan_class:
            from .mmasim import is_nan

            differ &= ~(is_nan(d, q.d_fmt) & is_nan(d_oracle, q.d_fmt))
        return d, differ

    d_model, differ = differ_from_oracle(job.p)
    bad = np.nonzero(differ)[0]
    kept = bad[: job.keep]
    by_kind = {}
    if kind is not None:
        from .rows import KINDS

        counts = np.bincount(kind[bad], minlength=len(KINDS))
        by_kind = {k.value: int(n) for k, n in zip(KINDS, counts)}
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
        others={name: int(differ_from_oracle(q)[1].sum()) for name, q in job.others},
        by_kind=by_kind,
    )


@dataclass
class Tally:
    """Chunk results merged in any order; the first `keep` mismatches by row number."""

    keep: int = KEEP
    rows: int = 0
    mismatches: int = 0
    chunks: int = 0
    kept: list[tuple[int, list[int], list[int], int, int, int]] = field(default_factory=list)
    others: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, r: ChunkResult) -> None:
        self.rows += r.rows
        self.mismatches += r.mismatches
        self.chunks += 1
        for name, n in r.others.items():
            self.others[name] = self.others.get(name, 0) + n
        for name, n in r.by_kind.items():
            self.by_kind[name] = self.by_kind.get(name, 0) + n
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


@dataclass
class RunResult:
    """A whole run: the merged chunk results, the chunks that failed (TaskFailure, each
    naming its rows), whether Ctrl-C cut it short, the task phase's seconds, the
    cluster's start-up seconds and its worker count."""

    tally: Tally
    failures: list
    interrupted: bool
    seconds: float
    startup_seconds: float
    workers: int

    @property
    def rows_per_s(self) -> float:
        return self.tally.rows / self.seconds if self.seconds > 0 else 0.0


def run_validation(
    job: Job,
    chunks: list[Chunk],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    dashboard: bool = False,
    label: str = "validate",
    progress: bool = False,
    on_failure=None,
    client=None,
) -> RunResult:
    """Run every chunk of `job` as a task on a Dask cluster (`client`'s, else
    `distributed.connect`: an embedded one of `workers` processes, or `scheduler`'s) and
    merge the results as they come. A failed chunk is passed to `on_failure` (if given)
    and the others go on; Ctrl-C ends the run with what finished (`interrupted`)."""
    from contextlib import nullcontext
    from functools import partial

    from .distributed import TaskFailure, connect, run_tasks

    tally = Tally(keep=job.keep)
    failures: list[TaskFailure] = []
    interrupted = False
    t0 = time.monotonic()
    with nullcontext(client) if client else connect(workers, scheduler, dashboard) as client:
        n_workers = len(client.scheduler_info().get("workers", {}))
        t_start = time.monotonic()
        try:
            for _, r in run_tasks(
                client,
                partial(check_chunk, job),
                chunks,
                describe=lambda c: c.describe(),
                label=label,
                weights=[c.n for c in chunks],
                progress=progress,
            ):
                if isinstance(r, TaskFailure):
                    failures.append(r)
                    if on_failure is not None:
                        on_failure(r)
                else:
                    tally.add(r)
        except KeyboardInterrupt:
            interrupted = True
        seconds = time.monotonic() - t_start
    return RunResult(tally, failures, interrupted, seconds, t_start - t0, n_workers)


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
    sources: list[str] | None = None,
) -> Path:
    """Write the kept mismatches as a test-vector file (the one mismatch-file format of
    validate and the hardware campaign): `model`'s prediction for every vector, and the
    hidden variant's when the oracle is one (`variant:EXPR`); the oracle's own d is in
    each vector's note and, in order, in meta["observed"]; each vector's source is its
    row number ("row N") in the run's rows."""
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
                source=sources[row] if sources else f"row {row}",
            )
        )
    vf = vectors.VectorFile(
        arch=arch,
        instruction=instr,
        variants=names,
        vectors=vecs,
        property=None,
        meta={
            "validate": meta,
            "observed": [format_hex(do, p.d_fmt) for *_, do in tally.kept],
        },
    )
    vectors.save(vf, path)
    return path


def rows_jsonl(tally: Tally, p: ModelParams) -> str:
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
    return "\n".join(lines) + "\n"


def write_rows(tally: Tally, p: ModelParams, path: Path) -> Path:
    """Write `rows_jsonl` to `path`."""
    path.write_text(rows_jsonl(tally, p))
    return path


def read_inputs(path: Path, p: ModelParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input rows from JSONL rows or a vector file (JSON or CSV), read by
    `validation.vectors.read_rows`: (a, b, c) arrays. UserError naming the line or field."""
    return read_inputs_where(path, p)[0]


def read_inputs_where(
    path: Path, p: ModelParams
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], list[str]]:
    """`read_inputs`, and where each row is in the file ("PATH:LINE", "PATH vectors[i]"):
    what the mismatch file names as a mismatching row's source."""
    from .vectors import read_rows

    got = read_rows(path, p)
    return got.arrays(p), [r.where for r in got.rows]


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
    "RunResult",
    "random_chunks",
    "run_validation",
    "read_inputs",
    "read_inputs_where",
    "recorded_inputs",
    "rows_jsonl",
    "write_rows",
]
