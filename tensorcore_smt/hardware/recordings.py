"""GEMM recordings on the GPU: what torch (cuBLAS / cuBLASLt) returns for matrices drawn
from saved seeds, for the fitting of GEMM hypotheses without the GPU afterwards.

Two kinds of input, both regenerated bit for bit from their recipe by `inputs()` (numpy's
PCG64 stream is stable across numpy versions), so that a recording keeps only D:

- ``random``: A (M×K) and B (K×N) standard normal, rounded to the call's input format;
- ``pairs``: the cancellation probe of Xie, Gao, Wang, Xue, "Revealing Floating-Point
  Accumulation Orders in Software/Hardware Implementations" (USENIX ATC 2025), all pairs
  in one product: with M = N = K, product k of output (m, n) is +big at k = m, -big at
  k = n and one unit elsewhere (A = t + (s - t)·I, B = w + (d - w)·I with s·w = big,
  t·d = -big, t·w = unit). big/unit is at least 2^35, so a unit added to a partial sum
  holding ±big is lost; D[m][n] counts, in units, the products summed outside the
  subtree where m and n meet: the accumulation tree of the library, read off one call.

Each call of `CALLS` runs on every shape of the grid; D is kept whole up to 64×64 and as
a 64×64 sub-grid (rows and columns drawn from the seed, saved with it) beyond, in one
compressed .npz per call with the library versions in its metadata.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import ml_dtypes
import numpy as np

from ..errors import UserError
from ..formats import Format


class Kind(str, Enum):
    """What the matrices of a recording hold."""

    RANDOM = "random"
    PAIRS = "pairs"


class How(str, Enum):
    """How torch is asked for D."""

    MATMUL = "mm"  # torch.matmul
    MM_FP32 = "mm32"  # torch.mm with out_dtype=float32
    SCALED = "scaled"  # torch._scaled_mm with unit scales


@dataclass(frozen=True)
class Call:
    """One library call: its name, input format, the dtype of D, and how torch is asked."""

    name: str
    fmt: Format
    out: str
    how: How
    tf32: bool = False
    fast: bool = False


CALLS: tuple[Call, ...] = (
    Call("fp16", Format.FP16, "float16", How.MATMUL),
    Call("fp16-f32out", Format.FP16, "float32", How.MM_FP32),
    Call("bf16", Format.BF16, "bfloat16", How.MATMUL),
    Call("bf16-f32out", Format.BF16, "float32", How.MM_FP32),
    Call("tf32", Format.TF32, "float32", How.MATMUL, tf32=True),
    Call("fp32", Format.FP32, "float32", How.MATMUL),
    Call("e4m3-bf16out", Format.E4M3, "bfloat16", How.SCALED),
    Call("e4m3-bf16out-fast", Format.E4M3, "bfloat16", How.SCALED, fast=True),
    Call("e4m3-f32out", Format.E4M3, "float32", How.SCALED),
    Call("e4m3-f32out-fast", Format.E4M3, "float32", How.SCALED, fast=True),
)
"""The calls recorded (issue grid: fp16, bf16, tf32 and FP8 with and without fast
accumulation; fp32 full precision beside them)."""

SIZES_MN = (16, 64, 256, 1024)
SIZES_K = (32, 256, 1024, 4096)
PAIR_K = (32, 256, 1024)
KEEP = 64
"""Rows and columns of D kept per shape (a sub-grid beyond KEEP×KEEP)."""

NP_DTYPE = {
    Format.FP16: np.dtype(np.float16),
    Format.BF16: np.dtype(ml_dtypes.bfloat16),
    Format.TF32: np.dtype(np.float32),
    Format.FP32: np.dtype(np.float32),
    Format.E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
}

PAIR_VALUES: dict[Format, tuple[float, float, float, float]] = {
    # (s, t, w, d): big = s*w = -t*d, unit = t*w; big/unit = s/t.
    Format.FP16: (2.0**15, 2.0**-24, 2.0**-24, -(2.0**15)),  # 2^39 (t, w subnormal)
    Format.BF16: (2.0**17, 2.0**-20, 2.0**-20, -(2.0**17)),  # 2^37
    Format.TF32: (2.0**17, 2.0**-20, 2.0**-20, -(2.0**17)),
    Format.FP32: (2.0**17, 2.0**-20, 2.0**-20, -(2.0**17)),
}
"""Values of the pair probe per input format (powers of two, so exact in each)."""


def inputs(
    kind: Kind, fmt: Format, m: int, n: int, k: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """A (m×k) and B (k×n) of a recording, in the numpy dtype of `fmt`."""
    dt = NP_DTYPE[fmt]
    if kind == Kind.PAIRS:
        if not (m == n == k) or fmt not in PAIR_VALUES:
            raise UserError(f"pair probes need M = N = K and one of {sorted(PAIR_VALUES)}")
        s, t, w, d = PAIR_VALUES[fmt]
        a = np.full((k, k), t, np.float64)
        b = np.full((k, k), w, np.float64)
        np.fill_diagonal(a, s)
        np.fill_diagonal(b, d)
        return a.astype(dt), b.astype(dt)
    rng = np.random.Generator(np.random.PCG64([seed, m, n, k]))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    if fmt == Format.TF32:  # what the unit reads of an fp32 operand: round to 10 bits
        return _round_tf32(a), _round_tf32(b)
    return a.astype(dt), b.astype(dt)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 values rounded to nearest-even on TF32's 10 fraction bits (exact as fp32)."""
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


