"""cuBLASLt heuristic sweeps (cublaslt_sweep.py) as columns: the form a library folder
keeps the large sweeps in, and the one table every reader of a folder's sweeps gets.

A GPU writes a sweep as JSON lines (one answer a line, gzip-compressed: what comes back
from the machine). Millions of answers are kept instead as one LZMA-compressed file
`cublaslt-seed<S>.cols.xz` (about a quarter of the gzip lines' size): a JSON header line
``{"format": 1, "classes": [...], "fields": FIELD_ORDER, "rows": R}`` then the columns'
little-endian bytes in the order of COLUMNS. Only answered shapes are kept (a line with an
``error`` carries nothing a reader uses). `python -m tensorcore_smt.hardware.sweep_store
OUT.cols.xz IN.jsonl[.gz] ...` packs the lines of IN in order (a later line for the same
class and shape in place of an earlier one).

`table(folder)` merges every sweep file of a folder (sweep_paths: the first sweep, then
the others by seed, either form) into one SweepTable, one row per (class, M, N, K), a
later file's answer in place of an earlier one, rows in the order first asked.
"""

from __future__ import annotations

import gzip
import json
import lzma
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from .cublaslt_sweep import FIELD_ORDER

FORMAT = 1
COLUMNS = (("cls", "<u1"), ("m", "<u4"), ("n", "<u4"), ("k", "<u4"), ("f", "<f8"))
"""Column name and dtype in file order; f holds len(FIELD_ORDER) values a row."""
KEY_BITS = 18
"""Bits of M, N and K in a row's merge key (shapes up to 262143)."""


@dataclass(frozen=True)
class SweepTable:
    """Answered shapes of one or more sweeps: row i is class classes[cls[i]] at
    (m[i], n[i], k[i]) with heuristic fields f[i] (FIELD_ORDER)."""

    classes: tuple[str, ...]
    cls: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    f: np.ndarray

    def __len__(self) -> int:
        return len(self.m)

    def of(self, names) -> np.ndarray:
        """Mask of the rows whose class is one of `names`."""
        want = [i for i, c in enumerate(self.classes) if c in set(names)]
        return np.isin(self.cls, want)

    def records(self, mask: np.ndarray | None = None) -> list[dict]:
        """The rows (of `mask`) as sweep lines: {"class", "m", "n", "k", "f"}, the
        integer fields as ints."""
        idx = np.arange(len(self)) if mask is None else np.flatnonzero(mask)
        whole = [j for j, name in enumerate(FIELD_ORDER) if name != "waves"]
        out = []
        for i in idx.tolist():
            f = self.f[i].tolist()
            for j in whole:
                f[j] = int(f[j])
            out.append(
                {
                    "class": self.classes[self.cls[i]],
                    "m": int(self.m[i]),
                    "n": int(self.n[i]),
                    "k": int(self.k[i]),
                    "f": f,
                }
            )
        return out


def _empty() -> SweepTable:
    z = np.zeros(0, dtype=np.int64)
    return SweepTable((), z.astype(np.uint8), z, z, z, np.zeros((0, len(FIELD_ORDER))))


def from_lines(lines) -> SweepTable:
    """The answered lines of a sweep (an iterable of JSON lines), in order."""
    classes: dict[str, int] = {}
    cls, shp, f = [], [], []
    for line in lines:
        r = json.loads(line)
        if "f" not in r:
            continue
        cls.append(classes.setdefault(r["class"], len(classes)))
        shp.append((r["m"], r["n"], r["k"]))
        f.append(r["f"])
    if not cls:
        return _empty()
    s = np.array(shp, dtype=np.int64)
    return SweepTable(
        tuple(classes),
        np.array(cls, dtype=np.uint8),
        s[:, 0],
        s[:, 1],
        s[:, 2],
        np.array(f, dtype=np.float64).reshape(len(cls), len(FIELD_ORDER)),
    )


def read(path: Path) -> SweepTable:
    """A sweep file: gzip JSON lines (*.jsonl.gz) or columns (*.cols.xz)."""
    path = Path(path)
    if path.name.endswith(".cols.xz"):
        raw = lzma.decompress(path.read_bytes())
        head, _, body = raw.partition(b"\n")
        doc = json.loads(head)
        if doc.get("format") != FORMAT or tuple(doc["fields"]) != FIELD_ORDER:
            raise ValueError(f"{path}: not a sweep of format {FORMAT} with these fields")
        rows, at, cols = doc["rows"], 0, {}
        for name, dt in COLUMNS:
            width = len(FIELD_ORDER) if name == "f" else 1
            size = np.dtype(dt).itemsize * rows * width
            cols[name] = np.frombuffer(body[at : at + size], dtype=dt)
            at += size
        return SweepTable(
            tuple(doc["classes"]),
            cols["cls"].copy(),
            cols["m"].astype(np.int64),
            cols["n"].astype(np.int64),
            cols["k"].astype(np.int64),
            cols["f"].reshape(rows, len(FIELD_ORDER)).copy(),
        )
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as lines:
        return from_lines(lines)


