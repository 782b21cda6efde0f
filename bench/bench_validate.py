"""Throughput of `tcsmt validate` on 1 and 2 Dask workers, and the speed-up.

Run with `python bench/bench_validate.py` (part of `make bench`). Each run is the command
itself (`tcsmt validate --json`) on hopper m16n8k16 fp16->fp32 against the hidden model
`variant:hopper` (so the model and the oracle both run the vector interpreter) on the same
random rows (same seed); the figure is rows per second over the task phase (the
cluster's start-up, a few seconds, is reported apart). Goal: >= 1.7x from 1 to 2 workers
on 2 cores. Other processes on the machine slow both runs; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

GOAL = 1.7
INSTR = "m16n8k16.f32.f16.f16.f32"


def run(workers: int, rows: int, chunk: int, seed: int) -> dict:
    """One `tcsmt validate --json` run; its JSON report."""
    tcsmt = Path(sys.executable).with_name("tcsmt")
    cmd = [str(tcsmt)] if tcsmt.exists() else [sys.executable, "-m", "tensorcore_smt.cli"]
    cmd += ["validate", "--arch", "hopper", "--instr", INSTR, "--oracle", "variant:hopper"]
    cmd += ["--rows", str(rows), "--chunk", str(chunk), "--seed", str(seed)]
    cmd += ["--workers", str(workers), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"validate failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rows", type=int, default=800_000, help="rows per run")
    ap.add_argument("--chunk", type=int, default=100_000, help="rows per task")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"tcsmt validate --arch hopper --instr {INSTR} --oracle variant:hopper")
    print(f"{args.rows:,} rows in chunks of {args.chunk:,}, {os.cpu_count()} CPUs")
    if hasattr(os, "getloadavg"):
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    rates = {}
    for w in (1, 2):
        rep = run(w, args.rows, args.chunk, args.seed)
        assert rep["mismatches"] == 0, rep
        rates[w] = rep["rows_per_s"]
        print(
            f"  {w} worker{'s' if w > 1 else ' '}  {rep['rows_per_s']:12,.0f} rows/s  "
            f"({rep['seconds']:.2f} s; start-up {rep['startup_seconds']:.1f} s)"
        )
    ratio = rates[2] / rates[1]
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"  speed-up  {ratio:12.2f}x  2 workers / 1 (goal >= {GOAL:g}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
