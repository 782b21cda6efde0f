"""Decision tables for TF32 calls at shapes not recorded (schedules/library/
40-tf32-tree-*.toml): which kernel family cuBLAS runs for a torch call on fp32 operands at
float32 matmul precision "high", learnt from cuBLASLt's heuristic answers as boxes of M,
N, K and M*N (the classification tree of library_tree.grow; Breiman et al. 1984), one
tree for the shapes whose M, N and K are all multiples of 8 and one for the others (the
tables' `misaligned` test), each leaf a rule whose recipe is its family's template; the
FFMA leaves (another instruction) in a table of their own, read first.

Points: the heuristic sweep (cublaslt_sweep.py, results/hardware/<gpu>/library/
cublaslt.jsonl.gz, matmul.tf32 only) and the fit calls' own heuristic fields for the
class (they win where both have a shape); for classes the sweep does not cover, the
matmul sweep stands in between the class's own fit shapes. Evidence of what cuBLAS picks
for a shape, never a rule's input: a rule knows only the class, the shape and the GPU.

The families (results/cublas/tf32.md; the same recipes as library_tf32's per-shape
families):

- ``chain``: one TF32 wgmma chain, operands rounded to nearest even (algo 63, 43, ...);
- ``ffma``: a CUDA-core FFMA chain on the fp32 operands (algo 20 and 55 without split-K);
- ``res16``, ``res32``: algo 21 and 23 without split-K: one chain that takes its partial
  k-tile of 16 or 32 first (the tile depth the heuristic's STAGES field names);
- ``range16``, ``range32``: algo 21 and 23 with S splits: CUTLASS 2.x split-K over
  element ranges (split_range=4), each range its own partial k-tile first.

`python -m tensorcore_smt.hardware.tf32_tree [--out DIR]` writes the tables (seconds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..spec.datadirs import data_dir
from .cublaslt_sweep import FIELD_ORDER
from .library_fit import fit_calls, recording_dir
from .library_tf32 import CHAIN, CLASSES, FFMA, SHORT
from .library_tree import KERNEL_FEATURES, labelled_leaves, when_bounds, write_table
from .sweep_store import sweep_records

GPUS = ("h200", "h100")
DEPTH = 14
MIN_LEAF = 2
"""Tree size, chosen by 5-fold cross-validation on the H200 sweep points of matmul.tf32
(exact label of the held-out fold): depth 10 / leaf 3: 0.94 (shapes multiples of 8) and
0.73 (others); 14 / 2: 0.95 and 0.76; 18 / 1: 0.96 and 0.76 at twice the rules."""
SWEEP_CLASS = "matmul.tf32"
"""The one TF32 class the heuristic sweep asked about."""
ALIGN = 8
"""What `aligned` tests: the decision tables' ALIGN (library_rules `misaligned`)."""


@dataclass(frozen=True, order=True)
class Label:
    """A kernel family and its split count (1: none) and k-tile depth (0: none)."""

    family: str
    splits: int = 1
    tile: int = 0

    def recipe(self) -> str:
        """The GEMM hypothesis text ({expr} parts of k: gemm/library_rules.py)."""
        if self.family == "chain":
            return CHAIN
        if self.family == "ffma":
            return FFMA
        if self.family == "res":
            return f"hopper/serial[operand_round=rne,residue_tile={self.tile}]"
        s = f"cdiv(k, 4*cdiv(cdiv(k, 4), {self.splits}))"  # splits that own an element
        return (
            f"hopper/serial[operand_round=rne,split_k={{{s}}},split_range=4,"
            f"residue_tile={self.tile}]"
        )

    def text(self) -> str:
        return (
            self.family
            + (f"{self.tile}" if self.tile else "")
            + (f" S={self.splits}" if self.splits > 1 else "")
        )


def tile_of(stages_id: int) -> int:
    """The k depth of a CTA tile from cuBLASLt's STAGES field (cublasLtMatmulStages_t:
    1..6 are 16xN, 7..12 32xN, 13..18 64xN); 32 where it is unset or another."""
    if 1 <= stages_id <= 6:
        return 16
    if 13 <= stages_id <= 18:
        return 64
    return 32


def label_of(fields: dict) -> Label:
    """The family of cuBLASLt heuristic fields (algo_id, splitk_num, stages_id)."""
    algo, s = int(fields["algo_id"]), int(fields["splitk_num"])
    split = 2 <= s <= 1024
    if algo in (20, 55) and not split:
        return Label("ffma")
    if algo in (21, 23):
        t = tile_of(int(fields["stages_id"]))
        return Label("range", s, t) if split else Label("res", 1, t)
    return Label("chain")


def aligned(m: int, n: int, k: int) -> bool:
    return m % ALIGN == 0 and n % ALIGN == 0 and k % ALIGN == 0


@cache
def _sweep(gpu: str) -> dict[tuple[int, int, int], Label]:
    out = {}
    for r in sweep_records(recording_dir(gpu, 0).parent, [SWEEP_CLASS]):
        if "f" in r and min(r["m"], r["n"]) >= 2:
            out[(r["m"], r["n"], r["k"])] = label_of(dict(zip(FIELD_ORDER, r["f"])))
    return out


