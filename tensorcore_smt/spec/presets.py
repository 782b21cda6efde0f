"""Architecture presets as data: instructions per architecture and the model of each.

Sources: MMA-Sim (seed 002) Table III/IV and §IV for F, L, the algorithm families and
the e_zero constants of its reference implementation; paper 000 (seed 000) §4 and
Algorithm 1 for carry bits (3 for the 5-term unit, 4 for the 9-term one; in general
ceil(log2(L + 1)) with unnormalised products) and truncation; Fasi et al. (seed 001) §III
for Volta. Every architecture quirk lives in these tables, not in the algorithms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..errors import UserError
from ..model.params import (
    Algorithm,
    CAddend,
    GroupMap,
    ModelParams,
    NanRule,
    Split,
    ZeroSign,
    parse_value,
)
from ..model.rounding import Overflow
from ..model.terms import AlignMode
from .formats import Format, Rounding

NV_NAN32 = 0x7FFFFFFF  # NVIDIA canonical NaNs (MMA-Sim §IV-C step 1)
NV_NAN16 = 0x7FFF

_PTX_FMT = {
    "f64": Format.FP64,
    "f32": Format.FP32,
    "tf32": Format.TF32,
    "f16": Format.FP16,
    "bf16": Format.BF16,
    "e4m3": Format.E4M3,
    "e5m2": Format.E5M2,
    "e3m2": Format.E3M2,
    "e2m3": Format.E2M3,
    "e2m1": Format.E2M1,
}
_AMD_FMT = {
    "f64": Format.FP64,
    "f32": Format.FP32,
    "xf32": Format.TF32,
    "f16": Format.FP16,
    "bf16": Format.BF16,
    "fp8": Format.E4M3FNUZ,
    "bf8": Format.E5M2FNUZ,
}
_ITEM_BYTES = {Format.FP16: 2, Format.BF16: 2, Format.TF32: 4}  # others: 1 byte


@dataclass(frozen=True)
class Instruction:
    """One matrix instruction of one architecture and the model that computes it."""

    name: str
    kind: str  # mma | wgmma | tcgen05 | mfma
    params: ModelParams
    sm: int | None = None
    note: str = ""
    unit: str = ""  # the hardware unit that runs it (instructions with one unit share it)

    @property
    def K(self) -> int:
        return self.params.K


@dataclass(frozen=True)
class Preset:
    """An architecture: its facts and its instructions (the first is the default)."""

    name: str
    vendor: str
    sm: int | None
    F: int
    L_bytes: int
    e_zero_fp32: int | None
    e_zero_fp16: int | None
    description: str
    default_instr: str
    instructions: dict[str, Instruction] = field(default_factory=dict)


def carry_bits_for(L: int) -> int:
    """Carry bits a fused group of L unnormalised products and c needs to be exact
    (paper 000 §4.3: 3 for Volta's 5 terms, 4 for Ampere's 9)."""
    return math.ceil(math.log2(L + 1))


def _nv_fda(
    arch: dict,
    K: int,
    a: Format,
    b: Format,
    c: Format,
    d: Format,
    F: int | None = None,
    L_bytes: int | None = None,
    e8m13: bool = False,
    e_zero: tuple[int, int] | None = None,
) -> ModelParams:
    F = arch["F"] if F is None else F
    L = (arch["L_bytes"] if L_bytes is None else L_bytes) // _ITEM_BYTES.get(a, 1)
    L = min(L, K)
    fp16_out = d == Format.FP16
    ez32, ez16 = e_zero if e_zero else (arch["e_zero_fp32"], arch["e_zero_fp16"])
    return ModelParams(
        algorithm=Algorithm.FDA,
        a_fmt=a,
        b_fmt=b,
        c_fmt=c,
        d_fmt=d,
        K=K,
        L=L,
        F=F,
        carry_bits=carry_bits_for(L),
        align=AlignMode.TRUNCATE,
        e_zero=ez16 if fp16_out else ez32,
        rounding=Rounding.RNE if fp16_out else Rounding.RZ,
        rounding_fmt=Format.E8M13 if (e8m13 and not fp16_out) else None,
        overflow=Overflow.TO_INF,
        nan_bits=NV_NAN16 if fp16_out else NV_NAN32,
        # Subnormal inputs, results and outputs are all kept: Fasi et al. §III-B (Volta,
        # fp16 and fp32), FTTN Table IV (V100, A100, H100 for fp16, bf16 and tf32).
        flush_inputs=False,
        flush_outputs=False,
    )


def _sfma(K: int, fmt: Format, **quirks) -> ModelParams:
    return ModelParams(
        Algorithm.SFMA,
        fmt,
        fmt,
        fmt,
        fmt,
        K=K,
        L=1,
        rounding=Rounding.RNE,
        overflow=Overflow.IEEE,
        **quirks,
    )


NV_DMMA = dict(nan_bits=0xFFF8000000000000, nan_rule=NanRule.B_ACC_A)
"""NVIDIA DMMA's NaNs, read off an H100 (results/hardware/h100/validation): an FMA with a
NaN operand returns the first of b_k, the running sum, a_k made quiet; an invalid
operation (Inf - Inf, 0 x Inf) gives the negative quiet NaN 0xFFF8000000000000."""


_NV_ARCH = {
    # name: F, fused group width in bytes of A, e_zero for fp32 / fp16 outputs (MMA-Sim)
    "volta": dict(sm=70, F=23, L_bytes=8, e_zero_fp32=-131, e_zero_fp16=-19),
    "turing": dict(sm=75, F=24, L_bytes=16, e_zero_fp32=-132, e_zero_fp16=-20),
    "ampere": dict(sm=80, F=24, L_bytes=16, e_zero_fp32=-132, e_zero_fp16=-20),
    "ada": dict(sm=89, F=24, L_bytes=16, e_zero_fp32=-132, e_zero_fp16=-20),
    "hopper": dict(sm=90, F=25, L_bytes=32, e_zero_fp32=-133, e_zero_fp16=-21),
    "blackwell": dict(sm=100, F=25, L_bytes=32, e_zero_fp32=-133, e_zero_fp16=-21),
    "rtx-blackwell": dict(sm=120, F=25, L_bytes=32, e_zero_fp32=-133, e_zero_fp16=-21),
}
_NV_DESC = {
    "volta": "V100 (sm_70): HMMA.884, 5-term fused unit, F=23",
    "turing": "T4 / RTX 20 (sm_75): HMMA.884 as Volta, HMMA.1688 with F=24",
    "ampere": "A100 / A-series (sm_80): 9-term fused fp16/bf16 unit, F=24, TF32, DMMA",
    "ada": "L40S / RTX 40 (sm_89): as Ampere, plus FP8 with F=13 and E8M13 output",
    "hopper": "H100 / H200 (sm_90): 17-term fp16 unit, F=25; wgmma; FP8 with F=13",
    "blackwell": "B200 (sm_100): as Hopper for mma (FP8 on the f16 HMMA path); tcgen05, FP8 at F=25",
    "rtx-blackwell": (
        "RTX PRO 6000 / RTX 50 (sm_120): f8f6f4 mma at F=25; block-scaled mxf8f6f4 (FDA) "
        "and mxf4 / mxf4nvf4 (GDFS, F=35)"
    ),
}
_F8 = ("e5m2", "e4m3")
_F8F6F4 = ("e5m2", "e4m3", "e3m2", "e2m3", "e2m1")


def _mma_rows(sm: int) -> list[tuple[str, int]]:
    """(PTX shape.types, minimum sm) of every mma.sync form the model covers."""
    rows = [
        ("m8n8k4.f32.f16.f16.f32", 70),
        ("m8n8k4.f32.f16.f16.f16", 70),
        ("m8n8k4.f16.f16.f16.f16", 70),
        ("m16n8k8.f32.f16.f16.f32", 75),
        ("m16n8k8.f16.f16.f16.f16", 75),
        ("m16n8k16.f32.f16.f16.f32", 80),
        ("m16n8k16.f16.f16.f16.f16", 80),
        ("m16n8k16.f32.bf16.bf16.f32", 80),
        ("m16n8k8.f32.bf16.bf16.f32", 80),
        ("m16n8k8.f32.tf32.tf32.f32", 80),
        ("m16n8k4.f32.tf32.tf32.f32", 80),
        ("m8n8k4.f64.f64.f64.f64", 80),
    ]
    rows += [
        (f"m16n8k{k}.{d}.{a}.{b}.{d}", 89)
        for k in (32, 16)
        for d in ("f32", "f16")
        for a in _F8
        for b in _F8
    ]
    rows += [(f"m16n8k{k}.f64.f64.f64.f64", 90) for k in (16, 8, 4)]
    rows += [
        (f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}", 120)
        for d in ("f32", "f16")
        for a in _F8F6F4
        for b in _F8F6F4
    ]
    return rows


# Which sm generations' mma forms each architecture has (MMA-Sim isa_mma; Blackwell
# sm_100 has no sm_89 FP8 mma and no sm_90 f64 shapes; m8n8k4 f16 exists only on 70/75).
_MMA_FROM = {
    "volta": {70},
    "turing": {70, 75},
    "ampere": {75, 80},
    "ada": {75, 80, 89},
    "hopper": {75, 80, 89, 90},
    # sm_100 has the sm_89 FP8 forms too (PTX ISA: mma with .e4m3/.e5m2 needs sm_89 or
    # higher); MMA-Sim's isa_mma leaves them out of Blackwell, so they have no MMA-Sim model
    "blackwell": {75, 80, 89},
    "rtx-blackwell": {75, 80, 89, 120},
}

# FP8 mma.sync on the f16 HMMA unit: nvcc 13.0 lowers mma.sync m16n8k32 / m16n8k16 with
# e4m3/e5m2 operands, for sm_90 and for sm_100a alike, to F2FP.UNPACK_B conversions to
# f16 (exact), two chained HMMAs (HMMA.16816 for k32, HMMA.1688 for k16) from C = RZ, the
# first on bytes 0-1 of every register and the second on bytes 2-3, then FADD (f32 d) or
# HADD2 (f16 d) of c (SASS read with cuobjdump). The HMMAs multiply the f16 values, so an
# e4m3 subnormal takes the normalised f16 exponent (unpack=fp16). The H100 matches it bit
# for bit on every row of its validation (results/hardware/h100). sm_120a instead runs
# them on QMMA.16832 / QMMA.16816 with c inside the instruction.
_HMMA_FP8 = {
    "groups": 2,
    "group_map": GroupMap.BYTE_PAIRS,
    "c_add": CAddend.AFTER,
    "unpack": Format.FP16,
    "unit": "HMMA",
    "note": "fp8 unpacked to f16 (F2FP.UNPACK_B), 2 HMMAs from 0, then c",
}


# Instruction generations an architecture runs differently from its own defaults.
_MMA_QUIRKS: dict[tuple[str, int], dict] = {
    # Turing runs HMMA.884 exactly as Volta (paper 000 §5; MMA-Sim 2.x).
    ("turing", 70): {"as_arch": "volta"},
    # Ada's FP8 QMMA keeps F=13 and truncates fp32 output to E8M13 (MMA-Sim §VI-A).
    ("ada", 89): {"F": 13, "e8m13": True},
    # Hopper's FP8 mma.sync is not the FP8 wgmma unit: nvcc 13 lowers it to F2FP.UNPACK_B
    # conversions to f16 (exact) and two chained f16 HMMAs (HMMA.16816 for k32, HMMA.1688
    # for k16) that start from C = 0, each taking bytes 0-1 then bytes 2-3 of every
    # register, and adds c at the end with one round-to-nearest addition; 4 x 10^6 random
    # rows on an H100 match it bit for bit (results/hardware/h100). The MATLAB model's
    # belief (one group of 32 at F = 13, as the FP8 wgmma) is the variant matlab-h100-fp8.
    ("hopper", 89): _HMMA_FP8,
    # Blackwell B200: the same SASS as sm_90 (see _HMMA_FP8) on Blackwell's f16 HMMA (F=25,
    # 16 products: MMA-Sim Table III). The MATLAB B200 models' beliefs are the variants
    # matlab-b200-fp8 (models/B200TC.m) and matlab-b200-fp8-x16 (models/B200TCRN.m).
    ("blackwell", 89): _HMMA_FP8,
}

# The unit each kind of instruction runs on, by operand format (SASS opcode families as
# nvcc 13.0 emits them; a quirk's "unit" overrides). `tcsmt list archs` groups by it.
_MMA_UNIT = {
    Format.FP64: "DMMA",
    Format.FP32: "HMMA",
    Format.TF32: "HMMA",
    Format.FP16: "HMMA",
    Format.BF16: "HMMA",
}
_KIND_UNIT = {"wgmma": ("HGMMA", "QGMMA"), "tcgen05": ("UTCHMMA", "UTCQMMA")}


def unit_of(kind: str, a: Format) -> str:
    """The unit an instruction of `kind` with `a` operands runs on when no quirk says."""
    if kind == "mfma":
        return "MFMA"
    if kind in _KIND_UNIT:
        return _KIND_UNIT[kind][0 if a in _MMA_UNIT else 1]
    return _MMA_UNIT.get(a, "QMMA")


def _parse_mma(name: str) -> tuple[int, Format, Format, Format, Format]:
    parts = [p for p in name.split(".") if not p.startswith("kind::")]
    k = int(re.match(r"m\d+n\d+k(\d+)", parts[0]).group(1))
    d, a, b, c = (_PTX_FMT[x] for x in parts[1:5])
    return k, a, b, c, d


def _nv_instructions(arch_name: str) -> dict[str, Instruction]:
    arch = _NV_ARCH[arch_name]
    out: dict[str, Instruction] = {}
    for name, sm in _mma_rows(arch["sm"]):
        if sm not in _MMA_FROM[arch_name]:
            continue
        K, a, b, c, d = _parse_mma(name)
        quirk = _MMA_QUIRKS.get((arch_name, sm), {})
        if a == Format.FP64:
            params = _sfma(K, Format.FP64, **NV_DMMA)
        else:
            base = _NV_ARCH[quirk.get("as_arch", arch_name)]
            params = _nv_fda(base, K, a, b, c, d, F=quirk.get("F"), e8m13=quirk.get("e8m13", False))
            if "groups" in quirk:
                L = K // quirk["groups"]
                params = params.with_(
                    L=L,
                    carry_bits=carry_bits_for(L),
                    group_map=quirk["group_map"],
                    c_add=quirk["c_add"],
                    unpack=quirk.get("unpack"),
                )
        unit = quirk.get("unit") or unit_of("mma", a)
        note = quirk.get("note", "")
        out[name] = Instruction(name, "mma", params, sm=arch["sm"], note=note, unit=unit)
    if arch_name == "rtx-blackwell":
        for name, (kind, K, a, b, sf, block) in block_scale_rows().items():
            params = _block_scale_params(arch, kind, K, a, b, sf, block)
            note = "block-scaled GDFS" if params.algorithm == Algorithm.GDFS else "block-scaled"
            out[name] = Instruction(name, "mma", params, sm=120, note=note, unit="QMMA")
    if arch_name == "hopper":
        for name, (K, a, d) in _wgmma_rows().items():
            fp8 = a in (Format.E4M3, Format.E5M2)
            b = _PTX_FMT[name.split(".")[-1]]
            params = _nv_fda(arch, K, a, b, d, d, F=13 if fp8 else None, e8m13=fp8)
            out[name] = Instruction(name, "wgmma", params, sm=90, unit=unit_of("wgmma", a))
    if arch_name == "blackwell":
        for name, (K, a, b, d) in _tcgen05_rows().items():
            params = _nv_fda(arch, K, a, b, d, d)
            out[name] = Instruction(name, "tcgen05", params, sm=100, unit=unit_of("tcgen05", a))
        # MMA-Sim sim.TCGen05MMABlockScale: the arithmetic of the sm_120a forms; Table III
        # names the units UTCQMMA (mxf8f6f4) and UTCOMMA (FP4, GDFS)
        for name, (kind, K, a, b, sf, block) in block_scale_rows(tcgen05=True).items():
            params = _block_scale_params(arch, kind, K, a, b, sf, block)
            gdfs = params.algorithm == Algorithm.GDFS
            out[name] = Instruction(
                name,
                "tcgen05",
                params,
                sm=100,
                note="block-scaled GDFS" if gdfs else "block-scaled",
                unit="UTCOMMA" if gdfs else "UTCQMMA",
            )
    return out


_SCALE_FMT = {"ue8m0": Format.UE8M0, "ue4m3": Format.UE4M3}

# Block-scaled mma.sync of sm_120a (PTX ISA "mma.sync ... .block_scale"; MMA-Sim 2.1.1
# isa_mma `mma_block_scale_shape_and_type_from_sm_120`, which spells scale_vec::1X/2X as
# block32 and 4X as block16): (kind, K, scale_vec, products per scale factor, scale types).
_BLOCK_SCALE_FORMS = [
    ("mxf8f6f4", 32, "1X", 32, ("ue8m0",)),
    ("mxf4", 64, "2X", 32, ("ue8m0",)),
    ("mxf4nvf4", 64, "2X", 32, ("ue8m0",)),
    ("mxf4nvf4", 64, "4X", 16, ("ue8m0", "ue4m3")),
]

# GDFS of the K = 64 forms (MMA-Sim §IV-E and sim.MMABlockScale: groups of G = 16 exact
# products, F = 35, one fused step of 64, e_zero = -139, RZ to fp32).
_GDFS = {"G": 16, "F": 35, "L": 64, "e_zero": -139}


def block_scale_rows(
    tcgen05: bool = False,
) -> dict[str, tuple[str, int, Format, Format, Format, int]]:
    """name -> (kind, K, a, b, scale format, products per scale) of every block-scaled
    mma.sync form (f32 d and c only; FP4 kinds take e2m1 operands); with `tcgen05`, of
    Blackwell's tcgen05.mma .block_scale forms (MMA-Sim 2.1.1 isa_tcgen05mma: the same
    kinds, blocks and scale types, M = 128; named like the other tcgen05 forms, d.a.b)."""
    rows = {}
    for kind, K, vec, block, stypes in _BLOCK_SCALE_FORMS:
        types = _F8F6F4 if kind == "mxf8f6f4" else ("e2m1",)
        for a in types:
            for b in types:
                for st in stypes:
                    name = (
                        f"m16n8k{K}.kind::{kind}.block_scale.scale_vec::{vec}.f32.{a}.{b}.f32.{st}"
                    )
                    if tcgen05:
                        name = (
                            f"tcgen05.m128n8k{K}.kind::{kind}.block_scale.scale_vec::{vec}"
                            f".f32.{a}.{b}.{st}"
                        )
                    rows[name] = (kind, K, _PTX_FMT[a], _PTX_FMT[b], _SCALE_FMT[st], block)
    return rows


def _block_scale_params(
    arch: dict, kind: str, K: int, a: Format, b: Format, s: Format, block: int
) -> ModelParams:
    """mxf8f6f4 (K = 32): FDA with the scale factors folded into every product (MMA-Sim
    §IV-C "Scale factor"; mmasim's ST-FDPA: F = 25, one group of 32, e_zero = -133);
    mxf4 / mxf4nvf4 (K = 64): GDFS (§IV-E)."""
    if kind == "mxf8f6f4":
        p = _nv_fda(arch, K, a, b, Format.FP32, Format.FP32, L_bytes=32)
        return p.with_(scale_fmt=s, scale_block=block)
    return ModelParams(
        algorithm=Algorithm.GDFS,
        a_fmt=a,
        b_fmt=b,
        c_fmt=Format.FP32,
        d_fmt=Format.FP32,
        K=K,
        L=_GDFS["L"],
        F=_GDFS["F"],
        G=_GDFS["G"],
        align=AlignMode.TRUNCATE,
        e_zero=_GDFS["e_zero"],
        rounding=Rounding.RZ,
        overflow=Overflow.TO_INF,
        nan_bits=NV_NAN32,
        scale_fmt=s,
        scale_block=block,
    )


def _wgmma_rows() -> dict[str, tuple[int, Format, Format]]:
    rows = {
        "wgmma.m64n8k8.f32.tf32.tf32": (8, Format.TF32, Format.FP32),
        "wgmma.m64n8k16.f32.f16.f16": (16, Format.FP16, Format.FP32),
        "wgmma.m64n8k16.f16.f16.f16": (16, Format.FP16, Format.FP16),
        "wgmma.m64n8k16.f32.bf16.bf16": (16, Format.BF16, Format.FP32),
    }
    for d in ("f32", "f16"):
        for a in _F8:
            for b in _F8:
                rows[f"wgmma.m64n8k32.{d}.{a}.{b}"] = (32, _PTX_FMT[a], _PTX_FMT[d])
    return rows


def _tcgen05_rows() -> dict[str, tuple[int, Format, Format, Format]]:
    rows = {
        "tcgen05.m64n8k8.kind::tf32.f32.tf32.tf32": (8, Format.TF32, Format.TF32, Format.FP32),
        "tcgen05.m64n8k16.kind::f16.f32.f16.f16": (16, Format.FP16, Format.FP16, Format.FP32),
        "tcgen05.m64n8k16.kind::f16.f32.bf16.bf16": (16, Format.BF16, Format.BF16, Format.FP32),
        "tcgen05.m64n8k16.kind::f16.f16.f16.f16": (16, Format.FP16, Format.FP16, Format.FP16),
    }
    for d in ("f32", "f16"):
        for a in _F8F6F4:
            for b in _F8F6F4:
                rows[f"tcgen05.m64n8k32.kind::f8f6f4.{d}.{a}.{b}"] = (
                    32,
                    _PTX_FMT[a],
                    _PTX_FMT[b],
                    _PTX_FMT[d],
                )
    return rows


# --- AMD (MMA-Sim Table IV; names without the v_mfma_ prefix there) -------------------

_CDNA1_MFMA = [
    # MI100 (CDNA1 ISA; MMA-Sim 2.1.1 isa_mfma "CDNA1"): no f64, bf16 only without _1k
    "f32_32x32x2f32",
    "f32_32x32x1f32",
    "f32_16x16x4f32",
    "f32_16x16x1f32",
    "f32_4x4x1f32",
    "f32_32x32x8f16",
    "f32_32x32x4f16",
    "f32_16x16x16f16",
    "f32_16x16x4f16",
    "f32_4x4x4f16",
    "f32_32x32x4bf16",
    "f32_32x32x2bf16",
    "f32_16x16x8bf16",
    "f32_16x16x2bf16",
    "f32_4x4x2bf16",
]
_CDNA2_MFMA = [
    "f64_16x16x4f64",
    "f64_4x4x4f64",
    "f32_32x32x2f32",
    "f32_32x32x1f32",
    "f32_16x16x4f32",
    "f32_16x16x1f32",
    "f32_4x4x1f32",
    "f32_32x32x8f16",
    "f32_32x32x4f16",
    "f32_16x16x16f16",
    "f32_16x16x4f16",
    "f32_4x4x4f16",
    "f32_32x32x4bf16",
    "f32_32x32x2bf16",
    "f32_16x16x8bf16",
    "f32_16x16x2bf16",
    "f32_4x4x2bf16",
    "f32_32x32x8bf16_1k",
    "f32_32x32x4bf16_1k",
    "f32_16x16x16bf16_1k",
    "f32_16x16x4bf16_1k",
    "f32_4x4x4bf16_1k",
]
_CDNA3_MFMA = [
    "f64_16x16x4_f64",
    "f64_4x4x4_4b_f64",
    "f32_32x32x1_2b_f32",
    "f32_16x16x1_4b_f32",
    "f32_4x4x1_16b_f32",
    "f32_32x32x2_f32",
    "f32_16x16x4_f32",
    "f32_16x16x8_xf32",
    "f32_32x32x4_xf32",
    "f32_32x32x4_2b_f16",
    "f32_16x16x4_4b_f16",
    "f32_4x4x4_16b_f16",
    "f32_32x32x8_f16",
    "f32_16x16x16_f16",
    "f32_32x32x4_2b_bf16",
    "f32_16x16x4_4b_bf16",
    "f32_4x4x4_16b_bf16",
    "f32_32x32x8_bf16",
    "f32_16x16x16_bf16",
] + [
    f"f32_{s}_{a}_{b}"
    for s in ("16x16x32", "32x32x16")
    for a in ("bf8", "fp8")
    for b in ("bf8", "fp8")
]


def _parse_mfma(suffix: str) -> tuple[int, Format, Format, Format, bool]:
    """K, A/B/D formats and the `_1k` flag of an MFMA name (CDNA2 or CDNA3 spelling)."""
    k1 = suffix.endswith("_1k")
    parts = suffix.removesuffix("_1k").split("_")
    m = re.match(r"(\d+)x(\d+)x(\d+)([a-z0-9]*)$", parts[1])
    types = ([m.group(4)] if m.group(4) else []) + [
        t for t in parts[2:] if not re.fullmatch(r"\d+b", t)
    ]
    a_name, b_name = types[0], types[-1]
    return int(m.group(3)), _AMD_FMT[a_name], _AMD_FMT[b_name], _AMD_FMT[parts[0]], k1


def _cdna1_fused(K: int, a: Format, b: Format) -> ModelParams:
    """MI100's fp16 / bf16 unit: groups of 4 fp16 or 2 bf16 products and c summed exactly
    and rounded once to fp32, to nearest even, the groups chained through fp32 (MMA-Sim
    2.1.1 E_FDPA with L_max 4 / 2; MATLAB models/MI100MC.m: fma 4 / 2, exact accumulation,
    rne; FTTN Table IV, MI100: block FMA width 4 (fp16) and 2 (bf16), RNE, subnormal inputs
    and outputs kept). Special values as IEEE arithmetic gives them (MMA-Sim sums the
    products in float): NaN payloads unspecified, zero signs as IEEE."""
    return ModelParams(
        Algorithm.FDA,
        a,
        b,
        Format.FP32,
        Format.FP32,
        K=K,
        L=min(4 if a == Format.FP16 else 2, K),
        align=AlignMode.EXACT,
        rounding=Rounding.RNE,
        overflow=Overflow.IEEE,
        zero_sign=ZeroSign.IEEE,
    )


_AMD_NAMES = {"cdna1": _CDNA1_MFMA, "cdna2": _CDNA2_MFMA, "cdna3": _CDNA3_MFMA}


def _amd_instructions(arch_name: str) -> dict[str, Instruction]:
    out: dict[str, Instruction] = {}
    for suffix in _AMD_NAMES[arch_name]:
        K, a, b, d, k1 = _parse_mfma(suffix)
        name = f"v_mfma_{suffix}"
        if a in (Format.FP64, Format.FP32):
            params = _sfma(K, a)
        elif arch_name == "cdna1":
            params = _cdna1_fused(K, a, b)
        elif arch_name == "cdna2":
            G = 2 if (a == Format.BF16 and not k1) else 4
            params = ModelParams(
                Algorithm.GPS,
                a,
                b,
                Format.FP32,
                Format.FP32,
                K=K,
                L=K,
                G=min(G, K),
                rounding=Rounding.RNE,
                # MMA-Sim §IV-B Algorithm 3: subnormal inputs -> +0 (step 1), fp32 products
                # (step 2), pairwise and running sums (steps 3-4) and so d flushed keeping
                # their sign; FTTN Table IV: MI250X fp16/bf16 subnormals neither in nor out.
                flush_inputs=True,
                flush_products=True,
                flush_sums=True,
                flush_outputs=True,
                overflow=Overflow.IEEE,
            )
        else:
            fp8 = a in (Format.E4M3FNUZ, Format.E5M2FNUZ)
            L = 16 if fp8 else (4 if a == Format.TF32 else 8)
            params = ModelParams(
                Algorithm.GFDRDA if fp8 else Algorithm.FDRDA,
                a,
                b,
                Format.FP32,
                Format.FP32,
                K=K,
                L=min(L, K),
                F=24,
                F2=31,
                align=AlignMode.ROUND_DOWN,
                rounding=Rounding.RNE,
                nan_bits=NV_NAN32,
                overflow=Overflow.IEEE,
            )
        out[name] = Instruction(name, "mfma", params, unit=unit_of("mfma", a))
    return out


def _build() -> dict[str, Preset]:
    presets: dict[str, Preset] = {}
    for name, arch in _NV_ARCH.items():
        default = (
            "m8n8k4.f32.f16.f16.f32"
            if name in ("volta", "turing")
            else ("m16n8k16.f32.f16.f16.f32")
        )
        presets[name] = Preset(
            name,
            "nvidia",
            arch["sm"],
            arch["F"],
            arch["L_bytes"],
            arch["e_zero_fp32"],
            arch["e_zero_fp16"],
            _NV_DESC[name],
            default,
            _nv_instructions(name),
        )
    presets["cdna1"] = Preset(
        "cdna1",
        "amd",
        None,
        0,
        0,
        None,
        None,
        "MI100 (CDNA1): fp16 in exact groups of 4, bf16 of 2, RNE to fp32; SFMA for fp32",
        "v_mfma_f32_32x32x8f16",
        _amd_instructions("cdna1"),
    )
    presets["cdna2"] = Preset(
        "cdna2",
        "amd",
        None,
        0,
        0,
        None,
        None,
        "MI200 (CDNA2): GPS with flush-to-zero for fp16/bf16; SFMA",
        "v_mfma_f32_32x32x8f16",
        _amd_instructions("cdna2"),
    )
    presets["cdna3"] = Preset(
        "cdna3",
        "amd",
        None,
        24,
        0,
        None,
        None,
        "MI300 (CDNA3): FDRDA (round-down c) for xf32/fp16/bf16, GFDRDA for fp8; SFMA",
        "v_mfma_f32_32x32x8_f16",
        _amd_instructions("cdna3"),
    )
    return presets


PRESETS: dict[str, Preset] = _build()

ALIASES: dict[str, tuple[str, str]] = {
    # name: (variant expression, where the hypothesis comes from)
    "paper000-volta": (
        "volta[product_exponent=normalized]",
        "paper 000 Algorithm 1: exact products normalised as fp32 values",
    ),
    "paper000-ampere": (
        "ampere[product_exponent=normalized]",
        "paper 000 Algorithm 1 for Ampere (one extra alignment bit)",
    ),
    "fasi-volta": (
        "volta[align=exact]",
        "Fasi et al. §III-C: additions rounded toward zero (a correctly "
        "rounded RZ sum, unlike truncation: paper 000 Table 3)",
    ),
    "mmasim1-turing": (
        "turing[F=24]",
        "MMA-Sim first version, Table III: Turing HMMA.884 with F=24",
    ),
    "matlab-h100-fp8": (
        "hopper[L=32,F=13,carry_bits=6,rounding_fmt=e8m13,group_map=contiguous,c_add=fused,unpack=none]",
        "MATLAB tensor-core models, models/H100TC.m: FP8 in one group of 32 products with "
        "F = 13 and no mma/wgmma distinction (the FP8 wgmma unit), f32 output through E8M13; "
        "the H100 refutes it for mma.sync (f32-output forms; fp16 output: matlab-h100-fp8-f16)",
    ),
    "matlab-h100-fp8-f16": (
        "hopper[L=32,F=13,carry_bits=6,group_map=contiguous,c_add=fused,unpack=none]",
        "the same belief for the fp16-output FP8 forms, rounded to fp16 directly as the FP8 "
        "wgmma with fp16 output is",
    ),
    "matlab-b200-fp8": (
        "blackwell[L=32,carry_bits=6,group_map=contiguous,c_add=fused,unpack=none]",
        "MATLAB tensor-core models, models/B200TC.m (also RTXPRO6000TC.m): FP8 in one group "
        "of 32 products (fma = 32) with 2 extra alignment bits (F = 25), RZ, c in the group: "
        "the FP8 unit MMA-Sim gives tcgen05 kind::f8f6f4; nvcc's SASS for sm_100a says mma.sync "
        "runs on HMMA instead",
    ),
    "matlab-b200-fp8-x16": (
        "blackwell[L=16,carry_bits=5,group_map=byte-pairs,c_add=fused,unpack=none]",
        "MATLAB tensor-core models, models/B200TCRN.m and README: two groups of 16 "
        "interleaved (fma = 16, inter_pattern = 1, the HMMA path) with F = 25, c in the "
        "first group",
    ),
    "ieee-fp32-rz": (
        "volta[algorithm=sequential,acc_rounding=rz]",
        "binary32 products and additions in index order, each rounded RZ",
    ),
    "ieee-fp32-rne": (
        "volta[algorithm=sequential,acc_rounding=rne]",
        "binary32 products and additions in index order, each rounded RNE",
    ),
}

_VARIANT_RE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\[(.*)\])?\s*$")


@dataclass(frozen=True)
class Variant:
    """A preset with parameter overrides, e.g. `volta[carry_bits=2]`."""

    text: str
    preset: Preset
    overrides: tuple[tuple[str, object], ...]

    def instruction(self, instr: str | None) -> Instruction:
        name = instr or self.preset.default_instr
        inst = self.preset.instructions.get(name) or self.preset.instructions.get(
            _normalise_instr(name)
        )
        if inst is None:
            raise UserError(
                f"unknown instruction {name!r} for {self.preset.name}; "
                f"see `tcsmt list archs` ({len(self.preset.instructions)} instructions)"
            )
        return inst

    def params(self, instr: str | None = None) -> ModelParams:
        """The model of `instr` (default: the preset's) under this variant's overrides."""
        p = self.instruction(instr).params
        changes = dict(self.overrides)
        if changes.get("split", Split.NONE) != Split.NONE:
            # a split algorithm reads single-precision inputs (the unit's c format) and
            # feeds the unit its own operand format, unless the variant says otherwise
            changes.setdefault("split_fmt", p.a_fmt)
            changes.setdefault("a_fmt", p.c_fmt)
            changes.setdefault("b_fmt", p.c_fmt)
        if changes.get("d_fmt", p.d_fmt) != p.d_fmt and p.nan_bits is not None:
            # the instruction's NaN pattern belongs to its own d format: another d format
            # takes that format's default NaN unless the variant names one
            changes.setdefault("nan_bits", None)
        try:
            q = p.with_(**changes)
        except (TypeError, ValueError) as e:
            raise UserError(
                f"variant {self.text!r} on {self.instruction(instr).name}: {e}"
            ) from None
        if q.split != Split.NONE:
            _check_split(self.text, self.instruction(instr).name, q)
        return q


def _check_split(text: str, instr: str, p: ModelParams) -> None:
    """A split needs inputs wider than the unit's operands and a unit that can be chained."""
    if p.c_fmt != p.d_fmt:
        raise UserError(
            f"{text}: a split chains the unit, so c and d need the same format ({instr})"
        )
    if p.a_fmt.spec.precision <= p.split_fmt.spec.precision:
        raise UserError(
            f"{text}: {instr} takes {p.split_fmt.spec.name} operands and a {p.c_fmt.spec.name} "
            f"addend; splitting needs wider inputs (pick an instruction with fp32 c and d)"
        )


def _normalise_instr(name: str) -> str:
    n = name.strip()
    for prefix in ("mma.sync.aligned.", "mma.sync.", "mma."):
        if n.startswith(prefix):
            n = n[len(prefix) :]
    n = re.sub(r"\.(row|col)", "", n)
    if n.startswith("wgmma.mma_async.sync.aligned."):
        n = "wgmma." + n[len("wgmma.mma_async.sync.aligned.") :]
    m = re.match(r"^(wgmma\.m64n)\d+(k.*)$", n)
    if m:
        n = m.group(1) + "8" + m.group(2)
    m = re.match(r"^(tcgen05\.m(?:64|128)n)\d+(k.*)$", n)
    if m:
        n = ("tcgen05.m128n8" if ".block_scale." in n else "tcgen05.m64n8") + m.group(2)
    if not n.startswith("v_mfma_") and re.match(r"^f(32|64)_\d+x", n):
        n = "v_mfma_" + n
    return n


def parse_variant(text: str) -> Variant:
    """Parse `arch` or `arch[name=value,...]` (or a named alias); UserError if bad."""
    t = text.strip()
    if t in ALIASES:
        return parse_variant(ALIASES[t][0])
    m = _VARIANT_RE.match(t)
    if not m:
        raise UserError(f"malformed variant {text!r}; expected ARCH or ARCH[param=value,...]")
    name, body = m.group(1), m.group(2)
    if name in ALIASES:
        base = parse_variant(ALIASES[name][0])
        preset, overrides = base.preset, list(base.overrides)
    elif name in PRESETS:
        preset, overrides = PRESETS[name], []
    else:
        raise UserError(f"unknown architecture {name!r}; known: {', '.join(PRESETS)}")
    if body is not None:
        if not body.strip():
            raise UserError(f"malformed variant {text!r}: empty parameter list")
        for item in body.split(","):
            if "=" not in item:
                raise UserError(f"malformed variant {text!r}: {item.strip()!r} is not name=value")
            k, v = (s.strip() for s in item.split("=", 1))
            try:
                overrides.append((k, parse_value(k, v)))
            except ValueError as e:
                raise UserError(f"variant {text!r}: {e}") from None
    return Variant(t, preset, tuple(overrides))