def merge(tables: list[SweepTable]) -> SweepTable:
    """One row per (class, M, N, K): a later table's answer in place of an earlier one,
    rows in the order first seen."""
    classes = tuple(dict.fromkeys(c for t in tables for c in t.classes))
    if not classes:
        return _empty()
    at = {c: i for i, c in enumerate(classes)}
    cls = np.concatenate([np.array([at[c] for c in t.classes], np.uint8)[t.cls] for t in tables])
    m, n, k = (np.concatenate([getattr(t, a) for t in tables]) for a in "mnk")
    f = np.concatenate([t.f for t in tables])
    if max(m.max(), n.max(), k.max()) >> KEY_BITS:
        raise ValueError(f"sweep shape beyond {1 << KEY_BITS}")
    key = (((cls.astype(np.int64) << KEY_BITS | m) << KEY_BITS | n) << KEY_BITS) | k
    _, first = np.unique(key, return_index=True)
    _, back = np.unique(key[::-1], return_index=True)
    last = len(key) - 1 - back  # same key order as `first`
    order = np.argsort(first, kind="stable")
    rows = last[order]
    return SweepTable(classes, cls[rows], m[rows], n[rows], k[rows], f[rows])


def write(path: Path, t: SweepTable) -> None:
    """`t` as a columns file (cols.xz)."""
    head = {"format": FORMAT, "classes": list(t.classes), "fields": FIELD_ORDER, "rows": len(t)}
    body = [json.dumps(head).encode() + b"\n"]
    for name, dt in COLUMNS:
        body.append(np.ascontiguousarray(getattr(t, name), dtype=dt).tobytes())
    Path(path).write_bytes(lzma.compress(b"".join(body), preset=9))


@cache
def table(folder: Path) -> SweepTable:
    """Every sweep of a library folder merged (module doc); cached per folder."""
    return merge([read(p) for p in sweep_paths(Path(folder))])


SWEEP_FILE = "cublaslt.jsonl.gz"
"""The first sweep's answers in a GPU's library folder (results/hardware/<gpu>/library);
later sweeps (other seeds) beside it as cublaslt-seed<S>.jsonl.gz (as they come back from
the GPU, in parts cublaslt-seed<S>-<P>.jsonl.gz when one file would be too large to bring
back) or cublaslt-seed<S>.cols.xz (the same answers as columns: sweep_store.py)."""


def sweep_paths(folder: Path) -> list[Path]:
    """The sweep files of a library folder: the first sweep, then the others by seed
    (the parts of a seed in order)."""
    first = [folder / SWEEP_FILE] if (folder / SWEEP_FILE).is_file() else []
    later = [*folder.glob("cublaslt-seed*.jsonl.gz"), *folder.glob("cublaslt-seed*.cols.xz")]
    return first + sorted(later, key=lambda p: _seed_of(p.name))


def _seed_of(name: str) -> tuple[int, int, str]:
    """(seed, part, name) of cublaslt-seed<S>[-<P>].<suffix> ((-1, -1, name) otherwise)."""
    stem = name.removeprefix("cublaslt-seed").split(".")[0]
    seed, _, part = stem.partition("-")
    if not seed.isdigit() or not (part.isdigit() or part == ""):
        return (-1, -1, name)
    return (int(seed), int(part or 0), name)


def sweep_records(folder: Path, classes=None) -> list[dict]:
    """Every answer of the sweeps of a library folder (of `classes` only, when given),
    one per (class, M, N, K) (a later sweep's answer in place of an earlier one: each
    sweep asks the LLM series again), in the order first asked (sweep_store.table)."""
    t = table(Path(folder))
    return t.records(None if classes is None else t.of(classes))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].endswith(".cols.xz"):
        print("usage: sweep_store OUT.cols.xz IN.jsonl[.gz] ...", file=sys.stderr)
        return 2
    try:
        t = merge([read(Path(p)) for p in argv[1:]])
    except (OSError, ValueError, KeyError, TypeError) as e:  # unreadable, or not sweep lines
        print(f"sweep_store: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    write(Path(argv[0]), t)
    print(f"sweep_store: {len(t)} answers of {len(t.classes)} classes into {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
