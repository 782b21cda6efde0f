"""Where the elements of A, B, C and D of an RDNA WMMA instruction (and the operands of a
V_DOT2) live in the registers of a 32-lane wavefront, as data tables, and the clang
builtin that issues it.

RDNA3 / RDNA3.5 (RDNA3 ISA, "Wave Matrix Multiply Accumulate"; AMD GPUOpen, "How to
accelerate AI applications on RDNA 3 using WMMA"): lane l holds row l mod 16 of A (column
l mod 16 of B) with all 16 k, lanes 16-31 a copy of lanes 0-15; lane l's accumulator
element v is D[2v + l // 16][l mod 16] (a 16-bit D in the low half of each register).

RDNA4 (RDNA4 ISA, "Wave Matrix Multiply Accumulate"): no copies; lane l holds row l mod 16
of A (column of B) with k = 8 (l // 16) .. 8 (l // 16) + 7, and accumulator element v is
D[v + 8 (l // 16)][l mod 16] (16-bit D packed two to a register).

Integer WMMA (V_WMMA_I32_16X16X16_IU8; clang's __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32
and _w32_gfx12): the 8-bit elements in A's and B's places, four to a register, each
operand preceded by its sign flag (the ISA's NEG bit: signed) and C followed by the clamp
flag (the CLAMP bit). The 4-bit forms pack two elements to a byte, which the byte-wise
operand fill of the probes does not write: no probes for them yet.

V_DOT2_F32_F16 / _BF16: every lane its own dot product of two pairs; lane 0's is probed.
In every layout element 0 of lane 0's accumulator holds C[0][0] and D[0][0].
"""

from __future__ import annotations

import re

from ..errors import UserError
from ..formats import Format
from ..model.params import IntClamp
from ..spec.presets import Instruction
from .mfma import MfmaLayout

WAVE32 = 32

_CTYPE = {Format.FP16: "_Float16", Format.BF16: "short"}
"""C element type of a 16-bit operand vector (bf16 travels as raw shorts)."""

_BUILTIN_TYPE = {
    Format.FP16: "f16",
    Format.BF16: "bf16",
    Format.E4M3: "fp8",
    Format.E5M2: "bf8",
    Format.FP32: "f32",
    Format.S32: "i32",
}

WMMA_ARCHS = {"rdna3": "gfx1100", "rdna4": "gfx1201"}
"""The presets with WMMA layouts and their default --offload-arch (RX 7900 / RX 9070)."""


def _vec(ctype: str, n: int) -> str:
    return ctype if n == 1 else f"{ctype} __attribute__((ext_vector_type({n})))"


def wmma_layout(inst: Instruction, arch: str) -> MfmaLayout:
    """The layout of a preset's WMMA or V_DOT2 instruction on `arch` (rdna3 or rdna4)."""
    p = inst.params
    if inst.kind == "dot":
        return _dot_layout(inst)
    m = re.search(r"_(\d+)x(\d+)x(\d+)", inst.name)
    M, N, K = (int(x) for x in m.groups())
    gfx12 = arch == "rdna4"
    kpl = K // 2 if gfx12 else K
    half = K // 2
    a = tuple(
        tuple((0, ln % M, (half * (ln // 16) if gfx12 else 0) + e) for e in range(kpl))
        for ln in range(WAVE32)
    )
    b = tuple(
        tuple((0, (half * (ln // 16) if gfx12 else 0) + e, ln % N) for e in range(kpl))
        for ln in range(WAVE32)
    )
    out = _BUILTIN_TYPE[p.d_fmt]
    pre = ("", "")
    if p.a_fmt.spec.is_integer:
        if p.a_fmt.spec.storage != 8:
            raise UserError(
                f"probe generation for {inst.name} is not supported yet (4-bit WMMA "
                "operands pack two to a byte)"
            )
        kinds, a_type = "iu8", _vec("int", kpl // 4)
        pre = tuple(f"{str(f.spec.signed).lower()}, " for f in (p.a_fmt, p.b_fmt))
    elif p.a_fmt in (Format.E4M3, Format.E5M2):
        kinds = f"{_BUILTIN_TYPE[p.a_fmt]}_{_BUILTIN_TYPE[p.b_fmt]}"
        a_type = _vec("int", kpl // 4)
    else:
        kinds = _BUILTIN_TYPE[p.a_fmt]
        a_type = _vec(_CTYPE[p.a_fmt], kpl)
    acc = M * N // WAVE32
    if p.d_fmt == Format.S32:  # the clamp flag follows C
        clamp = p.int_clamp == IntClamp.SATFINITE
        acc_type, call_args = _vec("int", acc), f", {str(clamp).lower()}"
    elif p.d_fmt == Format.FP32:
        acc_type, call_args = _vec("float", acc), ""
    else:  # 16-bit D: RDNA3 keeps one per register (low halves, opsel 0), RDNA4 packs two
        acc_type = _vec(_CTYPE[p.d_fmt], acc if gfx12 else 2 * acc)
        call_args = "" if gfx12 else ", false"
    suffix = "_w32_gfx12" if gfx12 else "_w32"
    return MfmaLayout(
        inst.name,
        M,
        N,
        K,
        1,
        kpl,
        a,
        b,
        acc,
        f"__builtin_amdgcn_wmma_{out}_{M}x{N}x{K}_{kinds}{suffix}",
        a_type,
        acc_type,
        max(1, p.a_fmt.spec.storage // 8),
        f"AMD {'RDNA4' if gfx12 else 'RDNA3'} ISA (WMMA operand layouts, wave32)",
        wave=WAVE32,
        copies=1 if gfx12 else 2,
        call_args=call_args,
        a_prefix=pre[0],
        b_prefix=pre[1],
    )


def _dot_layout(inst: Instruction) -> MfmaLayout:
    """V_DOT2_F32_F16 / _BF16 in lane 0: a and b the two halves of one register each."""
    p = inst.params
    builtin = (
        "__builtin_amdgcn_fdot2" if p.a_fmt == Format.FP16 else "__builtin_amdgcn_fdot2_f32_bf16"
    )
    return MfmaLayout(
        inst.name,
        1,
        1,
        p.K,
        1,
        p.K,
        (tuple((0, 0, k) for k in range(p.K)),),
        (tuple((0, k, 0) for k in range(p.K)),),
        1,
        builtin,
        _vec(_CTYPE[p.a_fmt], p.K),
        "float",
        2,
        "AMD RDNA3 ISA (V_DOT2_F32_F16 / V_DOT2_F32_BF16: S0, S1 packed halves, S2 fp32)",
        wave=1,
        call_args=", false",  # no clamp
    )


def all_wmma_layouts() -> dict[tuple[str, str], MfmaLayout]:
    """Every WMMA and V_DOT2 instruction of the RDNA presets that has probes (all but
    the 4-bit integer forms): (arch, name) -> layout."""
    from ..spec.presets import PRESETS

    return {
        (arch, name): wmma_layout(inst, arch)
        for arch in WMMA_ARCHS
        for name, inst in PRESETS[arch].instructions.items()
        if inst.kind in ("wmma", "dot") and inst.params.a_fmt.spec.storage != 4
    }
