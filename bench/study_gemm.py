"""The GEMM study (results/gemm.md and results/gemm/*.png), computed with the emulator.

    python bench/study_gemm.py [--quick] [--out results] [--engine numpy] [--jobs N]
    make study

Part 1, error against K: on every architecture preset, for fp16, bf16, tf32 and fp8
inputs (where the architecture has an instruction for them: the one libraries run,
schedules/instructions.toml), D = A·B for K = 16 .. 16384 under `serial` (one chain: what
libraries run for every input type) and, for fp8, `serial[promote=128]` (a new chain every
128 K elements, added into fp32: the cuBLAS FP8 default), against the exact product (integer arithmetic, tensorcore_smt.gemm.accuracy):
max and median error in ulps of the output, elementwise and normwise relative error.
The matrices are N(0, 1) draws rounded to the input format from recorded seeds; every K
uses the first K columns of A and rows of B.

Part 2, Sun et al. (IEEE TPDS 2023) §8 reproduced with the emulator (bench/study_sun.py):
Tables 12-15 and the chain matrix multiplication of Fig. 19/20.

`--quick` runs the smallest configuration (two architectures, two formats, two K, few
samples) into a scratch folder: what the test runs. `--jobs N` runs part 1 in N processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import study_report
import study_sun

from tensorcore_smt import __version__, matmul
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.gemm.accuracy import Exact, exact_matmul, grid_values, measure
from tensorcore_smt.gemm.hypothesis import default_instruction
from tensorcore_smt.spec.presets import PRESETS, parse_variant

SEED = 20221130
"""Base seed of every random matrix (recorded in the JSON with each draw's own seed)."""

SERIAL, PROMOTED = "serial", "serial[promote=128]"


@dataclass(frozen=True)
class InputKind:
    """One input type of the study: the array dtype that carries it, the format per vendor
    (AMD's fp8 is the FNUZ variant), and the schedules libraries run for it: one chain for
    fp16, bf16 and tf32 (cuBLAS, CUTLASS mainloops); one chain (fast accumulation) or a
    chain per 128 K elements promoted into fp32 (the default) for FP8."""

    name: str
    dtype: np.dtype
    fmt: Format
    amd_dtype: np.dtype | None = None
    amd_fmt: Format | None = None
    schedules: tuple[str, ...] = (SERIAL, PROMOTED)
    positive: bool = False  # draws from uniform [0, 1) instead of N(0, 1)


KINDS = (
    InputKind("fp16", np.dtype(np.float16), Format.FP16, schedules=(SERIAL,)),
    InputKind("bf16", np.dtype(ml_dtypes.bfloat16), Format.BF16, schedules=(SERIAL,)),
    # TF32 operands travel in float32 arrays (a TF32 instruction reads the top 19 bits);
    # the draws are rounded to TF32 first, so no input bit is ignored.
    InputKind("tf32", np.dtype(np.float32), Format.TF32, schedules=(SERIAL,)),
    InputKind(
        "fp8",
        np.dtype(ml_dtypes.float8_e4m3fn),
        Format.E4M3,
        np.dtype(ml_dtypes.float8_e4m3fnuz),
        Format.E4M3FNUZ,
    ),
    # FP8 on positive data (no cancellation: every error shows as a relative error)
    InputKind(
        "fp8-pos",
        np.dtype(ml_dtypes.float8_e4m3fn),
        Format.E4M3,
        np.dtype(ml_dtypes.float8_e4m3fnuz),
        Format.E4M3FNUZ,
        positive=True,
    ),
)

TF32_INSTR = {"cdna3": "v_mfma_f32_32x32x4_xf32"}
"""TF32 forms where the library table maps fp32 inputs to true-fp32 instructions: CDNA3's
xf32 MFMA (AMD CDNA3 ISA guide; hipBLASLt HIPBLASLT_COMPUTE_F32_FAST_XF32)."""


@dataclass(frozen=True)
class Config:
    """The sizes of one run of the study."""

    M: int
    N: int
    ks: tuple[int, ...]
    archs: tuple[str, ...]
    kinds: tuple[str, ...]
    chain_samples: int
    chain_lengths: int
    element_samples: int
    ablation_k: int
    ablation_mn: int


FULL = Config(
    M=32,
    N=32,
    ks=(16, 64, 256, 1024, 4096, 16384),
    archs=tuple(PRESETS),
    kinds=tuple(k.name for k in KINDS),
    chain_samples=1000,
    chain_lengths=30,
    element_samples=10000,
    ablation_k=2048,
    ablation_mn=16,
)
QUICK = Config(
    M=4,
    N=4,
    ks=(32, 1024),
    archs=("hopper", "blackwell"),
    kinds=("fp16", "fp8"),
    chain_samples=20,
    chain_lengths=3,
    element_samples=200,
    ablation_k=256,
    ablation_mn=4,
)


def kind(name: str) -> InputKind:
    return next(k for k in KINDS if k.name == name)


def vendor_format(arch: str, k: InputKind) -> tuple[np.dtype, Format]:
    if PRESETS[arch].vendor == "amd" and k.amd_fmt is not None:
        assert k.amd_dtype is not None
        return k.amd_dtype, k.amd_fmt
    return k.dtype, k.fmt


def study_instruction(arch: str, k: InputKind) -> str | None:
    """The instruction of `arch` for inputs of kind `k` (None: the architecture has none):
    the library default (schedules/instructions.toml), for TF32 the TF32 form."""
    _, fmt = vendor_format(arch, k)
    if k.fmt == Format.TF32:
        if arch in TF32_INSTR:
            return TF32_INSTR[arch]
        fmt = Format.FP32
    try:
        name = default_instruction(arch, fmt, fmt)
    except UserError:
        return None
    p = parse_variant(arch).params(name)
    return name if p.a_fmt == (Format.TF32 if k.fmt == Format.TF32 else fmt) else None


def draw(k: InputKind, dtype: np.dtype, shape, seed: int) -> np.ndarray:
    """N(0, 1) (uniform [0, 1) for a `positive` kind) float32 draws rounded to the input
    format (round to nearest)."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(0.0, 1.0, shape) if k.positive else rng.standard_normal(shape)).astype(
        np.float32
    )
    return study_sun.to_tf32(x) if k.fmt == Format.TF32 else x.astype(dtype)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@dataclass
class Task:
    """One unit (an instruction model) under one schedule on one input kind; `archs`: every
    (arch, instr) of the study whose instruction has exactly this model (the same bits)."""

    archs: list[tuple[str, str]]
    kind: str
    schedule: str
    seeds: tuple[int, int]


def run_task(task: Task, cfg: Config, engine: str | None) -> tuple[Task, dict]:
    """Emulate every K of one task: output bits, seconds and output dtype per K. Under
    `serial` each K continues the previous one's chain (C = D of the previous K joins as
    the chain's acc_0, so D(K2) = chain over K2 exactly; the test checks it against a
    direct call); a promoted schedule is run from scratch for every K."""
    arch, instr = task.archs[0]
    k = kind(task.kind)
    dtype, _ = vendor_format(arch, k)
    A = draw(k, dtype, (cfg.M, max(cfg.ks)), task.seeds[0])
    B = draw(k, dtype, (max(cfg.ks), cfg.N), task.seeds[1])
    out = {}
    D, prev = None, 0
    for K in cfg.ks:
        t0 = time.perf_counter()
        if task.schedule == SERIAL:
            D = matmul(
                arch, A[:, prev:K], B[prev:K], D, schedule=SERIAL, instr=instr, engine=engine
            )
        else:
            D = matmul(arch, A[:, :K], B[:K], schedule=task.schedule, instr=instr, engine=engine)
        prev = K
        out[K] = (bits(np.ascontiguousarray(D)).copy(), time.perf_counter() - t0, D.dtype)
    return task, out


def tasks_of(cfg: Config) -> list[Task]:
    """One task per (input kind, distinct instruction model, schedule)."""
    tasks = []
    for ki, kname in enumerate(cfg.kinds):
        k = kind(kname)
        units: dict = {}
        for arch in cfg.archs:
            instr = study_instruction(arch, k)
            if instr is not None:
                units.setdefault(parse_variant(arch).params(instr), []).append((arch, instr))
        for archs in units.values():
            for sched in k.schedules:
                tasks.append(Task(archs, kname, sched, (SEED + 2 * ki, SEED + 2 * ki + 1)))
    # longest first (steps = K / the instruction's K), so parallel workers finish together
    return sorted(tasks, key=lambda t: -_steps(t, cfg))


def _steps(t: Task, cfg: Config) -> int:
    arch, instr = t.archs[0]
    per = parse_variant(arch).params(instr).K
    return (max(cfg.ks) if t.schedule == SERIAL else sum(cfg.ks)) // per


def ksweep(cfg: Config, engine: str | None, jobs: int, log) -> dict:
    """Part 1: every (arch, kind, schedule) over the K sweep, measured against the exact
    product of the same matrices."""
    tasks = tasks_of(cfg)
    exact: dict[tuple[str, str, int], Exact] = {}
    rows = []
    t_start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _Serial() as pool:
        futures = [pool.submit(run_task, t, cfg, engine) for t in tasks]
        for fut in futures:
            task, out = fut.result()
            k = kind(task.kind)
            rep = task.archs[0][0]
            dtype, fmt = vendor_format(rep, k)
            A = draw(k, dtype, (cfg.M, max(cfg.ks)), task.seeds[0])
            B = draw(k, dtype, (max(cfg.ks), cfg.N), task.seeds[1])
            for K, (dbits, secs, d_dtype) in out.items():
                key = (task.kind, fmt.spec.name, K)
                if key not in exact:
                    exact[key] = exact_matmul(bits(A[:, :K]), fmt, bits(B[:K]), fmt)
                d_fmt = {2: Format.FP16, 4: Format.FP32}[np.dtype(d_dtype).itemsize]
                st = measure(dbits, d_fmt, exact[key])
                for arch, instr in task.archs:
                    rows.append(
                        {
                            "arch": arch,
                            "kind": task.kind,
                            "format": fmt.spec.name,
                            "instr": instr,
                            "schedule": task.schedule,
                            "K": K,
                            "seeds": list(task.seeds),
                            "computed_as": rep,
                            "seconds": round(secs, 3),
                            "d_sha256": hashlib.sha256(dbits.tobytes()).hexdigest()[:16],
                            **st.as_dict(),
                        }
                    )
            log(
                f"  {'/'.join(a for a, _ in task.archs):28s} {task.kind:5s} {task.schedule:20s}"
                f" K={max(cfg.ks)}: median {rows[-1]['median_ulps']:.3g} ulp, max "
                f"{rows[-1]['max_ulps']:.3g} ulp ({time.perf_counter() - t_start:.0f} s)"
            )
    return {
        "M": cfg.M,
        "N": cfg.N,
        "ks": list(cfg.ks),
        "distribution": "N(0,1) (fp8-pos: uniform [0, 1)) rounded to the input format",
        "seed": SEED,
        "rows": rows,
    }


ABLATION = (
    ("volta", "m8n8k4.f32.f16.f16.f32"),
    ("volta[F=24]", "m8n8k4.f32.f16.f16.f32"),
    ("turing", "m16n8k8.f32.f16.f16.f32"),
    ("turing[F=23]", "m16n8k8.f32.f16.f16.f32"),
)
"""Volta (F = 23) and Turing (F = 24) with each other's F: what the extra bit does."""


