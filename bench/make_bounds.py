"""results/bounds.md: certified intervals of the worst normwise error per instruction,
beside the largest error found by random sampling (`make bounds`).

Each row: `tc.bound` with the default class (finite inputs, no overflow) and the budget
given, the interval as it stands when the budget ends (open intervals are printed as
open), the witness's inputs, and the largest measure over random rows computed with
exact rationals (a sample can only show a lower bound: it must stay below U where U is
proved, and it shows how far random testing is from the worst case).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import tensorcore_smt as tc
from tensorcore_smt.certify.bound import default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.exact import exactness
from tensorcore_smt.certify.gemm import gemm_certificate
from tensorcore_smt.certify.report import status
from tensorcore_smt.certify.sample import sample_best
from tensorcore_smt.model.measure import Measure

EXACT_ROWS = [
    ("volta", "m8n8k4.f32.f16.f16.f32", 5),
    ("ampere", "m16n8k16.f32.bf16.bf16.f32", 7),
    ("hopper", "m16n8k16.f32.bf16.bf16.f32", 7),
    ("hopper", "m16n8k16.f32.f16.f16.f32", 5),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", 3),
    ("hopper", "m16n8k32.f32.e4m3.e4m3.f32", 3),
    ("blackwell", "m16n8k16.f32.bf16.bf16.f32", 7),
    ("cdna3", None, 7),
]

ROWS = [
    ("volta", None),
    ("hopper", None),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("cdna3", None),
]


FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
GEMMS = [
    # hypothesis, against (None: the exact result), instruction (None: fp16 inputs')
    ("hopper/serial", None, None),
    ("ampere/serial", None, None),
    ("hopper/cublas-fp8", None, FP8),
    ("hopper/fast-accum", None, FP8),
    ("ampere/serial", "hopper/serial", None),
    ("hopper/fast-accum", "hopper/cublas-fp8", FP8),
]
GEMM_K = (256, 1024, 4096, 16384)

NORMAL = default_class() + (parse_where("normal-only"),)
CLASSES = {"default": default_class(), "normal-only": NORMAL}


def sampled_max(arch: str, instr: str | None, measure: Measure, rows: int, seed: int, cons=None):
    """The largest measure over `rows` random rows of the class, exactly
    (certify/sample.py, the rows that also seed tc.bound)."""
    q = make_bound_query(arch, None, instr, measure, cons or default_class())
    best = sample_best(q, rows, seed)
    return None if best is None else best.measure


def gemm_section(args) -> list[str]:
    """The GEMM-level table (certify/gemm.py) as markdown lines."""
    lines = [
        "## GEMM level: one output element at depth K",
        "",
        "`tcsmt bound HYP --gemm --k K --where normal-only`: U composed over the schedule's "
        "plan (instruction nodes, fp32 promotions, split combinations, epilogue); L the "
        f"largest exact normwise error of {args.gemm_rows} random columns run through "
        "tc.matmul (one sign or both, exponent spreads 0, 4, 12) and of columns that repeat "
        "the instruction's worst case in every k-block. Drift rows bound "
        "|d_X - d_Y| / (|c| + sum |a_k b_k|) by U_X + U_Y.",
        "",
        "| hypothesis | against | K | L (measured) | U (composed) | U/L | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for hyp, against, instr in GEMMS:
        for K in GEMM_K:
            g = gemm_certificate(hyp, K, NORMAL, against=against, rows=args.gemm_rows, instr=instr)
            up = f"{float(g.upper):.4g}" if g.upper is not None else "not proved"
            ratio = f"{float(g.upper / g.lower):.3g}" if g.upper is not None and g.lower else "-"
            lines.append(
                f"| {hyp} {instr or ''} | {against or 'exact'} | {K} | {float(g.lower):.4g} | {up} | "
                f"{ratio} | {g.seconds:.0f} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--timeout", type=float, default=120.0, help="budget per bound (s)")
    ap.add_argument("--rows", type=int, default=20000, help="random rows per instruction")
    ap.add_argument("--exact-timeout", type=float, default=600.0, help="budget per exactness")
    ap.add_argument("--write", default=None, help="folder for bounds.md")
    ap.add_argument("--gemm-rows", type=int, default=64, help="random columns per GEMM row")
    ap.add_argument(
        "--only-gemm",
        action="store_true",
        help="re-measure only the GEMM section of the existing bounds.md",
    )

    args = ap.parse_args()
    if args.only_gemm:
        out = Path(args.write or "results") / "bounds.md"
        text = out.read_text()
        head, rest = text.split("## GEMM level: one output element at depth K", 1)
        tail = "## Exact accumulation" + rest.split("## Exact accumulation", 1)[1]
        out.write_text(head + "\n".join(gemm_section(args)) + "\n\n" + tail)
        print(f"wrote {out}", file=sys.stderr)
        return
    lines = [
        "# Certified worst-case errors",
        "",
        f"Measured by `bench/make_bounds.py` (`make bounds`); load average at the start "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; budget {args.timeout:g} s "
        f"per row; sample {args.rows} random rows.",
        "",
        "Classes: finite inputs whose exact magnitudes lie in the output format's normal "
        "range (the default), and the same with normal operands (normal-only). "
        "L is attained by a witness re-run on the concrete model; U is proved by unsat "
        "(confirmed by a second solver) or by the composed argument (docs/bounds.md, "
        "certify/compose.py), or 'not proved'. An open interval claims only [L, U].",
        "",
        "The bisection starts from the best of 1000 random rows (seed 0); the last column "
        f"is the best of {args.rows} other random rows (seed 1), measured exactly.",
        "",
        "| instruction | class | L (witness) | U (proved) | U by | U/L | status | sampled max "
        "| seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arch, instr in ROWS:
        for cname, cons in CLASSES.items():
            t0 = time.monotonic()
            cert = tc.bound(
                arch, instr=instr, measure="normwise", timeout=args.timeout, constraints=cons
            )
            secs = time.monotonic() - t0
            sm = sampled_max(arch, instr, Measure.NORMWISE, args.rows, 1, cons)  # another seed
            up = f"{float(cert.upper):.4g}" if cert.upper is not None else "not proved"
            ratio = (
                f"{float(cert.upper / cert.lower):.3g}"
                if cert.upper is not None and cert.lower
                else "-"
            )
            lines.append(
                f"| {arch} {cert.instruction} | {cname} | {float(cert.lower):.4g} | {up} | "
                f"{cert.upper_method or '-'} | {ratio} | {status(cert).value} | "
                f"{'-' if sm is None else f'{float(sm):.4g}'} | {secs:.0f} |"
            )
            print(lines[-1], flush=True)
    lines += [
        "",
        "cdna3 (FDRDA): the products are aligned to their own largest exponent and c is "
        "floored to that grid, so in the default class a tiny negative c becomes a whole step "
        "of a subnormal product's grid: a0 = b0 = 2^-24, c = -2^-149 give 1/16, attained and "
        "proved (certify/compose_cdna3.py).",
        "",
    ]
    lines += gemm_section(args)
    lines += [
        "",
        "## Exact accumulation of integer slices (the Ozaki question)",
        "",
        "`tcsmt exact`: the largest running accumulator B the instruction provably adds "
        "P-bit integer slices into exactly (by the composed argument of certify/exact.py, "
        "or by a solver where the argument does not apply), whether |c| = B + 1 is "
        "refuted by a witness re-run on the model (tight), the chain length the induction "
        "proves exact, and a chain one instruction longer that tc.matmul shows inexact; "
        f"solver budget {args.exact_timeout:g} s where one is asked.",
        "",
        "| instruction | P | exact for abs(c) <= B | by | tight | chain exact up to K | "
        "chain witness K (error) | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arch, instr, P in EXACT_ROWS:
        r = exactness(arch, P, instr=instr, timeout=args.exact_timeout)
        how = (
            "argument"
            if r.argued_B is not None and r.bound_B == r.argued_B
            else "solver"
            if r.c_bits is not None
            else "-"
        )
        tight = "yes" if r.above_witness is not None and how == "argument" else "-"
        cw = (
            f"{r.chain_witness_K} ({r.chain_witness_error})"
            if r.chain_witness_K is not None
            else "-"
        )
        lines.append(
            f"| {arch} {r.instruction} | {P} | "
            f"{'undecided' if r.bound_B is None else r.bound_B} | {how} | {tight} | "
            f"{r.chain_K if r.chain_K is not None else '-'} | {cw} | {r.seconds:.0f} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.write:
        out = Path(args.write) / "bounds.md"
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
