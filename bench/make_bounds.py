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
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.certify.bound import default_class, fmt_value, make_bound_query
from tensorcore_smt.certify.report import status
from tensorcore_smt.model.measure import Measure, exact_value, measure_value
from tensorcore_smt.spec.formats import value_of

ROWS = [
    ("volta", None),
    ("hopper", None),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("cdna3", None),
]


def sampled_max(arch: str, instr: str | None, measure: Measure, rows: int, seed: int):
    """The largest measure over `rows` random finite rows (exponents of a and b drawn
    near 1, c near the products), exactly."""
    q = make_bound_query(arch, None, instr, measure, default_class())
    p = q.p
    rng = random.Random(seed)

    def draw(fmt, scale: float) -> int:
        from tensorcore_smt.spec.formats import round_fraction

        v = Fraction(rng.uniform(-1, 1) * scale).limit_denominator(1 << 40)
        return round_fraction(v, fmt)

    A = np.array([[draw(p.a_fmt, 2.0) for _ in range(p.K)] for _ in range(rows)], dtype=np.uint64)
    B = np.array([[draw(p.b_fmt, 2.0) for _ in range(p.K)] for _ in range(rows)], dtype=np.uint64)
    C = np.array([draw(p.c_fmt, 4.0) for _ in range(rows)], dtype=np.uint64)
    D = tc.simulate(arch, q.instruction, A, B, C)
    best = Fraction(0)
    for i in range(rows):
        a, b = [int(x) for x in A[i]], [int(x) for x in B[i]]
        e, n = exact_value(a, b, int(C[i]), (p.a_fmt, p.b_fmt, p.c_fmt))
        m = measure_value(value_of(int(D[i]), p.d_fmt), e, n, measure, p.d_fmt)
        if isinstance(m, float):
            return m
        best = max(best, m)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--timeout", type=float, default=120.0, help="budget per bound (s)")
    ap.add_argument("--rows", type=int, default=20000, help="random rows per instruction")
    ap.add_argument("--write", default=None, help="folder for bounds.md")
    args = ap.parse_args()
    lines = [
        "# Certified worst-case errors",
        "",
        f"Measured by `bench/make_bounds.py` (`make bounds`); load average at the start "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; budget {args.timeout:g} s "
        f"per row; sample {args.rows} random rows.",
        "",
        "Class: finite inputs whose exact magnitudes fit the output format (the default). "
        "L is attained by a witness re-run on the concrete model; U is proved by unsat "
        "(confirmed by a second solver) or 'not proved'. An open interval claims only "
        "[L, U].",
        "",
        "| instruction | measure | L (witness) | U (proved) | status | sampled max | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arch, instr in ROWS:
        t0 = time.monotonic()
        cert = tc.bound(arch, instr=instr, measure="normwise", timeout=args.timeout)
        secs = time.monotonic() - t0
        sm = sampled_max(arch, instr, Measure.NORMWISE, args.rows, 1)
        up = fmt_value(cert.upper) if cert.upper is not None else "not proved"
        lines.append(
            f"| {arch} {cert.instruction} | normwise | {fmt_value(cert.lower)} | {up} | "
            f"{status(cert)} | {fmt_value(sm)} | {secs:.0f} |"
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