def toward_zero(dbits: np.ndarray, d_fmt: Format, exact: Exact) -> float:
    """Share of the inexact outputs with |d| < |exact| (1: every error shrinks D)."""
    gd = grid_values(dbits, d_fmt)
    lo = min(gd.lsb, exact.lsb)
    n = shrunk = 0
    for sig, sh, x in zip(gd.sig.reshape(-1), gd.shift.reshape(-1), exact.ints.reshape(-1)):
        d = abs(int(sig) << int(sh)) << (gd.lsb - lo)
        x = abs(int(x)) << (exact.lsb - lo)
        if d != x:
            n += 1
            shrunk += d < x
    return shrunk / n if n else 0.0


def ablation(cfg: Config, engine: str | None) -> list[dict]:
    """fp16 GEMMs of one K on Volta and Turing with F swapped (ABLATION)."""
    k = kind("fp16")
    ki = cfg.kinds.index("fp16") if "fp16" in cfg.kinds else 0
    K, mn = cfg.ablation_k, cfg.ablation_mn
    A = draw(k, k.dtype, (mn, K), SEED + 2 * ki)
    B = draw(k, k.dtype, (K, mn), SEED + 2 * ki + 1)
    ex = exact_matmul(bits(A), k.fmt, bits(B), k.fmt)
    out = []
    for arch, instr in ABLATION:
        D = matmul(arch, A, B, instr=instr, engine=engine)
        st = measure(bits(D), Format.FP32, ex)
        out.append(
            {
                "arch": arch,
                "instr": instr,
                "F": parse_variant(arch).params(instr).F,
                "K": K,
                "M": mn,
                "N": mn,
                "median_ulps": st.median_ulps,
                "normwise_rel": st.normwise,
                "toward_zero": toward_zero(bits(D), Format.FP32, ex),
            }
        )
    return out


