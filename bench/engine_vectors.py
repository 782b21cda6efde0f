"""The GEMM runner's chain kernels as LLVM vectorised them, and where a GEMM's time goes.

Part of bench/bench_engine.py (its "vectors" section of results/engine.md and
engine.json; `--vectors-only` recomputes this section alone). For one instruction of
each family the chain kernel's lane loop is described by engine/vectors.py: the SIMD
lanes, the vector types it computes in and the widest register of the machine code in
its largest block. `time_split` compares a whole `tc.matmul` call with the one chain
kernel call inside it (one thread, best CPU time of several; the outputs in the order
the runner hands them over, compiled.panel_order): the rest is the Python
and numpy around the kernel (operand tables, index arrays, the result's conversion).
"""

from __future__ import annotations

import os
import time

import ml_dtypes
import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.engine.vectors import loop_vectors
from tensorcore_smt.gemm import compiled

KERNELS = {
    "fp64 formulation": compiled.float_chain_ir,
    "general": compiled.chain_ir,
    "binary32 fma": compiled.fma_chain_ir,
}
"""The chain kernels by name: the IR each makes for an instruction."""
FAMILIES = [
    # family, arch, instruction, operand container bits, kernel (KERNELS)
    ("bf16 wgmma", "hopper", "wgmma.m64n8k16.f32.bf16.bf16", 16, "fp64 formulation"),
    ("bf16 wgmma", "hopper", "wgmma.m64n8k16.f32.bf16.bf16", 16, "general"),
    ("fp16 wgmma", "hopper", "wgmma.m64n8k16.f32.f16.f16", 16, "fp64 formulation"),
    ("fp16 wgmma", "hopper", "wgmma.m64n8k16.f32.f16.f16", 16, "general"),
    ("e4m3 wgmma", "hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", 8, "general"),
    ("fp32 FFMA chain (SGEMM)", "hopper", "fma.rn.f32", 32, "binary32 fma"),
    ("fp32 FFMA chain (SGEMM)", "hopper", "fma.rn.f32", 32, "general"),
]
"""The instruction families of issue 45 (fp16/bf16 and e4m3 products, fp32 FFMA)."""
BF16 = "wgmma.m64n8k16.f32.bf16.bf16"


def vector_rows() -> list[dict]:
    """One row per entry of FAMILIES: lanes, IR operations of the loop, vector types,
    machine instructions of its largest block by register width."""
    rows = []
    for family, arch, instr, bits, kind in FAMILIES:
        p = tc.resolve(arch, instr)
        ir, vectorize = KERNELS[kind](p, bits, bits)
        r = loop_vectors(ir, vectorize)
        asm = r.asm
        rows.append(
            {
                "family": family,
                "instr": f"{arch} {instr}",
                "kernel": kind,
                "lanes": r.lanes,
                "ops": r.ops,
                "types": r.summary(),
                "asm": {k: asm.get(k, 0) for k in ("zmm", "ymm", "xmm", "scalar")},
            }
        )
        print(f"vectors: {family} {rows[-1]['kernel']}: {r.lanes} lanes, {r.summary()}")
    return rows


