"""Operand arrays in and out: the one rule by which simulate, mma, matmul and validate read
a caller's operands as bit patterns, and write results.

An operand array of format `fmt` is accepted as:

- integer bit patterns (unsigned, or signed with no negative value), each within the
  format's `storage` bits; nested lists of Python ints too;
- an array of the format's own float dtype (`FORMAT_DTYPE`: float16 for fp16,
  ml_dtypes.bfloat16 for bf16, float8_e4m3fn for e4m3, float32 for fp32 and tf32, ...),
  read bit for bit;
- a float array of another dtype whose every value the format holds exactly, converted
  by value (a float32 array of 2.0 for an fp16 operand is 2.0 in fp16); a float dtype of
  the same width below 32 bits but another format (bfloat16 for fp16) is always refused,
  as a likely mix-up;
- a torch tensor, read the same way on the CPU (bfloat16 and float8 through ml_dtypes).

Anything else is one UserError naming the dtype expected. What the kernels receive is
the caller's memory itself wherever it can be: an unsigned array is passed as it is, a
float array of the format's dtype as a view of its bits, a signed array as an unsigned
view; only lists and by-value conversions make a new array. A range check costs one
pass over the data only where the array's element is wider than the format (a uint16
array for an e4m3 operand), never for an element exactly the format's width.
"""

from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import numpy as np

from .bv.dtypes import UNSIGNED, bit_view, unsigned_holding
from .errors import UserError
from .formats import Format

FORMAT_DTYPE: dict[Format, np.dtype] = {
    Format.FP64: np.dtype(np.float64),
    Format.FP32: np.dtype(np.float32),
    Format.TF32: np.dtype(np.float32),  # tf32 lives in 32 bits, low 13 ignored (PTX ISA)
    Format.FP16: np.dtype(np.float16),
    Format.BF16: np.dtype(ml_dtypes.bfloat16),
    Format.E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    Format.E5M2: np.dtype(ml_dtypes.float8_e5m2),
    Format.E3M2: np.dtype(ml_dtypes.float6_e3m2fn),
    Format.E2M3: np.dtype(ml_dtypes.float6_e2m3fn),
    Format.E2M1: np.dtype(ml_dtypes.float4_e2m1fn),
    Format.UE8M0: np.dtype(ml_dtypes.float8_e8m0fnu),
    Format.E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    Format.E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
}
"""The numpy / ml_dtypes dtype whose values are exactly the values of each format
(formats without one, e.g. ue4m3, take bit patterns only)."""

DTYPE_FORMAT: dict[np.dtype, Format] = {d: f for f, d in FORMAT_DTYPE.items() if f != Format.TF32}
"""The format a float array's dtype carries (float32 is fp32; a TF32 operand reads it)."""

_TORCH_VIEWS = (
    ("bfloat16", "int16", ml_dtypes.bfloat16),
    ("float8_e4m3fn", "uint8", ml_dtypes.float8_e4m3fn),
    ("float8_e5m2", "uint8", ml_dtypes.float8_e5m2),
    ("float8_e4m3fnuz", "uint8", ml_dtypes.float8_e4m3fnuz),
    ("float8_e5m2fnuz", "uint8", ml_dtypes.float8_e5m2fnuz),
)
"""torch dtypes numpy has no dtype for: (torch name, raw torch dtype, ml_dtypes dtype)."""


