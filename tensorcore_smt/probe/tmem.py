"""Where tcgen05.mma (sm_100a) finds its operands, as data tables.

A and B are read from shared memory through 64-bit matrix descriptors, D (and the C it
accumulates into) lives in tensor memory (TMEM). The tables follow the PTX ISA:

- shared memory: K-major, no swizzle (PTX ISA §9.7.16.4.1 "Shared memory descriptor",
  §9.7.16.3 "Major-ness supported by strides"): 8 rows x 16 bytes core matrices, the
  leading byte offset LBO between core matrices along K, the stride byte offset SBO
  between core matrices along M / N. One 16-byte core-matrix row holds 8 f16/bf16, 4 tf32
  or, with .kind::f8f6f4, 16 elements of any of its types: fp8 one per byte, fp6 packed
  in 12 bytes and fp4 in 8 bytes followed by padding (the .b6x16_p32 / .b4x16_p64 forms of
  §5.5.1.1.1). `bit[r][k]` is the bit offset of element [r][k] from the buffer's start;
- tensor memory: M = 64 with cta_group::1 and no .ws is "Layout F" (§9.7.16.10.5.6): rows
  16w..16w+15 of D in lanes 32w..32w+15, column n in TMEM column n (32-bit cells);
- the instruction descriptor (§9.7.16.4.2, Table 42): D type in bits 4-5, A and B types in
  7-9 and 10-12, K-major A and B (bits 15, 16 clear), N >> 3 in 17-22, M >> 4 in 24-28.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from ..formats import Format
from ..spec.presets import Instruction

CORE_ROWS = 8
CORE_BYTES = 16  # bytes of K in one core-matrix row

_PER_CHUNK = {"f16": 8, "tf32": 4, "f8f6f4": 16, "i8": 16}
"""Elements of K in one 16-byte core-matrix row, per .kind."""

_IDESC_TYPE: dict[str, dict[Format, int]] = {
    "f16": {Format.FP16: 0, Format.BF16: 1},
    "tf32": {Format.TF32: 2},
    "f8f6f4": {Format.E4M3: 0, Format.E5M2: 1, Format.E2M3: 3, Format.E3M2: 4, Format.E2M1: 5},
    "i8": {Format.U8: 0, Format.S8: 1},
}
"""atype / btype codes of the instruction descriptor (PTX ISA Table 42)."""

_IDESC_DTYPE = {Format.FP16: 0, Format.FP32: 1, Format.S32: 2}

IDESC_SATURATE = 1 << 3
"""Instruction descriptor bit 3: saturate, for integer types (.kind::i8)."""


@dataclass(frozen=True)
class PackedSmem:
    """A K-major operand (rows x K) in shared memory as tcgen05 reads it."""

    operand: str  # "A" or "B" (B stored as N x K)
    rows: int
    cols: int  # K
    elem_bits: int  # bits one element occupies (4, 6, 8, 16 or 32)
    bit: tuple[tuple[int, ...], ...]  # bit[r][k]: bit offset of element [r][k]
    lbo: int  # bytes between core matrices along K
    sbo: int  # bytes between core matrices along M / N
    size: int  # bytes


@dataclass(frozen=True)
class TmemLayout:
    """D (M x N, 32-bit cells) in tensor memory: place[r][c] = (lane, column)."""

    rows: int
    cols: int
    place: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class Tcgen05Layout:
    """Everything a tcgen05.mma probe needs to place one vector."""

    key: str
    kind: str  # f16 | tf32 | f8f6f4
    M: int
    N: int
    K: int
    threads: int  # one warp allocates TMEM, issues the MMA and reads D back
    a: PackedSmem
    b: PackedSmem
    d: TmemLayout
    idesc: int
    source: str


def packed_smem(operand: str, rows: int, K: int, elem_bits: int, per_chunk: int) -> PackedSmem:
    """The no-swizzle K-major layout: LBO = 128 bytes (the next core matrix along K
    follows), SBO = one row of core matrices along K further."""
    chunks = -(-K // per_chunk)
    lbo = CORE_ROWS * CORE_BYTES
    sbo = chunks * lbo
    bit = tuple(
        tuple(
            8 * ((r // CORE_ROWS) * sbo + (k // per_chunk) * lbo + (r % CORE_ROWS) * CORE_BYTES)
            + (k % per_chunk) * elem_bits
            for k in range(K)
        )
        for r in range(rows)
    )
    size = -(-rows // CORE_ROWS) * sbo
    return PackedSmem(operand, rows, K, elem_bits, bit, lbo, sbo, size)


def layout_f(M: int, N: int) -> TmemLayout:
    """PTX ISA Layout F (M = 64, cta_group::1, not .ws), lane alignment 0."""
    place = tuple(tuple((32 * (r // 16) + r % 16, c) for c in range(N)) for r in range(M))
    return TmemLayout(M, N, place)


def kind_of(inst: Instruction) -> str:
    m = re.search(r"kind::(\w+)", inst.name)
    if inst.kind != "tcgen05" or m is None:
        raise ValueError(f"{inst.name} is not a tcgen05 instruction")
    return m.group(1)


def instruction_descriptor(kind: str, M: int, N: int, a: Format, b: Format, d: Format) -> int:
    codes = _IDESC_TYPE[kind]
    return (
        (_IDESC_DTYPE[d] << 4)
        | (codes[a] << 7)
        | (codes[b] << 10)
        | ((N >> 3) << 17)
        | ((M >> 4) << 24)
    )


def _elem_bits(fmt: Format) -> int:
    """Bits of one element in shared memory (TF32 in 32-bit words, sub-byte types packed)."""
    return 32 if fmt == Format.TF32 else fmt.spec.storage


def tcgen05_layout(inst: Instruction) -> Tcgen05Layout:
    """The placement tables of a preset's tcgen05 instruction (M = 64, N = 8)."""
    p = inst.params
    if p.scale_fmt is not None:
        raise UserError(
            f"probe generation for tcgen05 .block_scale forms is not supported yet ({inst.name})"
        )
    kind = kind_of(inst)
    M, N = 64, 8
    per = _PER_CHUNK[kind]
    a = packed_smem("A", M, p.K, _elem_bits(p.a_fmt), per)
    b = packed_smem("B", N, p.K, _elem_bits(p.b_fmt), per)
    idesc = instruction_descriptor(kind, M, N, p.a_fmt, p.b_fmt, p.d_fmt)
    if p.int_clamp.value == "satfinite":
        idesc |= IDESC_SATURATE
    return Tcgen05Layout(
        f"tcgen05.m{M}n{N}k{p.K}.{kind}.{a.elem_bits}.{b.elem_bits}.{p.d_fmt.spec.name}"
        + (".sat" if idesc & IDESC_SATURATE and kind == "i8" else ""),
        kind,
        M,
        N,
        p.K,
        32,
        a,
        b,
        layout_f(M, N),
        idesc,
        "PTX ISA §9.7.16 (tcgen05: shared memory descriptor, instruction descriptor, "
        "tensor memory Layout F)",
    )


def all_tcgen05_layouts() -> dict[str, Tcgen05Layout]:
    """Every distinct tcgen05 layout the presets use."""
    from ..spec.presets import PRESETS

    out: dict[str, Tcgen05Layout] = {}
    for preset in PRESETS.values():
        for inst in preset.instructions.values():
            if inst.kind == "tcgen05" and inst.params.scale_fmt is None:
                lay = tcgen05_layout(inst)
                out.setdefault(lay.key, lay)
    return out
