"""Recorded-shape tables for F.linear with a bias (schedules/library/05-bias-fp32.toml,
05-bias-tf32.toml, 05-bias-tf32-ffma.toml, 03-bias-half-{fp16,bf16}-{rr0,rr1}.toml):
at each shape of the fit calls (M, N > 1), the first candidate recipe that reproduces
every fit call of the shape.

fp16 and bf16 (03-bias-half-*): only the shapes where the other tables' recipe (F.linear's
kernel with the bias in the epilogue) misses a fit call get a rule. The candidates are the
sm80-style kernels' orders (half_order.KernelOrder: 8 products per step with 32-wide
k-tiles, 16 with 64- or 128-wide) with one chain or a split-K over element ranges at every
split count that cuts K differently, its partials combined three ways: in place in the
output type with the bias added to the first partial in fp32 before it is rounded
(`reduce_fmt=out,round_partials=first,c_join=partial`: an in-place reduction whose first
split writes the bias epilogue's result and the later ones add into it), in an fp32
workspace with the bias in the epilogue, or stored in the output type with the bias in
the epilogue. With torch's reduced-precision reductions allowed (rr1) the bias path
takes the in-place reduction at many shapes where F.linear sums in an fp32 workspace,
and at another split count (333 x 777 x 1000 bf16: 3 splits, F.linear's heuristic 12).

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

from ..gemm.library_rules import decide, tables, with_fields
from ..spec.datadirs import data_dir
from .half_order import KernelOrder
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


HALF_ORDERS = (KernelOrder(8, 32), KernelOrder(16, 64), KernelOrder(16, 128))
"""The sm80-style kernels' orders tried at a fp16/bf16 shape."""

HALF_JOINS = (
    "reduce_fmt=out,round_partials=first,c_join=partial",
    "c_join=epilogue",
    "round_partials=all,c_join=epilogue",
)
"""How the partials of a split-K combine and where the bias joins (module docstring)."""

HALF_MAX_SPLITS = 64
"""Split counts above this are not tried, besides the heuristic's own (the bias path's
found on the recorded fp16 shapes and bf16 rr1 shapes are at most 32; at 256 the search
over deep-K shapes no candidate reproduces took most of an hour per class)."""

HALF_TABLE_PREFIX = "03-bias-half"