def is_torch(x: Any) -> bool:
    """Whether `x` is a torch tensor (torch is never imported to find out)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def from_torch(x: Any) -> Any:
    """A torch tensor as a numpy array of the same dtype, bits unchanged (bfloat16 and
    float8 through ml_dtypes); anything else unchanged."""
    if not is_torch(x):
        return x
    torch = sys.modules["torch"]
    t = x.detach().cpu()
    for name, raw, dt in _TORCH_VIEWS:
        if t.dtype == getattr(torch, name, None):
            return t.contiguous().view(getattr(torch, raw)).numpy().view(dt)
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise UserError(f"cannot read a torch tensor of dtype {t.dtype}: {e}") from None


def to_torch(a: np.ndarray, device: Any) -> Any:
    """A numpy array (ml_dtypes dtypes too) as a torch tensor on `device`, bits unchanged."""
    import torch

    a = np.ascontiguousarray(a)
    for name, raw, dt in _TORCH_VIEWS:
        if a.dtype == np.dtype(dt):
            raw_np = np.int16 if raw == "int16" else np.uint8
            return torch.from_numpy(a.view(raw_np)).view(getattr(torch, name)).to(device)
    return torch.from_numpy(a).to(device)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt in DTYPE_FORMAT


def native(a: np.ndarray) -> np.ndarray:
    """`a` in this machine's byte order: a big-endian array (`>f2`, as some files hold
    them) byte-swapped to the same values; a native array itself."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def format_of(a: np.ndarray, what: str) -> Format | None:
    """The format a float array carries (its dtype's, in either byte order), None for
    integer bit patterns; UserError for any other dtype."""
    dt = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
    if dt in DTYPE_INTEGER:
        return DTYPE_INTEGER[dt]
    if dt.kind in "ui":
        return None
    f = DTYPE_FORMAT.get(dt)
    if f is None:
        known = ", ".join(sorted({d.name for d in FORMAT_DTYPE.values()}))
        raise UserError(f"{what}: dtype {a.dtype} is not an operand dtype; allowed: {known}, uint")
    return f


def _expected(fmt: Format) -> str:
    dt = FORMAT_DTYPE.get(fmt)
    floats = f"{dt.name} values or " if dt is not None else ""
    return f"{floats}unsigned integer bit patterns of {fmt.spec.name}"


def _python_ints(x: Any, a: np.ndarray) -> np.ndarray:
    """Nested lists of Python ints as a uint64 array (`a`, numpy's own reading, when
    they are not all ints, or some do not fit in 64 unsigned bits)."""
    o = np.array(x, dtype=object)
    flat = o.reshape(-1)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
        return a
    if any(v < 0 or v >> 64 for v in flat):
        return a
    return o.astype(np.uint64)


