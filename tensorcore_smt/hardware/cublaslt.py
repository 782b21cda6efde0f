"""cuBLASLt's heuristic choice for a call's shape, read through ctypes: the algorithm
configuration fields that decide a kernel's summation order (ALGO_ID, TILE_ID, STAGES_ID,
SPLITK_NUM, REDUCTION_SCHEME, CUSTOM_OPTION, ...), recorded beside the outputs so that a
profile's rule can be learnt from them.

The query describes the call as torch hands it to cuBLAS: a row-major D = A B is the
column-major D^T = B^T A^T (cuBLAS's A is our B), a transposed operand an op T; compute
type 32F (TF32: 32F_FAST_TF32), fp32 scale; the reduced-precision reduction flag off
allows only NONE and COMPUTE_TYPE reduction schemes; FP8 with fast accumulation sets
FAST_ACCUM. torch's plain fp16/bf16 matmul runs cublasGemmEx, which chooses through
cuBLAS's own heuristic, so these fields are cuBLASLt's answer to the same problem, not
a readout of the kernel that ran (the outputs decide; the fields are evidence).

Enum values: cublasLt.h (CUDA 12.x and 13.x): cublasLtMatmulAlgoConfigAttributes_t 0-8,
cublasLtMatmulDescAttributes_t TRANSA 3, TRANSB 4, EPILOGUE 7, FAST_ACCUM 25,
cublasLtEpilogue_t BIAS 4 (F.linear with a bias: torch's bias epilogue, the bias in D's type),
cublasLtMatmulPreferenceAttributes_t MAX_WORKSPACE_BYTES 1, REDUCTION_SCHEME_MASK 3;
cudaDataType_t R_32F 0, R_16F 2, R_16BF 14, R_8F_E4M3 28; cublasComputeType_t 32F 68,
32F_FAST_TF32 77. Every failure (no library, an unknown symbol, a refused query) returns
None with the reason: the fields are then only omitted.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

from ..formats import Format
from .library_calls import CallClass, Op, Precision

CONFIG_FIELDS: dict[str, tuple[int, int]] = {
    "algo_id": (0, 4),
    "tile_id": (1, 4),
    "splitk_num": (2, 4),
    "reduction_scheme": (3, 4),
    "cta_swizzling": (4, 4),
    "custom_option": (5, 4),
    "stages_id": (6, 4),
    "inner_shape_id": (7, 2),
    "cluster_shape_id": (8, 2),
}
"""Recorded field -> (cublasLtMatmulAlgoConfigAttributes_t value, size in bytes)."""

CUDA_TYPE = {Format.FP32: 0, Format.FP16: 2, Format.BF16: 14, Format.E4M3: 28}
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_FAST_ACCUM = 3, 4, 7, 25
EPILOGUE_BIAS = 4
PREF_MAX_WORKSPACE, PREF_REDUCTION_MASK = 1, 3
REDUCTION_NO_OUTPUT_TYPE = 2  # NONE (0) | COMPUTE_TYPE (2)
OP_N, OP_T = 0, 1
SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so")
DEFAULT_WORKSPACE = 32 << 20
"""Bytes of workspace offered (torch's default on Hopper; $CUBLASLT_WORKSPACE_SIZE in KiB,
as torch reads it, overrides)."""


class _Result(ctypes.Structure):
    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def workspace_bytes() -> int:
    kib = os.environ.get("CUBLASLT_WORKSPACE_SIZE")
    return int(kib) * 1024 if kib and kib.isdigit() else DEFAULT_WORKSPACE


@cache
def _library() -> ctypes.CDLL:
    errors = []
    for name in SONAMES:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise OSError("libcublasLt not found: " + "; ".join(errors))


@cache
def _handle() -> ctypes.c_void_p:
    h = ctypes.c_void_p()
    _check(_library().cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
    return h


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} returned status {status}")


def _layout(fmt: Format, rows: int, cols: int) -> ctypes.c_void_p:
    lay = ctypes.c_void_p()
    _check(
        _library().cublasLtMatrixLayoutCreate(
            ctypes.byref(lay),
            ctypes.c_int(CUDA_TYPE[fmt]),
            ctypes.c_uint64(rows),
            ctypes.c_uint64(cols),
            ctypes.c_int64(rows),
        ),
        "cublasLtMatrixLayoutCreate",
    )
    return lay


def _set(fn, obj, attr: int, value: ctypes._SimpleCData, what: str) -> None:
    _check(fn(obj, ctypes.c_int(attr), ctypes.byref(value), ctypes.sizeof(value)), what)


def operand_ops(op: Op) -> tuple[int, int]:
    """cuBLAS's (transa, transb) for a call: its A is our B, its B our A (column-major)."""
    b_transposed = op in (Op.LINEAR, Op.LINEAR_BIAS, Op.MATMUL_BT, Op.SCALED, Op.SCALED_FAST)
    a_transposed = op == Op.MATMUL_AT
    return (OP_T if b_transposed else OP_N), (OP_T if a_transposed else OP_N)


