"""The split-K count of cuBLAS's wgmma kernels (cuBLASLt algo 66: fp16/bf16 operands
16-byte aligned) at deep-K shapes with few output tiles outside the LLM (N, K) pairs, as
one compact rule read off cuBLASLt's heuristic sweep (cublaslt_sweep.py,
results/hardware/<gpu>/library/cublaslt.jsonl.gz) and the fit calls' own heuristic
fields.

The rule: where the output has at most MAX_TILES tiles of TILE x TILE and K is at least
K_MIN, K is cut into 64-wide k-tiles and split in S = round(k-tiles / PER_SPLIT) parts
(half up), cdiv(k-tiles, S) contiguous k-tiles each (empty parts dropped: the effective
split of sweep_bands), the fp32 partials added serially; elsewhere no split. At the 1,246
aligned shapes (class, M, N, K) outside the LLM pairs with M, N >= 2 (matmul and
F.linear, fp16 and bf16) of the first sweep and the fit calls it names the heuristic's
split at 95.8 % on the H200 and 94.4 % on the H100 (`agreement`; one chain everywhere:
88.4 and 88.9 %); at the 21,557 of the dense sweeps, at 85.9 and 86.7 % (one chain 76.4
and 78.7 %): the rule was read off too few split shapes.

Which alignment picks the wgmma kernel depends on the layout: N and K multiples of 8 for
torch.matmul, F.linear and matmul with B column-major; M and N for matmul with A
column-major (its A rows run along M). torch.bmm is left out: its calls' heuristic
fields do not tell its split (with them, fewer fit calls are reproduced than with one
chain; results/cublas/half.md).

`python -m tensorcore_smt.hardware.half_aligned [--out DIR]` writes the tables
(20-half-aligned.toml, 20-half-aligned-at.toml), the same every run; `--check` prints
the rule's agreement with the sweep.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np

from ..gemm.library_rules import evaluate
from .cublaslt_sweep import FIELD_ORDER
from .library_fit import fit_calls, recording_dir
from .library_plan import LLM_K, LLM_N
from .oneline import OneLineParser
from .sweep_bands import SPLIT_TILE, effective_split
from .sweep_store import table

GPUS = ("h200", "h100")
TILE = 128
"""Side of the output tile the tile count is taken in."""
MAX_TILES = 16
"""Most output tiles (TILE x TILE) where the heuristic splits K."""
K_MIN = 3000
"""Shallowest K split: between the deepest unsplit few-tile sweep shape (K = 2872) and
the shallowest split one (K = 3016)."""
PER_SPLIT = 22
"""64-wide k-tiles per split the heuristic aims at."""

TABLES: dict[str, tuple[tuple[str, ...], tuple[str, str]]] = {
    "20-half-aligned": (("matmul", "linear", "matmul-bt"), ("n", "k")),
    "20-half-aligned-at": (("matmul-at",), ("m", "n")),
}
"""Table -> (ops, the dimensions that must be multiples of 8 for the wgmma kernel)."""
DTYPES = ("fp16", "bf16")


_T = f"cdiv(k, {SPLIT_TILE})"
SPLITS = f"cdiv({_T}, cdiv({_T}, (2*{_T} + {PER_SPLIT}) // {2 * PER_SPLIT}))"
"""The effective split of S = round(k-tiles / PER_SPLIT) (half up) as an expression of k
(gemm/library_rules.py); at least 2 from K_MIN on."""
RECIPE = f"hopper/serial[split_k={{{SPLITS}}},split_tile={SPLIT_TILE}]"
"""The rules' recipe; their bounds hold the tile count and K."""


