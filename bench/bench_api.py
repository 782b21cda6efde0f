"""Throughput of the public API as users call it, against anchors measured in the same run.

Run with `python bench/bench_api.py --write results` (part of `make bench`). For each
instruction it times `tensorcore_smt.simulate(arch, instr, A, B, C, engine=...)` on the
documented row mix (validation/rows.py) held the way a user holds it: float16 (or
ml_dtypes float8_e4m3fn) operand arrays and a float32 C, kernels already in the disk
cache. Anchors, on the same rows:

- numpy: the same call with engine="numpy" (on the first --numpy-rows rows);
- kernel: the compiled kernel alone (engine/kernel.run_rows on the bit patterns, d into
  a preallocated array): what the API can reach at best;
- MMA-Sim (when mmasim and torch are importable and have the instruction), torch on
  every core.

In a fresh process (kernels on disk, nothing compiled in it): the first call against
the later ones, and the memory a call takes beyond its inputs (tracemalloc's peak during
the call) over the inputs' bytes. Last, 10^8 rows through `simulate_stream` (batches of
10^6 rows from a generator): the most memory allocated at once while it runs, and the
resident memory before and after.
Every figure is the best of --repeat runs, the API's, the kernel's and numpy's
interleaved (a change of load on the shared machine touches all three alike); the load
average is printed beside them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

import tensorcore_smt as tc
from tensorcore_smt import intake
from tensorcore_smt.engine import kernel
from tensorcore_smt.validation.rows import random_rows

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import best  # noqa: E402
from bench_simulate import best_times  # noqa: E402

CASES = [
    # arch, instruction, MMA-Sim arch (None: no MMA-Sim form), goal over numpy
    ("hopper", "m16n8k16.f32.f16.f16.f32", "Hopper", 10.0),
    ("volta", "m8n8k4.f32.f16.f16.f32", "Volta", 10.0),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", None, 8.0),
]
KERNEL_GOAL = 0.8  # API throughput over the kernel's
FIRST_GOAL = 1.5  # first call over later ones
MEMORY_GOAL = 2.0  # peak memory over the inputs' bytes
STREAM_ROWS = 10**8
STREAM_BATCH = 10**6


def user_arrays(arch: str, instr: str, n: int, seed: int = 1):
    """(params, bit arrays, user arrays): rows of the mix as bits of each format's width
    and as the float arrays a user holds (views of the same memory)."""
    p = tc.resolve(arch, instr)
    bits = list(random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, seed)[:3])
    fmts = (p.a_fmt, p.b_fmt, p.c_fmt)
    user = [x.view(intake.FORMAT_DTYPE[f]) for x, f in zip(bits, fmts)]
    return p, bits, user


def mmasim_rate(mm_arch, instr: str, bits, want, repeat: int):
    """MMA-Sim's rows/s on the same bits and whether its bits equal ours; None without it."""
    if mm_arch is None or importlib.util.find_spec("mmasim") is None:
        return None
    from bench_simulate import Case, mmasim_runner

    made = mmasim_runner(Case("", mm_arch, instr), *bits)
    if made is None:
        return None
    run, to_bits = made
    equal = bool(np.array_equal(to_bits(run()), want))
    return {"rate": len(bits[2]) / best(run, repeat), "bits_equal": equal}


FRESH = r"""
import json, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from bench_api import user_arrays
import numpy as np, tensorcore_smt as tc
arch, instr, n, repeat = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
p, bits, user = user_arrays(arch, instr, n)
del bits
inputs = sum(x.nbytes for x in user)
t0 = time.perf_counter(); tc.simulate(arch, instr, *user, engine="compiled"); first = time.perf_counter() - t0
later = []
for _ in range(repeat):
    t0 = time.perf_counter(); tc.simulate(arch, instr, *user, engine="compiled"); later.append(time.perf_counter() - t0)
tracemalloc.start()
d = tc.simulate(arch, instr, *user, engine="compiled")
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
from tensorcore_smt.engine import kernel
(k,) = kernel._KERNELS.values()
kernel._KERNELS.clear()
t0 = time.perf_counter(); kernel.cpu_kernel(k.p, k.containers, k.out_bits); load = time.perf_counter() - t0
print(json.dumps({"first_s": first, "later_s": min(later), "later_median_s": sorted(later)[len(later) // 2],
                  "inputs_bytes": inputs, "kernel_load_s": load,
                  "traced_peak_bytes": peak, "d_dtype": str(d.dtype)}))
"""

