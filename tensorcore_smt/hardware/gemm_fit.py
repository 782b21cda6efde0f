"""Fit GEMM hypotheses to the GEMM recordings of a GPU run (hardware/recordings.py): for
every call and every recorded shape, the candidates of schedules/gemm-fit.toml that
reproduce the kept elements of D bit for bit.

The inputs are regenerated from their seed and only the kept rows and columns are
computed (A[rows], B[:, cols]). Candidates are tried per input format in the file's
order, simplest first; the first that reproduces every kept element is the shape's fit,
and every candidate is still counted (how many reproduce). To keep this fast:

- a candidate's plan for a K (gemm/plan.py) is computed once; candidates with the same
  instruction, plan and epilogue compute the same bits, so one run answers for all of
  them (counts are of candidates, not of plans);
- each plan first runs on a screen of at most SCREEN_ROWS x SCREEN_COLS kept elements;
  only plans that match the screen run on every kept element;
- the plans that match the screen run on a check grid of at most CHECK x CHECK kept
  elements (all of them for the random shapes, which keep 64 x 64 at most; spread rows
  and columns of the pair probes, which keep all of D): `reproduced` counts the
  candidates that match it; the first of them that also matches every kept element is
  the fit;
- when no candidate reproduces a shape, the plans with the fewest screen mismatches
  (CLOSEST of them) run on every kept element, and the best is reported as the closest
  with its mismatch count.

Writes DIR/gemm/FIT.json and DIR/gemm/FIT.md.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import UserError
from ..formats import Format
from ..gemm.emulate import matmul, prepare
from ..gemm.hypothesis import GemmHypothesis, full_fp32_instruction, parse_gemm
from ..spec.datadirs import data_dir
from .recordings import CALLS, Call, Kind, inputs

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CANDIDATES = data_dir("schedules") / "gemm-fit.toml"
SCREEN_ROWS, SCREEN_COLS = 4, 8
CHECK = 64
CLOSEST = 5
OUT_DTYPE = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@dataclass(frozen=True)
class Candidate:
    """One hypothesis of the list: its text (ARCH/SCHEDULE[...]), the instruction named
    (None: the library default for the inputs), its family and place in the order."""

    text: str
    instr: str | None
    family: str
    rank: int
    hyp: GemmHypothesis = field(compare=False, repr=False)


def _grid(schedule: str, grid: dict[str, list]) -> list[str]:
    """SCHEDULE[f=v,...] for every point of `grid`, the first field outermost."""
    if not grid:
        return [schedule]
    names = list(grid)
    out = []
    for values in itertools.product(*(grid[n] for n in names)):
        fields = ",".join(f"{n}={v}" for n, v in zip(names, values, strict=True))
        out.append(f"{schedule}[{fields}]")
    return out


def load_candidates(path: Path = CANDIDATES) -> dict[str, list[Candidate]]:
    """Input format name -> its candidates in the order they are tried."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"candidates {path}: {e}") from None
    arch = data.get("arch", "hopper")
    families = data.get("families", {})
    out: dict[str, list[Candidate]] = {}
    for fmt, spec in data.get("formats", {}).items():
        instr = spec.get("instr") or None
        if instr == "full-fp32":
            instr = full_fp32_instruction(arch)
        cands: list[Candidate] = []
        for fam in spec.get("families", []):
            if fam not in families:
                raise UserError(f"candidates {path}: {fmt} names no family {fam!r}")
            f = families[fam]
            for sched in _grid(f.get("schedule", "serial"), f.get("grid", {})):
                text = f"{arch}/{sched}"
                hyp = parse_gemm(text, instr)
                cands.append(Candidate(text, instr, fam, len(cands), hyp))
        out[fmt] = cands
    return out


@dataclass
class ShapeFit:
    """The fit of one recorded shape."""

    shape: str
    kept: int
    tried: int  # candidates whose plan this K admits
    plans: int  # distinct plans among them
    fit: str | None = None  # the first candidate that reproduces D
    reproduced: int = 0  # candidates that reproduce D on the check grid
    closest: str | None = None  # when none does: the closest measured in full
    mismatches: int | None = None  # the closest's mismatching kept elements
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _recording(folder: Path, call: Call) -> tuple[Any, dict]:
    path = folder / f"{call.name}.npz"
    try:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{path}: not a GEMM recording ({e})") from None
    return z, meta


def _screen_index(n: int, want: int) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, min(n, want)).round().astype(int))


