"""Where the elements of A, B, C and D of an AMD MFMA instruction live in the registers of
a 64-lane wavefront, as data tables, and the clang builtin that issues it.

The tables follow the AMD CDNA3 ISA ("Matrix fused multiply add (MFMA)", §7.1: the
dependent layouts of A, B and C/D) and the CDNA2 ISA (§7.1), as the AMD matrix
instruction calculator prints them: an instruction of M x N x K with `blocks` independent
products ("_2b", "_4b", "_16b" in the CDNA3 names) gives each lane `kpl` consecutive k of
one row of A (one column of B); the lanes of group g = lane // M hold block
g // (K / kpl) and the k-range (g mod (K / kpl)) * kpl upwards:

    A[block][i][k] -> lane i + M * (block * (K / kpl) + k // kpl), element k % kpl
    B[block][k][j] -> lane j + N * (block * (K / kpl) + k // kpl), element k % kpl

In every MFMA layout element 0 of lane 0's accumulator holds C[0][0] and D[0][0] of
block 0, which is all a probe needs of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..formats import Format
from ..spec.presets import Instruction

WAVE = 64

_KPL = {
    Format.FP64: 1,
    Format.FP32: 1,
    Format.TF32: 2,  # xf32
    Format.FP16: 4,
    Format.BF16: 4,  # CDNA2 bf16 without _1k: 2
    Format.E4M3FNUZ: 8,
    Format.E5M2FNUZ: 8,
    Format.E4M3: 8,  # CDNA4's OCP fp8 in CDNA3's fp8 shapes
    Format.E5M2: 8,
    Format.S8: 4,  # CDNA1-2 and the k4 forms of CDNA3; CDNA3's k16/k32 forms: 8
}
"""Elements of A (and of B) per lane."""

_OPERAND_CTYPE = {
    Format.FP64: "double",
    Format.FP32: "float",
    Format.TF32: "float",
    Format.FP16: "_Float16",
    Format.BF16: "short",
}
"""C element type of the builtin's A/B vector (bf16 travels as raw shorts; fp8 as long)."""

_BUILTIN_TYPE = {
    Format.FP64: "f64",
    Format.FP32: "f32",
    Format.TF32: "_xf32",
    Format.FP16: "f16",
    Format.BF16: "bf16",
    Format.E4M3FNUZ: "fp8",
    Format.E5M2FNUZ: "bf8",
    Format.E4M3: "fp8",
    Format.E5M2: "bf8",
    Format.S8: "i8",
}

_GFX950_CTYPE = {Format.FP16: "_Float16", Format.BF16: "__bf16", Format.S8: "int"}
"""C element type of the A/B vector of CDNA4's new shapes' builtins (i8: 4 bytes an int)."""


@dataclass(frozen=True)
class MfmaLayout:
    """The register placement of one MFMA instruction."""

    name: str
    M: int
    N: int
    K: int
    blocks: int
    kpl: int  # A / B elements per lane
    a: tuple[tuple[tuple[int, int, int], ...], ...]  # a[lane][e] = (block, row, k)
    b: tuple[tuple[tuple[int, int, int], ...], ...]  # b[lane][e] = (block, k, col)
    acc: int  # accumulator elements per lane
    builtin: str
    a_type: str  # C type of the A / B operand
    acc_type: str  # C type of C / D
    elem_bytes: int  # bytes of one A / B element in its operand
    source: str
    wave: int = WAVE  # lanes of the wavefront that runs it
    copies: int = 1  # lanes holding each element of A and B (RDNA3 WMMA: 2)
    call_args: str = ", 0, 0, 0"  # the builtin's operands after C (MFMA: cbsz, abid, blgp)
    a_prefix: str = ""  # the builtin's operands before A (integer WMMA: A's sign flag)
    b_prefix: str = ""  # and before B (B's sign flag)
    # element e of a lane's A (B) operand occupies bits [e * bits, (e + 1) * bits) of it,
    # little-endian; 0: 8 * elem_bytes (block-scaled forms pack fp6 / fp4 densely)
    a_bits: int = 0
    b_bits: int = 0
    operand_bytes: int = 0  # bytes of the builtin's A / B operand (0: kpl * elem_bytes)
    # block-scaled forms: a_scale[lane] = (row, scale block) whose E8M0 scale factor of A
    # the lane supplies, b_scale[lane] = (column, scale block) of B; () for the others
    a_scale: tuple[tuple[int, int], ...] = ()
    b_scale: tuple[tuple[int, int], ...] = ()

    def a_lane(self, k: int) -> tuple[int, int]:
        """The first (lane, element) holding A[0][0][k]."""
        return _first(self.a, (0, 0, k))

    def b_lane(self, k: int) -> tuple[int, int]:
        """The first (lane, element) holding B[0][k][0]."""
        return _first(self.b, (0, k, 0))

    def holders(self, which: str, k: int) -> list[tuple[int, int]]:
        """Every (lane, element) holding A[0][0][k] (`which` "a") or B[0][k][0] ("b")."""
        table, want = (self.a, (0, 0, k)) if which == "a" else (self.b, (0, k, 0))
        return [(ln, e) for ln, xs in enumerate(table) for e, x in enumerate(xs) if x == want]

    def bits(self, which: str) -> int:
        """Bits one element of A (`which` "a") or B ("b") takes in a lane's operand."""
        bits = self.a_bits if which == "a" else self.b_bits
        return bits or 8 * self.elem_bytes

    def reg_bytes(self) -> int:
        """Bytes of the builtin's A / B operand a lane passes."""
        return self.operand_bytes or self.kpl * self.elem_bytes

    @property
    def scaled(self) -> bool:
        """Whether the instruction takes E8M0 scale factors of A and B (CDNA4's
        v_mfma_scale_* forms)."""
        return bool(self.a_scale)

    def scale_lanes(self, which: str, block: int) -> list[int]:
        """The lanes supplying the scale factor of scale block `block` of row 0 of A
        (`which` "a") or of column 0 of B ("b")."""
        table = self.a_scale if which == "a" else self.b_scale
        return [ln for ln, x in enumerate(table) if x == (0, block)]