def desc_settings(cls: CallClass) -> list[tuple[int, ctypes._SimpleCData, str]]:
    """(attribute, value, name) the matmul descriptor of `cls` sets: the operands' ops,
    FAST_ACCUM for FP8 with fast accumulation, the BIAS epilogue for F.linear with a bias
    (torch runs that call through cuBLASLt with CUBLASLT_EPILOGUE_BIAS, whose kernels and
    split counts are its own)."""
    ta, tb = operand_ops(cls.op)
    out: list[tuple[int, ctypes._SimpleCData, str]] = [
        (DESC_TRANSA, ctypes.c_int32(ta), "TRANSA"),
        (DESC_TRANSB, ctypes.c_int32(tb), "TRANSB"),
    ]
    if cls.op == Op.SCALED_FAST:
        out.append((DESC_FAST_ACCUM, ctypes.c_int8(1), "FAST_ACCUM"))
    if cls.op == Op.LINEAR_BIAS:
        out.append((DESC_EPILOGUE, ctypes.c_uint32(EPILOGUE_BIAS), "EPILOGUE"))
    return out


def heuristic(cls: CallClass, m: int, n: int, k: int) -> tuple[dict | None, str | None]:
    """cuBLASLt's first heuristic answer for the call's problem: (fields, None), or
    (None, the reason) when any step fails."""
    try:
        return _query(cls, m, n, k), None
    except (OSError, AttributeError, RuntimeError, KeyError, ValueError) as e:
        return None, str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def _query(cls: CallClass, m: int, n: int, k: int) -> dict:
    lib = _library()
    fin, fout = cls.operand_format, cls.output_format
    compute = COMPUTE_32F_FAST_TF32 if cls.precision == Precision.TF32 else COMPUTE_32F
    desc = ctypes.c_void_p()
    _check(
        lib.cublasLtMatmulDescCreate(ctypes.byref(desc), ctypes.c_int(compute), ctypes.c_int(0)),
        "cublasLtMatmulDescCreate",
    )
    made = []
    pref = ctypes.c_void_p()
    try:
        ta, tb = operand_ops(cls.op)
        setd = lib.cublasLtMatmulDescSetAttribute
        for attr, value, what in desc_settings(cls):
            _set(setd, desc, attr, value, what)
        # column-major view: cuBLAS A = our B (N x K), B = our A (K x M), D = N x M
        a_lay = _layout(fin, k, n) if ta == OP_T else _layout(fin, n, k)
        b_lay = _layout(fin, m, k) if tb == OP_T else _layout(fin, k, m)
        d_lay = _layout(fout, n, m)
        made = [a_lay, b_lay, d_lay]
        _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "PreferenceCreate")
        setp = lib.cublasLtMatmulPreferenceSetAttribute
        _set(setp, pref, PREF_MAX_WORKSPACE, ctypes.c_uint64(workspace_bytes()), "WORKSPACE")
        if cls.reduced is False:
            _set(setp, pref, PREF_REDUCTION_MASK, ctypes.c_uint32(REDUCTION_NO_OUTPUT_TYPE), "MASK")
        res = (_Result * 1)()
        count = ctypes.c_int(0)
        _check(
            lib.cublasLtMatmulAlgoGetHeuristic(
                _handle(), desc, a_lay, b_lay, d_lay, d_lay, pref, 1, res, ctypes.byref(count)
            ),
            "cublasLtMatmulAlgoGetHeuristic",
        )
        if count.value < 1:
            raise RuntimeError("cublasLtMatmulAlgoGetHeuristic returned no algorithm")
        fields: dict = {"workspace": int(res[0].workspace), "waves": float(res[0].waves)}
        for name, (attr, size) in CONFIG_FIELDS.items():
            buf = ctypes.c_uint64(0)
            written = ctypes.c_size_t(0)
            _check(
                lib.cublasLtMatmulAlgoConfigGetAttribute(
                    ctypes.byref(res[0].algo),
                    ctypes.c_int(attr),
                    ctypes.byref(buf),
                    ctypes.c_size_t(size),
                    ctypes.byref(written),
                ),
                f"ConfigGetAttribute({name})",
            )
            fields[name] = int(buf.value & ((1 << (8 * size)) - 1))
        return fields
    finally:
        for lay in made:
            lib.cublasLtMatrixLayoutDestroy(lay)
        if pref.value:
            lib.cublasLtMatmulPreferenceDestroy(pref)
        lib.cublasLtMatmulDescDestroy(desc)


__all__ = ["CONFIG_FIELDS", "desc_settings", "heuristic", "operand_ops", "workspace_bytes"]