def kept(m: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns of D a recording keeps (all up to KEEP, else KEEP drawn)."""
    rng = np.random.Generator(np.random.PCG64([seed, m, n, 7]))
    rows = np.arange(m) if m <= KEEP else np.sort(rng.choice(m, KEEP, replace=False))
    cols = np.arange(n) if n <= KEEP else np.sort(rng.choice(n, KEEP, replace=False))
    return rows, cols


def digest(*arrays: np.ndarray) -> str:
    """A short hash of the inputs' bits, to check that a regeneration is the recording's."""
    h = hashlib.sha256()
    for x in arrays:
        h.update(np.ascontiguousarray(x).view(np.uint8).tobytes())
    return h.hexdigest()[:16]


def run_call(call: Call, a: np.ndarray, b: np.ndarray, device: str) -> np.ndarray:
    """D = A·B as torch computes it for `call` on `device`, as a numpy array."""
    import torch

    from ..intake import from_torch as torch_to_numpy
    from ..intake import to_torch as numpy_to_torch

    A = numpy_to_torch(a, device)
    B = numpy_to_torch(b, device)
    torch.backends.cuda.matmul.allow_tf32 = call.tf32
    out = getattr(torch, call.out)
    if call.how == How.MATMUL:
        D = torch.matmul(A, B)
    elif call.how == How.MM_FP32:
        D = torch.mm(A, B, out_dtype=out)
    else:
        one = torch.tensor(1.0, device=device)
        D = torch._scaled_mm(
            A,
            B.t().contiguous().t(),
            scale_a=one,
            scale_b=one,
            out_dtype=out,
            use_fast_accum=call.fast,
        )
    if device != "cpu":
        torch.cuda.synchronize()
    return torch_to_numpy(D)


def record(
    out: Path,
    device: str = "cuda",
    seed: int = 0,
    calls: tuple[Call, ...] = CALLS,
    sizes_mn: tuple[int, ...] = SIZES_MN,
    sizes_k: tuple[int, ...] = SIZES_K,
    pair_k: tuple[int, ...] = PAIR_K,
) -> list[dict]:
    """Record every call on every shape (random inputs) and the pair probes; one
    out/<call>.npz per call and out/recordings.json (what ran, what failed, seconds)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cublas": _cublas_version(),
        "device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu",
        "seed": seed,
    }
    summary = []
    for call in calls:
        t0 = time.monotonic()
        arrays: dict[str, np.ndarray] = {}
        index, errors = [], []
        shapes = [(Kind.RANDOM, m, n, k) for k in sizes_k for m in sizes_mn for n in sizes_mn]
        if call.fmt in PAIR_VALUES:
            shapes += [(Kind.PAIRS, k, k, k) for k in pair_k]
        for kind, m, n, k in shapes:
            tag = f"{kind.value}_{m}_{n}_{k}"
            a, b = inputs(kind, call.fmt, m, n, k, seed)
            try:
                d = run_call(call, a, b, device)
            except Exception as e:  # noqa: BLE001 - a refused call is recorded, not fatal
                errors.append({"shape": tag, "error": str(e).splitlines()[0][:200]})
                continue
            rows, cols = kept(m, n, seed) if kind == Kind.RANDOM else (np.arange(m),) * 2
            bits = np.ascontiguousarray(d[np.ix_(rows, cols)])
            arrays[f"{tag}_d"] = bits.view({2: np.uint16, 4: np.uint32}[bits.itemsize])
            arrays[f"{tag}_rows"] = rows.astype(np.int32)
            arrays[f"{tag}_cols"] = cols.astype(np.int32)
            index.append({"shape": tag, "digest": digest(a, b)})
        info = {**meta, "call": call.name, "shapes": index, "errors": errors}
        np.savez_compressed(out / f"{call.name}.npz", meta=json.dumps(info), **arrays)
        row = {
            "call": call.name,
            "recorded": len(index),
            "failed": len(errors),
            "seconds": round(time.monotonic() - t0, 1),
        }
        print(f"record {row}", flush=True)
        summary.append(row)
    (out / "recordings.json").write_text(json.dumps({**meta, "calls": summary}, indent=2) + "\n")
    return summary


def _cublas_version() -> str | None:
    try:
        import torch

        return str(torch._C._cuda_getCompiledVersion()) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a version string is informative only
        return None


__all__ = ["CALLS", "Call", "Kind", "digest", "inputs", "kept", "record", "run_call"]
