"""The hardware's own fused multiply-add for units whose step is IEEE binary32 fma.

A unit with Algorithm.SFMA (model/sequential.py sfma: d = c, then d = fma(a_k, b_k, d)
for k in order) whose formats are all binary32, rounding to nearest even, with no flush
and the canonical NaN rule, is by its parameters a chain of correctly rounded IEEE 754
binary32 fused multiply-adds (IEEE 754-2019 §5.4.1) with one NaN pattern: NVIDIA's FFMA
(fma.rn.f32), the step of every full-fp32 SGEMM emulation. The model computes each one
on wide integer nodes; LLVM's llvm.fma.f32 is the same operation, and on a host with FMA3
(x86-64 `fma`) the loop vectoriser turns it into vfmadd on 8 or 16 lanes.

`reasons(p)` says why a unit is not such a chain (empty: it is); `emit_step` emits the
step: the K fmas, then a NaN result replaced by the unit's `nan_bits` (LLVM keeps some
NaN payload; the model returns the one canonical NaN). The same step on e5m2 (an IEEE
format with subnormals, Inf and NaN, 3-bit significands) is proved equal to the model's by
bitwuzla and z3 (tests/test_ieee_fma.py, slow); the fp16 and binary32 queries (11 x 11-
and 24 x 24-bit multipliers on each side) have not been answered by a solver (bitwuzla:
over 7 minutes on fp16, over 150 s on binary32), so for binary32 the equality rests on
the proof of the same rule on e5m2 and on GEMMs compared bit for bit with the numpy
interpreter there and in tests/test_gemm_sgemm.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..formats import Format, Rounding, default_nan_bits
from ..model.params import Algorithm, ModelParams, NanRule, Sparsity
from ..model.split import Split
from .lower import Body

FORMAT = Format.FP32
"""The one format of every operand, the sum and d: IEEE binary32."""


def reasons(p: ModelParams) -> list[str]:
    """Why unit `p`'s step is not a chain of IEEE binary32 fmas (empty: it is)."""
    checks = {
        "algorithm: sequential fmas (sfma)": p.algorithm == Algorithm.SFMA,
        "a, b, c, d and the sum in binary32": all(
            f == FORMAT for f in (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt, p.acc_fmt)
        ),
        "round to nearest even": p.rounding == Rounding.RNE,
        "subnormals kept (no flush)": not (
            p.flush_inputs or p.flush_products or p.flush_sums or p.flush_outputs
        ),
        "one canonical NaN": p.nan_rule == NanRule.CANONICAL,
        "no split, sparsity, unpacking or block scales": p.split == Split.NONE
        and p.sparse == Sparsity.NONE
        and p.unpack is None
        and p.scale_fmt is None,
    }
    return [f"not: {k}" for k, ok in checks.items() if not ok]


def applies(p: ModelParams) -> bool:
    """Whether unit `p`'s step is a chain of IEEE binary32 fmas."""
    return not reasons(p)


def subnormals_kept() -> bool:
    """Whether this thread's floating-point environment keeps binary32 subnormals (x86
    MXCSR flush-to-zero and denormals-are-zero clear, as a process starts; a library may
    set them, e.g. torch.set_flush_denormal(True)). The hardware fma follows that
    environment and the model does not, so the runner takes the fma kernel only while
    this holds: a subnormal input must survive a product (DAZ) and a product must be
    able to land below the normal range (FTZ), checked by numpy's binary32 arithmetic,
    which runs under the same environment."""
    tiny = np.array([2.0**-140], dtype=np.float32)  # a subnormal operand
    smallest_normal = np.array([2.0**-126], dtype=np.float32)
    return bool((tiny * np.float32(2.0))[0] != 0) and bool(
        (smallest_normal * np.float32(0.5))[0] != 0
    )


DECLARATIONS = ("declare float @llvm.fma.f32(float, float, float)",)
"""The intrinsic the step calls (LLVM Language Reference, 'llvm.fma.*')."""


def emit_step(p: ModelParams, body: Body, operand: Callable[[str, int], str], acc_ty: str) -> str:
    """The step d = fma(a_{K-1}, b_{K-1}, ... fma(a_0, b_0, acc)) of unit `p` (for which
    `applies`), its NaN made the model's one NaN (`p.nan_bits`, else the format's
    default); `operand(stem, k)`: the bits of a_k ("a"),
    b_k ("b") or the accumulator ("acc", 0), each i32."""
    if acc_ty != "i32":
        raise ValueError(f"a binary32 fma chain in an {acc_ty} accumulator")

    def f32(x: str) -> str:
        return body.emit(f"bitcast i32 {x} to float")

    d = f32(operand("acc", 0))
    for k in range(p.K):
        a, b = f32(operand("a", k)), f32(operand("b", k))
        d = body.emit(f"call float @llvm.fma.f32(float {a}, float {b}, float {d})")
    nan = body.emit(f"fcmp uno float {d}, 0.0")
    bits = body.emit(f"bitcast float {d} to i32")
    nb = default_nan_bits(p.d_fmt) if p.nan_bits is None else p.nan_bits
    canonical = nb - (1 << 32) if nb >= 1 << 31 else nb  # LLVM's i32 constants are signed
    return body.emit(f"select i1 {nan}, i32 {canonical}, i32 {bits}")