def half_candidates(fields: dict | None, k: int) -> list[str]:
    """Recipes to try at a fp16/bf16 shape of K = `k`: the heuristic's kernel order
    first, one chain, then every split count whose element ranges (of 8-aligned width
    q = 8*ceil(ceil(K/8)/S)) cut K differently, the heuristic's own count first."""
    own = KernelOrder.of(fields) if fields else None
    orders = sorted(HALF_ORDERS, key=lambda o: o != own)
    kt = -(-k // 8)
    heur = int((fields or {}).get("splitk_num", 1))
    counts = [heur] if 2 <= heur <= kt else []
    seen = {8 * -(-kt // heur)} if counts else set()
    for S in range(2, min(kt, HALF_MAX_SPLITS) + 1):
        q = 8 * -(-kt // S)
        if q not in seen:
            seen.add(q)
            counts.append(-(-k // q))
    out = []
    for o in orders:
        out.append(o.apply("hopper/serial[c_join=epilogue]"))
        for join in HALF_JOINS:
            out += [o.apply(f"hopper/serial[split_k={S},split_range=8,{join}]") for S in counts]
    return list(dict.fromkeys(out))


def _fit_shapes(gpu: str, cls: str) -> tuple[dict, dict]:
    """({shape: fit calls}, {shape: the heuristic fields recorded with one of them}) of
    `cls` on `gpu`, M, N > 1."""
    by_shape: dict[tuple[int, int, int], list] = {}
    fields: dict[tuple[int, int, int], dict] = {}
    for c in fit_calls(gpu):
        if c.cls.name == cls and c.m > 1 and c.n > 1:
            by_shape.setdefault((c.m, c.n, c.k), []).append(c)
            if c.cublaslt is not None:
                fields[(c.m, c.n, c.k)] = c.cublaslt
    return by_shape, fields


def _reproduces(calls: list, recipe: str) -> bool:
    try:
        return all(mismatches(c, recipe) == 0 for c in calls)
    except (RecursionError, ValueError):
        return False


def half_shape_recipes(gpus: Iterable[str], cls: str) -> dict[tuple[int, int, int], dict]:
    """(m, n, k) -> {(recipe, ""): [gpus]} for every recorded fit shape of the fp16/bf16
    class `cls` (M, N > 1) whose recipe from the other tables misses a fit call and that
    a candidate reproduces on all its fit calls of that GPU (a recipe found on one GPU
    is tried first on the next)."""
    among = [t for t in tables() if not t.name.startswith(HALF_TABLE_PREFIX)]
    out: dict[tuple[int, int, int], dict] = {}
    for gpu in gpus:
        by_shape, fields = _fit_shapes(gpu, cls)
        for shape, calls in sorted(by_shape.items()):
            got = decide(cls, *shape, gpu, among)
            if got is not None and _reproduces(calls, got[0]):
                continue
            known = [r for r, _ in out.get(shape, {})]
            for recipe in known + half_candidates(fields.get(shape), shape[2]):
                if _reproduces(calls, recipe):
                    out.setdefault(shape, {}).setdefault((recipe, ""), []).append(gpu)
                    break
    return out


def shape_recipes(gpus: Iterable[str], cls: str) -> dict[tuple[int, int, int], dict]:
    """(m, n, k) -> {(recipe, instr): [gpus]} for every recorded fit shape of `cls`
    (M, N > 1) that a candidate reproduces on all its fit calls of that GPU."""
    out: dict[tuple[int, int, int], dict] = {}
    for gpu in gpus:
        by_shape, fields = _fit_shapes(gpu, cls)
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


HALF_HEADER = """\
# F.linear(x, W, b) on {dtype} operands: recorded shapes where cuBLASLt's bias epilogue
# does not run F.linear's kernel with the bias in the epilogue. Each recorded shape
# (M, N > 1) whose recipe from the other tables misses a fit call gets the first recipe
# that reproduces its fit calls (tensorcore_smt/hardware/bias_shapes.py wrote this file; do
# not edit by hand). With reduced-precision reductions allowed (rr1) that is often a
# split-K reduced in place in {dtype}, the bias added in fp32 to the first partial before
# its rounding (reduce_fmt=out,round_partials=first,c_join=partial); with them off (rr0)
# another split count or kernel order. Other shapes fall through. Report:
# results/cublas/epilogue.md.
classes = ["{cls}"]
instr = ""
source = "fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"
"""

HALF_CLASSES = tuple(f"linear-bias.{d}.{rr}" for d in ("fp16", "bf16") for rr in ("rr0", "rr1"))


def half_stem(cls: str) -> str:
    """The table of one class: 03-bias-half-bf16-rr1 for linear-bias.bf16.rr1."""
    _, dtype, rr = cls.split(".")
    return f"{HALF_TABLE_PREFIX}-{dtype}-{rr}"


def write_half_tables(
    folder: Path, gpus: Iterable[str], classes: tuple[str, ...] = HALF_CLASSES
) -> dict[str, int]:
    """Write one 03-bias-half-* table per class into `folder`; the number of rules of each."""
    gpus = list(gpus)
    count = {}
    for cls in classes:
        found = half_shape_recipes(gpus, cls)
        rules = [
            _rule(sorted(gs), shape, recipe)
            for shape, by in sorted(found.items())
            for (recipe, _), gs in by.items()
        ]
        head = HALF_HEADER.format(dtype=cls.split(".")[1], cls=cls)
        (folder / f"{half_stem(cls)}.toml").write_text(head + "\n" + "\n".join(rules))
        count[half_stem(cls)] = len(rules)
    return count


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
    ap.add_argument(
        "--half",
        action="append",
        metavar="CLASS",
        help="only these fp16/bf16 classes' 03-bias-half tables (linear-bias.bf16.rr1, ...)",
    )
    args = ap.parse_args(argv)
    folder = Path(args.out) if args.out else data_dir("schedules") / "library"
    gpus = args.gpu or ["h200", "h100"]
    if args.half:
        count = write_half_tables(folder, gpus, tuple(args.half))
    else:
        count = write_tables(folder, gpus) | write_half_tables(folder, gpus)
    print(", ".join(f"{t}.toml: {n} rules" for t, n in count.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = [
    "fp32_candidates",
    "half_candidates",
    "half_shape_recipes",
    "shape_recipes",
    "tf32_candidates",
    "write_half_tables",
    "write_tables",
]
