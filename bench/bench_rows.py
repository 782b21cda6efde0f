"""Random-row generation (validation/rows.py) against the stream it replaced, and its share
of a validation chunk.

Run with `python bench/bench_rows.py` (part of `make bench`). For each instruction, rows/s
of `random_rows` (stream 2, kind by kind from raw PCG64 words) and of the frozen stream 1
(`rows_legacy`: seven candidates per operand), measured alternately in the same run, best
of `--repeat`; the ratio is the figure judged (goal >= 10x on hopper m16n8k16, where rows
took most of a chunk's time). Beside it, the share of one chunk's time (`--rows` rows
drawn, then the model run once on the numpy and on the compiled engine) spent drawing
rows, before and after. Writes results/rows.json and results/rows.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

GOAL = 10.0
CASES = (
    ("hopper", "m16n8k16.f32.f16.f16.f32"),
    ("volta", "m8n8k4.f32.f16.f16.f32"),
    ("hopper", "m16n8k32.f32.e4m3.e4m3.f32"),
)


def best_seconds(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(arch: str, instr: str, n: int, repeat: int) -> dict:
    """rows/s of both streams and one chunk's split between rows and the model."""
    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.spec.presets import parse_variant
    from tensorcore_smt.validation import rows, rows_legacy

    p = parse_variant(arch).params(instr)
    args = (p.a_fmt, p.b_fmt, p.c_fmt, p.K, n)
    t_old = t_new = float("inf")
    for i in range(repeat):  # alternate, so load changes hit both alike
        t_old = min(t_old, best_seconds(lambda i=i: rows_legacy.random_rows(*args, i), 1))
        t_new = min(t_new, best_seconds(lambda i=i: rows.random_rows(*args, i), 1))
    a, b, c, _ = rows.random_rows(*args, 0)
    t_model = best_seconds(lambda: simulate_params(p, a, b, c, engine="numpy"), repeat)
    simulate_params(p, a, b, c, engine="compiled")  # compiled (or read from the cache) once
    t_comp = best_seconds(lambda: simulate_params(p, a, b, c, engine="compiled"), repeat)
    return {
        "arch": arch,
        "instruction": instr,
        "K": p.K,
        "rows": n,
        "stream1_rows_per_s": round(n / t_old),
        "stream2_rows_per_s": round(n / t_new),
        "ratio": round(t_old / t_new, 2),
        "model_numpy_rows_per_s": round(n / t_model),
        "model_compiled_rows_per_s": round(n / t_comp),
        "chunk_share_of_rows_before": round(t_old / (t_old + t_model), 3),
        "chunk_share_of_rows_after": round(t_new / (t_new + t_model), 3),
        "compiled_chunk_share_of_rows_before": round(t_old / (t_old + t_comp), 3),
        "compiled_chunk_share_of_rows_after": round(t_new / (t_new + t_comp), 3),
        "compiled_chunk_speedup": round((t_old + t_comp) / (t_new + t_comp), 2),
    }


def write(results: list[dict], out: Path, load: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps({"load": load, "cases": results}, indent=2) + "\n")
    lines = [
        "# Random-row generation (bench/bench_rows.py)",
        "",
        "`validation.rows.random_rows` (stream 2) against the frozen stream 1 "
        "(`validation.rows_legacy`), one core, best of several alternated runs; "
        f"load average at the start: {load}. *Share*: the fraction of one chunk's time "
        "(rows drawn + the model run once, numpy / compiled engine) spent drawing rows; "
        "*chunk*: how much faster rows + compiled model got.",
        "",
        "| instruction | K | stream 1 rows/s | stream 2 rows/s | ratio | share numpy | "
        "share compiled | chunk |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['arch']} {r['instruction']} | {r['K']} | {r['stream1_rows_per_s']:,} | "
            f"{r['stream2_rows_per_s']:,} | {r['ratio']}x | "
            f"{r['chunk_share_of_rows_before']:.0%} -> {r['chunk_share_of_rows_after']:.0%} | "
            f"{r['compiled_chunk_share_of_rows_before']:.0%} -> "
            f"{r['compiled_chunk_share_of_rows_after']:.0%} | {r['compiled_chunk_speedup']}x |"
        )
    (out / "rows.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rows", type=int, default=100_000, help="rows per call")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", default="results", help="folder for rows.json / rows.md")
    args = ap.parse_args(argv)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"random_rows, {args.rows:,} rows per call, best of {args.repeat}; load {load}")
    results = []
    for arch, instr in CASES:
        r = measure(arch, instr, args.rows, args.repeat)
        results.append(r)
        goal = f" (goal >= {GOAL:g}x: {'met' if r['ratio'] >= GOAL else 'NOT met'})"
        print(
            f"  {arch:7s} {instr:28s} stream 1 {r['stream1_rows_per_s']:>10,} rows/s  "
            f"stream 2 {r['stream2_rows_per_s']:>11,} rows/s  {r['ratio']:5.1f}x"
            f"{goal if (arch, instr) == CASES[0] else ''}"
        )
        print(
            f"  {'':36s} rows' share of a chunk: numpy model "
            f"{r['chunk_share_of_rows_before']:.0%} -> {r['chunk_share_of_rows_after']:.0%}, "
            f"compiled model {r['compiled_chunk_share_of_rows_before']:.0%} -> "
            f"{r['compiled_chunk_share_of_rows_after']:.0%} "
            f"(chunk {r['compiled_chunk_speedup']}x faster)"
        )
    if args.write:
        write(results, Path(args.write), load)
        print(f"written: {args.write}/rows.json, {args.write}/rows.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
