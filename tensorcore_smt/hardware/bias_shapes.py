"""Recorded-shape tables for F.linear with a bias on fp32 operands (schedules/library/
05-bias-fp32.toml, 05-bias-tf32.toml, 05-bias-tf32-ffma.toml): at each shape of the fit
calls (M, N > 1), the first candidate recipe, with the bias in the epilogue, that
reproduces every fit call of the shape.

torch runs F.linear with a bias through cuBLASLt's bias epilogue (CUBLASLT_EPILOGUE_BIAS;
aten/src/ATen/native/cuda/Blas.cpp), F.linear without one through cuBLAS's GEMM, and the
two pick different kernels at most fp32 and TF32 shapes (results/cublas/epilogue.md), so
the tables of F.linear (30-fp32*, 40-tf32*) do not say what the bias path runs. The
candidates are the kernel families those tables know (library_tree for full fp32,
library_tf32 for TF32) at the split count of the heuristic's answer for F.linear (recorded
with the call: evidence for what to try first, never read by a rule) and at other split
counts. Shapes no candidate reproduces get no rule and fall through to
05-epilogue-linear (the F.linear recipe with the bias in the epilogue).

The H200 and the H100 return the same bits on these calls at most shapes; a shape's rule
names each GPU whose fit calls its recipe reproduces.

`python -m tensorcore_smt.hardware.bias_shapes` rewrites the tables (minutes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from ..gemm.library_rules import with_fields
from ..spec.datadirs import data_dir
from .library_fit import fit_calls, mismatches
from .library_tf32 import FAMILIES as TF32_FAMILIES
from .library_tree import Family, Label, label_of, shape_candidates

JOIN = "c_join=epilogue"
SPLITS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 16)
"""Split counts tried besides the heuristic's."""

HEADER = """\
# F.linear(x, W, b) on fp32 operands at float32 matmul precision {prec}: {what}
# cuBLASLt's bias epilogue picks its own kernel (not F.linear's), so each recorded shape
# (M, N > 1) gets the recipe that reproduces its fit calls, the bias added in the fp32
# epilogue (tensorcore_smt/hardware/bias_shapes.py wrote this file; do not edit by hand).
# Other shapes fall through to 05-epilogue-linear. Report: results/cublas/epilogue.md.
classes = ["{cls}"]
instr = "{instr}"
source = "fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"
"""


def fp32_candidates(fields: dict | None, k: int) -> list[str]:
    """FFMA recipes to try at a shape of K = `k`: the heuristic's family first
    (library_tree.shape_candidates), then contiguous ranges of 4 and 8 wide multiples
    at other split counts."""
    lab = label_of(fields, Family.LANES) if fields else Label(Family.SERIAL, 1)
    out = shape_candidates(lab, k)
    for S in SPLITS:
        for g in (8, 4):
            q = g * -(-k // (g * S))
            if q < k and q <= 4096:
                out.append(f"hopper/serial[split_k={-(-k // q)},split_tile={q}]")
    return list(dict.fromkeys(out))


def tf32_candidates(fields: dict | None, k: int) -> list[tuple[str, str]]:
    """(recipe, instr) pairs to try at a TF32 shape: library_tf32's families at the
    heuristic's split count, then at other split counts."""
    s = (fields or {}).get("splitk_num", 1)
    heur = s if 1 <= s <= 4096 else 1
    out: list[tuple[str, str]] = []
    for S in (heur, *SPLITS):
        for fam in TF32_FAMILIES:
            r = fam.recipe(k, S)
            if r is not None:
                out.append((r, fam.instr))
    return list(dict.fromkeys(out))


def shape_recipes(gpus: Iterable[str], cls: str) -> dict[tuple[int, int, int], dict]:
    """(m, n, k) -> {(recipe, instr): [gpus]} for every recorded fit shape of `cls`
    (M, N > 1) that a candidate reproduces on all its fit calls of that GPU."""
    out: dict[tuple[int, int, int], dict] = {}
    for gpu in gpus:
        by_shape: dict[tuple[int, int, int], list] = {}
        fields: dict[tuple[int, int, int], dict] = {}
        for c in fit_calls(gpu):
            if c.cls.name == cls and c.m > 1 and c.n > 1:
                by_shape.setdefault((c.m, c.n, c.k), []).append(c)
                if c.cublaslt is not None:
                    fields[(c.m, c.n, c.k)] = c.cublaslt
        for shape, calls in sorted(by_shape.items()):
            f, k = fields.get(shape), shape[2]
            if cls.endswith(".fp32"):
                cands = [(r, "full-fp32") for r in fp32_candidates(f, k)]
            else:
                cands = tf32_candidates(f, k)
            for recipe, instr in cands:
                full = with_fields(recipe, JOIN)
                if all(mismatches(c, full, instr or "default") == 0 for c in calls):
                    out.setdefault(shape, {}).setdefault((full, instr), []).append(gpu)
                    break
    return out


def _rule(gpus: list[str], shape: tuple[int, int, int], recipe: str) -> str:
    m, n, k = shape
    when = f"m_min = {m}, m_max = {m}, n_min = {n}, n_max = {n}, k_min = {k}, k_max = {k}"
    g = ", ".join(f'"{x}"' for x in gpus)
    return f'[[rule]]\ngpu = [{g}]\nwhen = {{ {when} }}\nrecipe = "{recipe}"\n'


TABLES = {
    # stem: (class, instr of its rules, precision, what)
    "05-bias-fp32": ("linear-bias.fp32", "full-fp32", '"highest"', "FFMA kernels."),
    "05-bias-tf32": ("linear-bias.tf32", "", '"high"', "TF32 kernels."),
    "05-bias-tf32-ffma": (
        "linear-bias.tf32",
        "full-fp32",
        '"high"',
        "shapes where the kernel is FFMA (no TF32).",
    ),
}


def write_tables(folder: Path, gpus: Iterable[str]) -> dict[str, int]:
    """Write the tables into `folder`; the number of rules of each."""
    gpus = list(gpus)
    found = {cls: shape_recipes(gpus, cls) for cls in ("linear-bias.fp32", "linear-bias.tf32")}
    count = {}
    for stem, (cls, instr, prec, what) in TABLES.items():
        rules = [
            _rule(sorted(gs), shape, recipe)
            for shape, by in sorted(found[cls].items())
            for (recipe, ins), gs in by.items()
            if ins == instr
        ]
        head = HEADER.format(prec=prec, what=what, cls=cls, instr=instr)
        (folder / f"{stem}.toml").write_text(head + "\n" + "\n".join(rules))
        count[stem] = len(rules)
    return count


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bias_shapes")
    ap.add_argument("--out", default=None, help="folder (default: schedules/library)")
    ap.add_argument("--gpu", action="append", help="GPUs (default: h200 and h100)")
    args = ap.parse_args(argv)
    folder = Path(args.out) if args.out else data_dir("schedules") / "library"
    count = write_tables(folder, args.gpu or ["h200", "h100"])
    print(", ".join(f"{t}.toml: {n} rules" for t, n in count.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["fp32_candidates", "shape_recipes", "tf32_candidates", "write_tables"]