def _first(table, want) -> tuple[int, int]:
    for lane, xs in enumerate(table):
        for e, x in enumerate(xs):
            if x == want:
                return lane, e
    raise KeyError(want)


def _vec(ctype: str, n: int) -> str:
    return ctype if n == 1 else f"{ctype} __attribute__((ext_vector_type({n})))"


def mfma_layout(inst: Instruction, arch: str) -> MfmaLayout:
    """The layout of a preset's MFMA instruction on `arch` (cdna1 to cdna4; CDNA4 keeps
    CDNA3's forms and adds shapes of twice the K, whose lanes hold M * K / 64
    consecutive k each: AMD CDNA4 ISA, MFMA operand layouts; its block-scaled forms:
    `_scaled_layout`)."""
    if inst.params.scale_fmt is not None:  # the block-scaled forms (CDNA4's tables)
        return _scaled_layout(inst)
    p = inst.params
    suffix = inst.name.removeprefix("v_mfma_")
    m = re.search(r"_(\d+)x(\d+)x(\d+)", suffix)
    M, N, K = (int(x) for x in m.groups())
    if arch == "cdna4" and suffix in GFX950_SHAPES:
        return _gfx950_layout(inst, M, N, K)
    arch = SAME_FORMS.get(arch, arch)  # the forms CDNA4 keeps, with their CDNA3 builtins
    k1 = suffix.endswith("_1k") or (arch == "cdna3" and p.a_fmt == Format.BF16)
    kpl = 2 if (p.a_fmt == Format.BF16 and not k1) else _KPL[p.a_fmt]
    # CDNA3's i8 forms with 16 or 32 products (V_MFMA_I32_32X32X16_I8, _16X16X32_I8) give
    # each lane 8 bytes of A and B (a 64-bit operand), as its fp8 forms do
    wide_i8 = p.a_fmt == Format.S8 and arch == "cdna3" and K >= 16
    if wide_i8:
        kpl = 8
    blocks = WAVE * kpl // (M * K)
    groups = K // kpl
    a = tuple(
        tuple(
            (g // groups, lane % M, (g % groups) * kpl + e) for e in range(kpl) for g in [lane // M]
        )
        for lane in range(WAVE)
    )
    b = tuple(
        tuple(
            (g // groups, (g % groups) * kpl + e, lane % N) for e in range(kpl) for g in [lane // N]
        )
        for lane in range(WAVE)
    )
    out = {Format.FP64: "f64", Format.S32: "i32"}.get(p.d_fmt, "f32")
    if p.a_fmt == Format.S8:  # clang: int (4 x i8) or long (8 x i8) operands
        kinds = "_i8" if wide_i8 else "i8"
        a_type = "long" if wide_i8 else "int"
    elif p.a_fmt in (Format.E4M3FNUZ, Format.E5M2FNUZ, Format.E4M3, Format.E5M2):
        kinds = f"_{_BUILTIN_TYPE[p.a_fmt]}_{_BUILTIN_TYPE[p.b_fmt]}"
        a_type = "long"
    else:
        kinds = _BUILTIN_TYPE[p.a_fmt] + ("_1k" if k1 else "")
        a_type = _vec(_OPERAND_CTYPE[p.a_fmt], kpl)
    builtin = f"__builtin_amdgcn_mfma_{out}_{M}x{N}x{K}{kinds}"
    acc = blocks * M * N // WAVE
    acc_type = _vec({"f64": "double", "i32": "int"}.get(out, "float"), acc)
    elem_bytes = 4 if p.a_fmt == Format.TF32 else max(1, p.a_fmt.spec.storage // 8)
    return MfmaLayout(
        inst.name,
        M,
        N,
        K,
        blocks,
        kpl,
        a,
        b,
        acc,
        builtin,
        a_type,
        acc_type,
        elem_bytes,
        f"AMD {arch.upper()} ISA §7.1 (MFMA operand layouts)",
    )


SAME_FORMS = {"cdna4": "cdna3"}
"""An architecture whose other MFMA forms are those of an earlier one (layouts, builtins)."""

GFX950_SHAPES = frozenset(
    {
        "f32_16x16x32_f16",
        "f32_32x32x16_f16",
        "f32_16x16x32_bf16",
        "f32_32x32x16_bf16",
        "i32_16x16x64_i8",
        "i32_32x32x32_i8",
    }
)
"""The MFMA shapes CDNA4 (gfx950) adds, twice the K of CDNA3's (AMD CDNA4 ISA; LLVM's
gfx950 assembler test): the names after `v_mfma_`."""


def _gfx950_layout(inst: Instruction, M: int, N: int, K: int) -> MfmaLayout:
    """CDNA4's new single-block shapes: lane l holds row (column) l % M and the k-range
    (l // M) * kpl upwards, kpl = M * K / 64; the builtins `__builtin_amdgcn_mfma_{out}_
    {M}x{N}x{K}_{type}` take 8 f16 / bf16 or 16 bytes of i8 a lane."""
    p = inst.params
    kpl = M * K // WAVE
    a = tuple(
        tuple((0, lane % M, (lane // M) * kpl + e) for e in range(kpl)) for lane in range(WAVE)
    )
    b = tuple(
        tuple((0, (lane // N) * kpl + e, lane % N) for e in range(kpl)) for lane in range(WAVE)
    )
    out = "i32" if p.d_fmt == Format.S32 else "f32"
    elem_bytes = max(1, p.a_fmt.spec.storage // 8)
    n_ctype = kpl * elem_bytes // 4 if p.a_fmt == Format.S8 else kpl
    acc = M * N // WAVE
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
        f"__builtin_amdgcn_mfma_{out}_{M}x{N}x{K}_{_BUILTIN_TYPE[p.a_fmt]}",
        _vec(_GFX950_CTYPE[p.a_fmt], n_ctype),
        _vec("int" if out == "i32" else "float", acc),
        elem_bytes,
        "AMD CDNA4 ISA (MFMA operand layouts of the gfx950 shapes)",
    )


SCALED_FORMAT_CODE = {
    Format.E4M3: 0,
    Format.E5M2: 1,
    Format.E2M3: 2,
    Format.E3M2: 3,
    Format.E2M1: 4,
}
"""The block-scaled forms' operand-format codes, passed as the builtin's cbsz (A) and blgp
(B) arguments: fp8 e4m3, bf8 e5m2, fp6 e2m3, bf6 e3m2, fp4 e2m1 (AMD ROCm blog "Matrix
Core Programming on AMD CDNA3 and CDNA4 architecture", 2025, section on
__builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, whose Atype / Btype list gives them;
LLVM's IR verifier, llvm/lib/IR/VerifierAMDGPU.cpp, case
amdgcn_mfma_scale_f32_16x16x128_f8f6f4, accepts codes 0..4 only)."""

SCALED_RUN = {8: 16, 6: 32, 4: 32}
"""Consecutive k of one row of A (column of B) a lane holds in one run, by element bits,
in the block-scaled forms (see `_scaled_layout`)."""

SCALED_OPERAND_BYTES = 32
"""Bytes of the block-scaled builtins' A / B operand: 8 x i32 whatever the format (clang's
gfx950 builtin test, clang/test/SemaOpenCL/builtins-amdgcn-error-gfx950.cl, passes int8
vectors; fp8 fills 8 dwords, fp6 the low 6, fp4 the low 4, as LLVM's verifier counts
them, llvm/lib/IR/VerifierAMDGPU.cpp; the ROCm blog above zero-fills fp4's upper half)."""


def _scaled_k(bits: int, M: int, K: int, lane: int, e: int) -> int:
    """The k of element `e` of `lane`'s A row (B column) in a block-scaled form: runs of
    SCALED_RUN[bits] consecutive k, the lane group g = lane // M taking run g of each
    pass of (64 / M) runs."""
    run = SCALED_RUN[bits]
    groups = WAVE // M
    return (e // run) * groups * run + (lane // M) * run + e % run


def _scaled_layout(inst: Instruction) -> MfmaLayout:
    """CDNA4's block-scaled v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4 forms: each lane
    holds 32 elements of row l % M of A (column l % N of B), packed densely little-endian
    (element e at bits [e b, (e + 1) b) of the 8-dword operand, b = 8, 6 or 4), and one
    E8M0 scale factor of A and one of B: that of row (column) l % M, scale block l // M
    (one scale per 32 k). The builtin is
    `__builtin_amdgcn_mfma_scale_f32_{M}x{N}x{K}_f8f6f4(a, b, c, cbsz, blgp, opsel_a,
    scale_a, opsel_b, scale_b)`, cbsz / blgp the formats' SCALED_FORMAT_CODE, opsel 0
    (byte 0 of the scale word; the probe writes the scale factor in all four bytes, so
    the byte that opsel selects does not matter).

    Documented: the builtin, its argument order and the format codes (ROCm blog "Matrix
    Core Programming on AMD CDNA3 and CDNA4 architecture", ROCm/rocm-blogs
    blogs/software-tools-optimization/matrix-cores-cdna/README.md; clang's
    clang/test/SemaOpenCL/builtins-amdgcn-error-gfx950.cl: cbsz, blgp and the opsels
    constant, the scales runtime ints); 8 / 6 / 4 dwords of data for fp8 / fp6 / fp4
    (llvm/lib/IR/VerifierAMDGPU.cpp); for 32x32x64, the blog's examples: with fp8, lane l
    holds k (l // 32) * 16 + {0..15} and 32 + (l // 32) * 16 + {0..15} (runs of 16);
    with fp4, k (l // 32) * 32 + {0..31}, k even in the low nibble; one scale factor a
    lane, 2^(s - 127), applied to the dot product before accumulation.

    Assumed (a probe on gfx950 settles it): 16x16x128 follows the same rule with four
    lane groups (fp8: k (l // 16) * 16 + {0..15} and 64 + ...; fp4: (l // 16) * 32 +
    {0..31}); fp6 / bf6 hold 32 consecutive k as fp4 does (24 bytes, element 0 in the
    low bits); the scale factor of block kb of row i is lane i + M kb's, also where
    fp8's runs of 16 give the lane k of two blocks (Triton's gfx950 scaled-dot layouts,
    test/TritonGPU/amd/accelerate-amd-matmul-mfma-gfx950.mlir,
    mfma_dot_scaled_mxfp4_mxfp4, place a 32x32 form's scales so: lane bits 0-4 the row,
    bit 5 the block); in mixed forms each operand follows its own format's rule. No
    hipcc here: the generated programs are not compiled."""
    p = inst.params
    m = re.search(r"_(\d+)x(\d+)x(\d+)_", inst.name)
    M, N, K = (int(x) for x in m.groups())
    kpl = M * K // WAVE  # 32 in both shapes
    abits, bbits = p.a_fmt.spec.storage, p.b_fmt.spec.storage
    a = tuple(
        tuple((0, lane % M, _scaled_k(abits, M, K, lane, e)) for e in range(kpl))
        for lane in range(WAVE)
    )
    b = tuple(
        tuple((0, _scaled_k(bbits, N, K, lane, e), lane % N) for e in range(kpl))
        for lane in range(WAVE)
    )
    acc = M * N // WAVE
    codes = f"{SCALED_FORMAT_CODE[p.a_fmt]}, {SCALED_FORMAT_CODE[p.b_fmt]}"
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
        f"__builtin_amdgcn_mfma_scale_f32_{M}x{N}x{K}_f8f6f4",
        _vec("int", SCALED_OPERAND_BYTES // 4),
        _vec("float", acc),
        1,
        "ROCm blog 'Matrix Core Programming on AMD CDNA3 and CDNA4 architecture' "
        "(32x32x64 fp8 / fp4 layouts); 16x16x128, fp6 and the scale lanes assumed "
        "(probe/mfma.py _scaled_layout)",
        call_args=f", {codes}, 0, scale_a, 0, scale_b",
        a_bits=abits,
        b_bits=bbits,
        operand_bytes=SCALED_OPERAND_BYTES,
        a_scale=tuple((lane % M, lane // M) for lane in range(WAVE)),
        b_scale=tuple((lane % N, lane // N) for lane in range(WAVE)),
    )


MFMA_PROBE_ARCHS = ("cdna1", "cdna2", "cdna3", "cdna4")
"""Presets whose MFMA layouts these tables give (CDNA4's block-scaled forms included)."""


def all_mfma_layouts() -> dict[tuple[str, str], MfmaLayout]:
    """Every MFMA instruction of the presets with layout tables: (arch, name) -> layout."""
    from ..spec.presets import PRESETS

    return {
        (arch, name): mfma_layout(inst, arch)
        for arch, preset in PRESETS.items()
        for name, inst in preset.instructions.items()
        if inst.kind == "mfma" and arch in MFMA_PROBE_ARCHS
    }
