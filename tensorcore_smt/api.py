"""Python API: simulate dot products and whole matrix instructions bit-exactly.

Inputs are bit patterns (unsigned or signed integer arrays, each value within the
format's width) or floats. A float array of the operand format's own dtype (float16 for
fp16, ml_dtypes.bfloat16 for bf16, float8_e4m3fn for e4m3, float32 for fp32 and tf32,
...; `FORMAT_DTYPES`) is read bit for bit. A float array of another dtype is converted
by value when every element is exactly representable in the operand format (a float32
array of 2.0 for an fp16 operand is 2.0 in fp16), and refused naming the expected dtype
otherwise; a float dtype of the same width but another format (bfloat16 for fp16) is
always refused, as a likely mix-up. torch tensors are read the same way (on the CPU).
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from .bv.concrete import CONCRETE
from .bv.core import BV
from .bv.devices import array_backend
from .bv.dtypes import UNSIGNED, unsigned_holding
from .bv.vector import VECTOR
from .engine import Engine, default_engine, is_ready, parse_engine, run_compiled
from .errors import UserError
from .formats import Format
from .model import dot_add, sparse
from .model.params import ModelParams, Sparsity
from .spec.presets import parse_variant


def resolve(arch: str, instr: str | None = None) -> ModelParams:
    """Model parameters for a variant expression (`hopper`, `volta[carry_bits=2]`)."""
    if not isinstance(arch, str):
        raise UserError(f"arch: expected a variant expression (str), got {type(arch).__name__}")
    if instr is not None and not isinstance(instr, str):
        raise UserError(f"instr: expected an instruction name or None, got {type(instr).__name__}")
    return parse_variant(arch).params(instr)


CHUNK_ROWS = 32768
"""Rows per vector-interpreter pass: keeps arrays cache-sized (measured optimum here)."""


FORMAT_DTYPES: dict[Format, np.dtype] = {
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
"""The numpy / ml_dtypes dtype whose values are exactly the values of each operand
format (formats without one, e.g. ue4m3, take bit patterns only)."""

_FLOAT_DTYPES = {np.dtype(t) for t in (np.float16, np.float32, np.float64)} | set(
    FORMAT_DTYPES.values()
)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt in _FLOAT_DTYPES


def _expected(fmt: Format) -> str:
    dt = FORMAT_DTYPES.get(fmt)
    floats = f"{dt.name} values or " if dt is not None else ""
    return f"{floats}unsigned integer bit patterns of {fmt.spec.name}"


def _from_torch(x):
    """A torch tensor as a numpy array of the same dtype (bfloat16 and float8 through
    ml_dtypes); anything else unchanged. torch is never imported here: a tensor can only
    come from a program that has imported it."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return x
    t = x.detach().cpu()
    special = {
        torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
        getattr(torch, "float8_e4m3fn", None): (torch.uint8, ml_dtypes.float8_e4m3fn),
        getattr(torch, "float8_e5m2", None): (torch.uint8, ml_dtypes.float8_e5m2),
    }
    if t.dtype in special:
        raw, dt = special[t.dtype]
        return t.view(raw).numpy().view(dt)
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise UserError(f"cannot read a torch tensor of dtype {t.dtype}: {e}") from None


def _python_ints(x, a: np.ndarray) -> np.ndarray:
    """Nested lists of Python ints as a uint64 array (`a`, numpy's own reading, when
    they are not all ints, or some do not fit in 64 unsigned bits)."""
    o = np.array(x, dtype=object)
    flat = o.reshape(-1)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
        return a
    if any(v < 0 or v >> 64 for v in flat):
        return a
    return o.astype(np.uint64)


