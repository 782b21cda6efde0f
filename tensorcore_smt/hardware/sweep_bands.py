"""Split-K bands of cuBLAS at the LLM shapes, read off the cuBLASLt heuristic sweep
(cublaslt_sweep.py, results/hardware/<gpu>/library/cublaslt.jsonl.gz) and written as
decision-table rows (gemm/library_rules.py): for each fp16/bf16 class of the sweep, each
LLM (N, K) pair and each run of M values with one split count, the recipe
`hopper/serial[split_k=S]` over contiguous 64-wide k-tiles, partials added serially in
fp32 (reduction scheme 2, the compute type, the only one the sweep shows at these shapes
for both of torch's reduced-precision flags).

The recordings (library_fit.fit_calls) show the heuristic's split count is the one the
kernel ran at these shapes (the wgmma kernels of algo 66, 16-byte aligned operands); the
bands carry it to every M of the sweep, which holds every M to 64 and the powers of two,
their neighbours and quarter steps up to 8192. A band runs from its first M to the M
before the next band's first.

`python -m tensorcore_smt.hardware.sweep_bands OUT_DIR` writes one table per class
family (20-half-llm-<op>-<dtype>.toml).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np

from .library_fit import recording_dir
from .library_plan import LLM_K, LLM_N
from .sweep_store import table

GPUS = ("h200", "h100")
SPLIT_TILE = 64
"""k-tile of the split (the kernels' CTA k-depth); the split count is the number of
non-empty contiguous parts when cdiv(tiles, S) tiles go to each."""

Band = tuple[int, int | None, int]  # first M, last M (None: no bound), split count


@cache
def sweep(gpu: str) -> dict[tuple[str, int, int], list[tuple[int, int]]]:
    """{(class, n, k): [(m, splitk_num), ...]} of the sweep at the LLM (N, K) pairs."""
    out: dict[tuple[str, int, int], list[tuple[int, int]]] = defaultdict(list)
    t = table(recording_dir(gpu, 0).parent)
    for r in t.records(np.isin(t.n, LLM_N) & np.isin(t.k, LLM_K)):
        out[(r["class"], r["n"], r["k"])].append((r["m"], int(r["f"][2])))
    return out


def effective_split(k: int, s: int) -> int:
    """The non-empty parts of K cut into `s` contiguous runs of whole k-tiles."""
    tiles = -(-k // SPLIT_TILE)
    per = -(-tiles // s)
    return -(-tiles // per)


def bands(points: list[tuple[int, int]], k: int, m_min: int = 2) -> list[Band]:
    """Runs of M with one split count, from `m_min` on (M = 1 is a GEMV's)."""
    out: list[list] = []
    for m, s in sorted(points):
        if m < m_min:
            continue
        s = effective_split(k, s) if 1 < s < 1 << 16 else 1
        if out and out[-1][2] == s:
            continue
        if out:
            out[-1][1] = m - 1
        out.append([m, None, s])
    if out:
        out[0][0] = m_min
    return [tuple(b) for b in out]  # type: ignore[misc]


def table_text(op: str, dtype: str) -> str:
    """The TOML text of the table for `op` (matmul, linear) at `dtype` (fp16, bf16)."""
    per_gpu = {g: sweep(g) for g in GPUS}
    lines = [
        f"# cuBLAS {op} {dtype} at the LLM shapes (N, K in {list(LLM_N)} x {list(LLM_K)}): split-K",
        "# bands of M from the cuBLASLt heuristic sweep (written by",
        "# `python -m tensorcore_smt.hardware.sweep_bands`; do not edit by hand). Shapes",
        "# outside these (N, K) pairs fall through to the next table.",
        f'classes = ["{op}.{dtype}.*"]',
        'instr = ""',
        'source = "cuBLASLt heuristic sweep, H200 and H100, cuBLAS 13.1.0 (torch 2.11.0+cu130)"',
        "",
    ]
    for n in LLM_N:
        for k in LLM_K:
            got = {}
            for g in GPUS:
                pts = per_gpu[g].get((f"{op}.{dtype}.rr1", n, k), [])
                got[g] = bands(pts, k)
            same = got["h200"] == got["h100"]
            for g in (None,) if same else GPUS:
                for lo, hi, s in got[g or "h200"]:
                    when = f"n_min = {n}, n_max = {n}, k_min = {k}, k_max = {k}, m_min = {lo}"
                    if hi is not None:
                        when += f", m_max = {hi}"
                    recipe = (
                        "hopper/serial"
                        if s == 1
                        else f"hopper/serial[split_k={s},split_tile={SPLIT_TILE}]"
                    )
                    lines.append("[[rule]]")
                    if g:
                        lines.append(f'gpu = ["{g}"]')
                    lines.append(f"when = {{ {when} }}")
                    lines.append(f'recipe = "{recipe}"')
                    lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m tensorcore_smt.hardware.sweep_bands [OUT_DIR]", file=sys.stderr)
        return 2
    out = Path(argv[0]) if argv else Path("schedules/library")
    if not out.is_dir():
        print(f"sweep_bands: {out} is not a folder", file=sys.stderr)
        return 2
    for op in ("matmul", "linear"):
        for dtype in ("fp16", "bf16"):
            (out / f"20-half-llm-{op}-{dtype}.toml").write_text(table_text(op, dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
