"""Python API: simulate dot products and whole matrix instructions bit-exactly.

Inputs are bit patterns (unsigned or signed integer arrays, each value within the
format's width) or floats, read by the one rule of tensorcore_smt/intake.py: a float
array of the operand format's own dtype (float16 for fp16, ml_dtypes.bfloat16 for bf16,
float8_e4m3fn for e4m3, float32 for fp32 and tf32, ...; `FORMAT_DTYPES`) is read bit for
bit; a float array of another dtype is converted by value when every element is exactly
representable in the operand format, and refused naming the expected dtype otherwise; a
float dtype of the same width but another format (bfloat16 for fp16) is always refused,
as a likely mix-up. torch tensors are read the same way (on the CPU). The compiled
engine reads the caller's arrays as they are (no copy: its kernels are generated for
each element width) and writes d straight into an array of the narrowest dtype;
`simulate_stream` runs batches one at a time, so that any number of rows fits in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from .argtypes import check_type
from .bv.chunks import CHUNK_ROWS, run_rows_on
from .bv.concrete import CONCRETE
from .bv.core import BV
from .bv.devices import array_backend
from .bv.vector import VECTOR
from .engine import Engine, default_engine, is_ready, parse_engine, run_compiled
from .errors import UserError
from .formats import Format
from .intake import FORMAT_DTYPE, bits_dtype, from_bits, operand_bits
from .model import dot_add, sparse
from .model.params import ModelParams, Sparsity
from .spec.presets import parse_variant

FORMAT_DTYPES = FORMAT_DTYPE
"""The float dtype of each operand format (intake.FORMAT_DTYPE)."""
__all__ = [
    "CHUNK_ROWS",
    "FORMAT_DTYPES",
    "as_bits",
    "bits_dtype",
    "from_bits",
    "mma",
    "resolve",
    "simulate",
    "simulate_one",
    "simulate_params",
    "simulate_stream",
    "to_bits",
]


def resolve(arch: str, instr: str | None = None) -> ModelParams:
    """Model parameters for a variant expression (`hopper`, `volta[carry_bits=2]`)."""
    if not isinstance(arch, str):
        raise UserError(f"arch: expected a variant expression (str), got {type(arch).__name__}")
    if instr is not None and not isinstance(instr, str):
        raise UserError(f"instr: expected an instruction name or None, got {type(instr).__name__}")
    return parse_variant(arch).params(instr)


def _check_scales(p: ModelParams, sa_bits, sb_bits, n: int):
    """The scale-factor arrays, (N, n_scales) each, or (None, None) when none are given
    (a block-scaled unit then runs with scales of 1)."""
    if sa_bits is None and sb_bits is None:
        return None, None
    if p.scale_fmt is None:
        raise UserError("sa, sb: this instruction takes no scale factors")
    if sa_bits is None or sb_bits is None:
        raise UserError("sa, sb: give both scale-factor arrays, or neither")
    sa = operand_bits(sa_bits, p.scale_fmt, "sa")
    sb = operand_bits(sb_bits, p.scale_fmt, "sb")
    shape = (n, p.n_scales)
    if sa.shape != shape or sb.shape != shape:
        raise UserError(f"sa and sb must both have shape {shape}; got {sa.shape} and {sb.shape}")
    return sa, sb


def simulate_params(
    p: ModelParams,
    a_bits,
    b_bits,
    c_bits,
    device: str | None = None,
    sa_bits=None,
    sb_bits=None,
    engine: str | Engine | None = None,
    out: np.ndarray | None = None,
    meta=None,
) -> np.ndarray:
    """Run the model `p` on (N, K), (N, K), (N,) operands; returns (N,) d bit patterns,
    uint64 unless `out` is given.

    `engine`: "numpy" (bv/vector.py), "compiled" (the model's DAG compiled by LLVM, on
    every core; tensorcore_smt/engine) or "torch" (bv/xp.py, needs the `torch` extra);
    None picks compiled when its kernel is compiled already or the batch is large, else
    numpy (engine/choice.py). `device`: "cpu", "cuda", "cuda:N" for torch (None with
    engine torch: "cpu"; "numpy" runs the array-API code path on numpy); the compiled
    engine takes None or "cpu" (this machine) or "cuda[:N]" (a GPU kernel).
    `sa_bits`, `sb_bits`: (N, p.n_scales) block scale factors of a block-scaled unit
    (PTX `.block_scale`); left out, every scale factor is 1. `out`: an unsigned (N,)
    array at least as wide as d (`bits_dtype(p.d_fmt)`) that d is written into, and
    returned (a memmap too: the compiled engine writes it directly). `meta`: the metadata of a
    structured-sparse instruction (PTX mma.sp), (p.n_a,) for every row or (N, p.n_a),
    each entry the position of its a within its group; a is then (N, p.n_a)."""
    a = operand_bits(a_bits, p.a_fmt, "a")
    b = operand_bits(b_bits, p.b_fmt, "b")
    c = operand_bits(c_bits, p.c_fmt, "c")
    if p.sparse != Sparsity.NONE or meta is not None:
        p, a, b = _sparse_rows(p, a, b, meta)
    if a.ndim != 2 or b.ndim != 2 or a.shape != b.shape or a.shape[1] != p.K:
        raise UserError(f"a and b must both have shape (N, {p.K}); got {a.shape} and {b.shape}")
    if c.shape != (a.shape[0],):
        raise UserError(f"c must have shape ({a.shape[0]},); got {c.shape}")
    sa, sb = _check_scales(p, sa_bits, sb_bits, a.shape[0])
    out = _out_array(p, out, a.shape[0])
    eng = _pick_engine(p, parse_engine(engine), device, [a, b, c, sa, sb], _out_bits(out))
    if eng == Engine.COMPILED:
        if out.flags.c_contiguous and out.dtype.kind == "u":
            return run_compiled(p, a, b, c, sa, sb, device, out)
        out[:] = run_compiled(p, a, b, c, sa, sb, device)
        return out
    if eng == Engine.TORCH:
        return _simulate_on(p, a, b, c, device or "cpu", sa, sb, out)
    return _run_vector(p, VECTOR, a, b, c, sa, sb, out, CHUNK_ROWS)


def _out_array(p: ModelParams, out: np.ndarray | None, n: int) -> np.ndarray:
    """`out` checked to hold n results of d, or a new uint64 array (object beyond 64 bits)."""
    if out is None:
        return np.empty(n, dtype=object if p.d_fmt.spec.storage > 64 else np.uint64)
    if not isinstance(out, np.ndarray) or out.shape != (n,):
        raise UserError(f"out: expected a numpy array of shape ({n},)")
    want = bits_dtype(p.d_fmt)
    if out.dtype != want and not (out.dtype.kind == "u" and out.dtype.itemsize >= want.itemsize):
        raise UserError(f"out: got dtype {out.dtype}; d needs {want} (or a wider unsigned)")
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


def _out_bits(out: np.ndarray) -> int:
    """Bits per element of the array the compiled kernel writes d into."""
    return out.dtype.itemsize * 8 if out.dtype.kind == "u" else 64


def _run_vector(p: ModelParams, be, a, b, c, sa, sb, out: np.ndarray, step: int) -> np.ndarray:
    """d of every row on an array interpreter (numpy, or torch through bv/xp.py), in
    chunks of `step` rows."""
    ws = p.scale_fmt.spec.storage if p.scale_fmt is not None else 8
    ops = [(a, p.a_fmt.spec.storage), (b, p.b_fmt.spec.storage), (c, p.c_fmt.spec.storage)]
    ops += [(sa, ws), (sb, ws)]
    return run_rows_on(be, lambda a, b, c, sa, sb: dot_add(a, b, c, p, sa, sb), ops, out, step)


def _pick_engine(
    p: ModelParams, engine: Engine | None, device: str | None, arrays, out_bits: int = 64
) -> Engine:
    """The engine a run uses: the one asked for (checked against `device`), else torch
    when a torch device is named, else the faster of numpy and compiled for the batch."""
    if engine == Engine.NUMPY and device is not None:
        raise UserError(f"engine numpy runs on this machine's CPU; device {device!r} needs torch")
    if engine is not None:
        return engine
    if device is not None:
        return Engine.TORCH
    ready = is_ready(p, [x for x in arrays if x is not None], out_bits)
    return default_engine(ready, len(arrays[0]))


DEVICE_CHUNK_ROWS = 1 << 21
"""Rows per pass on a GPU, where larger arrays keep the device busy."""


def _simulate_on(p: ModelParams, a, b, c, device: str, sa, sb, out: np.ndarray) -> np.ndarray:
    be = array_backend(device)
    step = DEVICE_CHUNK_ROWS if getattr(be.device, "type", None) == "cuda" else CHUNK_ROWS
    return _run_vector(p, be, a, b, c, sa, sb, out, step)


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
    out: np.ndarray | None = None,
    meta=None,
) -> np.ndarray:
    """d bits for each row: `arch` is a variant expression, `instr` a PTX/MFMA name (None:
    the preset's default); `arch` may also be ModelParams (then `instr` must be None).
    Shapes (N, K), (N, K), (N,); returns (N,) bit patterns in the narrowest unsigned
    dtype that holds d (uint16 for fp16/bf16 d, uint32 for fp32, uint64 for fp64),
    written there directly (or into `out`, an array of that dtype, e.g. a memmap).
    `device`: None (numpy), or "cpu" / "cuda" / "cuda:N" for torch (see
    `simulate_params`); `sa_bits`, `sb_bits`: (N, n_scales) scale factors of a
    block-scaled instruction; `engine`: "numpy" | "compiled" | "torch" or None, `meta`
    a sparse instruction's metadata (see `simulate_params`)."""
    p = _params(arch, instr)
    if out is None:
        n = _rows(a_bits)
        out = np.empty(n, dtype=bits_dtype(p.d_fmt))
    return simulate_params(
        p, a_bits, b_bits, c_bits, device, sa_bits, sb_bits, engine, out=out, meta=meta
    )


def _rows(x) -> int:
    """Rows of an operand as given (its first dimension; 0 for a scalar, which the shape
    check then refuses)."""
    shape = np.shape(x)
    return int(shape[0]) if shape else 0


def simulate_stream(
    arch: str | ModelParams,
    instr: str | None,
    batches: Iterable[tuple],
    device: str | None = None,
    engine: str | Engine | None = None,
) -> Iterator[np.ndarray]:
    """`simulate` on each batch of an iterable, one at a time: batches are (a, b, c) or
    (a, b, c, sa, sb) tuples, each yielding its d (narrowest dtype). Memory holds one
    batch and its result, so any number of rows can be run from a generator (or from
    slices of memmapped files); the instruction is resolved once."""
    p = _params(arch, instr)
    check_type("simulate_stream: batches", batches, (Iterable,), "an iterable of tuples")
    for batch in batches:
        if not isinstance(batch, (tuple, list)) or len(batch) not in (3, 5):
            raise UserError("simulate_stream: batches: each is (a, b, c) or (a, b, c, sa, sb)")
        a, b, c, *scales = batch
        if len(scales) not in (0, 2):
            raise UserError("simulate_stream: a batch is (a, b, c) or (a, b, c, sa, sb)")
        sa, sb = scales if scales else (None, None)
        yield simulate(p, None, a, b, c, device, sa, sb, engine)


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


def as_bits(x, fmt: Format, what: str = "array") -> np.ndarray:
    """Bit patterns of an array of `fmt` operands (intake.operand_bits: unsigned, at
    least the format's width, the caller's memory wherever it can be); UserError naming
    the expected dtype otherwise."""
    return operand_bits(x, fmt, what)


to_bits = as_bits


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
    d = simulate_params(p, rows_a, rows_b, c.reshape(-1), out=np.empty(m * n, bits_dtype(p.d_fmt)))
    return from_bits(d, p.d_fmt).reshape(m, n)
