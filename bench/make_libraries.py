"""results/libraries.md (`make libraries`): the accumulation orders `tcsmt reveal` learns
from the libraries on this machine (numpy's OpenBLAS, torch's CPU kernels) and from the
H100 recordings (results/hardware/h100/gemm), with the GEMM hypothesis of every class of
output positions, checked bit for bit on 10^6 random outputs, the oracle calls and the
seconds, against the goals (K = 256 in at most 16 calls, K = 1024 in under 10 s)."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.order import tree as trees
from tensorcore_smt.order.tree import render

RUNS = [
    # oracle, dtype, K values
    ("numpy:dot", "fp32", (32, 256, 1024)),
    ("numpy:gemv", "fp32", (32, 256, 1024)),
    ("numpy:matmul", "fp32", (32, 256, 1024)),
    ("torch:cpu", "fp32", (32, 256, 1024)),
    ("torch:cpu", "bf16", (32, 256)),
    ("h100:fp16-f32out", "fp16", (32, 256, 1024)),
    ("h100:bf16-f32out", "bf16", (32, 256, 1024)),
    ("h100:tf32", "fp32", (32, 256, 1024)),
    ("h100:fp32", "fp32", (32, 256, 1024)),
]
CHECK_OUTPUTS = 10**6
CALL_GOAL = (256, 16)  # K, oracle calls at most
SECONDS_GOAL = (1024, 10.0)  # K, probing seconds under


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _blas() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # an older numpy: no dict form
        return "its BLAS"


def _random_call_schedules(r) -> list[str]:
    """For a recorded oracle whose hypothesis did not reproduce its random call (another
    shape than the probe's): the schedules of the same instruction that do, simplest
    first."""
    from tensorcore_smt.gemm.emulate import matmul
    from tensorcore_smt.order.hypothesis import schedules
    from tensorcore_smt.order.oracles import make_oracle

    o = make_oracle(r.oracle)
    a, b, d = o.random(r.k, 0)
    arch = r.hypothesis.split("/", 1)[0]
    hits = []
    for s in schedules(r.k, tc.resolve(arch, r.instr).K):
        try:
            h = np.asarray(matmul(f"{arch}/{s.text()}", a, b, instr=r.instr, engine="numpy"))
        except UserError:
            continue
        if (h.astype(np.float32).view(np.uint32) == d.view(np.uint32)).all():
            hits.append(f"{arch}/{s.text()}")
    return hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", default=None, help="folder for libraries.md")
    ap.add_argument("--outputs", type=int, default=CHECK_OUTPUTS, help="random outputs a row")
    args = ap.parse_args()
    import torch

    lines = [
        "# Accumulation orders of real libraries and units",
        "",
        f"Measured by `bench/make_libraries.py` (`make libraries`) with `tc.reveal` on "
        f"{_cpu()} ({os.cpu_count()} cores): numpy {np.__version__} with {_blas()}, torch "
        f"{torch.__version__} on the CPU ({torch.get_num_threads()} threads), and the H100 "
        "recordings of results/hardware/h100/gemm (torch 2.11.0+cu130, cuBLAS 13.0). "
        "Classes: the output positions of one K x K call that sum alike (a dot is one "
        "output, a GEMV one column); tree: that of output (0, 0), leaves k indices, [..] one "
        "addition of its members (n-ary for a fused add), chain(i..j) a left-to-right "
        "chain; hypothesis: the GEMM hypothesis of that class (CPU libraries: schedules of "
        "x86-fma's fp32 FMA, VFMADD231PS); reproduced: every class's hypothesis run through "
        "tc.matmul on the random outputs of that class, bit for bit, and how many outputs "
        "(the H100 rows: the outputs recorded); calls: library calls of the probing; s: "
        "seconds of the probing and the rebuild (not of the check).",
        "",
        "| oracle | dtype | K | classes | tree of output (0, 0) | hypothesis | reproduced "
        "| calls | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes: list[str] = []
    goals: list[str] = []
    for oracle, dtype, ks in RUNS:
        for k in ks:
            try:
                with trees.deep(k):
                    r = tc.reveal(oracle, k, dtype=dtype, check_outputs=args.outputs)
                    text = render(r.tree)
                    class_trees = [render(c.tree) for c in r.classes]
            except (UserError, ValueError) as e:
                lines.append(f"| {oracle} | {dtype} | {k} | - | {str(e)[:80]} | - | - | - | - |")
                print(lines[-1], flush=True)
                continue
            rep = r.reproduced
            rep_text = "-" if rep is None else f"{'yes' if rep else 'no'} ({r.checked_outputs:,})"
            hyps = sorted({c.hypothesis or "-" for c in r.classes})
            hyp = r.hypothesis or "-"
            if len(hyps) > 1:
                hyp += f" (+{len(hyps) - 1} more)"
            lines.append(
                f"| {oracle} | {dtype} | {k} | {len(r.classes)} | {_short(text)} | "
                f"{_short(hyp, 90)} | {rep_text} | {r.oracle_calls} | {r.seconds:.2f} |"
            )
            print(lines[-1], flush=True)
            if len(r.classes) > 1:
                parts = [
                    f"class {i} ({c.outputs} outputs, {len(c.blocks)} blocks): "
                    f"{_short(t, 80)} = "
                    + (f"`{c.hypothesis}`" if c.hypothesis else "no hypothesis")
                    for i, (c, t) in enumerate(zip(r.classes, class_trees))
                ]
                notes.append(f"- {oracle} {dtype} K = {k}: " + "; ".join(parts))
            elif r.hypothesis and len(r.hypothesis) > 90:
                notes.append(f"- {oracle} {dtype} K = {k}: `{r.hypothesis}`")
            if r.note:
                notes.append(f"- {oracle} {dtype} K = {k}: {r.note}")
            if oracle.startswith("h100") and rep is False:
                hits = _random_call_schedules(r)
                shape = f"{r.check_shape[0]} x {r.check_shape[1]} x {k}"
                notes.append(
                    f"- {oracle} {dtype} K = {k}: the recorded {shape} call is reproduced "
                    + (
                        f"by {len(hits)} schedule(s) of the same instruction, the simplest "
                        f"`{hits[0]}`: its tree is not the probe's, a kernel chosen for the "
                        "smaller shape"
                        if hits
                        else "by no schedule of the same instruction"
                    )
                )
            if oracle == "numpy:matmul" and k == CALL_GOAL[0]:
                ok = r.oracle_calls <= CALL_GOAL[1]
                goals.append(
                    f"- numpy:matmul K = {k}: {r.oracle_calls} oracle calls (goal: at most "
                    f"{CALL_GOAL[1]}): {'met' if ok else 'missed'}"
                )
            if not oracle.startswith("h100") and k == SECONDS_GOAL[0]:
                ok = r.seconds < SECONDS_GOAL[1]
                goals.append(
                    f"- {oracle} {dtype} K = {k}: {r.seconds:.2f} s, {r.oracle_calls} calls "
                    f"(goal: under {SECONDS_GOAL[1]:.0f} s): {'met' if ok else 'missed'}"
                )
    lines += ["", "Goals (measured in this run):", "", *goals]
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