class _Serial:
    """A stand-in for an executor that runs every task in this process, in order."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args):
        class Done:
            def __init__(self, value):
                self.value = value

            def result(self):
                return self.value

        return Done(fn(*args))


def compare_runs(data: dict, other: dict) -> dict:
    """Part 1 of this run against another run's: how many (arch, kind, schedule, K) outputs
    have the same bits (by their SHA-256), and the other run's engine and seconds."""

    def key(r):
        return (r["arch"], r["kind"], r["schedule"], r["K"])

    mine = {key(r): r["d_sha256"] for r in data.get("ksweep", {}).get("rows", [])}
    theirs = {key(r): r["d_sha256"] for r in other.get("ksweep", {}).get("rows", [])}
    both = sorted(set(mine) & set(theirs))
    return {
        "other_engine": other.get("meta", {}).get("engine"),
        "other_seconds": other.get("ksweep", {}).get("seconds"),
        "other_jobs": other.get("meta", {}).get("jobs", 1),
        "compared": len(both),
        "equal": sum(mine[k] == theirs[k] for k in both),
        "differ": [list(k) for k in both if mine[k] != theirs[k]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smallest configuration")
    ap.add_argument("--out", default=None, help="output folder (default results; --quick: a temp)")
    ap.add_argument("--engine", default=None, help="matmul engine (default: matmul's choice)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for part 1")
    ap.add_argument(
        "--parts", default="ksweep,sun", help="comma list of ksweep (with ablation), ablation, sun"
    )
    ap.add_argument(
        "--compare-with",
        default=None,
        help="a study.json of another run (e.g. another engine): count part 1 outputs that differ",
    )
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite gemm.md and plots from study.json"
    )
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.out is None:
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="study-gemm-")) if args.quick else Path("results")
    else:
        out = Path(args.out)
    figs = out / "gemm"
    figs.mkdir(parents=True, exist_ok=True)
    parts = set() if args.report_only else set(args.parts.split(","))
    data_path = figs / "study.json"
    data = json.loads(data_path.read_text()) if data_path.exists() else {}
    data["meta"] = (
        data.get("meta")
        if args.report_only
        else {
            "tensorcore_smt": __version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "engine": args.engine or "default (compiled for large GEMMs when it is built)",
            "jobs": args.jobs,
            "config": "quick" if args.quick else "full",
        }
    )

    def log(msg: str) -> None:
        print(msg, flush=True)

    t0 = time.perf_counter()
    if "ksweep" in parts:
        log("part 1: error against K")
        data["ksweep"] = ksweep(cfg, args.engine, args.jobs, log)
        data["ksweep"]["seconds"] = round(time.perf_counter() - t0, 1)
    if "ksweep" in parts or "ablation" in parts:
        data["ablation"] = ablation(cfg, args.engine)
        log("  ablation: done")
    if "sun" in parts:
        log("part 2: Sun et al. section 8")
        t1 = time.perf_counter()
        data["sun"] = study_sun.run(cfg.element_samples, cfg.chain_samples, cfg.chain_lengths, log)
        data["sun"]["seconds"] = round(time.perf_counter() - t1, 1)
    if args.compare_with:
        data["engine_check"] = compare_runs(data, json.loads(Path(args.compare_with).read_text()))
    data_path.write_text(json.dumps(data, indent=1) + "\n")
    study_report.write(data, out)
    log(f"wrote {out / 'gemm.md'} and {figs}/ ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