def split_count(m: int, n: int, k: int) -> int:
    """The parts the tables cut K into at (m, n, k) (1: one chain): SPLITS where the
    output has at most MAX_TILES tiles and K >= K_MIN."""
    tiles = -(-m // TILE) * -(-n // TILE)
    if tiles > MAX_TILES or k < K_MIN:
        return 1
    return evaluate(SPLITS, {"m": m, "n": n, "k": k})


def _steps() -> list[tuple[int, int, int]]:
    """(m_min, m_max, n_max) boxes whose union is cdiv(m, TILE) * cdiv(n, TILE) <= MAX_TILES."""
    return [
        (TILE * (a - 1) + 1, TILE * a, TILE * (MAX_TILES // a)) for a in range(1, MAX_TILES + 1)
    ]


HEADER = """\
# {ops} on fp16 and bf16 operands ({dims} multiples of 8: cuBLAS's
# wgmma kernels, cuBLASLt algo 66), both settings of torch's reduced-precision flag, H200 and H100, cuBLAS 13.1.0:
# deep K with at most {tiles} output tiles of {tile}x{tile} splits K in
# round(cdiv(K, 64) / {per}) parts of whole 64-wide k-tiles (empty parts dropped), the fp32
# partials added serially. One rule read off the cuBLASLt heuristic sweep and the fit calls'
# fields (hardware/half_aligned.py wrote this file; do not edit by hand); the boxes are the
# staircase cdiv(M, {tile}) * cdiv(N, {tile}) <= {tiles}.
classes = [{classes}]
instr = ""
source = "cuBLASLt heuristic sweep and fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"
"""


def table_text(name: str) -> str:
    """The TOML text of table `name` (a key of TABLES)."""
    ops, dims = TABLES[name]
    classes = ", ".join(f'"{op}.{d}.*"' for op in ops for d in DTYPES)
    out = [
        HEADER.format(
            ops=", ".join(ops),
            dims=" and ".join(d.upper() for d in dims),
            tiles=MAX_TILES,
            tile=TILE,
            per=PER_SPLIT,
            classes=classes,
        )
    ]
    mods = ", ".join(f"{d}_mod = [8, 0]" for d in dims)
    for lo, hi, n_max in _steps():
        out.append(
            "[[rule]]\n"
            f"when = {{ {mods}, m_min = {max(lo, 2)}, m_max = {hi}, n_min = 2, "
            f"n_max = {n_max}, k_min = {K_MIN} }}\n"
            f'recipe = "{RECIPE}"\n'
        )
    return "\n".join(out)


@cache
def points(gpu: str) -> dict[tuple[str, int, int, int], int]:
    """{(class, m, n, k): effective split} of the aligned shapes (N, K multiples of 8,
    M, N >= 2) outside the LLM pairs: the sweep's, then the matmul and F.linear fit
    calls' own fields (which win where both have the shape)."""
    out: dict[tuple[str, int, int, int], int] = {}

    def put(cls: str, m: int, n: int, k: int, s: int) -> None:
        if min(m, n) >= 2 and n % 8 == 0 and k % 8 == 0 and not (n in LLM_N and k in LLM_K):
            out[(cls, m, n, k)] = effective_split(k, s) if 1 < s < 1 << 16 else 1

    t = table(recording_dir(gpu, 0).parent)
    mine = [c for c in t.classes if c.split(".")[0] in ("matmul", "linear")]
    mask = t.of([c for c in mine if c.split(".")[1] in DTYPES]) & (t.n % 8 == 0) & (t.k % 8 == 0)
    split = t.f[:, FIELD_ORDER.index("splitk_num")]
    for i in np.flatnonzero(mask).tolist():
        put(t.classes[t.cls[i]], int(t.m[i]), int(t.n[i]), int(t.k[i]), int(split[i]))
    for c in fit_calls(gpu):
        op, dtype = c.cls.name.split(".")[:2]
        if op in ("matmul", "linear") and dtype in DTYPES and c.cublaslt is not None:
            if c.cublaslt["algo_id"] == 66:
                put(c.cls.name, c.m, c.n, c.k, int(c.cublaslt["splitk_num"]))
    return out


def agreement(gpu: str) -> tuple[int, int, int]:
    """(shapes, the rule's split equal to the heuristic's, one chain equal to it) over
    `points(gpu)`."""
    pts = points(gpu)
    rule = sum(split_count(m, n, k) == s for (_, m, n, k), s in pts.items())
    return len(pts), rule, sum(s == 1 for s in pts.values())


def main(argv: list[str]) -> int:
    ap = OneLineParser(prog="half_aligned")
    ap.add_argument("--out", default="schedules/library", help="the tables' folder")
    ap.add_argument("--check", action="store_true", help="print the rule's sweep agreement")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.check:
        for gpu in GPUS:
            n, rule, one = agreement(gpu)
            print(
                f"{gpu}: {n} shapes, rule {rule} ({rule / n:.1%}), one chain {one} ({one / n:.1%})"
            )
        return 0
    out = Path(args.out)
    if not out.is_dir():
        print(f"half_aligned: {out} is not a folder", file=sys.stderr)
        return 2
    for name in TABLES:
        (out / f"{name}.toml").write_text(table_text(name))
        print(f"{name}.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