def points(gpu: str, cls: str) -> list[tuple[tuple[int, int, int], Label]]:
    """(shape, label) of the sweep (matmul) and `cls`'s fit fields, M, N >= 2."""
    out = dict(_sweep(gpu))
    for c in fit_calls(gpu):
        if c.cls.name == cls and c.cublaslt is not None and min(c.m, c.n) >= 2:
            out[(c.m, c.n, c.k)] = label_of(c.cublaslt)
    return sorted(out.items())


def leaves(pts: list[tuple[tuple[int, int, int], Label]]):
    """[(box, label, points, points of that label)] of the tree over `pts`."""
    return labelled_leaves(pts, DEPTH, MIN_LEAF, KERNEL_FEATURES)


ROWS = {"m": 2, "n": 2}
"""Least M and N of the calls these tables decide (M = 1 or N = 1: the GEMV tables')."""


ALIGNED = f"m_mod = [{ALIGN}, 0], n_mod = [{ALIGN}, 0], k_mod = [{ALIGN}, 0]"
MISALIGNED = 'misaligned = ["m", "n", "k"]'


def _rules(gpu: str | None, pts, extra: str, what: str, ffma: bool) -> list[str]:
    """The rules of the tree over `pts` (each with the group's bound `extra`): its FFMA
    leaves (`ffma`) or the others."""
    out = []
    only = f'gpu = ["{gpu}"]\n' if gpu else ""
    for box, lab, n, hit in leaves(pts):
        if (lab.family == "ffma") != ffma:
            continue
        why = f"{what}: {lab.text()} at {hit} of {n} shapes"
        if lab.family == "range" and box[2][0] <= 4:  # K <= 4: one range, its residue first
            one = [list(b) for b in box]
            one[2][1] = 4
            res = Label("res", 1, lab.tile)
            out.append(
                f'[[rule]]\n{only}when = {when_bounds(one, KERNEL_FEATURES, extra, ROWS)}\nrecipe = "{res.recipe()}"\n'
                f'why = "{why}, one range"\n'
            )
        out.append(
            f'[[rule]]\n{only}when = {when_bounds(box, KERNEL_FEATURES, extra, ROWS)}\nrecipe = "{lab.recipe()}"\n'
            f'why = "{why}"\n'
        )
    return out


HEADER = """\
# {cls} (torch 2.11.0+cu130, cuBLAS 13.1.0) at shapes without a recorded rule: the kernel
# family cuBLASLt's heuristic picks, learnt as boxes of M, N, K, M*N from its answers
# ({n} shapes per GPU: the matmul.tf32 sweep and this class's fit fields), one tree for
# M, N and K all multiples of 8, one for the others; {what}
# (hardware/tf32_tree.py wrote this file; do not edit by hand). Report: results/cublas/tf32.md.
classes = ["{cls}"]
instr = "{instr}"
source = "cuBLASLt heuristic sweep and fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"

"""


NO_KERNEL_TREE = ("bmm.tf32",)
"""Classes that get only the FFMA tree table: bmm's TF32 split-K is not CUTLASS split
ranges (results/cublas/tf32.md), and its tree of the TF32 kernels' boxes reproduced 36 of
89 held-out H200 calls where the tables without it reproduce 62."""


def tables() -> list[tuple[str, bool]]:
    """(class, ffma) of every tree table this module writes."""
    return [(c, f) for c in CLASSES for f in (True, False) if f or c not in NO_KERNEL_TREE]


def table_name(cls: str, ffma: bool = False) -> str:
    """40-tf32-tree-CLS, and 40-tf32-tree-CLS-ffma (read before it: file-name order)."""
    return f"40-tf32-tree-{SHORT[cls]}" + ("-ffma" if ffma else "")


def table_text(cls: str, gpus: Iterable[str] = GPUS, ffma: bool = False) -> str:
    """The table of `cls`: per GPU (one for all where their points agree) the leaves of
    the tree of the aligned shapes, then of the others; `ffma`: the FFMA leaves only,
    else all the others."""
    per_gpu = {gpu: points(gpu, cls) for gpu in gpus}
    first = next(iter(per_gpu.values()))
    n = max(len(p) for p in per_gpu.values())
    if all(p == first for p in per_gpu.values()):
        per_gpu = {None: first}
    rules: list[str] = []
    for gpu, pts in per_gpu.items():
        al = [p for p in pts if aligned(*p[0])]
        rules += _rules(gpu, al, ALIGNED, "M, N, K multiples of 8", ffma)
        rest = [p for p in pts if not aligned(*p[0])]
        rules += _rules(gpu, rest, MISALIGNED, "M, N or K not a multiple of 8", ffma)
    what = "the boxes where it runs an FFMA kernel." if ffma else "the TF32 kernels' boxes."
    head = HEADER.format(cls=cls, n=n, what=what, instr="full-fp32" if ffma else "")
    return head + "\n".join(rules)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="tf32_tree")
    ap.add_argument("--out", default=str(data_dir("schedules") / "library"))
    ap.add_argument("--gpu", action="append", help="GPUs (default: h200 and h100)")
    args = ap.parse_args(argv)
    for cls in NO_KERNEL_TREE:
        (Path(args.out) / f"{table_name(cls)}.toml").unlink(missing_ok=True)
    for cls, ffma in tables():
        text = table_text(cls, args.gpu or GPUS, ffma)
        write_table(Path(args.out) / f"{table_name(cls, ffma)}.toml", text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
