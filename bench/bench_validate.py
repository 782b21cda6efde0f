"""Throughput of `tcsmt validate` on 1 and 2 Dask workers, and the speed-up.

Run with `python bench/bench_validate.py` (part of `make bench`). Each run is the command
itself (`tcsmt validate --json`) on hopper m16n8k16 fp16->fp32 against the hidden model
`variant:hopper` (so the model and the oracle both run the vector interpreter) on the same
random rows (same seed); the figure is rows per second over the task phase (the
cluster's start-up, a few seconds, is reported apart). Goal: >= 1.7x from 1 to 2 workers
on 2 cores. Then the same 2-worker run with `--engine numpy` and `--engine compiled` (the
model and the variant oracle on the compiled engine): the compiled/numpy ratio, measured in
the same run on the same rows (goal >= 10x the 78,000 rows/s that validate reached on 2
workers before the compiled engine and the faster row stream; the numpy run of the same
run is the anchor here). The kernels are compiled (or loaded from the cache) by a short
untimed run first. `--write DIR` writes DIR/validate.md. Other processes on the
machine slow every run; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

GOAL = 1.7
OLD_ROWS_PER_S = 78_000
"""rows/s of `tcsmt validate` on 2 workers before the compiled engine (numpy model, row
stream 1), as measured on this 2-core machine: the historical anchor of the 10x goal."""
INSTR = "m16n8k16.f32.f16.f16.f32"


def run(workers: int, rows: int, chunk: int, seed: int, engine: str | None = None) -> dict:
    """One `tcsmt validate --json` run (with `--engine` when given); its JSON report."""
    tcsmt = Path(sys.executable).with_name("tcsmt")
    cmd = [str(tcsmt)] if tcsmt.exists() else [sys.executable, "-m", "tensorcore_smt.cli"]
    cmd += ["validate", "--arch", "hopper", "--instr", INSTR, "--oracle", "variant:hopper"]
    cmd += ["--rows", str(rows), "--chunk", str(chunk), "--seed", str(seed)]
    cmd += ["--workers", str(workers), "--json"]
    if engine is not None:
        cmd += ["--engine", engine]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"validate failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rows", type=int, default=2_000_000, help="rows per run")
    ap.add_argument("--chunk", type=int, default=250_000, help="rows per task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", default=None, help="folder to write validate.md into")
    args = ap.parse_args(argv)
    out: list[str] = []
    print(f"tcsmt validate --arch hopper --instr {INSTR} --oracle variant:hopper")
    print(f"{args.rows:,} rows in chunks of {args.chunk:,}, {os.cpu_count()} CPUs")
    if hasattr(os, "getloadavg"):
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    # compile (or load) the kernels once, untimed: the timed runs measure throughput
    run(1, 1000, 1000, args.seed, "compiled")
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
    out.append(f"| default engine, 1 worker | {rates[1]:,.0f} |")
    out.append(f"| default engine, 2 workers | {rates[2]:,.0f} |")
    by_engine = {}
    for engine in ("numpy", "compiled"):
        rep = run(2, args.rows, args.chunk, args.seed, engine)
        assert rep["mismatches"] == 0, rep
        by_engine[engine] = rep["rows_per_s"]
        print(f"  --engine {engine:9s} 2 workers {rep['rows_per_s']:12,.0f} rows/s")
        out.append(f"| --engine {engine}, 2 workers | {rep['rows_per_s']:,.0f} |")
    er = by_engine["compiled"] / by_engine["numpy"]
    vs_old = by_engine["compiled"] / OLD_ROWS_PER_S
    print(f"  compiled / numpy {er:6.2f}x; compiled / {OLD_ROWS_PER_S:,} (before) {vs_old:5.1f}x")
    if args.write:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
        text = [
            "# tcsmt validate throughput (bench/bench_validate.py)",
            "",
            f"`tcsmt validate --arch hopper --instr {INSTR} --oracle variant:hopper`, "
            f"{args.rows:,} rows in chunks of {args.chunk:,}, {os.cpu_count()} CPUs, "
            f"load average {load} at the end; every run 0 mismatches.",
            "",
            "| run | rows/s |",
            "| --- | ---: |",
            *out,
            "",
            f"Speed-up 1 -> 2 workers: {ratio:.2f}x (goal >= {GOAL:g}x). Compiled / numpy on 2 "
            f"workers: {er:.2f}x. Compiled against the {OLD_ROWS_PER_S:,} rows/s validate "
            f"reached before the compiled engine and row stream 2: {vs_old:.1f}x (goal >= 10x).",
            "",
        ]
        Path(args.write, "validate.md").write_text("\n".join(text))
        print(f"wrote {Path(args.write, 'validate.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
