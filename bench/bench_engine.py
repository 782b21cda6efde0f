"""The compiled engine against the numpy interpreter, on the same rows.

Run with `python bench/bench_engine.py` (part of `make bench`; writes results/engine.md and
results/engine.json). For each instruction: dot products per second of the numpy
interpreter (single-threaded) and of the compiled kernel on one thread and on every core,
on identical rows of validation/rows.py's mix (bits checked equal), the ratio against the
issue's goal (>= 10x hopper m16n8k16 and volta m8n8k4, >= 8x FP8 wgmma k32), the scaling
from one core to all (goal >= 0.9 x linear), the kernel's compile time on an empty cache
and its load time from the disk cache, and the batch size from which compiling pays.
MMA-Sim runs on the same bits when `mmasim` is importable (it needs torch; otherwise a
note), with torch on one thread and on every core, each compared with the compiled
kernel on as many cores (goal >= 25x). GEMM MAC/s of the compiled runner: a 1024^3 fp16 Hopper GEMM and a 64x5760x1920
e4m3 GEMM with promotion every 128 (goals < 2 s and >= 10^9 MAC/s on 2 cores).
The chain kernels' vector widths per instruction family and the share of a bf16 GEMM's
time spent in the kernel (bench/engine_vectors.py; `--vectors-only` recomputes that
section alone, keeping the rest of results/engine.json).
The machine's load average is printed: other processes slow every figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.api import simulate_params

sys.path.insert(0, str(Path(__file__).parent))
import engine_vectors  # noqa: E402

from tensorcore_smt.engine import kernel
from tensorcore_smt.engine.dag import instruction_dag
from tensorcore_smt.validation.rows import random_rows

CASES = [
    # arch, instruction, goal (compiled one thread / numpy), MMA-Sim arch name
    ("hopper", "m16n8k16.f32.f16.f16.f32", 10.0, "Hopper"),
    ("volta", "m8n8k4.f32.f16.f16.f32", 10.0, "Volta"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", 8.0, None),
]
GEMMS = [
    ("fp16 1024^3", "hopper/serial", np.float16, 1024, 1024, 1024),
    ("e4m3 64x5760x1920", "hopper/serial[promote=128]", ml_dtypes.float8_e4m3fn, 64, 5760, 1920),
]
SCALING_GOAL = 0.9


def best(fn, repeat: int) -> float:
    """Best wall time of `repeat` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def best_cpu(fn, repeat: int) -> float:
    """Best CPU time of the calling thread over `repeat` calls: on a shared machine the
    time the work itself took, whatever else runs (for single-threaded runs only)."""
    times = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return min(times)


MMASIM_GOAL = 25.0
"""Compiled over MMA-Sim, each on the same cores (issue goal)."""


def mmasim_rate(arch: str | None, p, instr: str, a, b, c, want, repeat: int, cores: int):
    """MMA-Sim's dot products per second on the same bits with torch on one thread and
    on `cores` threads, and whether its bits equal ours (bench_simulate.mmasim_runner makes
    the torch tensors); (None, None, None) without mmasim."""
    if arch is None or importlib.util.find_spec("mmasim") is None:
        return None, None, None
    import torch
    from bench_simulate import Case, mmasim_runner

    u = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
    made = mmasim_runner(
        Case("", arch, instr),
        a.astype(u[p.a_fmt.spec.storage]),
        b.astype(u[p.b_fmt.spec.storage]),
        c.astype(u[p.c_fmt.spec.storage]),
    )
    if made is None:
        return None, None, None
    run, to_bits = made
    equal = bool(np.array_equal(to_bits(run()), want))
    saved = torch.get_num_threads()
    rates = []
    try:
        for t in (1, cores):
            torch.set_num_threads(t)
            rates.append(len(c) / best(run, repeat))
    finally:
        torch.set_num_threads(saved)
    return rates[0], rates[1], equal


