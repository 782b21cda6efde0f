"""Wall-clock GEMM emulation rate through `tc.matmul` against the goals of issue 45.

Run with `python bench/bench_rate.py` (part of `make bench`; `--write results` also writes
results/rate_bench.md). Each GEMM is what a user calls: `tc.matmul("hopper", A, B)` on
random normal operands of the dtype, every thread the runner uses (the machine's cores),
best wall time of `--repeat` calls after one warm-up call (kernels compiled or loaded).
Beside it the CPU time of the same calls, numpy's fp32 matmul on the same shape (the
native anchor, best of as many calls) and the machine's load average before and after.
Goals (issue 45): bf16, fp16 and e4m3 at >= 5 G MAC/s wall on this 2-core machine, within
10x of numpy's fp32 matmul on the same shape.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import tensorcore_smt as tc

CASES = [
    # name, dtype, M, N, K
    ("bf16 250 x 9728 x 2560 (a 4B model's MLP at 250 tokens)", ml_dtypes.bfloat16, 250, 9728, 2560),
    ("fp16 1024 x 1024 x 1024", np.float16, 1024, 1024, 1024),
    ("fp16 250 x 9728 x 2560", np.float16, 250, 9728, 2560),
    ("e4m3 256 x 1920 x 2048", ml_dtypes.float8_e4m3fn, 256, 1920, 2048),
]  # fmt: skip
GOAL_MACS = 5e9
GOAL_NUMPY_RATIO = 10.0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of that call) of `repeat` calls of fn."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best = min(best, (wall, cpu))
    return best


def measure(dtype, M: int, N: int, K: int, repeat: int) -> dict:
    """One case's figures: tc.matmul and numpy fp32 on the same operands."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    tc.matmul("hopper", A[:8], B)  # compile or load the kernels
    wall, cpu = _best(lambda: tc.matmul("hopper", A, B), repeat)
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    np_wall, _ = _best(lambda: A32 @ B32, repeat)
    macs = M * N * K
    return {"macs": macs, "wall": wall, "cpu": cpu, "numpy": np_wall}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench_rate")
    ap.add_argument("--write", metavar="DIR", help="write DIR/rate_bench.md")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    before = _load()
    rows = []
    for name, dtype, M, N, K in CASES:
        f = measure(dtype, M, N, K, args.repeat)
        rate, ratio = f["macs"] / f["wall"] / 1e9, f["wall"] / f["numpy"]
        rows.append(
            f"| {name} | {f['wall']:.3f} | {rate:.2f} | {f['cpu']:.3f} | "
            f"{f['macs'] / f['cpu'] / 1e9:.2f} | "
            f"{'met' if rate * 1e9 >= GOAL_MACS else 'not met'} | {f['numpy']:.4f} | "
            f"{ratio:.1f}x | {'met' if ratio <= GOAL_NUMPY_RATIO else 'not met'} |"
        )
        print(rows[-1], flush=True)
    after = _load()
    lines = [
        "# GEMM emulation rate through tc.matmul (bench/bench_rate.py)",
        "",
        f"{os.cpu_count()} CPUs; load average {before} before and {after} after (other "
        "processes slow every figure alike). `tc.matmul('hopper', A, B)` on random normal "
        f"operands, best wall time of {args.repeat} calls after a warm-up call, the CPU "
        "time of that call (every thread), numpy's fp32 matmul of the same shape beside it.",
        "Goal (issue 45): >= 5 G MAC/s wall and within 10x of numpy's fp32 matmul.",
        "",
        "| GEMM | wall s | G MAC/s wall | CPU s | G MAC per CPU s | >= 5 G MAC/s | "
        "numpy fp32 s | over numpy | within 10x |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
        *rows,
        "",
    ]
    if args.write:
        Path(args.write, "rate_bench.md").write_text("\n".join(lines))
    else:
        sys.stdout.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
