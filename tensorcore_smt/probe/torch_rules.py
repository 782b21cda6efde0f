"""torch's argument rules for the GEMM calls the probes and the torch oracle make, written
once: what the CUDA kernels accept, which the CPU kernels do not all enforce.

Sources (torch 2.x): `torch._scaled_mm` checks in aten/src/ATen/native/cuda/Blas.cpp
(`_scaled_mm_out_cuda`): 2-D FP8 matrices, not both e5m2; mat1 row-major and mat2
column-major ("Only multiplication of row-major and column-major matrices is supported
by cuBLASLt"); mat1's columns and both of mat2's dimensions multiples of 16; fp32 scales,
one element each for per-tensor scaling; a bias of N elements, refused with an fp32
output ("Bias is not supported when out_dtype is set to Float32"), fp16 or bf16, bf16 for
a bf16 output and fp16 for an fp16 output. `torch.addmm` on CUDA: input, mat1 and mat2 of
one dtype. `torch.mm(..., out_dtype=torch.float32)`: fp16 or bf16 inputs, CUDA only.
"""

from __future__ import annotations

from typing import Any

from ..formats import Format

FP8_DTYPES = ("torch.float8_e4m3fn", "torch.float8_e5m2")
SCALED_MM_OUT = ("torch.float32", "torch.bfloat16", "torch.float16") + FP8_DTYPES


def scaled_mm_bias_format(out: Format) -> Format | None:
    """The format of the bias `torch._scaled_mm` takes for an output in `out` on CUDA: bf16
    for bf16 and FP8 outputs, fp16 for fp16; None for fp32 (no bias allowed)."""
    if out == Format.FP32:
        return None
    return Format.FP16 if out == Format.FP16 else Format.BF16


def _col_major(t: Any) -> bool:
    return t.dim() == 2 and t.stride(0) == 1 and t.stride(1) >= max(1, t.shape[0])


def _row_major(t: Any) -> bool:
    return t.dim() == 2 and t.stride(1) == 1 and t.stride(0) >= max(1, t.shape[1])


def scaled_mm_violations(
    a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any = None, out_dtype: Any = None
) -> list[str]:
    """The rules of CUDA `torch._scaled_mm` (per-tensor scales) these arguments break;
    empty when the call is valid. Arguments are torch tensors (or None)."""
    bad = []
    if a.dim() != 2 or b.dim() != 2:
        return [f"mat1 and mat2 must be matrices; got {tuple(a.shape)} and {tuple(b.shape)}"]
    if a.shape[1] != b.shape[0]:
        bad.append(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied")
    if a.shape[1] % 16:
        bad.append(f"mat1's trailing dimension {a.shape[1]} is not divisible by 16")
    if b.shape[0] % 16 or b.shape[1] % 16:
        bad.append(f"mat2 shape {tuple(b.shape)} is not divisible by 16")
    da, db = str(a.dtype), str(b.dtype)
    if da not in FP8_DTYPES or db not in FP8_DTYPES:
        bad.append(f"mat1 and mat2 must be float8; got {da} and {db}")
    elif da == db == "torch.float8_e5m2":
        bad.append("two float8_e5m2 matrices are not supported")
    if not _row_major(a):
        bad.append("mat1 must be row-major")
    if not _col_major(b):
        bad.append("mat2 must be column-major")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if str(s.dtype) != "torch.float32" or s.numel() != 1:
            bad.append(f"{name} must be a one-element float32 tensor")
    out = "torch.bfloat16" if out_dtype is None else str(out_dtype)
    if out not in SCALED_MM_OUT:
        bad.append(f"out_dtype {out} is not an output type")
    if bias is not None:
        bd = str(bias.dtype)
        if bias.numel() != b.shape[1]:
            bad.append(f"bias must have {b.shape[1]} elements; got {bias.numel()}")
        if out == "torch.float32":
            bad.append("bias is not supported when out_dtype is float32")
        elif bd not in ("torch.bfloat16", "torch.float16"):
            bad.append(f"bias must be float16 or bfloat16; got {bd}")
        elif out == "torch.bfloat16" and bd != "torch.bfloat16":
            bad.append("bias must be bfloat16 for a bfloat16 output")
        elif out == "torch.float16" and bd != "torch.float16":
            bad.append("bias must be float16 for a float16 output")
    return bad


def addmm_violations(c: Any, a: Any, b: Any) -> list[str]:
    """The rules of CUDA `torch.addmm(c, a, b)` these arguments break."""
    bad = []
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        bad.append(f"mat1 {tuple(a.shape)} and mat2 {tuple(b.shape)} cannot be multiplied")
    if not (c.dtype == a.dtype == b.dtype):
        bad.append(f"input, mat1 and mat2 must share a dtype; got {c.dtype}, {a.dtype}, {b.dtype}")
    return bad


def mm_out_dtype_violations(a: Any, b: Any, out_dtype: Any) -> list[str]:
    """The rules of CUDA `torch.mm(a, b, out_dtype=...)` these arguments break."""
    bad = []
    if a.dtype != b.dtype or str(a.dtype) not in ("torch.float16", "torch.bfloat16"):
        bad.append(f"mm(out_dtype=) takes two fp16 or two bf16 matrices; got {a.dtype}, {b.dtype}")
    if str(out_dtype) not in ("torch.float32", str(a.dtype)):
        bad.append(f"mm out_dtype {out_dtype} is neither float32 nor the inputs' dtype")
    return bad