def as_bits(x, fmt: Format, what: str) -> np.ndarray:
    """Bit patterns of the operand `what` in format `fmt` (uint64 array), from bit patterns
    or floats (module docstring); UserError naming the dtype expected otherwise."""
    a = np.asarray(_from_torch(x))
    if a.dtype.kind in "fO" and isinstance(x, (list, tuple)):
        a = _python_ints(x, a)  # 64-bit patterns >= 2^63 make numpy choose float64
    want = FORMAT_DTYPES.get(fmt)
    if a.dtype.kind in "ui":
        if a.size and (int(a.max()) >> fmt.spec.storage or int(a.min()) < 0):
            raise UserError(
                f"{what}: a value does not fit in {fmt.spec.storage}-bit {fmt.spec.name}"
            )
        return a.astype(np.uint64)
    if not _is_float(a.dtype):
        raise UserError(f"{what}: got dtype {a.dtype}; expected {_expected(fmt)}")
    if want is None:
        raise UserError(
            f"{what}: {fmt.spec.name} has no float dtype; expected unsigned integer bit patterns"
        )
    if a.dtype != want:
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
                f"{what}: {a.dtype.name} value {float(bad)!r} is not exactly a {fmt.spec.name} number; "
                f"expected {want.name} (or values it holds exactly)"
            )
        a = conv
    size = a.dtype.itemsize * 8
    return a.view(UNSIGNED[size]).astype(np.uint64)


def _check(arr, fmt: Format, what: str) -> np.ndarray:
    return as_bits(arr, fmt, what)


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
    p: ModelParams,
    a_bits,
    b_bits,
    c_bits,
    device: str | None = None,
    sa_bits=None,
    sb_bits=None,
    engine: str | Engine | None = None,
    meta=None,
) -> np.ndarray:
    """Run the model `p` on (N, K), (N, K), (N,) bit patterns; returns (N,) uint64.

    `engine`: "numpy" (bv/vector.py), "compiled" (the model's DAG compiled by LLVM, on
    every core; tensorcore_smt/engine) or "torch" (bv/xp.py, needs the `torch` extra);
    None picks compiled when its kernel is compiled already or the batch is large, else
    numpy (engine/choice.py). `device`: "cpu", "cuda", "cuda:N" for torch (None with
    engine torch: "cpu"; "numpy" runs the array-API code path on numpy); the compiled
    engine takes None or "cpu" (this machine) or "cuda[:N]" (a GPU kernel).
    `sa_bits`, `sb_bits`: (N, p.n_scales) block scale factors of a block-scaled unit
    (PTX `.block_scale`); left out, every scale factor is 1. `meta`: the metadata of a
    structured-sparse instruction (PTX mma.sp), (p.n_a,) for every row or (N, p.n_a),
    each entry the position of its a within its group; a is then (N, p.n_a)."""
    a = _check(a_bits, p.a_fmt, "a")
    b = _check(b_bits, p.b_fmt, "b")
    c = _check(c_bits, p.c_fmt, "c")
    if p.sparse != Sparsity.NONE or meta is not None:
        p, a, b = _sparse_rows(p, a, b, meta)
    if a.ndim != 2 or b.ndim != 2 or a.shape != b.shape or a.shape[1] != p.K:
        raise UserError(f"a and b must both have shape (N, {p.K}); got {a.shape} and {b.shape}")
    if c.shape != (a.shape[0],):
        raise UserError(f"c must have shape ({a.shape[0]},); got {c.shape}")
    sa, sb = _check_scales(p, sa_bits, sb_bits, a.shape[0])
    eng = _pick_engine(p, parse_engine(engine), device, [a, b, c, sa, sb])
    if eng == Engine.COMPILED:
        return run_compiled(p, a, b, c, sa, sb, device)
    if eng == Engine.TORCH:
        return _simulate_on(p, a, b, c, device or "cpu", sa, sb)
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


