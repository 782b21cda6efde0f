"""How the formats of GEMM operands relate: which arrays carry an instruction's operands
unchanged, and which formats hold every value of another. Arrays themselves are read and
written by tensorcore_smt/intake.py."""

from __future__ import annotations

from ..formats import Format


def fits(dtype_fmt: Format, fmt: Format) -> bool:
    """Whether arrays of `dtype_fmt` carry operands of `fmt` unchanged (same format, or
    float32 arrays for TF32)."""
    return dtype_fmt == fmt or (dtype_fmt == Format.FP32 and fmt == Format.TF32)


def holds(src: Format, dst: Format) -> bool:
    """Whether every value of `src` is a value of `dst` (fp16 and bf16 in fp32, FP8 in
    bf16 and fp16, ...): a conversion from src to dst never rounds."""
    s, t = src.spec, dst.spec
    return s.mbits <= t.mbits and s.emax <= t.emax and s.emin - s.mbits >= t.emin - t.mbits
