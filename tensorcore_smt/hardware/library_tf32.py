"""The TF32 decision tables of schedules/library (40-tf32*.toml), grown
from the fit calls: for torch calls on ordinary fp32 operands at float32 matmul precision
"high" (classes matmul, linear, bmm, matmul-at, matmul-bt .tf32), which kernel family
reproduces every fit call of a recorded shape, written as one rule per shape, and a rule
for the shapes between.

The families (what the recorded bits show, results/cublas/tf32.md):

- ``chain``: one wgmma chain over all of K, fp32 operands rounded to TF32 to nearest
  even (operand_round=rne, the TF32 probe of gemm/tf32_probe.py);
- ``ffma``: no TF32 at all: a CUDA-core FFMA chain on the fp32 operands (cuBLASLt algo 20
  and 55 kernels; every call at K = 1);
- ``res32``, ``res16``: one chain whose mainloop runs its partial k-tile first
  (residue_tile=32 or 16: the first K mod 32 or K mod 16 elements, then full k-tiles, so
  the instruction's k-groups start there; CUTLASS 2.x mainloops): the cuBLASLt algo 23
  kernels without split-K, the tile width the K of the heuristic's stages field
  (16 x 4 and 16 x 6 stages: 16; 32 x n: 32);
- ``split32``: split-K, split s the contiguous k-range [s*q, (s+1)*q), q =
  32*ceil(ceil(K/32)/S), each a TF32 chain from +0, the fp32 partials added in order;
- ``split8``: the same with q = 8*ceil(ceil(K/8)/S);
- ``bal8``: split-K over k-blocks of 8 dealt as evenly as integers allow (the first
  ceil(K/8) mod S splits one block longer), partials added in order;
- ``range32``, ``range16``: CUTLASS 2.x split-K (split_range=4): split s the elements
  [s*q, (s+1)*q) of the unpadded K, q = 4*ceil(ceil(K/4)/S) (gemm_k_size rounded to
  kAlignK = 4 for 32-bit operands), each range a TF32 chain that takes its own partial
  k-tile of 32 or 16 first (residue_tile), the fp32 partials added in order; S the
  splits that own an element (a heuristic S whose last ranges would be empty runs
  fewer): the cuBLASLt algo 23 and most algo 21 split-K kernels.

S is the split count of cuBLASLt's heuristic for the shape (the fit calls' recorded
fields): evidence used to choose what to try at a fit shape, never read by a rule.

`python -m tensorcore_smt.hardware.library_tf32` rewrites the tables from the stored
recordings (minutes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..spec.datadirs import data_dir
from .library_fit import fit_calls, mismatches
from .library_tree import write_table

CLASSES = ("matmul.tf32", "linear.tf32", "bmm.tf32", "matmul-at.tf32", "matmul-bt.tf32")
"""The call classes the tables cover (F.linear with a bias and addmm are epilogues over
these: 05/06-epilogue tables)."""

CHAIN = "hopper/serial[operand_round=rne]"
FFMA = "hopper"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Family:
    """A kernel family: its instruction ("" TF32 wgmma, "full-fp32" FFMA) and the recipe
    at a K and split count S (None where it cannot cut this K)."""

    name: str
    instr: str

    def recipe(self, k: int, S: int) -> str | None:
        if self.name == "chain":
            return CHAIN
        if self.name == "ffma":
            return FFMA
        if self.name.startswith("res"):
            return f"hopper/serial[operand_round=rne,residue_tile={self.name[3:]}]"
        if S < 2:
            return None
        if self.name.startswith("range"):
            q = 4 * _cdiv(_cdiv(k, 4), S)
            s_eff = _cdiv(k, q)
            if s_eff < 2 or 4 * _cdiv(_cdiv(k, 4), s_eff) != q:
                return None
            return (
                f"hopper/serial[operand_round=rne,split_k={s_eff},split_range=4,"
                f"residue_tile={self.name[5:]}]"
            )
        kp = 8 * _cdiv(k, 8)
        if self.name in ("split32", "split8"):
            g = 32 if self.name == "split32" else 8
            q = g * _cdiv(_cdiv(kp, g), S)
            if q >= kp or q > 4096:
                return None
            return f"hopper/serial[operand_round=rne,split_k={_cdiv(kp, q)},split_tile={q}]"
        blocks = kp // 8  # bal8
        if S > blocks:
            return None
        base, extra = divmod(blocks, S)
        sizes = [8 * (base + (s < extra)) for s in range(S)]
        return f"hopper/serial[operand_round=rne,kblocks={'+'.join(map(str, sizes))}]"


FAMILIES = (
    Family("chain", ""),
    Family("ffma", "full-fp32"),
    Family("res32", ""),
    Family("res16", ""),
    Family("split32", ""),
    Family("split8", ""),
    Family("bal8", ""),
    Family("range32", ""),
    Family("range16", ""),
)
"""Tried in this order at each recorded shape; the first that reproduces every fit call
of the shape is its recipe."""


def _splits(fields: dict | None) -> int:
    s = (fields or {}).get("splitk_num", 1)
    return s if 1 <= s <= 4096 else 1  # 0 or -1 (unset, stream-K): none


def shape_fits(gpu: str) -> dict[tuple[str, int, int, int], tuple[Family, str]]:
    """(class, m, n, k) -> (family, recipe) of every recorded shape (M, N > 1) of
    CLASSES on `gpu` that one family reproduces on all its fit calls."""
    by_shape: dict[tuple[str, int, int, int], list] = {}
    fields: dict[tuple[str, int, int, int], dict] = {}
    for c in fit_calls(gpu):
        if c.cls.name in CLASSES and c.m > 1 and c.n > 1:
            key = (c.cls.name, c.m, c.n, c.k)
            by_shape.setdefault(key, []).append(c)
            if c.cublaslt is not None:
                fields[key] = c.cublaslt
    out = {}
    for key, calls in sorted(by_shape.items()):
        S = _splits(fields.get(key))
        for fam in FAMILIES:
            recipe = fam.recipe(key[3], S)
            if recipe is None:
                continue
            instr = fam.instr or "default"
            if all(mismatches(c, recipe, instr) == 0 for c in calls):
                out[key] = (fam, recipe)
                break
    return out


HEADER = """\
# torch calls on fp32 operands at float32 matmul precision "high" (TF32 allowed):
# {what}
# (tensorcore_smt/hardware/library_tf32.py wrote this file; do not edit by hand).
# Tables are tried in file-name order: per class the recorded shapes (the family that
# reproduces their fit calls), then 40-tf32-k1 and 40-tf32. Report: results/cublas/tf32.md.
classes = {classes}
instr = "{instr}"
source = "fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0); TF32 probe (operands rounded to nearest even)"
"""

SHAPES_FFMA = "{cls}: recorded shapes where cuBLAS runs a CUDA-core FFMA kernel (no TF32)."
SHAPES_SPLIT = (
    "{cls}: recorded shapes where cuBLAS runs a TF32 split-K kernel or one that takes its "
    "partial k-tile first."
)
K1_WHAT = "K = 1: an FFMA product on the fp32 operands (no TF32), every class."
TF32_WHAT = "every other shape: one TF32 chain, operands rounded to nearest even."


SMALL_K_FFMA = {"bmm.tf32": 16}
"""Classes whose shapes up to this K (not recorded) run an FFMA kernel: bmm at K <= 16
(every fit call on both GPUs, 21 of 21 on the H200)."""


def _rule(gpus: list[str] | None, when: str, recipe: str, why: str) -> str:
    g = f"gpu = {gpus!r}\n".replace("'", '"') if gpus else ""
    w = f"when = {{ {when} }}\n" if when else ""
    return f'[[rule]]\n{g}{w}recipe = "{recipe}"\nwhy = "{why}"\n'


SHORT = {
    "matmul.tf32": "mm",
    "linear.tf32": "linear",
    "bmm.tf32": "bmm",
    "matmul-at.tf32": "at",
    "matmul-bt.tf32": "bt",
}
"""File stem part of each class's recorded-shape tables (a rule cannot name a class, so
each class has its own: the same shape may run another kernel in another layout)."""


def table_texts(gpus: Iterable[str]) -> dict[str, str]:
    """File stem -> text of every table, from the fit calls of `gpus`: per class
    40-tf32-CLS-ffma (recorded shapes run as FFMA) and 40-tf32-CLS (recorded shapes run
    split-K or residue first), then for every class 40-tf32-k1 (K = 1, FFMA) and 40-tf32 (one chain)."""
    fits = {g: shape_fits(g) for g in gpus}
    shapes = sorted({key for f in fits.values() for key in f})
    rules: dict[str, list[str]] = {}
    for short in SHORT.values():
        rules[f"40-tf32-{short}-ffma"] = []
        rules[f"40-tf32-{short}"] = []
    for key in shapes:
        cls, m, n, k = key
        by_recipe: dict[tuple[str, str], list[str]] = {}
        for g, f in fits.items():
            if key in f:
                fam, recipe = f[key]
                by_recipe.setdefault((fam.name, recipe), []).append(g)
        when = f"m_min = {m}, m_max = {m}, n_min = {n}, n_max = {n}, k_min = {k}, k_max = {k}"
        for (fam_name, recipe), gs in by_recipe.items():
            if fam_name == "chain" or (fam_name == "ffma" and k == 1):
                continue  # the rules for other shapes say so
            fam = next(f for f in FAMILIES if f.name == fam_name)
            stem = f"40-tf32-{SHORT[cls]}" + ("-ffma" if fam.instr else "")
            rules[stem].append(_rule(sorted(gs), when, recipe, fam_name))
    for cls, k_max in SMALL_K_FFMA.items():
        why = f"K <= {k_max}: every fit call an FFMA kernel"
        rules[f"40-tf32-{SHORT[cls]}-ffma"].append(_rule(None, f"k_max = {k_max}", FFMA, why))
    cls_text = "[" + ", ".join(f'"{c}"' for c in CLASSES) + "]"
    out = {}
    for stem, rs in rules.items():
        cls = next(c for c, s in SHORT.items() if stem.startswith(f"40-tf32-{s}"))
        ffma = stem.endswith("-ffma")
        what = (SHAPES_FFMA if ffma else SHAPES_SPLIT).format(cls=cls)
        head = HEADER.format(what=what, classes=f'["{cls}"]', instr="full-fp32" if ffma else "")
        out[stem] = head + "\n" + "\n".join(rs)
    k1 = _rule(None, "k_max = 1", FFMA, "K = 1: every fit call an FFMA product (algo 20)")
    out["40-tf32-k1"] = HEADER.format(what=K1_WHAT, classes=cls_text, instr="full-fp32") + "\n" + k1
    chain = _rule(None, "", CHAIN, "one TF32 chain, operands rounded to nearest even")
    out["40-tf32"] = HEADER.format(what=TF32_WHAT, classes=cls_text, instr="") + "\n" + chain
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="library_tf32")
    ap.add_argument("--out", default=str(data_dir("schedules") / "library"))
    ap.add_argument("--gpu", action="append", help="GPUs (default: h200 and h100)")
    args = ap.parse_args(argv)
    for stem, text in table_texts(args.gpu or ["h200", "h100"]).items():
        write_table(Path(args.out) / f"{stem}.toml", text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