def _sparse_rows(p: ModelParams, a: np.ndarray, b: np.ndarray, meta):
    """A sparse instruction's rows as the dense unit's (model/sparse.py), the metadata
    checked (UserError naming the first bad group)."""
    if p.sparse == Sparsity.NONE:
        raise UserError("meta: metadata given to a dense instruction; allowed: none")
    if meta is None:
        raise UserError(
            f"meta: a sparse instruction needs its metadata ({p.n_a} indices, "
            f"{p.sparse_keep} of every {p.sparse_group} k)"
        )
    n = a.shape[0] if a.ndim == 2 else 0
    if a.ndim != 2 or b.ndim != 2 or a.shape != (n, p.n_a) or b.shape != (n, p.K):
        raise UserError(
            f"a and b must have shapes (N, {p.n_a}) and (N, {p.K}); got {a.shape} and {b.shape}"
        )
    m = np.asarray(meta)
    if m.dtype.kind not in "iu" or m.shape not in ((p.n_a,), (n, p.n_a)):
        raise UserError(f"meta: expected integers of shape ({p.n_a},) or ({n}, {p.n_a})")
    try:
        for row in np.unique(m.reshape(-1, p.n_a), axis=0):
            sparse.check_metadata(row.tolist(), p)
    except ValueError as e:
        raise UserError(str(e)) from None
    a, b = sparse.select_rows(a, b, m, p)
    return sparse.dense_params(p), a, b


def _pick_engine(p: ModelParams, engine: Engine | None, device: str | None, arrays) -> Engine:
    """The engine a run uses: the one asked for (checked against `device`), else torch
    when a torch device is named, else the faster of numpy and compiled for the batch."""
    if engine == Engine.NUMPY and device is not None:
        raise UserError(f"engine numpy runs on this machine's CPU; device {device!r} needs torch")
    if engine is not None:
        return engine
    if device is not None:
        return Engine.TORCH
    return default_engine(is_ready(p, [x for x in arrays if x is not None]), len(arrays[0]))


DEVICE_CHUNK_ROWS = 1 << 21
"""Rows per pass on a GPU, where larger arrays keep the device busy."""


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
    engine: str | Engine | None = None,
    meta=None,
) -> np.ndarray:
    """d bits for each row: `arch` is a variant expression, `instr` a PTX/MFMA name (None:
    the preset's default); `arch` may also be ModelParams (then `instr` must be None).
    Shapes (N, K), (N, K), (N,); returns (N,) bit patterns in the narrowest unsigned
    dtype that holds d (uint16 for fp16/bf16 d, uint32 for fp32, uint64 for fp64).
    `device`: None (numpy), or "cpu" / "cuda" / "cuda:N" for torch (see
    `simulate_params`); `sa_bits`, `sb_bits`: (N, n_scales) scale factors of a
    block-scaled instruction; `engine`: "numpy" | "compiled" | "torch" or None, `meta`
    a sparse instruction's metadata (see `simulate_params`)."""
    p = _params(arch, instr)
    d = simulate_params(p, a_bits, b_bits, c_bits, device, sa_bits, sb_bits, engine, meta)
    return d.astype(bits_dtype(p.d_fmt))


def bits_dtype(fmt: Format) -> np.dtype:
    """The narrowest unsigned dtype that holds a bit pattern of `fmt`."""
    if fmt.spec.storage > 64:
        return np.dtype(object)
    return unsigned_holding(fmt.spec.storage)


def _params(model: str | ModelParams, instr: str | None) -> ModelParams:
    """ModelParams from a variant expression (+ instruction) or as given."""
    if isinstance(model, ModelParams):
        if instr is not None:
            raise UserError("instr: give an instruction with an arch name, not with ModelParams")
        return model
    if not isinstance(model, str):
        raise UserError(f"arch: expected a variant expression or ModelParams, got {model!r}")
    return resolve(model, instr)


