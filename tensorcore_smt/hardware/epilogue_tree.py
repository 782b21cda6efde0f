"""The epilogue table of torch.addmm at TF32 (schedules/library/06-epilogue-addmm-tf32.toml)
grown from cuBLASLt's heuristic: which FMA the kernel's epilogue uses follows the kernel
family, and the family is what the heuristic answers for the shape, learnt as boxes of
M, N, K, M*N (library_tree.grow) over the matmul.tf32 sweep (cublaslt_sweep.py) and the
fit calls' own fields.

What the recorded addmm calls show over a base recipe that reproduces their matmul
(results/cublas/epilogue.md): the kernels whose partials a separate reduction combines
(split-K, cuBLASLt algo 20, 21, 23, even when algo 23 runs one split) compute
fma(beta, C, RN(alpha*acc)) (`epilogue=fma-c`); the others (algo 63, 43, 55 and the GEMV
kernels) fma(alpha, acc, RN(beta*C)) (`fma`). A base recipe with a contiguous split
(`base_split = "contiguous"`) takes fma-c whatever the box says.

`python -m tensorcore_smt.hardware.epilogue_tree` rewrites the table (seconds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..gemm.schedule import EpilogueOp
from ..spec.datadirs import data_dir
from .cublaslt_sweep import FIELD_ORDER
from .library_fit import fit_calls
from .library_fit import recording_dir as _seed_dir
from .library_tree import _features, grow, when_bounds
from .sweep_store import sweep_records

REDUCED_ALGOS = frozenset((20, 21, 23))
"""cuBLASLt algorithms whose epilogue runs in a separate reduction: fma-c."""

BASE = "matmul.tf32"
TABLE = "06-epilogue-addmm-tf32"
LABELS = (EpilogueOp.FMA, EpilogueOp.FMA_C)


def label(fields: dict) -> EpilogueOp:
    """The epilogue FMA of the kernel that cuBLASLt's heuristic `fields` name."""
    return EpilogueOp.FMA_C if fields["algo_id"] in REDUCED_ALGOS else EpilogueOp.FMA


def points(gpu: str) -> list[tuple[tuple[int, int, int], EpilogueOp]]:
    """(shape, epilogue) of every swept matmul.tf32 shape and every fit call's fields."""
    seen: dict[tuple[int, int, int], EpilogueOp] = {}
    for r in sweep_records(_seed_dir(gpu, 0).parent, [BASE]):
        if "f" in r:
            seen[(r["m"], r["n"], r["k"])] = label(dict(zip(FIELD_ORDER, r["f"])))
    for c in fit_calls(gpu):
        if c.cls.name == BASE and c.cublaslt is not None:
            seen[(c.m, c.n, c.k)] = label(c.cublaslt)
    return list(seen.items())


HEADER = """\
# torch.addmm(C, A, B, beta=1.3, alpha=0.7) on fp32 operands at "high" (TF32 allowed;
# full fp32: 06-epilogue-addmm-fp32): beta != 1 keeps torch off cuBLASLt's bias
# epilogue, so C (M x N, fp32) is copied into the output and a cuBLAS GEMM runs with
# alpha and beta, C read back in the fp32 epilogue (aten/src/ATen/native/cuda/Blas.cpp,
# addmm_out_cuda_impl). Which FMA follows the kernel: where a separate reduction combines
# the partials (split-K; cuBLASLt algo 20, 21, 23, also at one split) it rounds alpha*acc
# first and fuses beta*C into the add, fma(beta, C, RN(alpha*acc)) (epilogue=fma-c);
# the other kernels (algo 63, 43, 55, GEMV) compute fma(alpha, acc, RN(beta*C)) (fma).
# The boxes below are the kernel family cuBLASLt's heuristic answers for torch.matmul at
# TF32 ({n} shapes per GPU: the sweep and the fit calls' fields), learnt as a tree over M,
# N, K, M*N (tensorcore_smt/hardware/epilogue_tree.py wrote this file; do not edit by
# hand). Figures: results/cublas/epilogue.md.
kind = "epilogue"
base = "matmul"
classes = ["addmm.tf32"]
source = "cuBLASLt heuristic sweep and library recordings on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"

[[rule]]
base_split = "contiguous"
fields = "c_join=epilogue,epilogue=fma-c"
why = "split-K with a separate reduction: fma(beta, C, RN(alpha*acc))"

"""


def table_rules(gpu: str, pts: list[tuple[tuple[int, int, int], EpilogueOp]], **kw) -> list[str]:
    """The [[rule]] entries (TOML text) of `gpu`'s tree over `pts`."""
    X = _features(np.array([s for s, _ in pts], dtype=np.int64))
    y = np.array([LABELS.index(op) for _, op in pts])
    out = []
    for box, i, n, hit in grow(X, y, len(LABELS), **kw):
        op = LABELS[i]
        out.append(
            f'[[rule]]\ngpu = ["{gpu}"]\nwhen = {when_bounds(box)}\n'
            f'fields = "c_join=epilogue,epilogue={op.value}"\n'
            f'why = "{hit} of {n} shapes"\n'
        )
    return out


def write_table(folder: Path, gpus: Iterable[str], max_depth: int = 12) -> int:
    """Write TABLE.toml into `folder`; the number of rules."""
    rules: list[str] = []
    n = 0
    for gpu in gpus:
        pts = points(gpu)
        n = max(n, len(pts))
        rules += table_rules(gpu, pts, max_depth=max_depth)
    rules.append(
        '[[rule]]\nfields = "c_join=epilogue,epilogue=fma"\n'
        'why = "a GPU without a sweep: one kernel sums each output"\n'
    )
    text = HEADER.format(n=f"{n:,}") + "\n".join(rules)
    (folder / f"{TABLE}.toml").write_text(text)
    return len(rules)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="epilogue_tree")
    ap.add_argument("--out", default=None, help="folder (default: schedules/library)")
    ap.add_argument("--gpu", action="append", help="GPUs (default: h200 and h100)")
    ap.add_argument("--depth", type=int, default=12)
    args = ap.parse_args(argv)
    folder = Path(args.out) if args.out else data_dir("schedules") / "library"
    n = write_table(folder, args.gpu or ["h200", "h100"], args.depth)
    print(f"{TABLE}: {n} rules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["REDUCED_ALGOS", "label", "points", "table_rules", "write_table"]
