"""Sun et al., "Dissecting Tensor Cores via Microbenchmarks" (IEEE TPDS 2023) §8, reproduced
with the emulator (tensorcore_smt.matmul on the `ampere` preset: the paper's A100).

§8.1 (Tables 12-15): three one-element experiments on an m16n8k8 mma, D = A·B + C with all
other entries 0: multiplication d0 = a0·b0, inner-product addition d0 = a0·b0 + a1·b1,
accumulation d0 = a0·b0 + c0; mean |D_TC - D_CPU| against fp32 arithmetic on the CPU,
with the data drawn in fp32 (and converted for the tensor core) or drawn in the low
precision type (no conversion). As the paper states, one random stream serves every
experiment: a0 of the inner product is a0 of the accumulation and a1 is c0.

§8.2 (Figs. 19, 20): the chain matrix multiplication: A (16x8) and B (8x8) N(0, 1); N
times D = A·B on the tensor core (fp32 D, converted to the input type to become the next
A) and in fp32 on the CPU, a fresh B each step; the l2 relative error of Eq. (1),
||D^l - D^FP32|| / ||D^l||, averaged over the samples.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tensorcore_smt import matmul

ARCH = "ampere"
SEED = 2022
"""The seed of the §8.1 stream and of the §8.2 chains (the paper reuses one seed)."""

EXPERIMENTS = ("multiplication", "inner product", "accumulation")

# The paper's figures (mean absolute error w.r.t. fp32 on the CPU), quoted from §8.1.
PAPER = {
    "12": {"low": (0.0, 0.0, 1.89e-08), "fp32": (1.29e-03, 1.72e-03, 1.13e-03)},
    "13": {"low": (0.0, 0.0, 0.0), "fp32": (1.59e-04, 2.18e-04, 1.36e-04)},
    "14": {
        "low": (1.22e-04, 1.81e-04, 1.81e-04),
        "fp32": (1.94e-04, 2.99e-04, 2.99e-04),
        "low vs fp16(CPU)": (0.0, 0.0, 0.0),
        "fp32 vs fp16(CPU)": (1.67e-04, 2.21e-04, 2.21e-04),
    },
    "15": {"low": (0.0, 0.0, 0.0), "fp32": (1.59e-04, 2.17e-04, 1.36e-04)},
}


def to_tf32(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: round to 10 fraction bits, ties away from zero (PTX ISA, cvt)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


LOW = {
    "bf16": lambda x: x.astype(ml_dtypes.bfloat16),
    "fp16": lambda x: x.astype(np.float16),
    "tf32": to_tf32,
    # fp32 handed to the TF32 unit as it is: the unit reads the top 19 bits (MMA-Sim §IV-C)
    "tf32-raw": lambda x: x.astype(np.float32),
}

TABLES = {
    # table: (input type, instruction, C/D dtype)
    "12": ("bf16", "m16n8k8.f32.bf16.bf16.f32", np.float32),
    "13": ("fp16", "m16n8k8.f32.f16.f16.f32", np.float32),
    "14": ("fp16", "m16n8k8.f16.f16.f16.f16", np.float16),
    "15": ("tf32", "m16n8k8.f32.tf32.tf32.f32", np.float32),
}

CHAIN_INSTR = {
    "tf32": "m16n8k8.f32.tf32.tf32.f32",
    "bf16": "m16n8k8.f32.bf16.bf16.f32",
    "fp16": "m16n8k8.f32.f16.f16.f32",
}
"""§8.2: "we choose mma instructions with shape m16n8k8" (fp32 C/D)."""


def one_element(low, instr: str, cd, a: np.ndarray, b: np.ndarray, c: np.ndarray | None):
    """d0 of D = A·B + C on the tensor core for S samples: a, b (S, k) nonzero leading
    entries of A's first row and B's first column (the rest of K is 0), c (S,) or None."""
    S, k = a.shape
    A = np.zeros((S, 1, 8), dtype=low(np.zeros(1, np.float32)).dtype)
    B = np.zeros((S, 8, 1), dtype=A.dtype)
    A[:, 0, :k] = low(a)
    B[:, :k, 0] = low(b)
    C = np.zeros((S, 1, 1), dtype=cd)
    if c is not None:
        C[:, 0, 0] = c.astype(cd)
    D = matmul(ARCH, A, B, C, instr=instr)
    return D[:, 0, 0].astype(np.float64)


def cpu_fp32(exp: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """D_CPU in fp32 (each product and sum rounded, no FMA contraction)."""
    p0 = x[:, 0] * y[:, 0]
    if exp == "multiplication":
        return p0
    if exp == "inner product":
        return p0 + x[:, 1] * y[:, 1]
    return p0 + x[:, 1]


def element_table(table: str, samples: int) -> dict:
    """One of Tables 12-15: mean |error| per experiment and initialisation, with the
    share of samples in error and the spread of 100-sample means."""
    kind, instr, cd = TABLES[table]
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((samples, 2)).astype(np.float32)
    y = rng.standard_normal((samples, 2)).astype(np.float32)
    conversions = {"low": kind, "fp32": kind}
    if kind == "tf32":
        conversions["fp32 (raw bits)"] = "tf32-raw"
    out = {}
    for init, conv in conversions.items():
        low = LOW[conv]
        if init == "low":
            xs, ys = low(x).astype(np.float32), low(y).astype(np.float32)
        else:
            xs, ys = x, y
        cols: dict[str, list] = {}
        for exp in EXPERIMENTS:
            k = 2 if exp == "inner product" else 1
            c = xs[:, 1] if exp == "accumulation" else None
            d_tc = one_element(low, instr, cd, xs[:, :k], ys[:, :k], c)
            d_cpu = cpu_fp32(exp, xs, ys)
            refs = {"CPU_FP32": d_cpu.astype(np.float64)}
            if cd == np.float16:
                refs["CPU_FP32 cvt FP16"] = d_cpu.astype(np.float16).astype(np.float64)
            for ref, r in refs.items():
                err = np.abs(d_tc - r)
                blocks = err[: samples // 100 * 100].reshape(-1, 100).mean(axis=1)
                cols.setdefault(ref, []).append(
                    {
                        "mean": float(err.mean()),
                        "share_nonzero": float((err > 0).mean()),
                        "block100_p5": float(np.percentile(blocks, 5)) if len(blocks) else None,
                        "block100_p95": float(np.percentile(blocks, 95)) if len(blocks) else None,
                        "max": float(err.max()),
                    }
                )
        out[init] = cols
    return {"kind": kind, "instr": instr, "samples": samples, "results": out}


def chain(kind: str, init: str, samples: int, lengths: int) -> dict:
    """Fig. 20: the chain D = A·B, D -> next A, for N = 1 .. lengths."""
    instr = CHAIN_INSTR[kind]
    low = LOW[kind]
    rng = np.random.default_rng([SEED, ("bf16", "fp16", "tf32").index(kind)])

    def fresh(shape):
        v = rng.standard_normal(shape).astype(np.float32)
        return low(v).astype(np.float32) if init == "low" else v

    a_cpu = fresh((samples, 16, 8))
    a_tc = low(a_cpu)
    mean, finite_mean, overflow = [], [], []
    with np.errstate(all="ignore"):
        for _ in range(lengths):
            b_cpu = fresh((samples, 8, 8))
            d_cpu = np.matmul(a_cpu, b_cpu).astype(np.float64)
            d_tc = matmul(ARCH, a_tc, low(b_cpu), instr=instr).astype(np.float64)
            err = np.sqrt(((d_tc - d_cpu) ** 2).sum(axis=(1, 2))) / np.sqrt(
                (d_tc**2).sum(axis=(1, 2))
            )
            a_cpu = d_cpu.astype(np.float32)
            a_tc = low(d_tc.astype(np.float32))
            ok = np.isfinite(err) & np.isfinite(a_tc.astype(np.float32)).all(axis=(1, 2))
            mean.append(float(err.mean()) if ok.all() else float("inf"))
            finite_mean.append(float(err[ok].mean()) if ok.any() else None)
            overflow.append(float(1 - ok.mean()))
    return {
        "instr": instr,
        "samples": samples,
        "mean": mean,
        "finite_mean": finite_mean,
        "overflow_share": overflow,
    }


def run(element_samples: int, chain_samples: int, chain_lengths: int, log) -> dict:
    tables = {}
    for t in TABLES:
        tables[t] = element_table(t, element_samples)
        log(f"  Table {t}: done")
    chains = {}
    for kind in ("tf32", "bf16", "fp16"):
        for init in ("low", "fp32"):
            chains[f"{kind}/{init}"] = chain(kind, init, chain_samples, chain_lengths)
        log(f"  chain {kind}: done")
    return {
        "arch": ARCH,
        "seed": SEED,
        "paper": PAPER,
        "tables": tables,
        "chain": chains,
        "chain_lengths": chain_lengths,
    }
