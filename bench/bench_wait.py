"""A user's wait at the command line: start-up and `tcsmt gemm --random` end to end.

Times, each the best of `--repeat` fresh processes (wall clock, the installed `tcsmt`):
importing the command line, `tcsmt --help`, one `tcsmt simulate`, and
`tcsmt gemm --arch hopper --random 1024,1024,1024` with its error report (the command's
own split of that wall: GEMM, error report, the rest); then that error report timed in
one process both ways, by digit products (now) and by exponent slices and wide integers
(before), with whether their figures agree bit for bit. Other processes slow every figure
alike; the load average is written beside them. Part of `make bench`; `--write DIR`
writes DIR/wait_bench.md. Usage: python bench/bench_wait.py [--repeat N] [--size M,N,K]
[--write DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TCSMT = str(BIN / "tcsmt")
SIMULATE = [TCSMT, "simulate", "--arch", "volta", "--a", "3c00,3c00,3c00,3c00"]
SIMULATE += ["--b", "3c00,3c00,3c00,3c00", "--c", "0"]


def _wall(cmd: list[str]) -> tuple[float, str]:
    """Seconds one fresh process takes (and its stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, r.stdout


def _best(cmd: list[str], repeat: int) -> tuple[float, str]:
    runs = [_wall(cmd) for _ in range(repeat)]
    return min(runs, key=lambda x: x[0])


def _field(text: str, name: str) -> float | None:
    m = re.search(rf"^{name}\s+([0-9.]+)", text, re.M)
    return float(m.group(1)) if m else None


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def error_report_ways(size: str) -> tuple[float, float, bool]:
    """(seconds of the exact error report by digit products and fp64 terms, seconds by
    the exponent slices and wide integers it replaced, whether every figure agrees bit
    for bit) on one `hopper` GEMM of random fp16 standard normal inputs of `size`."""
    import numpy as np

    from tensorcore_smt.formats import Format
    from tensorcore_smt.gemm import measure as ms

    m, n, k = ms.parse_shape(size)
    rng = np.random.default_rng(0)
    A = ms.random_matrix((m, k), Format.FP16, ms.Dist.NORMAL, rng)
    B = ms.random_matrix((k, n), Format.FP16, ms.Dist.NORMAL, rng)
    run = ms.run_measured("hopper", A, B, errors=False)
    t0 = time.perf_counter()
    fast = ms.measure_errors(run.run, A, B, None, run.D)
    t1 = time.perf_counter()
    digits, in_range = ms._exact_by_digits, ms.in_range
    ms._exact_by_digits, ms.in_range = (lambda *a: None), (lambda x: False)
    try:
        t2 = time.perf_counter()
        slow = ms.measure_errors(run.run, A, B, None, run.D)
        t3 = time.perf_counter()
    finally:
        ms._exact_by_digits, ms.in_range = digits, in_range
    same = all(
        f.ulps.tobytes() == s.ulps.tobytes()
        and f.rel.tobytes() == s.rel.tobytes()
        and f.normwise == s.normwise
        for f, s in zip(fast[:2], slow[:2])
    )
    return t1 - t0, t3 - t2, same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per figure")
    ap.add_argument("--size", default="1024,1024,1024", help="M,N,K of the gemm run")
    ap.add_argument("--write", default=None, help="folder to write wait_bench.md into")
    args = ap.parse_args(argv)
    load = _load()
    print(f"a user's wait, {os.cpu_count()} CPUs, load average {load}")
    rows: list[tuple[str, float]] = []
    imp, _ = _best([sys.executable, "-c", "import tensorcore_smt.cli"], args.repeat)
    rows.append(("python -c 'import tensorcore_smt.cli'", imp))
    rows.append(("tcsmt --help", _best([TCSMT, "--help"], args.repeat)[0]))
    rows.append(("tcsmt simulate (one volta row)", _best(SIMULATE, args.repeat)[0]))
    gemm = [TCSMT, "gemm", "--arch", "hopper", "--random", args.size]
    wall, out = _best(gemm, 1 if args.repeat < 3 else 2)
    rows.append((f"tcsmt gemm --arch hopper --random {args.size}", wall))
    split = {k: _field(out, k) for k in ("seconds", "errors in")}
    for name, s in rows:
        print(f"  {name:<52} {s:6.2f} s")
    print(f"  of the gemm run: GEMM {split['seconds']} s, error report {split['errors in']} s")
    fast, slow, same = error_report_ways(args.size)
    print(
        f"  error report in one process: {fast:.2f} s by digit products, {slow:.2f} s by "
        f"exponent slices and wide integers; the same figures: {same}"
    )
    end_load = _load()
    print(f"load average at the end: {end_load}")
    if args.write:
        lines = [
            "# A user's wait at the command line",
            "",
            f"`python bench/bench_wait.py` ({os.cpu_count()} CPUs, load average {load} at the "
            f"start, {end_load} at the end; wall clock of fresh processes, best of "
            f"{args.repeat}; other processes slow every figure alike).",
            "",
            "| command | wall (s) |",
            "|---|---|",
            *(f"| `{name}` | {s:.2f} |" for name, s in rows),
            "",
            f"Of the gemm run: the GEMM {split['seconds']} s, the exact error report "
            f"{split['errors in']} s, the rest start-up and inputs.",
            "",
            f"The exact error report of that run (vs exact and vs fp64) in one process: "
            f"{fast:.2f} s by digit products and fp64 terms (gemm/digits.py, "
            f"gemm/term_errors.py), {slow:.2f} s by the exponent slices and wide integers "
            f"used before; every figure the same bit for bit: {same}.",
            "",
        ]
        path = Path(args.write) / "wait_bench.md"
        path.write_text("\n".join(lines))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