def fit_shape(
    call: Call,
    cands: list[Candidate],
    shape: str,
    z: Any,
    seed: int,
    engine: str = "compiled",
) -> ShapeFit:
    """Fit one recorded shape `shape` (kind_M_N_K) of `call`'s recording `z`."""
    t0 = time.monotonic()
    kind, m, n, k = shape.split("_")
    a, b = inputs(Kind(kind), call.fmt, int(m), int(n), int(k), seed)
    rows, cols, d = z[f"{shape}_rows"], z[f"{shape}_cols"], z[f"{shape}_d"]
    a, b = a[rows], b[:, cols]
    out = OUT_DTYPE[call.out]
    fa = fb = Format.FP32 if call.fmt == Format.TF32 else call.fmt
    # candidates grouped by what they compute for this K (first candidate of each group
    # stands for it); a plan this K refuses (too few k-tiles, an empty split) is skipped
    groups: dict[Any, list[Candidate]] = {}
    for c in cands:
        try:
            run = prepare(c.hyp, fa, fb, int(k), None, None, None)
        except UserError:
            continue
        s = run.schedule
        key = (run.instr, run.plan, s.alpha, s.beta, s.epilogue, s.out, s.saturate)
        groups.setdefault(key, []).append(c)
    plans = sorted(groups.values(), key=lambda g: g[0].rank)
    res = ShapeFit(shape, int(d.size), sum(map(len, plans)), len(plans))

    def mismatches(c: Candidate, r: np.ndarray, q: np.ndarray) -> int:
        got = matmul(c.hyp, a[r], b[:, q], out_dtype=out, engine=engine)
        bits = np.ascontiguousarray(got).view(d.dtype)
        return int((bits != d[np.ix_(r, q)]).sum())

    every_r, every_q = np.arange(d.shape[0]), np.arange(d.shape[1])
    sr, sq = _screen_index(d.shape[0], SCREEN_ROWS), _screen_index(d.shape[1], SCREEN_COLS)
    screened = [(mismatches(g[0], sr, sq), g) for g in plans]
    cr, cq = _screen_index(d.shape[0], CHECK), _screen_index(d.shape[1], CHECK)
    whole = len(cr) == d.shape[0] and len(cq) == d.shape[1]
    measured: set[int] = set()  # ranks measured on every kept element

    def closer(g: list[Candidate], full: int) -> None:
        measured.add(g[0].rank)
        if res.mismatches is None or full < res.mismatches:
            res.closest, res.mismatches = g[0].text, full

    for miss, g in screened:
        if miss:
            continue
        # the count: candidates that reproduce the check grid (every kept element up to
        # CHECK x CHECK); the fit: the first of them that reproduces every kept element
        checked = mismatches(g[0], cr, cq)
        if checked:
            if whole:
                closer(g, checked)
            continue
        res.reproduced += len(g)
        if res.fit is None:
            full = 0 if whole else mismatches(g[0], every_r, every_q)
            if full == 0:
                res.fit = g[0].text
            else:
                closer(g, full)
    if res.fit is None:
        near = sorted(screened, key=lambda t: (t[0], t[1][0].rank))[:CLOSEST]
        for _miss, g in near:
            if g[0].rank not in measured:
                closer(g, mismatches(g[0], every_r, every_q))
    res.seconds = round(time.monotonic() - t0, 2)
    return res


def _instr_text(cands: list[Candidate], call: Call) -> str:
    c = cands[0]
    fa = Format.FP32 if call.fmt == Format.TF32 else call.fmt
    return c.hyp.instruction(fa, fa).name


