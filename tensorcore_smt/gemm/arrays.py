"""Arrays at the GEMM level: numpy / ml_dtypes float dtypes <-> formats, bit patterns,
and torch tensors in and out (torch imported only when a tensor is given)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..formats import Format

DTYPE_FORMAT: dict[np.dtype, Format] = {
    np.dtype(np.float64): Format.FP64,
    np.dtype(np.float32): Format.FP32,
    np.dtype(np.float16): Format.FP16,
    np.dtype(ml_dtypes.bfloat16): Format.BF16,
    np.dtype(ml_dtypes.float8_e4m3fn): Format.E4M3,
    np.dtype(ml_dtypes.float8_e5m2): Format.E5M2,
    np.dtype(ml_dtypes.float8_e4m3fnuz): Format.E4M3FNUZ,
    np.dtype(ml_dtypes.float8_e5m2fnuz): Format.E5M2FNUZ,
    np.dtype(np.int8): Format.S8,
    np.dtype(np.int32): Format.S32,
}
"""The dtype of each format a GEMM reads or writes (float32 arrays also carry TF32
operands: a TF32 instruction reads their top 19 bits; int8 and int32 arrays the s8 and
s32 integers; u8, u4 and s4 operands come as unsigned bit patterns)."""

FORMAT_DTYPE: dict[Format, np.dtype] = {f: d for d, f in DTYPE_FORMAT.items()}
FORMAT_DTYPE[Format.TF32] = np.dtype(np.float32)


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "device")


def torch_to_numpy(t: Any) -> np.ndarray:
    """A torch tensor as a numpy array of the matching (ml_dtypes) dtype, bits unchanged."""
    import torch

    t = t.detach().cpu().contiguous()
    names = {
        torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
        torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
        torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
        torch.float8_e4m3fnuz: (torch.uint8, ml_dtypes.float8_e4m3fnuz),
        torch.float8_e5m2fnuz: (torch.uint8, ml_dtypes.float8_e5m2fnuz),
    }
    if t.dtype in names:
        as_int, dt = names[t.dtype]
        return t.view(as_int).numpy().view(dt)
    try:
        return t.numpy()
    except TypeError as e:
        raise UserError(f"a torch tensor of dtype {t.dtype} has no GEMM format: {e}") from None


def numpy_to_torch(a: np.ndarray, device: Any) -> Any:
    """A numpy array (ml_dtypes dtypes too) as a torch tensor on `device`, bits unchanged."""
    import torch

    views = {
        np.dtype(ml_dtypes.bfloat16): (np.int16, torch.bfloat16),
        np.dtype(ml_dtypes.float8_e4m3fn): (np.uint8, torch.float8_e4m3fn),
        np.dtype(ml_dtypes.float8_e5m2): (np.uint8, torch.float8_e5m2),
    }
    a = np.ascontiguousarray(a)
    if a.dtype in views:
        as_int, dt = views[a.dtype]
        return torch.from_numpy(a.view(as_int)).view(dt).to(device)
    return torch.from_numpy(a).to(device)


def format_of(a: np.ndarray, what: str) -> Format | None:
    """The format of a float array, None for unsigned bit patterns; UserError otherwise."""
    if a.dtype.kind == "u":
        return None
    f = DTYPE_FORMAT.get(a.dtype)
    if f is None:
        known = ", ".join(str(d) for d in DTYPE_FORMAT)
        raise UserError(f"{what}: dtype {a.dtype} is not a GEMM input; allowed: {known}, uint")
    return f


def fits(dtype_fmt: Format, fmt: Format) -> bool:
    """Whether arrays of `dtype_fmt` carry operands of `fmt` unchanged (same format, or
    float32 arrays for TF32)."""
    return dtype_fmt == fmt or (dtype_fmt == Format.FP32 and fmt == Format.TF32)


def holds(src: Format, dst: Format) -> bool:
    """Whether every value of `src` is a value of `dst` (fp16 and bf16 in fp32, FP8 in
    bf16 and fp16, ...): a conversion from src to dst never rounds."""
    s, t = src.spec, dst.spec
    return s.mbits <= t.mbits and s.emax <= t.emax and s.emin - s.mbits >= t.emin - t.mbits


def bits_of(a: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """Bit patterns (unsigned, of the format's storage width) of a float array in `fmt`
    or of an unsigned array (range-checked)."""
    w = fmt.spec.storage
    dt = UNSIGNED.get(w)
    if dt is None and fmt.spec.is_integer:  # s4, u4, b1: patterns in a byte
        dt = UNSIGNED[8]
    if dt is None:
        raise UserError(f"{what}: {fmt.spec.name} operands are not supported by matmul")
    if a.dtype.kind == "u":
        if a.size and int(a.max()) >> w:
            raise UserError(f"{what}: a value does not fit in {w}-bit {fmt.spec.name}")
        return a.astype(dt, copy=False)
    return a.view(dt) if a.dtype.itemsize * 8 == w else a.astype(FORMAT_DTYPE[fmt]).view(dt)


def to_format(a: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """Bits of `a` in `fmt`: unchanged when `a` is in it, converted when every value of
    a's format is a value of `fmt` (fp16/bf16 -> fp32, for example); UserError when a
    conversion could round."""
    f = format_of(a, what)
    if f is None or fits(f, fmt):
        return bits_of(a, fmt, what)
    if not (holds(f, fmt) and fmt in FORMAT_DTYPE):
        raise UserError(
            f"{what}: {a.dtype} values do not all fit {fmt.spec.name}; give {fmt.spec.name}"
        )
    return bits_of(a.astype(FORMAT_DTYPE[fmt]), fmt, what)


def from_bits(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Output bit patterns as an array of the format's float dtype."""
    dt = FORMAT_DTYPE.get(fmt)
    raw = bits.astype(UNSIGNED[fmt.spec.storage], copy=False)
    return raw.view(dt) if dt is not None else raw