def _int_bits(a: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """Integer bit patterns as an unsigned array (a view), range-checked: one pass when
    the element is wider than the format or signed, none when it is exactly as wide."""
    w = fmt.spec.storage
    bits = a.dtype.itemsize * 8
    u = bit_view(a) if bits in UNSIGNED else a
    if a.size and bits > w:
        # a negative signed value, viewed unsigned, is above every w-bit pattern too
        if int(u.max()) >> w:
            raise UserError(f"{what}: a value does not fit in {w}-bit {fmt.spec.name}")
    elif a.size and a.dtype.kind == "i" and int(a.min()) < 0:
        raise UserError(f"{what}: a value does not fit in {w}-bit {fmt.spec.name}")
    return u


INTEGER_DTYPE: dict[Format, np.dtype] = {
    Format.S8: np.dtype(np.int8),
    Format.U8: np.dtype(np.uint8),
    Format.S32: np.dtype(np.int32),
}
"""The numpy dtype whose values are exactly the values of an integer format (s4, u4 and
b1 operands come as patterns in a byte)."""

DTYPE_INTEGER: dict[np.dtype, Format] = {d: f for f, d in INTEGER_DTYPE.items() if d.kind == "i"}
"""The integer format a signed array's dtype carries in a GEMM (int8: s8, int32: s32);
unsigned arrays are bit patterns."""


def operand_formats(a: np.ndarray, b: np.ndarray) -> tuple[Format | None, Format | None]:
    """The formats GEMM operands A and B carry (`format_of`; None: bit patterns), where
    an unsigned array beside a signed integer operand (int8 A with uint8 B) holds the
    values of the unsigned integer format of its width (u8): the two are integer
    values, as an s8 x u8 instruction takes them, not a float and bit patterns."""
    fa, fb = format_of(a, "A"), format_of(b, "B")
    if fa is None and fb is not None and fb.spec.is_integer:
        fa = _UNSIGNED_INTEGER.get(a.dtype)
    elif fb is None and fa is not None and fa.spec.is_integer:
        fb = _UNSIGNED_INTEGER.get(b.dtype)
    return fa, fb


_UNSIGNED_INTEGER: dict[np.dtype, Format] = {
    d: f for f, d in INTEGER_DTYPE.items() if d.kind == "u"
}
"""The unsigned integer format of an unsigned array beside an integer operand (uint8: u8)."""


def integer_bits(a: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """Bit patterns of an integer operand: an array of the format's own dtype (int8 for
    s8, int32 for s32) read bit for bit (a view); other integer arrays hold patterns
    within the format's width, where a negative entry of a signed format is its value (-1
    is 0xff in s8), range-checked; floats are refused (UserError): integer operands given
    as floats are a likely mix-up."""
    s = fmt.spec
    lo, hi = s.int_range
    if a.dtype.kind not in "ui":
        raise UserError(
            f"{what}: got dtype {a.dtype}; {s.name} operands are integers (values "
            f"{lo}..{hi} or {s.storage}-bit patterns), not floats"
        )
    if a.dtype == INTEGER_DTYPE.get(fmt):
        return bit_view(a)
    if a.size:
        top, least = int(a.max()), int(a.min())
        if top >= 1 << s.storage:
            raise UserError(f"{what}: {top} does not fit in {s.storage}-bit {s.name}")
        if least < 0 and (not s.signed or least < lo):
            raise UserError(f"{what}: {least} is outside {s.name}'s range {lo}..{hi}")
    if a.dtype.kind == "u":
        return a
    return (a & ((1 << s.storage) - 1)).astype(bits_dtype(fmt))


def operand_bits(x: Any, fmt: Format, what: str) -> np.ndarray:
    """The bit patterns of operand array `what` in format `fmt` (module docstring): an
    unsigned array at least `fmt.spec.storage` bits wide, the caller's memory wherever it
    can be (not necessarily contiguous); UserError naming the dtype expected otherwise."""
    a = native(np.asarray(from_torch(x)))
    if fmt.spec.is_integer:
        return integer_bits(a, fmt, what)
    if a.dtype.kind in "fO" and isinstance(x, (list, tuple)):
        a = _python_ints(x, a)  # 64-bit patterns >= 2^63 make numpy choose float64
    if a.dtype.kind in "ui":
        return _int_bits(a, fmt, what)
    if not _is_float(a.dtype):
        raise UserError(f"{what}: got dtype {a.dtype}; expected {_expected(fmt)}")
    want = FORMAT_DTYPE.get(fmt)
    if want is None:
        raise UserError(
            f"{what}: {fmt.spec.name} has no float dtype; expected unsigned integer bit patterns"
        )
    if a.dtype != want:
        a = _by_value(a, want, fmt, what)
    return bit_view(a)


def _by_value(a: np.ndarray, want: np.dtype, fmt: Format, what: str) -> np.ndarray:
    """A float array of another dtype converted to `want` when every value is exactly a
    value of `fmt`; UserError otherwise, and always for a same-width dtype below 32 bits."""
    if a.dtype.itemsize == want.itemsize and a.dtype.itemsize < 4:
        raise UserError(
            f"{what}: got a {a.dtype.name} array for a {fmt.spec.name} operand; "
            f"expected {want.name} (convert it first if that is meant)"
        )
    with np.errstate(all="ignore"):
        conv = a.astype(want)
        back = conv.astype(a.dtype)
    same = (back == a) | (np.isnan(back.astype(np.float64)) & np.isnan(a.astype(np.float64)))
    if not bool(np.all(same)):
        bad = a.reshape(-1)[int(np.argmin(same.reshape(-1)))]
        raise UserError(
            f"{what}: {a.dtype.name} value {float(bad)!r} is not exactly a {fmt.spec.name} "
            f"number; expected {want.name} (or values it holds exactly)"
        )
    return conv


def bits_dtype(fmt: Format) -> np.dtype:
    """The narrowest unsigned dtype that holds a bit pattern of `fmt` (object beyond 64
    bits): the dtype results are written in."""
    if fmt.spec.storage > 64:
        return np.dtype(object)
    return unsigned_holding(fmt.spec.storage)


def from_bits(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Result bit patterns as an array of the format's float dtype (`FORMAT_DTYPE`), or
    unsigned of its width when it has none; a view when `bits` is already that wide."""
    raw = np.asarray(bits).astype(bits_dtype(fmt), copy=False)
    dt = FORMAT_DTYPE.get(fmt) or INTEGER_DTYPE.get(fmt)
    if dt is None or dt.itemsize != raw.dtype.itemsize:
        return raw
    return raw.view(dt)