def simulate_one(
    model: str | ModelParams,
    *args,
    sa_bits: list[int] | None = None,
    sb_bits: list[int] | None = None,
    meta: list[int] | None = None,
) -> int:
    """Concrete-interpreter run on one dot product (the reference interpreter), called
    as `simulate` is: `simulate_one(arch, instr, a, b, c)` with a variant expression
    (instr None: the preset's default), or `simulate_one(params, a, b, c)` with
    ModelParams; a, b: K bit patterns each, c one. `sa_bits`, `sb_bits` (also as the two
    positional arguments after c): the block scale factors of a block-scaled unit
    (None: 1). `meta`: a sparse instruction's metadata (then a has `n_a` entries)."""
    if isinstance(model, ModelParams):
        instr, rest = None, list(args)
    else:
        if not args:
            raise UserError("simulate_one(arch, instr, a, b, c): a, b and c are missing")
        instr, rest = args[0], list(args[1:])
        if instr is not None and not isinstance(instr, str):
            raise UserError(
                "simulate_one(arch, instr, a, b, c): instr must be an instruction name or "
                f"None, got {type(instr).__name__}"
            )
    if not 3 <= len(rest) <= 5:
        raise UserError(
            "simulate_one takes (arch, instr, a, b, c) or (params, a, b, c), "
            "optionally followed by sa, sb"
        )
    a_bits, b_bits, c_bits = rest[:3]
    if len(rest) > 3:
        sa_bits = rest[3]
    if len(rest) > 4:
        sb_bits = rest[4]
    p = _params(model, instr)
    a_bits = [int(x) for x in as_bits(a_bits, p.a_fmt, "a").reshape(-1)]
    b_bits = [int(x) for x in as_bits(b_bits, p.b_fmt, "b").reshape(-1)]
    c_bits = int(as_bits(c_bits, p.c_fmt, "c").reshape(-1)[0])
    if len(a_bits) != p.n_a or len(b_bits) != p.K:
        raise UserError(
            f"a and b must have {p.n_a} and {p.K} entries; got {len(a_bits)} and {len(b_bits)}"
        )
    if (meta is None) != (p.sparse == Sparsity.NONE):
        raise UserError(
            "meta: metadata given to a dense instruction"
            if meta is not None
            else f"meta: a sparse instruction needs its metadata ({p.n_a} indices)"
        )
    if meta is not None:
        try:
            meta = sparse.check_metadata(meta, p)
        except ValueError as e:
            raise UserError(str(e)) from None
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    ws = p.scale_fmt.spec.storage if p.scale_fmt is not None else 8
    d = dot_add(
        [BV(CONCRETE, x, wa) for x in a_bits],
        [BV(CONCRETE, x, wb) for x in b_bits],
        BV(CONCRETE, c_bits, wc),
        p,
        None if sa_bits is None else [BV(CONCRETE, x, ws) for x in sa_bits],
        None if sb_bits is None else [BV(CONCRETE, x, ws) for x in sb_bits],
        meta,
    )
    return int(d.v)


def to_bits(x, fmt: Format, what: str = "array") -> np.ndarray:
    """Bit patterns (uint64) of an array of `fmt` operands: bit patterns pass through
    (checked to fit), floats are read as the module docstring says (UserError naming
    the expected dtype otherwise)."""
    return as_bits(x, fmt, what)


def from_bits(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """View output bits as a float array of the format (fp64/fp32/fp16), else uint."""
    dt = {Format.FP64: np.float64, Format.FP32: np.float32, Format.FP16: np.float16}.get(fmt)
    raw = bits.astype(UNSIGNED.get(fmt.spec.storage, UNSIGNED[64]))
    return raw.view(dt) if dt is not None else raw


def mma(arch: str, instr: str | None, A, B, C) -> np.ndarray:
    """D = A B + C for an M x K, K x N, M x N instruction operand set, bit-exactly.

    A, B, C may be numpy/ml_dtypes float arrays of the operands' formats (float16,
    bfloat16, float8_e4m3fn, ...; float32 for tf32), other float arrays whose values the
    formats hold exactly, torch tensors, or unsigned arrays of bit patterns (module
    docstring). Returns D as float16/32/64 (bits as unsigned ints for other formats).
    """
    p = _params(arch, instr)
    a, b, c = to_bits(A, p.a_fmt, "A"), to_bits(B, p.b_fmt, "B"), to_bits(C, p.c_fmt, "C")
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