def fit_gemm(
    folder: Path,
    candidates: Path = CANDIDATES,
    calls: tuple[str, ...] = (),
    shapes: tuple[str, ...] = (),
    engine: str = "compiled",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit every call (or those named) and every recorded shape (or those named) of
    FOLDER/gemm; write FOLDER/gemm/FIT.json and FIT.md; return what FIT.json holds."""
    gemm = Path(folder) / "gemm"
    if not gemm.is_dir():
        raise UserError(f"{folder}: no gemm/ folder of GEMM recordings")
    present = [c for c in CALLS if (gemm / f"{c.name}.npz").is_file()]
    if calls:
        unknown = sorted(set(calls) - {c.name for c in present})
        if unknown:
            raise UserError(
                f"call {unknown[0]!r} is not recorded in {gemm}; recorded: "
                f"{', '.join(c.name for c in present) or 'none'}"
            )
        present = [c for c in present if c.name in calls]
    if not present:
        raise UserError(f"{gemm}: no GEMM recordings (<call>.npz of hardware/recordings.py)")
    table = load_candidates(candidates)
    report: dict[str, Any] = {"folder": str(folder), "candidates": str(candidates), "calls": []}
    kept: dict[str, dict] = {}
    if calls and (gemm / "FIT.json").is_file():  # refit the calls named, keep the others
        try:
            kept = {c["call"]: c for c in json.loads((gemm / "FIT.json").read_text())["calls"]}
        except (ValueError, KeyError, TypeError):
            kept = {}
    for call in present:
        fmt = call.fmt.spec.name
        if fmt not in table:
            raise UserError(f"candidates {candidates}: no candidates for {fmt} inputs")
        cands = table[fmt]
        z, meta = _recording(gemm, call)
        tags = [e["shape"] for e in meta["shapes"]]
        if shapes:
            tags = [t for t in tags if t in shapes]
        fits = []
        for tag in tags:
            f = fit_shape(call, cands, tag, z, meta["seed"], engine)
            fits.append(f.row())
            if progress:
                what = (
                    f"fit {f.fit} ({f.reproduced} of {f.tried})"
                    if f.fit
                    else (f"none of {f.tried}; closest {f.closest}: {f.mismatches}/{f.kept}")
                )
                progress(f"{call.name:18s} {tag:22s} {what}  [{f.seconds}s]")
        kept[call.name] = {
            "call": call.name,
            "format": fmt,
            "out": call.out,
            "instr": _instr_text(cands, call),
            "candidates": len(cands),
            "library": {k: meta.get(k) for k in ("torch", "cuda", "cublas", "device")},
            "shapes": fits,
        }
        # written after every call, in the order of CALLS
        report["calls"] = [kept[c.name] for c in CALLS if c.name in kept]
        (gemm / "FIT.json").write_text(json.dumps(report, indent=1) + "\n")
        (gemm / "FIT.md").write_text(render(report))
    return report


def _schedule(text: str | None) -> str:
    return "—" if text is None else text.split("/", 1)[1]


def render(report: dict[str, Any]) -> str:
    """FIT.md from what FIT.json holds."""
    lines = [
        "# GEMM recordings: fitted hypotheses",
        "",
        "Written by `tcsmt hardware fit-gemm` (tensorcore_smt/hardware/gemm_fit.py) from the",
        f"recordings of this folder and the candidates of {Path(report['candidates']).name}",
        "(schedules/gemm-fit.toml). Per call and shape: the first candidate, in the file's",
        "order (simplest first), that reproduces every kept element of D bit for bit, and how",
        "many of the candidates this K admits reproduce it; where none does, the closest",
        "measured and its mismatching elements out of those kept.",
        "",
        "## Summary",
        "",
        "| call | instruction | shapes | reproduced | not reproduced |",
        "|---|---|---:|---:|---|",
    ]
    for c in report["calls"]:
        miss = [s["shape"] for s in c["shapes"] if s["fit"] is None]
        lines.append(
            f"| {c['call']} | {c['instr']} | {len(c['shapes'])} | "
            f"{len(c['shapes']) - len(miss)} | {', '.join(miss) or '—'} |"
        )
    lines += ["", "## Fits by schedule", ""]
    lines += ["| call | schedule | shapes |", "|---|---|---|"]
    for c in report["calls"]:
        by: dict[str, list[str]] = {}
        for s in c["shapes"]:
            by.setdefault(_schedule(s["fit"]) if s["fit"] else "none", []).append(
                s["shape"].removeprefix("random_")
            )
        for sched, tags in by.items():
            lines.append(f"| {c['call']} | `{sched}` | {', '.join(tags)} |")
    for c in report["calls"]:
        lib = c["library"]
        lines += [
            "",
            f"## {c['call']}",
            "",
            f"{c['format']} inputs, {c['out']} output, instruction {c['instr']}, "
            f"{c['candidates']} candidates; torch {lib.get('torch')}, "
            f"{lib.get('device')}.",
            "",
            "| shape | kept | fit | reproduced / admitted | closest (mismatches) |",
            "|---|---:|---|---:|---|",
        ]
        for s in c["shapes"]:
            fit = f"`{_schedule(s['fit'])}`" if s["fit"] else "**none**"
            close = (
                f"`{_schedule(s['closest'])}` ({s['mismatches']})"
                if s["fit"] is None and s["closest"]
                else ""
            )
            lines.append(
                f"| {s['shape']} | {s['kept']} | {fit} | {s['reproduced']} / {s['tried']} "
                f"| {close} |"
            )
    return "\n".join(lines) + "\n"


__all__ = ["CANDIDATES", "Candidate", "ShapeFit", "fit_gemm", "fit_shape", "load_candidates"]