def bench_instruction(arch, instr, goal, mm_arch, n, repeat, cores, copies) -> dict:
    """Figures of one instruction: numpy on n rows; the compiled kernel on those rows
    repeated `copies` times (long enough that starting the threads does not count)."""
    p = tc.resolve(arch, instr)
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, 1)
    big = [np.tile(a, (copies, 1)), np.tile(b, (copies, 1)), np.tile(c, copies)]
    nb = n * copies
    with tempfile.TemporaryDirectory() as d:  # a cold cache: the compile is timed
        os.environ["TCSMT_CACHE"] = d
        kernel._KERNELS.clear()
        t0 = time.perf_counter()
        kernel.cpu_kernel(p, (64, 64, 64))
        compile_s = time.perf_counter() - t0
        kernel._KERNELS.clear()
        t0 = time.perf_counter()
        kernel.cpu_kernel(p, (64, 64, 64))
        load_s = time.perf_counter() - t0
        del os.environ["TCSMT_CACHE"]
    want = simulate_params(p, a, b, c, engine="numpy")
    got1 = kernel.run_rows(p, big, n_threads=1)
    gotn = kernel.run_rows(p, big, n_threads=cores)
    want_big = np.tile(want, copies)
    equal = bool(np.array_equal(want_big, got1) and np.array_equal(want_big, gotn))
    t_np = best(lambda: simulate_params(p, a, b, c, engine="numpy"), repeat) * copies
    t_1 = best(lambda: kernel.run_rows(p, big, n_threads=1), repeat)
    t_n = best(lambda: kernel.run_rows(p, big, n_threads=cores), repeat)
    cpu_np = best_cpu(lambda: simulate_params(p, a, b, c, engine="numpy"), repeat) * copies
    cpu_1 = best_cpu(lambda: kernel.run_rows(p, big, n_threads=1), repeat)
    # small batches, kernel ready: where numpy's per-call cost meets the kernel's
    small = {}
    for rows in (1, 100, 10_000):
        s = slice(0, rows)
        tn = best(lambda s=s: simulate_params(p, a[s], b[s], c[s], engine="numpy"), 3)
        tk = best(lambda s=s: kernel.run_rows(p, [a[s], b[s], c[s]]), 3)
        small[rows] = (tn, tk)
    r = {
        "arch": arch,
        "instr": instr,
        "dag_nodes": instruction_dag(p).nodes,
        "rows": n,
        "compiled_rows": nb,
        "bits_equal": equal,
        "numpy_per_s": nb / t_np,
        "compiled_1_per_s": nb / t_1,
        f"compiled_{cores}_per_s": nb / t_n,
        "ratio_1": t_np / t_1,
        "numpy_per_cpu_s": nb / cpu_np,
        "compiled_1_per_cpu_s": nb / cpu_1,
        "ratio_cpu": cpu_np / cpu_1,
        "goal": goal,
        "scaling": (t_1 / t_n) / cores,
        "compile_s": compile_s,
        "load_s": load_s,
        "compile_pays_from_rows": compile_s * nb / t_np,
        "small_batches_s": {str(k): {"numpy": v[0], "compiled": v[1]} for k, v in small.items()},
    }
    r["mmasim_1_per_s"], r["mmasim_per_s"], r["mmasim_bits_equal"] = mmasim_rate(
        mm_arch, p, instr, a, b, c, want, repeat, cores
    )
    return r


def bench_gemm(name, hyp, dt, M, N, K, m_numpy: int) -> dict:
    rng = np.random.default_rng(2)
    A = rng.standard_normal((M, K)).astype(dt)
    B = rng.standard_normal((K, N)).astype(dt)
    tc.matmul(hyp, A[:2], B[:, :2], engine="compiled")  # compile (or load) the kernels
    t0 = time.perf_counter()
    D = tc.matmul(hyp, A, B, engine="compiled")
    t_c = time.perf_counter() - t0
    t0 = time.perf_counter()
    Dn = tc.matmul(hyp, A[:m_numpy], B, engine="numpy")
    t_n = time.perf_counter() - t0
    raw = np.dtype(f"u{D.dtype.itemsize}")
    equal = bool(np.array_equal(D[:m_numpy].view(raw), Dn.view(raw)))
    return {
        "gemm": name,
        "hypothesis": hyp,
        "M": M,
        "N": N,
        "K": K,
        "seconds": t_c,
        "macs_per_s": M * N * K / t_c,
        "numpy_macs_per_s": m_numpy * N * K / t_n,
        "numpy_rows": m_numpy,
        "bits_equal_on_numpy_rows": equal,
    }


