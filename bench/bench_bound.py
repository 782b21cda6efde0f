"""How long a user waits for an instruction certificate: `tc.bound` on the default
instruction of every preset, default class, to resolution 1/16 (results/bound_speed.md;
part of `make bench`).

Each row is one public call, timed from the call to its return (kernel caches warm:
a first throwaway call on Volta is made before the table), with the interval's status,
U/L, how U was proved and the seconds. The goal (the certificates issue): closed to
R = 1/16 in at most 120 s at the median over the presets, none over 600 s; the budget per
call here is --timeout seconds, so an open row took its whole budget.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import tensorcore_smt as tc
from tensorcore_smt.spec.presets import PRESETS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--timeout", type=float, default=120.0, help="budget per certificate (s)")
    ap.add_argument("--write", help="folder for bound_speed.md")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    tc.bound("volta", timeout=5, sample_rows=10)  # imports and first-call costs
    rows = []
    for name in PRESETS:
        t0 = time.monotonic()
        cert = tc.bound(name, timeout=args.timeout)
        s = time.monotonic() - t0
        unbounded = isinstance(cert.lower, float)  # an overflow row: L = inf, attained
        ratio = (
            "-"
            if unbounded or cert.upper is None or not cert.lower
            else f"{float(cert.upper / cert.lower):.4g}"
        )
        status = "closed" if cert.closed else "open"
        how = "overflow row (unbounded)" if unbounded else cert.upper_method or "-"
        rows.append((name, cert.instruction, status, ratio, how, s))
        print(
            f"{name:16s} {status:6s} U/L {ratio:>8s} {how:9s} {s:7.1f} s",
            flush=True,
        )
    secs = [r[5] for r in rows]
    closed = sum(r[2] == "closed" for r in rows)
    med = statistics.median(secs)
    lines = [
        "# Instruction certificates: how long `tc.bound` takes",
        "",
        f"Measured by `bench/bench_bound.py` (`make bench`): `tc.bound(preset)` on each "
        f"preset's default instruction, default class (finite, no overflow, no underflow; "
        f"subnormal inputs admitted), resolution 1/16, budget {args.timeout:g} s per call; "
        f"load average at the start {load:.1f} on {os.cpu_count()} cores.",
        "",
        "| preset | instruction | status | U/L | U by | seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, instr, status, ratio, how, s in rows:
        lines.append(f"| {name} | {instr} | {status} | {ratio} | {how} | {s:.1f} |")
    lines += [
        "",
        f"{closed} of {len(rows)} closed; median {med:.1f} s, largest {max(secs):.1f} s "
        f"(goal: median <= 120 s, none over 600 s).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        Path(args.write, "bound_speed.md").write_text(text)


if __name__ == "__main__":
    main()