def time_split(hyp: str, instr: str, dtype, M: int, K: int, N: int, repeat: int = 5) -> dict:
    """CPU seconds of `tc.matmul(hyp, A, B)` and of the chain kernel call inside it, one
    thread, best of `repeat`; `hyp`: an architecture whose schedule for these operands
    is one chain of `instr` (hopper: serial) in the fp64 formulation."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    old = os.environ.get("TCSMT_THREADS")
    os.environ["TCSMT_THREADS"] = "1"
    try:
        D = tc.matmul(hyp, A, B, engine="compiled")
        best_total = min(
            _cpu(lambda: tc.matmul(hyp, A, B, engine="compiled")) for _ in range(repeat)
        )
        p = tc.resolve(hyp, instr)
        a = np.ascontiguousarray(A).view(np.uint16 if A.itemsize == 2 else np.uint8)
        b = np.ascontiguousarray(B).view(np.uint16 if B.itemsize == 2 else np.uint8)
        t = compiled._Tables(p, a.T, b)
        fn = compiled._float_chain_fn(p, *t.bits)
        n = M * N
        ia = np.repeat(np.arange(M, dtype=np.int64), N)
        ib = np.tile(np.arange(N, dtype=np.int64), M)
        order = compiled.panel_order(ia, ib)  # as the runner hands them over
        if order is not None:
            ia, ib = ia[order], ib[order]
        chain = (np.arange(K // p.K, dtype=np.int64), np.array([K // p.K], dtype=np.int64))
        zero = np.zeros(n, dtype=np.uint64)
        out = t.run(fn, chain, ia, ib, zero)
        if order is not None:
            out[order] = out.copy()
        best_kernel = min(_cpu(lambda: t.run(fn, chain, ia, ib, zero)) for _ in range(repeat))
    finally:
        if old is None:
            del os.environ["TCSMT_THREADS"]
        else:
            os.environ["TCSMT_THREADS"] = old
    raw = np.dtype(f"u{D.dtype.itemsize}")
    equal = bool(np.array_equal(D.reshape(-1).view(raw), out.astype(raw)))
    return {
        "hypothesis": hyp,
        "shape": f"{M} x {K} x {N}",
        "total_cpu_s": best_total,
        "kernel_cpu_s": best_kernel,
        "kernel_share": best_kernel / best_total,
        "gmacs_per_cpu_s": M * K * N / best_total / 1e9,
        "bits_equal": equal,
    }


def _cpu(fn) -> float:
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def bf16_split() -> dict:
    """`time_split` on hopper bf16 at 128 x 512 x 2048 and at Qwen3-4B's gate_proj
    width (250 x 2560 x 9728 scaled to 64 rows)."""
    return {
        "cases": [
            time_split("hopper", BF16, ml_dtypes.bfloat16, 128, 512, 2048),
            time_split("hopper", BF16, ml_dtypes.bfloat16, 64, 2560, 9728),
        ]
    }


FP32_SHAPES = [
    (64, 512, 1024, "general"),
    (64, 512, 1024, "binary32 fma"),
    (256, 2048, 2048, "binary32 fma"),
]
"""fp32 GEMMs timed through the FFMA chain (M, K, N, kernel): the general kernel is
about 150x slower, so it gets the small shape only."""


def fp32_rates(repeat: int = 3) -> dict:
    """`tc.matmul("hopper", A, B, instr="fma.rn.f32")` on fp32 operands, one thread,
    best CPU time of `repeat`, with the binary32 fma kernel and with the general kernel
    (ieee_fma.applies answering no), bits compared between the two on the small shape."""
    from tensorcore_smt.engine import ieee_fma

    old = os.environ.get("TCSMT_THREADS")
    os.environ["TCSMT_THREADS"] = "1"
    cases, seen = [], {}
    real = ieee_fma.applies
    try:
        for M, K, N, kind in FP32_SHAPES:
            rng = np.random.default_rng(M * K * N)  # the same operands for both kernels
            A = rng.standard_normal((M, K)).astype(np.float32)
            B = rng.standard_normal((K, N)).astype(np.float32)
            if kind == "general":
                ieee_fma.applies = lambda p: False
            try:

                def run(A=A, B=B):
                    return tc.matmul("hopper", A, B, instr="fma.rn.f32", engine="compiled")

                D = run()
                t = min(_cpu(run) for _ in range(repeat if kind != "general" else 1))
            finally:
                ieee_fma.applies = real
            key = (M, K, N)
            equal = None
            if key in seen:
                equal = bool(np.array_equal(seen[key], D.view(np.uint32)))
            else:
                seen[key] = D.view(np.uint32)
            cases.append(
                {"shape": f"{M} x {K} x {N}", "kernel": kind, "cpu_s": t,
                 "gmacs_per_cpu_s": M * K * N / t / 1e9, "bits_equal_general": equal}
            )  # fmt: skip
    finally:
        if old is None:
            del os.environ["TCSMT_THREADS"]
        else:
            os.environ["TCSMT_THREADS"] = old
    return {"cases": cases, "load": os.getloadavg()[0]}


def markdown(v: dict) -> list[str]:
    """The section of results/engine.md."""
    out = [
        "",
        "Chain kernels of the GEMM runner as LLVM vectorised them (engine/vectors.py; "
        "lanes: outputs per vector instruction of the lane loop, 1 = scalar; machine "
        f"code: instructions of the largest block by widest register; {v['cpu']}):",
        "",
        "| family | instruction | kernel | lanes | loop IR ops | main vector types (IR ops) "
        "| zmm / ymm / xmm / scalar instructions |",
        "| --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for r in v["rows"]:
        a = r["asm"]
        out.append(
            f"| {r['family']} | {r['instr']} | {r['kernel']} | {r['lanes']} | {r['ops']} | "
            f"{r['types']} | {a['zmm']} / {a['ymm']} / {a['xmm']} / {a['scalar']} |"
        )
    s = v.get("split")
    if s:
        out += [
            "",
            "Where a bf16 GEMM's time goes (`tc.matmul('hopper', A, B)`, one thread, best "
            "CPU time of 5; the chain kernel called alone on the same tables):",
            "",
            "| shape (M x K x N) | tc.matmul CPU s | kernel CPU s | kernel share | "
            "G MAC per CPU s | bits equal |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for c in s["cases"]:
            out.append(
                f"| {c['shape']} | {c['total_cpu_s']:.3f} | {c['kernel_cpu_s']:.3f} | "
                f"{c['kernel_share']:.0%} | {c['gmacs_per_cpu_s']:.2f} | {c['bits_equal']} |"
            )
    f = v.get("fp32")
    if f:
        out += [
            "",
            "fp32 GEMMs through the FFMA chain (`tc.matmul('hopper', A, B, "
            "instr='fma.rn.f32')`, one thread, best CPU time; the binary32 fma kernel and "
            f"the general one; load average {f['load']:.1f}):",
            "",
            "| shape (M x K x N) | kernel | CPU s | G MAC per CPU s | bits equal to the general kernel |",
            "| --- | --- | ---: | ---: | --- |",
        ]
        for c in f["cases"]:
            eq = "-" if c["bits_equal_general"] is None else str(c["bits_equal_general"])
            out.append(
                f"| {c['shape']} | {c['kernel']} | {c['cpu_s']:.3f} | "
                f"{c['gmacs_per_cpu_s']:.3f} | {eq} |"
            )
    return out
