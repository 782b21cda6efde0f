"""Python API: simulate dot products and whole matrix instructions bit-exactly."""

from __future__ import annotations

import numpy as np

from .bv.concrete import CONCRETE
from .bv.core import BV
from .bv.vector import VECTOR
from .errors import UserError
from .model import dot_add
from .model.params import ModelParams
from .spec.formats import Format
from .spec.presets import parse_variant


def resolve(arch: str, instr: str | None = None) -> ModelParams:
    """Model parameters for a variant expression (`hopper`, `volta[carry_bits=2]`)."""
    return parse_variant(arch).params(instr)


CHUNK_ROWS = 32768
"""Rows per vector-interpreter pass: keeps arrays cache-sized (measured optimum here)."""


def _check(arr: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    a = np.asarray(arr)
    if a.dtype.kind not in "ui":
        raise UserError(f"{what}: expected unsigned integer bit patterns, got dtype {a.dtype}")
    if a.size and (int(a.max()) >> fmt.spec.storage or int(a.min()) < 0):
        raise UserError(f"{what}: a value does not fit in {fmt.spec.storage}-bit {fmt.spec.name}")
    return a


def _check_scales(p: ModelParams, sa_bits, sb_bits, n: int):
    """The scale-factor arrays, (N, n_scales) each, or (None, None) when none are given
    (a block-scaled unit then runs with scales of 1)."""
    if sa_bits is None and sb_bits is None:
        return None, None
    if p.scale_fmt is None:
        raise UserError("sa, sb: this instruction takes no scale factors")
    if sa_bits is None or sb_bits is None:
        raise UserError("sa, sb: give both scale-factor arrays, or neither")
    sa = _check(sa_bits, p.scale_fmt, "sa")
    sb = _check(sb_bits, p.scale_fmt, "sb")
    shape = (n, p.n_scales)
    if sa.shape != shape or sb.shape != shape:
        raise UserError(f"sa and sb must both have shape {shape}; got {sa.shape} and {sb.shape}")
    return sa, sb


def _scale_bvs(be, p: ModelParams, s, lo: int, hi: int) -> list[BV] | None:
    if s is None:
        return None
    assert p.scale_fmt is not None
    w = p.scale_fmt.spec.storage
    return [BV(be, x, w) for x in be.columns(s[lo:hi], w)]


def simulate_params(
    p: ModelParams, a_bits, b_bits, c_bits, device: str | None = None, sa_bits=None, sb_bits=None
) -> np.ndarray:
    """Vector-interpreter run of the model `p` on (N, K), (N, K), (N,) bit patterns.

    `device` None runs numpy's interpreter (bv/vector.py); "cpu", "cuda", "cuda:N" run
    the same model on torch tensors there (bv/xp.py; needs the `torch` extra), and
    "numpy" runs that array-API code path on numpy. The result is always a numpy array.
    `sa_bits`, `sb_bits`: (N, p.n_scales) block scale factors of a block-scaled unit
    (PTX `.block_scale`); left out, every scale factor is 1."""
    a = _check(a_bits, p.a_fmt, "a")
    b = _check(b_bits, p.b_fmt, "b")
    c = _check(c_bits, p.c_fmt, "c")
    if a.ndim != 2 or b.ndim != 2 or a.shape != b.shape or a.shape[1] != p.K:
        raise UserError(f"a and b must both have shape (N, {p.K}); got {a.shape} and {b.shape}")
    if c.shape != (a.shape[0],):
        raise UserError(f"c must have shape ({a.shape[0]},); got {c.shape}")
    sa, sb = _check_scales(p, sa_bits, sb_bits, a.shape[0])
    if device is not None:
        return _simulate_on(p, a, b, c, device, sa, sb)
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    n = a.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(n, lo + CHUNK_ROWS)
        d = dot_add(
            [BV(VECTOR, x, wa) for x in VECTOR.columns(a[lo:hi], wa)],
            [BV(VECTOR, x, wb) for x in VECTOR.columns(b[lo:hi], wb)],
            BV(VECTOR, VECTOR.lanes(c[lo:hi], wc), wc),
            p,
            _scale_bvs(VECTOR, p, sa, lo, hi),
            _scale_bvs(VECTOR, p, sb, lo, hi),
        )
        out[lo:hi] = np.asarray(d.v, dtype=object if d.w > 64 else np.uint64)
    return out


DEVICE_CHUNK_ROWS = 1 << 21
"""Rows per pass on a GPU, where larger arrays keep the device busy."""


def array_backend(device: str):
    """The array-API interpreter for `device` (UserError if torch or the device is absent)."""
    from .bv.xp import backend_for

    try:
        be = backend_for(device)
    except ImportError:
        raise UserError(
            f"device {device!r} needs torch: pip install 'tensorcore-smt[torch]'"
        ) from None
    except (RuntimeError, ValueError) as e:
        raise UserError(f"device {device!r}: {e}") from None
    dev = getattr(be.device, "type", None)
    if dev == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError(f"device {device!r}: torch sees no CUDA device")
    return be


def _simulate_on(p: ModelParams, a, b, c, device: str, sa=None, sb=None) -> np.ndarray:
    be = array_backend(device)
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    n = a.shape[0]
    step = DEVICE_CHUNK_ROWS if getattr(be.device, "type", None) == "cuda" else CHUNK_ROWS
    out = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        d = dot_add(
            [BV(be, x, wa) for x in be.columns(a[lo:hi], wa)],
            [BV(be, x, wb) for x in be.columns(b[lo:hi], wb)],
            BV(be, be.lanes(c[lo:hi], wc), wc),
            p,
            _scale_bvs(be, p, sa, lo, hi),
            _scale_bvs(be, p, sb, lo, hi),
        )
        out[lo:hi] = be.to_host(d.v, hi - lo)
    return out


def simulate(
    arch: str,
    instr: str | None,
    a_bits,
    b_bits,
    c_bits,
    device: str | None = None,
    sa_bits=None,
    sb_bits=None,
) -> np.ndarray:
    """d bits for each row: `arch` is a variant expression, `instr` a PTX/MFMA name (None:
    the preset's default). Shapes (N, K), (N, K), (N,); returns (N,) uint64. `device`:
    None (numpy), or "cpu" / "cuda" / "cuda:N" for torch (see `simulate_params`);
    `sa_bits`, `sb_bits`: (N, n_scales) scale factors of a block-scaled instruction."""
    p = resolve(arch, instr)
    return simulate_params(p, a_bits, b_bits, c_bits, device, sa_bits, sb_bits)


def simulate_one(
    p: ModelParams,
    a_bits: list[int],
    b_bits: list[int],
    c_bits: int,
    sa_bits: list[int] | None = None,
    sb_bits: list[int] | None = None,
) -> int:
    """Concrete-interpreter run on one dot product (the reference interpreter);
    `sa_bits`, `sb_bits`: the block scale factors of a block-scaled unit (None: 1)."""
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    ws = p.scale_fmt.spec.storage if p.scale_fmt is not None else 8
    d = dot_add(
        [BV(CONCRETE, x, wa) for x in a_bits],
        [BV(CONCRETE, x, wb) for x in b_bits],
        BV(CONCRETE, c_bits, wc),
        p,
        None if sa_bits is None else [BV(CONCRETE, x, ws) for x in sa_bits],
        None if sb_bits is None else [BV(CONCRETE, x, ws) for x in sb_bits],
    )
    return int(d.v)


_BITS_DTYPE = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def to_bits(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Bit patterns of an array: unsigned ints pass through; floats are viewed."""
    a = np.asarray(x)
    if a.dtype.kind in "ui":
        return a.astype(np.uint64)
    size = a.dtype.itemsize * 8
    if size not in _BITS_DTYPE:
        raise UserError(f"cannot take bit patterns of dtype {a.dtype}")
    return a.view(_BITS_DTYPE[size]).astype(np.uint64)


def from_bits(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """View output bits as a float array of the format (fp64/fp32/fp16), else uint."""
    dt = {Format.FP64: np.float64, Format.FP32: np.float32, Format.FP16: np.float16}.get(fmt)
    raw = bits.astype(
        _BITS_DTYPE[fmt.spec.storage] if fmt.spec.storage in _BITS_DTYPE else np.uint64
    )
    return raw.view(dt) if dt is not None else raw


def mma(arch: str, instr: str | None, A, B, C) -> np.ndarray:
    """D = A B + C for an M x K, K x N, M x N instruction operand set, bit-exactly.

    A, B, C may be numpy/ml_dtypes float arrays (float16, bfloat16, float8_e4m3fn, ...;
    float32 for tf32) or unsigned arrays of bit patterns. Returns D as float16/32/64.
    """
    p = resolve(arch, instr)
    a, b, c = to_bits(A, p.a_fmt), to_bits(B, p.b_fmt), to_bits(C, p.c_fmt)
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        raise UserError("A, B and C must be 2-D")
    m, k = a.shape
    k2, n = b.shape
    if k != p.K or k2 != p.K or c.shape != (m, n):
        raise UserError(
            f"shapes must be (M, {p.K}), ({p.K}, N), (M, N); got {a.shape}, {b.shape}, {c.shape}"
        )
    rows_a = np.repeat(a, n, axis=0)
    rows_b = np.tile(b.T, (m, 1))
    d = simulate_params(p, rows_a, rows_b, c.reshape(-1))
    return from_bits(d, p.d_fmt).reshape(m, n)
