"""The structured-sparse (mma.sp) step of the hardware campaign: which dense unit the
sparse instructions run, decided on random rows.

Vector files carry no metadata, so the sparse forms are not probed through them: each
runnable mma.sp instruction's batch runner (probe/runner.py, the metadata word after c)
computes random rows whose groups all keep one pattern (probe/sparse_meta.py; the pattern
drawn per row), and the GPU's d is compared with every hypothesis of `HYPOTHESES`: the
preset (the dense unit of the kept products, `sparse=compressed`) and the dense unit of
all K products with zeros where nothing is kept (`sparse=expanded`). Rows are redrawn from
(seed, row count) by `sparse_rows`; the first `KEPT` rows' GPU answers are kept as
sparse/<instr>.d.npy so that the tests replay them without a GPU.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..api import bits_dtype, simulate_params
from ..errors import UserError
from ..model.params import ModelParams
from ..spec.presets import PRESETS, parse_variant
from ..validation.rows import random_rows
from .gpu import Gpu, run_cmd, safe_name, sass_excerpt, sass_ops

HYPOTHESES: dict[str, tuple[str, ...]] = {
    "hopper": ("hopper", "hopper[sparse=expanded]"),
}
"""The variants each sparse instruction's rows are compared with (the preset first)."""

KEPT = 4096
"""Rows whose GPU answer is kept in the repository (the tests replay them)."""


def sparse_names(arch: str, sm: int) -> list[str]:
    """The mma.sp instructions of `arch` a sm_`sm` GPU runs."""
    from .validation import runnable

    return [n for n in runnable(arch, sm) if n.startswith("mma.sp")]


def sparse_rows(p: ModelParams, n: int, seed: int):
    """Rows of a sparse instruction: a (n, n_a) kept elements, b (n, K), c (n,), the
    model's metadata (n, n_a), the metadata words (n,) and each row's pattern number.
    The dense rows of validation.rows (seed `seed`) with the kept positions of a pattern
    drawn per row (seed + 1)."""
    from ..probe.sparse_meta import patterns, row_metadata

    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, seed)
    which = np.random.default_rng(seed + 1).integers(0, len(patterns(p)), size=n)
    meta, words = row_metadata(which, p)
    j = np.arange(p.n_a)
    at = (j // p.sparse_keep) * p.sparse_group + meta
    a_kept = a[np.arange(n)[:, None], at]
    return a_kept, b, c, meta, words, which


def hypotheses(arch: str, name: str) -> list[tuple[str, ModelParams]]:
    """The compared variants that are a valid model of `name`."""
    out = []
    for v in HYPOTHESES.get(arch, (arch,)):
        try:
            out.append((v, parse_variant(v).params(name)))
        except (UserError, KeyError, ValueError):
            continue
    return out


def compare(arch: str, name: str, n: int, seed: int, d_gpu: np.ndarray) -> dict:
    """Mismatch counts of every hypothesis against the GPU's d on the rows of (n, seed)."""
    p = PRESETS[arch].instructions[name].params
    a, b, c, meta, _, which = sparse_rows(p, n, seed)
    mask = (1 << p.d_fmt.spec.storage) - 1
    d_gpu = np.asarray(d_gpu, dtype=np.uint64) & np.uint64(mask)
    out: dict = {}
    for v, q in hypotheses(arch, name):
        d = np.asarray(simulate_params(q, a, b, c, meta=meta), dtype=np.uint64)
        bad = np.flatnonzero(d != d_gpu)
        out[v] = {
            "mismatches": int(len(bad)),
            "by_pattern": np.bincount(which[bad], minlength=int(which.max(initial=0)) + 1)
            .astype(int)
            .tolist(),
            "first": [int(i) for i in bad[:8]],
        }
    return out


def run_sparse(arch: str, gpu: Gpu, out: Path, rows: int, seed: int, jobs: int) -> list[dict]:
    """Every runnable sparse instruction on `rows` random rows (instruction i: seed + i);
    writes out/sparse/sparse.json (rewritten after each), the runners' SASS excerpts and
    each instruction's first `KEPT` GPU answers."""
    from ..probe.runner import build_runner, run_binary

    names = sparse_names(arch, gpu.sm)
    work = out / "build" / "sparse"
    sdir = out / "sparse"
    sdir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        built = list(pool.map(lambda n: _build(build_runner, arch, n, work), names))
    report: list[dict] = []
    for i, (name, (cmd, err)) in enumerate(zip(names, built)):
        entry: dict = {"instruction": name, "rows": rows, "seed": seed + i}
        if cmd is None:
            entry["error"] = err
            report.append(entry)
            (sdir / "sparse.json").write_text(json.dumps(report, indent=2) + "\n")
            print(f"sparse {name}: {err}", flush=True)
            continue
        sass = run_cmd(["cuobjdump", "--dump-sass", cmd[0]]).stdout
        (sdir / f"{safe_name(name)}.sass.txt").write_text(sass_excerpt(sass) + "\n")
        entry["sass"] = sass_ops(sass)
        p = PRESETS[arch].instructions[name].params
        a, b, c, _, words, _ = sparse_rows(p, rows, seed + i)
        t0 = time.monotonic()
        try:
            d = run_binary(cmd, a, b, c, work / "tmp", meta_words=words)
        except UserError as e:
            entry["error"] = str(e)
            report.append(entry)
            (sdir / "sparse.json").write_text(json.dumps(report, indent=2) + "\n")
            print(f"sparse {name}: {e}", flush=True)
            continue
        entry["gpu_seconds"] = round(time.monotonic() - t0, 2)
        np.save(sdir / f"{safe_name(name)}.d.npy", d[:KEPT].astype(bits_dtype(p.d_fmt)))
        entry["hypotheses"] = compare(arch, name, rows, seed + i, d)
        report.append(entry)
        (sdir / "sparse.json").write_text(json.dumps(report, indent=2) + "\n")
        counts = {v: h["mismatches"] for v, h in entry["hypotheses"].items()}
        print(f"sparse {name:52s} {counts}", flush=True)
    return report


def _build(build_runner, arch: str, name: str, work: Path):
    try:
        return build_runner(arch, name, work), ""
    except UserError as e:
        return None, str(e)


__all__ = [
    "HYPOTHESES",
    "KEPT",
    "compare",
    "hypotheses",
    "run_sparse",
    "sparse_names",
    "sparse_rows",
]
