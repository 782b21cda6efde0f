"""results/libraries.md (`make libraries`): the accumulation orders `tcsmt reveal` learns
from the libraries on this machine (numpy's OpenBLAS, torch's CPU kernels) and from the
H100 recordings (results/hardware/h100/gemm), with the GEMM hypothesis that reproduces
each where a schedule expresses it, the oracle calls and the seconds."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.order import tree as trees
from tensorcore_smt.order.tree import render

RUNS = [
    # oracle, dtype, K values, shape (None: K x K)
    ("numpy:dot", "fp32", (32, 256, 1024), None),
    ("numpy:gemv", "fp32", (256,), None),
    ("numpy:matmul", "fp32", (32, 256), None),
    ("torch:cpu", "fp32", (32, 256, 1024), None),
    ("torch:cpu", "bf16", (32, 256), None),
    ("h100:fp16-f32out", "fp16", (32, 256, 1024), None),
    ("h100:bf16-f32out", "bf16", (32, 256, 1024), None),
    ("h100:tf32", "fp32", (32, 256, 1024), None),
    ("h100:fp32", "fp32", (32, 256, 1024), None),
]


def _short(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", default=None, help="folder for libraries.md")
    args = ap.parse_args()
    import torch

    lines = [
        "# Accumulation orders of real libraries and units",
        "",
        f"Measured by `bench/make_libraries.py` (`make libraries`) with `tc.reveal`: numpy "
        f"{np.__version__} ({np.show_config.__module__.split('.')[0]} with its BLAS), torch "
        f"{torch.__version__} on this machine's CPU ({os.cpu_count()} cores), and the H100 "
        "recordings of results/hardware/h100/gemm (torch 2.11.0+cu130, cuBLAS 13.0). "
        "Tree: leaves are k indices, [..] one addition of its members (n-ary for a fused "
        "add), chain(i..j) a left-to-right chain. Hypothesis: the GEMM schedule with the same "
        "tree ('-' where none expresses it); reproduced: random outputs of the oracle equal "
        "the hypothesis's (tc.matmul) bit for bit; fp32 tree sum: the tree summed with one "
        "rounding per fma (or per add), compared bit for bit.",
        "",
        "| oracle | dtype | K | tree | hypothesis | reproduced | fp32 tree sum | calls | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes: list[str] = []
    for oracle, dtype, ks, shape in RUNS:
        for k in ks:
            t0 = time.monotonic()
            try:
                with trees.deep(k):
                    r = tc.reveal(oracle, k, dtype=dtype, shape=shape)
                    text = render(r.tree)
            except (UserError, ValueError) as e:
                lines.append(f"| {oracle} | {dtype} | {k} | {str(e)[:80]} | - | - | - | - | - |")
                print(lines[-1], flush=True)
                continue
            tree_sum = ", ".join(f"{m}: {'yes' if ok else 'no'}" for m, ok in r.tree_check.items())
            hyp = r.hypothesis or (f"{r.fma_schedule} (fma)" if r.fma_schedule else "-")
            rep = r.reproduced if r.hypothesis else r.fma_schedule_reproduced
            lines.append(
                f"| {oracle} | {dtype} | {k} | {_short(text)} | {hyp} | "
                f"{'-' if rep is None else 'yes' if rep else 'no'} | {tree_sum or '-'} | "
                f"{r.oracle_calls} | {time.monotonic() - t0:.1f} |"
            )
            print(lines[-1], flush=True)
            if r.note:
                notes.append(f"- {oracle} {dtype} K = {k}: {r.note}")
    if notes:
        lines += ["", "Notes:", "", *notes]
    text = "\n".join(lines) + "\n"
    if args.write:
        out = Path(args.write) / "libraries.md"
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