def _mmasim_cell(r: dict, cores: int, note: str | None) -> str:
    """MMA-Sim's rates and the compiled engine's ratio over it, each on the same cores."""
    if r["mmasim_per_s"]:
        one = r["compiled_1_per_s"] / r["mmasim_1_per_s"]
        all_ = r[f"compiled_{cores}_per_s"] / r["mmasim_per_s"]
        return (
            f"{r['mmasim_1_per_s'] / 1e6:.2f} M / {r['mmasim_per_s'] / 1e6:.2f} M; "
            f"compiled {one:.0f}x / {all_:.0f}x (goal {MMASIM_GOAL:.0f}x); "
            f"bits equal: {r['mmasim_bits_equal']}"
        )
    return "not installed" if note else "no MMA-Sim form"


COMPILE_GOAL_S = 2.0
GPU_MAC_GOAL = 1e12
"""MAC/s of the GPU kernel on an H100 (dot products/s x K), FP8 k32 and fp16 k16."""


def gpu_rates(n: int, repeat: int) -> dict:
    """Dot products/s and MAC/s of the GPU kernel (engine='compiled', device='cuda') on
    each case, operands resident on the GPU as torch tensors, bits checked against
    numpy on the first rows; {'note': why not} where torch, CUDA or cuda-python is
    missing."""
    try:
        import torch

        if not torch.cuda.is_available():
            return {"note": "GPU kernel: no CUDA device here; not measured."}
        from tensorcore_smt.engine.cuda import check_gpu, run_rows_gpu

        check_gpu("cuda")
    except Exception as e:  # noqa: BLE001 - any missing piece is reported, not raised
        return {"note": f"GPU kernel: not measured here ({e})."}
    out = {"device": torch.cuda.get_device_name(0), "cases": []}
    for arch, instr, _, _ in CASES:
        p = tc.resolve(arch, instr)
        a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, 3)
        dev = [torch.from_numpy(x.astype(np.int64)).cuda() for x in (a, b, c)]
        got = run_rows_gpu(p, dev, "cuda")
        m = min(n, 20_000)
        want = simulate_params(p, a[:m], b[:m], c[:m], engine="numpy")
        t = best(lambda p=p, dev=dev: run_rows_gpu(p, dev, "cuda"), repeat)
        out["cases"].append(
            {
                "arch": arch,
                "instr": instr,
                "rows": n,
                "per_s": n / t,
                "macs_per_s": n * p.K / t,
                "bits_equal": bool(np.array_equal(got[:m], want)),
            }
        )
    return out