STREAM = r"""
import json, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from bench_api import user_arrays
import numpy as np, tensorcore_smt as tc
arch, instr, total, batch = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
pool = [user_arrays(arch, instr, batch, seed)[2] for seed in (1, 2)]
want = [tc.simulate(arch, instr, *u, engine="compiled") for u in pool]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
rss0 = rss()
tracemalloc.start()
def batches():
    for i in range(total // batch):
        yield pool[i % 2]
t0 = time.perf_counter()
rows = 0
same = True
for i, d in enumerate(tc.simulate_stream(arch, instr, batches(), engine="compiled")):
    rows += len(d)
    same = same and bool(np.array_equal(d, want[i % 2]))
wall = time.perf_counter() - t0
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"rows": rows, "wall_s": wall, "rss_before": rss0, "rss_after": rss(),
                  "traced_peak_bytes": peak,
                  "pool_bytes": sum(x.nbytes for u in pool for x in u), "bits_equal": same}))
"""


def child(script: str, *args) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).parent), *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_case(arch, instr, mm_arch, goal, n, n_np, repeat) -> dict:
    p, bits, user = user_arrays(arch, instr, n)
    d = tc.simulate(arch, instr, *user, engine="compiled")  # compiled once, cached on disk
    want = tc.simulate(arch, instr, *(x[:n_np] for x in bits), engine="numpy")
    out = np.empty(n, dtype=intake.bits_dtype(p.d_fmt))
    (t_api, t_ker, t_np), _ = best_times(
        [
            lambda: tc.simulate(arch, instr, *user, engine="compiled"),
            lambda: kernel.run_rows(p, bits, out=out),
            lambda: tc.simulate(arch, instr, *(x[:n_np] for x in user), engine="numpy"),
        ],
        repeat,
    )
    fresh = child(FRESH, arch, instr, n, repeat)
    mm = mmasim_rate(mm_arch, instr, [x[:n_np] for x in bits], want, 2)
    r = {
        "arch": arch,
        "instruction": instr,
        "K": p.K,
        "rows": n,
        "numpy_rows": n_np,
        "api_rate": n / t_api,
        "kernel_rate": n / t_ker,
        "numpy_rate": n_np / t_np,
        "goal_over_numpy": goal,
        "bits_equal": bool(np.array_equal(d[:n_np], want) and np.array_equal(out, d)),
        "d_dtype": str(d.dtype),
        "fresh": fresh,
        "mmasim": mm,
    }
    return r


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(results: list[dict], stream: dict, head: str) -> str:
    lines = [
        "# The public API's throughput (bench/bench_api.py)",
        "",
        head,
        "",
        "| instruction | numpy /s | API /s | kernel /s | API / numpy (goal) | API / kernel (goal 0.8) | MMA-Sim /s; API over it | bits equal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in results:
        over_np = r["api_rate"] / r["numpy_rate"]
        over_k = r["api_rate"] / r["kernel_rate"]
        mm = r["mmasim"]
        mm_txt = (
            f"{fmt_rate(mm['rate'])}; {r['api_rate'] / mm['rate']:.0f}x (bits equal: {mm['bits_equal']})"
            if mm
            else "no MMA-Sim form"
        )
        lines.append(
            f"| {r['arch']} {r['instruction']} | {fmt_rate(r['numpy_rate'])} | "
            f"{fmt_rate(r['api_rate'])} | {fmt_rate(r['kernel_rate'])} | "
            f"{over_np:.1f}x ({r['goal_over_numpy']:g}x: {verdict(over_np >= r['goal_over_numpy'])}) | "
            f"{over_k:.2f} ({verdict(over_k >= KERNEL_GOAL)}) | {mm_txt} | {r['bits_equal']} |"
        )
    lines += [
        "",
        "A fresh process with the kernels on disk (the same rows, float arrays in, d out in "
        "the narrowest dtype). The first call is one run; it is set against the median of the "
        "later ones, which the same load on the machine touches alike. What only a first call "
        "does is load the kernel from the disk cache (timed again after the runs: "
        + ", ".join(f"{r['fresh']['kernel_load_s'] * 1e3:.1f} ms" for r in results)
        + ") and start the worker threads:",
        "",
        "| instruction | first call s | later calls s, best / median | first / median later "
        "(goal 1.5) | inputs MB | "
        "allocated during a call, peak MB (inputs + it over inputs; goal 2) | d dtype |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        f = r["fresh"]
        ratio = f["first_s"] / f["later_median_s"]
        mb = 1 << 20
        over = (f["inputs_bytes"] + f["traced_peak_bytes"]) / f["inputs_bytes"]
        lines.append(
            f"| {r['arch']} {r['instruction']} | {f['first_s']:.3f} | {f['later_s']:.3f} / "
            f"{f['later_median_s']:.3f} | "
            f"{ratio:.2f} ({verdict(ratio <= FIRST_GOAL)}) | {f['inputs_bytes'] / mb:.0f} | "
            f"{f['traced_peak_bytes'] / mb:.1f} ({over:.2f}x with the inputs: "
            f"{verdict(over <= MEMORY_GOAL)}) | {f['d_dtype']} |"
        )
    mb = 1 << 20
    lines += [
        "",
        f"Streaming: {stream['rows']:,} rows of hopper m16n8k16.f32.f16.f16.f32 through "
        f"`tc.simulate_stream` in batches of {STREAM_BATCH:,} rows (a generator cycling over two "
        f"random batches of float16/float32 arrays, {stream['pool_bytes'] / mb:.0f} MB): "
        f"{stream['wall_s']:.1f} s ({stream['rows'] / stream['wall_s'] / 1e6:.1f} M rows/s); "
        f"at most {stream['traced_peak_bytes'] / mb:.1f} MB allocated at once while it ran "
        f"(tracemalloc), resident memory {stream['rss_before'] / mb:.0f} MB before and "
        f"{stream['rss_after'] / mb:.0f} MB after; every batch's bits equal to its direct run: "
        f"{stream['bits_equal']}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rows", type=int, default=1 << 22)
    ap.add_argument("--numpy-rows", type=int, default=1 << 18)
    ap.add_argument("-r", "--repeat", type=int, default=5)
    ap.add_argument("--stream-rows", type=int, default=STREAM_ROWS)
    ap.add_argument("--write", type=Path, default=None, help="folder for api.md and api.json")
    args = ap.parse_args(argv)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    head = (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other processes, "
        f"load average {load} at the start; tensorcore_smt {tc.__version__}, numpy "
        f"{np.__version__}. {args.rows:,} rows per call (numpy and MMA-Sim on the first "
        f"{args.numpy_rows:,}), best of {args.repeat} interleaved runs; kernels in the disk "
        "cache."
    )
    print(head)
    results = []
    for arch, instr, mm_arch, goal in CASES:
        r = bench_case(arch, instr, mm_arch, goal, args.rows, args.numpy_rows, args.repeat)
        results.append(r)
        print(json.dumps(r))
    stream = child(STREAM, CASES[0][0], CASES[0][1], args.stream_rows, STREAM_BATCH)
    print(json.dumps(stream))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(results, stream, head + f" Load average at the end: {load}.")
    print(text)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        (args.write / "api.md").write_text(text)
        (args.write / "api.json").write_text(
            json.dumps({"cases": results, "stream": stream}, indent=1) + "\n"
        )
    ok = all(r["bits_equal"] for r in results) and stream["bits_equal"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