def compile_survey() -> dict:
    """Compile time (empty cache) and loop plan of the kernel of every distinct instruction
    model of every preset (uint64 operand arrays, as validation hands them over)."""
    from tensorcore_smt.engine.loops import loop_plan
    from tensorcore_smt.spec.presets import PRESETS

    seen: dict = {}
    for arch, preset in PRESETS.items():
        for name, ins in preset.instructions.items():
            seen.setdefault(ins.params, (arch, name))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        os.environ["TCSMT_CACHE"] = d
        try:
            for p, (arch, name) in seen.items():
                kernel._KERNELS.clear()
                dag = instruction_dag(p)
                plan = loop_plan(dag.root, dag.nodes)
                n_ops = len(kernel.operands(p))
                t0 = time.perf_counter()
                kernel.cpu_kernel(p, (64,) * n_ops)
                rows.append(
                    {
                        "arch": arch,
                        "instr": name,
                        "nodes": dag.nodes,
                        "lanes": plan.lanes if plan.tiled else 1,
                        "compile_s": time.perf_counter() - t0,
                    }
                )
        finally:
            del os.environ["TCSMT_CACHE"]
    times = sorted(r["compile_s"] for r in rows)
    return {
        "models": len(rows),
        "median_s": times[len(times) // 2],
        "max_s": times[-1],
        "over_goal": [r for r in rows if r["compile_s"] > COMPILE_GOAL_S],
        "slowest": sorted(rows, key=lambda r: -r["compile_s"])[:5],
    }


def markdown(res: dict) -> str:
    cores = res["cores"]
    r0 = res["instructions"][0]
    out = [
        "# The compiled engine (bench/bench_engine.py)",
        "",
        f"Machine: {res['machine']}, {cores} cores, load average {res['load']} at the start "
        f"(other processes share the cores; every figure below is wall time). "
        f"numpy on {res['rows']:,} rows of validation/rows.py's mix per instruction, the "
        f"compiled kernel on those rows repeated to {r0['compiled_rows']:,} (so that a run "
        "lasts long enough to time the threads), bits equal to the numpy interpreter on "
        "every run.",
        "",
        f"| instruction | DAG nodes | numpy /s | compiled 1 core /s | ratio (goal) | "
        f"compiled {cores} cores /s | scaling (goal {SCALING_GOAL}) | compile s | load s | "
        f"MMA-Sim /s, torch on 1 / {cores} threads; compiled over it on the same cores |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in res["instructions"]:
        mm = _mmasim_cell(r, cores, res.get("mmasim_note"))
        out.append(
            f"| {r['arch']} {r['instr']} | {r['dag_nodes']:,} | {r['numpy_per_s'] / 1e6:.2f} M | "
            f"{r['compiled_1_per_s'] / 1e6:.2f} M | {r['ratio_1']:.1f}x ({r['goal']:.0f}x) | "
            f"{r[f'compiled_{cores}_per_s'] / 1e6:.2f} M | {r['scaling']:.2f} | "
            f"{r['compile_s']:.2f} | {r['load_s']:.3f} | {mm} |"
        )
    out += [
        "",
        "The same single-threaded runs timed by the thread's CPU time (what the work took, "
        "whatever else ran on the cores):",
        "",
        "| instruction | numpy /CPU-s | compiled /CPU-s | ratio (goal) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in res["instructions"]:
        out.append(
            f"| {r['arch']} {r['instr']} | {r['numpy_per_cpu_s'] / 1e6:.2f} M | "
            f"{r['compiled_1_per_cpu_s'] / 1e6:.2f} M | {r['ratio_cpu']:.1f}x ({r['goal']:.0f}x) |"
        )
    out += [
        "",
        "Small batches with the kernel already compiled (seconds per call, numpy / compiled):",
        "",
        "| instruction | 1 row | 100 rows | 10,000 rows | compiling pays from |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in res["instructions"]:
        s = r["small_batches_s"]
        cells = [f"{s[k]['numpy']:.2e} / {s[k]['compiled']:.2e}" for k in ("1", "100", "10000")]
        out.append(
            f"| {r['arch']} {r['instr']} | {' | '.join(cells)} | "
            f"{r['compile_pays_from_rows']:,.0f} rows |"
        )
    if res["gemms"]:
        out += [
            "",
            "GEMMs (tensorcore_smt.matmul, engine='compiled', all cores; numpy on the first "
            "rows of A for its rate and the bit check):",
            "",
            "| GEMM | hypothesis | seconds | MAC/s | numpy MAC/s | bits equal |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for g in res["gemms"]:
            out.append(
                f"| {g['gemm']} | `{g['hypothesis']}` | {g['seconds']:.2f} | "
                f"{g['macs_per_s']:.3g} | {g['numpy_macs_per_s']:.3g} | "
                f"{g['bits_equal_on_numpy_rows']} |"
            )
    cs = res.get("compile")
    if cs:
        out += [
            "",
            f"Compile times, every distinct instruction model of every preset ({cs['models']}, "
            f"empty cache, DAG building included): median {cs['median_s']:.2f} s, max "
            f"{cs['max_s']:.2f} s; {len(cs['over_goal'])} over the {COMPILE_GOAL_S:.0f} s goal. "
            "Slowest (lanes: SIMD lanes of the row loop, 1 = scalar; engine/loops.py):",
            "",
            "| instruction | DAG nodes | lanes | compile s |",
            "| --- | ---: | ---: | ---: |",
        ]
        for r in cs["slowest"]:
            lanes = r["lanes"] if r["lanes"] is not None else "LLVM's"
            out.append(
                f"| {r['arch']} {r['instr']} | {r['nodes']:,} | {lanes} | {r['compile_s']:.2f} |"
            )
    g = res.get("gpu") or {}
    if g.get("cases"):
        out += [
            "",
            f"GPU kernel on {g['device']} (operands resident as torch tensors; goal "
            f"{GPU_MAC_GOAL:.0e} MAC/s):",
            "",
            "| instruction | rows | dot products/s | MAC/s | bits equal |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for r in g["cases"]:
            out.append(
                f"| {r['arch']} {r['instr']} | {r['rows']:,} | {r['per_s']:.3g} | "
                f"{r['macs_per_s']:.3g} | {r['bits_equal']} |"
            )
    elif g.get("note"):
        out += ["", g["note"]]
    if res.get("vectors"):
        out += engine_vectors.markdown(res["vectors"])
    if res.get("mmasim_note"):
        out += ["", res["mmasim_note"]]
    return "\n".join(out) + "\n"


def vectors() -> dict:
    """The chain kernels' vector widths and the bf16 time split (bench/engine_vectors.py)."""
    from tensorcore_smt.engine import jit

    return {
        "cpu": f"{jit.llvm.get_host_cpu_name()}, load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "rows": engine_vectors.vector_rows(),
        "split": engine_vectors.bf16_split(),
        "fp32": engine_vectors.fp32_rates(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows per instruction")
    ap.add_argument(
        "--copies", type=int, default=10, help="the rows repeated this often for the kernel"
    )
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    ap.add_argument("--no-gemm", action="store_true", help="skip the GEMM figures")
    ap.add_argument("--gpu-rows", type=int, default=1 << 24, help="rows on the GPU")
    ap.add_argument(
        "--no-compile-survey", action="store_true", help="skip compiling every instruction"
    )
    ap.add_argument("--write", default=None, help="folder for engine.md and engine.json")
    ap.add_argument(
        "--vectors-only",
        action="store_true",
        help="recompute only the vector widths and the time split (keeping the rest of "
        "--write's engine.json)",
    )
    args = ap.parse_args()
    if args.vectors_only:
        d = Path(args.write or "results")
        res = json.loads((d / "engine.json").read_text())
        res["vectors"] = vectors()
        (d / "engine.json").write_text(json.dumps(res, indent=1) + "\n")
        (d / "engine.md").write_text(markdown(res))
        print(f"wrote {d / 'engine.md'} and {d / 'engine.json'}")
        return
    cores = kernel.threads()
    res = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cores": cores,
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "rows": args.rows,
        "instructions": [],
        "gemms": [],
    }
    if importlib.util.find_spec("mmasim") is None:
        res["mmasim_note"] = (
            "MMA-Sim: not importable here (needs the mmasim extra and torch); skipped."
        )
        print(res["mmasim_note"])
    for arch, instr, goal, mm in CASES:
        r = bench_instruction(arch, instr, goal, mm, args.rows, args.repeat, cores, args.copies)
        res["instructions"].append(r)
        print(
            f"{arch} {instr}: numpy {r['numpy_per_s'] / 1e6:.2f} M/s, compiled 1 core "
            f"{r['compiled_1_per_s'] / 1e6:.2f} M/s ({r['ratio_1']:.1f}x, goal {goal:.0f}x; by CPU "
            f"time {r['ratio_cpu']:.1f}x), "
            f"{cores} cores {r[f'compiled_{cores}_per_s'] / 1e6:.2f} M/s (scaling "
            f"{r['scaling']:.2f}, goal {SCALING_GOAL}), compile {r['compile_s']:.2f} s, "
            f"load {r['load_s']:.3f} s, bits equal: {r['bits_equal']}",
            flush=True,
        )
    if not args.no_gemm:
        for name, hyp, dt, M, N, K in GEMMS:
            g = bench_gemm(name, hyp, dt, M, N, K, m_numpy=4)
            res["gemms"].append(g)
            print(
                f"GEMM {name} {hyp}: {g['seconds']:.2f} s, {g['macs_per_s']:.3g} MAC/s "
                f"(numpy {g['numpy_macs_per_s']:.3g}), bits equal: {g['bits_equal_on_numpy_rows']}",
                flush=True,
            )
    res["gpu"] = gpu_rates(args.gpu_rows, args.repeat)
    print(res["gpu"].get("note") or res["gpu"], flush=True)
    if not args.no_compile_survey:
        cs = res["compile"] = compile_survey()
        print(
            f"compile: {cs['models']} instruction models, median {cs['median_s']:.2f} s, "
            f"max {cs['max_s']:.2f} s, {len(cs['over_goal'])} over {COMPILE_GOAL_S:.0f} s",
            flush=True,
        )
    res["vectors"] = vectors()
    if args.write:
        d = Path(args.write)
        d.mkdir(parents=True, exist_ok=True)
        (d / "engine.json").write_text(json.dumps(res, indent=1) + "\n")
        (d / "engine.md").write_text(markdown(res))
        print(f"wrote {d / 'engine.md'} and {d / 'engine.json'}")


if __name__ == "__main__":
    main()
