"""Where the elements of A, B, C and D live in the registers of a warp (mma) or a
warpgroup (wgmma), as data tables.

Every table is computed once from the row/column formulas of the PTX ISA ("Matrix
Fragments for mma.mMnNkK", §9.7.14.5; "Register Fragments" and "Shared Memory Matrix
Layout" for wgmma, §9.7.15.5.1) and stored as a tuple: ``place[t][i] = (row, col)`` says
that element ``i`` (low to high, i.e. register ``i // per_reg``, bits
``(i % per_reg) * elem_bits`` upwards) of thread ``t`` holds matrix element
``[row][col]``. Within a thread, the elements fill the registers in PTX order (a0, a1, …).

Notation of the formulas: ``lane = t % 32``, ``warp = t // 32``, ``g = lane >> 2``
(groupID), ``q = lane % 4`` (threadID_in_group).

`mma.m8n8k4` with .f16 runs four independent 8x8x4 products per warp, one per
"quadpair" (lanes 0-3 with 16-19, 4-7 with 20-23, …); `Layout.group` names the product a
thread takes part in and each table is a bijection per group. Every other layout has one
group.

wgmma reads B from shared memory. `SharedLayout` gives the byte offset of B[k][n] in the
canonical no-swizzle K-major layout: 8x16-byte "core matrices" (8 rows of N, 16 bytes of
K each, rows contiguous), placed ``lbo`` bytes apart along K and ``sbo`` bytes apart
along N. With N = 8 there is a single core matrix along N, and both offsets are set to
128 so the layout reads the same whichever of the two fields the hardware takes for the
K direction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UserError
from ..formats import Format
from ..spec.presets import Instruction

_BITS = {
    Format.FP64: 64,
    Format.FP32: 32,
    Format.TF32: 32,
    Format.FP16: 16,
    Format.BF16: 16,
    Format.S32: 32,
    Format.S4: 4,
    Format.U4: 4,
    Format.B1: 1,
}
"""Register container bits per element (8 for every fp8/fp6/fp4 type and .s8/.u8; the
integer .s4/.u4 and .b1 are packed 8 and 32 to a register: PTX ISA, mma integer
fragments)."""

_CONTAINER_SHIFT = {Format.E2M1: 2}
"""Bit position of a sub-byte value inside its 8-bit container (PTX ISA, mma with
.kind::f8f6f4: .e2m1 sits in the central 4 bits, .e3m2/.e2m3 in the low 6 bits)."""


def elem_bits(fmt: Format) -> int:
    """Bits one element of `fmt` occupies in a register (its container)."""
    return _BITS.get(fmt, 8)


def container_shift(fmt: Format) -> int:
    return _CONTAINER_SHIFT.get(fmt, 0)


@dataclass(frozen=True)
class Fragment:
    """One register operand of a warp- or warpgroup-level MMA."""

    operand: str  # "A", "B", "C" or "D"
    rows: int
    cols: int
    reg_bits: int  # 32 (.b32 / .f32 / .f16x2) or 64 (.f64)
    elem_bits: int  # container bits per element
    place: tuple[tuple[tuple[int, int], ...], ...]  # place[thread][element] = (row, col)

    @property
    def threads(self) -> int:
        return len(self.place)

    @property
    def elems(self) -> int:
        """Elements per thread."""
        return len(self.place[0])

    @property
    def per_reg(self) -> int:
        return self.reg_bits // self.elem_bits

    @property
    def regs(self) -> int:
        """Registers per thread."""
        return self.elems // self.per_reg

    def slot(self, i: int) -> tuple[int, int]:
        """(register, bit offset) of element i."""
        return i // self.per_reg, (i % self.per_reg) * self.elem_bits

    def holders(self, row: int, col: int, groups: tuple[int, ...], group: int = 0):
        """Every (thread, element) of `group` that holds [row][col]."""
        return [
            (t, i)
            for t, elems in enumerate(self.place)
            if groups[t] == group
            for i, rc in enumerate(elems)
            if rc == (row, col)
        ]


@dataclass(frozen=True)
class SharedLayout:
    """B (K x N) in shared memory: offset[k][n] is the byte offset of B[k][n]."""

    rows: int
    cols: int
    elem_bytes: int
    offset: tuple[tuple[int, ...], ...]
    lbo: int  # leading dimension byte offset (between core matrices along K)
    sbo: int  # stride dimension byte offset (between core matrices along N)
    size: int  # bytes

    swizzle: int = 0  # descriptor swizzle mode: 0 = none


@dataclass(frozen=True)
class Layout:
    """The fragment layouts of one PTX form (shape and operand types)."""

    key: str  # e.g. "mma.m16n8k16.f16.f32"
    M: int
    N: int
    K: int
    threads: int  # 32 (warp) or 128 (warpgroup)
    group: tuple[int, ...]  # independent product each thread takes part in
    a: Fragment
    b: Fragment | SharedLayout
    c: Fragment
    d: Fragment  # the same table as c when C and D have the same type
    source: str

    @property
    def groups(self) -> int:
        return max(self.group) + 1


Place = Callable[[int, int], tuple[int, int]]


def _frag(
    operand: str, rows: int, cols: int, threads: int, elems: int, reg_bits: int, ebits: int, f
):
    place = tuple(tuple(f(t, i) for i in range(elems)) for t in range(threads))
    return Fragment(operand, rows, cols, reg_bits, ebits, place)


def _lane(t: int) -> tuple[int, int, int, int]:
    """(warp, lane, groupID, threadID_in_group) of thread t."""
    lane = t % 32
    return t // 32, lane, lane >> 2, lane % 4


# --- the row/column formulas (PTX ISA §9.7.14.5 and §9.7.15.5.1.1) ----------------------


def _c_m16n8(t: int, i: int) -> tuple[int, int]:
    """C/D of every m16n8 shape (f32, f16 or f64): c0, c1 row g; c2, c3 row g+8."""
    w, _, g, q = _lane(t)
    return 16 * w + g + 8 * (i >= 2), 2 * q + (i & 1)


def _a_k8_16bit(t, i):  # m16n8k8 .f16/.bf16 A: a0,a1 row g; a2,a3 row g+8
    _, _, g, q = _lane(t)
    return g + 8 * (i >= 2), 2 * q + (i & 1)


def _b_k8_16bit(t, i):  # m16n8k8 .f16/.bf16 B
    _, _, g, q = _lane(t)
    return 2 * q + i, g


def _a_k16_16bit(t, i):  # m16n8k16 .f16/.bf16 A (and wgmma m64nNk16 per warp)
    w, _, g, q = _lane(t)
    return 16 * w + g + 8 * ((i // 2) % 2), 2 * q + (i & 1) + 8 * (i >= 4)


def _b_k16_16bit(t, i):  # m16n8k16 .f16/.bf16 B
    _, _, g, q = _lane(t)
    return 2 * q + (i & 1) + 8 * (i >= 2), g


def _a_k4_32bit(t, i):  # m16n8k4 .tf32/.f64 A: a0 row g, a1 row g+8
    _, _, g, q = _lane(t)
    return g + 8 * i, q


def _b_k4_32bit(t, i):  # m16n8k4 .tf32/.f64 B
    _, _, g, q = _lane(t)
    return q, g


def _a_k8_32bit(t, i):  # m16n8k8 .tf32/.f64, m16n8k16 .f64 A (and wgmma m64nNk8 per warp)
    w, _, g, q = _lane(t)
    return 16 * w + g + 8 * (i % 2), q + 4 * (i // 2)


def _b_k8_32bit(t, i):  # m16n8k8 .tf32/.f64, m16n8k16 .f64 B: b_i row q + 4i
    _, _, g, q = _lane(t)
    return q + 4 * i, g


def _a_k16_8bit(t, i):  # m16n8k16 .e4m3/.e5m2 A
    _, _, g, q = _lane(t)
    return g + 8 * (i >= 4), 4 * q + (i & 3)


def _b_k16_8bit(t, i):
    _, _, g, q = _lane(t)
    return 4 * q + i, g


def _a_k32_8bit(t, i):  # m16n8k32 8-bit A (and wgmma m64nNk32 per warp)
    w, _, g, q = _lane(t)
    return 16 * w + g + 8 * ((i // 4) % 2), 4 * q + (i & 3) + 16 * (i >= 8)


def _b_k32_8bit(t, i):
    _, _, g, q = _lane(t)
    return 4 * q + (i & 3) + 16 * (i >= 4), g


def _a_k64_4bit(t, i):  # m16n8k64 .e2m1 A, packed (kind::mxf4 / mxf4nvf4): 8 per register
    _, _, g, q = _lane(t)
    return g + 8 * ((i // 8) % 2), 8 * q + (i & 7) + 32 * (i >= 16)


def _b_k64_4bit(t, i):
    _, _, g, q = _lane(t)
    return 8 * q + (i & 7) + 32 * (i >= 8), g


def _c_m8n8(t, i):  # m8n8k16/k32/k128 .s32 accumulators: c0, c1 in row g
    _, _, g, q = _lane(t)
    return g, 2 * q + i


def _int_a(per: int, k: int):
    """A of an integer m8n8 / m16n8 form with `per` elements to a 32-bit register and K =
    k (PTX ISA, mma .u8/.s8, .u4/.s4, .b1 fragments): per register a run of `per`
    consecutive columns from threadID_in_group * per; registers alternate rows g and
    g + 8 (m16n8), then move 4 * per columns on."""

    def f(t, i):
        w, _, g, q = _lane(t)
        reg, e = divmod(i, per)
        if k == 4 * per:  # one register along K: m8n8 (one row) or m16n8 (rows g, g + 8)
            return 16 * w + g + 8 * reg, q * per + e
        return 16 * w + g + 8 * (reg % 2), q * per + e + 4 * per * (reg // 2)

    return f


def _int_b(per: int):
    """B of an integer form: register j holds rows threadID_in_group * per + 4 * per * j
    onwards, column groupID."""

    def f(t, i):
        _, _, g, q = _lane(t)
        reg, e = divmod(i, per)
        return q * per + e + 4 * per * reg, g

    return f


def _qp_row(t: int) -> int:
    """m8n8k4 .f16: the row (of A) or column (of B) a lane holds within its quadpair."""
    lane = t % 32
    return lane % 4 + 4 * (lane >= 16)


def _c_m8n8k4_f32(t, i):  # m8n8k4 .f32 accumulators
    lane = t % 32
    return (lane & 1) + (i & 2) + 4 * (lane >= 16), (i & 4) + (lane & 2) + (i & 1)


def _c_m8n8k4_f64(t, i):  # m8n8k4 .f64 accumulators: c0, c1 in row g
    _, _, g, q = _lane(t)
    return g, 2 * q + i


def _acc_m8n8k4_f16(operand: str, bits: int) -> Fragment:
    if bits == 32:
        return _frag(operand, 8, 8, 32, 8, 32, 32, _c_m8n8k4_f32)
    return _frag(operand, 8, 8, 32, 8, 32, 16, lambda t, i: (_qp_row(t), i))


def _m8n8k4_f16(c_bits: int, d_bits: int) -> Layout:
    group = tuple((t % 16) // 4 for t in range(32))
    a = _frag("A", 8, 4, 32, 4, 32, 16, lambda t, i: (_qp_row(t), i))  # .row A
    b = _frag("B", 4, 8, 32, 4, 32, 16, lambda t, i: (i, _qp_row(t)))  # .col B
    return Layout(
        f"mma.m8n8k4.b16.{c_bits}.{d_bits}",
        8,
        8,
        4,
        32,
        group,
        a,
        b,
        _acc_m8n8k4_f16("C", c_bits),
        _acc_m8n8k4_f16("D", d_bits),
        "PTX ISA §9.7.14.5.1 (mma.m8n8k4 with .f16: four products per warp, one per quadpair)",
    )


# Warp-level m16n8 (and m8n8k4 .f64) forms: (shape, element bits of A/B) ->
# (A elements per thread, A formula, B elements, B formula).
_MMA_FORMS: dict[tuple[str, int], tuple[int, Place, int, Place]] = {
    ("m16n8k8", 16): (4, _a_k8_16bit, 2, _b_k8_16bit),
    ("m16n8k16", 16): (8, _a_k16_16bit, 4, _b_k16_16bit),
    ("m16n8k4", 32): (2, _a_k4_32bit, 1, _b_k4_32bit),
    ("m16n8k8", 32): (4, _a_k8_32bit, 2, _b_k8_32bit),
    ("m16n8k4", 64): (2, _a_k4_32bit, 1, _b_k4_32bit),
    ("m16n8k8", 64): (4, _a_k8_32bit, 2, _b_k8_32bit),
    ("m16n8k16", 64): (8, _a_k8_32bit, 4, _b_k8_32bit),
    ("m16n8k16", 8): (8, _a_k16_8bit, 4, _b_k16_8bit),
    ("m16n8k32", 8): (16, _a_k32_8bit, 8, _b_k32_8bit),
    ("m16n8k64", 4): (32, _a_k64_4bit, 16, _b_k64_4bit),
    # integer forms (PTX ISA, mma .u8/.s8, .u4/.s4 and .b1 fragments)
    ("m8n8k16", 8): (4, _int_a(4, 16), 4, _int_b(4)),
    ("m8n8k32", 4): (8, _int_a(8, 32), 8, _int_b(8)),
    ("m8n8k128", 1): (32, _int_a(32, 128), 32, _int_b(32)),
    ("m16n8k32", 4): (16, _int_a(8, 32), 8, _int_b(8)),
    ("m16n8k128", 1): (64, _int_a(32, 128), 32, _int_b(32)),
    ("m16n8k256", 1): (128, _int_a(32, 256), 64, _int_b(32)),
}

_WGMMA_A: dict[int, tuple[int, Place]] = {
    # element bits of A -> (elements per thread, formula); K = 256 bits / element bits
    16: (8, _a_k16_16bit),
    32: (4, _a_k8_32bit),
    8: (16, _a_k32_8bit),
}


def _mma_layout(shape: str, ab_bits: int, c_bits: int, d_bits: int) -> Layout:
    M, N, K = (int(x) for x in re.match(r"m(\d+)n(\d+)k(\d+)$", shape).groups())

    def acc(operand: str, bits: int) -> Fragment:
        if shape == "m8n8k4":
            return _frag(operand, 8, 8, 32, 2, 64, 64, _c_m8n8k4_f64)
        if M == 8:  # the integer m8n8 shapes: two .s32 per thread
            return _frag(operand, 8, 8, 32, 2, 32, bits, _c_m8n8)
        return _frag(operand, M, N, 32, 4, 64 if bits == 64 else 32, bits, _c_m16n8)

    if shape == "m8n8k4" and ab_bits == 64:
        a = _frag("A", 8, 4, 32, 1, 64, 64, lambda t, i: (_lane(t)[2], _lane(t)[3]))
        b = _frag("B", 4, 8, 32, 1, 64, 64, lambda t, i: (_lane(t)[3], _lane(t)[2]))
    else:
        na, fa, nb, fb = _MMA_FORMS[(shape, ab_bits)]
        reg = 64 if ab_bits == 64 else 32
        a = _frag("A", M, K, 32, na, reg, ab_bits, fa)
        b = _frag("B", K, N, 32, nb, reg, ab_bits, fb)
    return Layout(
        f"mma.{shape}.b{ab_bits}.{c_bits}.{d_bits}",
        M,
        N,
        K,
        32,
        (0,) * 32,
        a,
        b,
        acc("C", c_bits),
        acc("D", d_bits),
        f"PTX ISA §9.7.14.5 (Matrix Fragments for mma.{shape})",
    )


def shared_b(K: int, N: int, elem_bytes: int) -> SharedLayout:
    """B (K x N, K-major, N <= 8) in the no-swizzle canonical layout: one 8 x 16-byte core
    matrix per 16 bytes of K, 128 bytes apart."""
    if N > 8:
        raise ValueError("shared_b covers N <= 8 (one core matrix along N)")
    per_row = 16 // elem_bytes  # elements of K in one 16-byte core-matrix row
    core = 8 * 16
    lbo = sbo = core
    offset = tuple(
        tuple((k // per_row) * lbo + n * 16 + (k % per_row) * elem_bytes for n in range(N))
        for k in range(K)
    )
    return SharedLayout(K, N, elem_bytes, offset, lbo, sbo, (K // per_row) * core)


def _wgmma_layout(ab_bits: int, cd_bits: int) -> Layout:
    na, fa = _WGMMA_A[ab_bits]
    K = 256 // ab_bits
    a = _frag("A", 64, K, 128, na, 32, ab_bits, fa)
    d = _frag("D", 64, 8, 128, 4, 32, cd_bits, _c_m16n8)  # D is also the accumulator input
    b = shared_b(K, 8, ab_bits // 8)
    return Layout(
        f"wgmma.m64n8k{K}.b{ab_bits}.{cd_bits}",
        64,
        8,
        K,
        128,
        (0,) * 128,
        a,
        b,
        d,
        d,
        "PTX ISA §9.7.15.5.1 (wgmma register fragments; B in shared memory, no swizzle)",
    )


@dataclass(frozen=True)
class Form:
    """A parsed PTX instruction form."""

    kind: str  # mma | wgmma | tcgen05
    shape: str  # e.g. m16n8k16
    d: str  # PTX type names
    a: str
    b: str
    c: str
    f8f6f4: bool = False
    satfinite: bool = False  # integer forms: `.satfinite` (PTX ISA, mma integer type)
    bit_op: str = ""  # single-bit forms: "xor" or "and" (then .popc)
    # block-scaled forms (PTX `.block_scale`): the name's part after the shape, e.g.
    # "kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"; "" otherwise
    scaled: str = ""
    # structured-sparse forms: "sp" (mma.sp) or "sp::ordered_metadata"; "" when dense
    sparse: str = ""

    @property
    def packed_fp4(self) -> bool:
        """FP4 operands packed 8 to a register (kind::mxf4 / mxf4nvf4; PTX ISA, mma
        block scaling) rather than one per 8-bit container (kind::f8f6f4 / mxf8f6f4)."""
        return self.scaled.startswith(("kind::mxf4.", "kind::mxf4nvf4."))


_PTX_NAME = {
    Format.FP64: "f64",
    Format.FP32: "f32",
    Format.TF32: "tf32",
    Format.FP16: "f16",
    Format.BF16: "bf16",
    Format.E4M3: "e4m3",
    Format.E5M2: "e5m2",
    Format.E3M2: "e3m2",
    Format.E2M3: "e2m3",
    Format.E2M1: "e2m1",
    Format.S32: "s32",
    Format.S8: "s8",
    Format.U8: "u8",
    Format.S4: "s4",
    Format.U4: "u4",
    Format.B1: "b1",
}


def form_of(inst: Instruction) -> Form:
    """The PTX form of a preset instruction (UserError for kinds without a probe)."""
    p = inst.params
    if inst.kind not in ("mma", "wgmma", "tcgen05"):
        what = "AMD MFMA" if inst.kind == "mfma" else inst.kind
        raise UserError(
            f"probe generation for {what} instructions is not supported yet ({inst.name})"
        )
    shape = re.search(r"m\d+n\d+k\d+", inst.name).group(0)
    names = [_PTX_NAME[f] for f in (p.d_fmt, p.a_fmt, p.b_fmt, p.c_fmt)]
    scaled = inst.name.split(".", 1)[1] if ".block_scale." in inst.name else ""
    parts = inst.name.split(".")
    op = next((x for x in ("xor", "and") if x in parts and "popc" in parts), "")
    return Form(
        inst.kind,
        shape,
        *names,
        f8f6f4="kind::f8f6f4" in inst.name,
        scaled=scaled,
        satfinite="satfinite" in parts,
        bit_op=op,
        sparse=parts[1] if inst.name.startswith("mma.sp") else "",
    )


def layout_for(inst: Instruction) -> Layout:
    """The fragment layouts of a preset's mma or wgmma instruction."""
    p = inst.params
    form = form_of(inst)
    ab = 4 if form.packed_fp4 else elem_bits(p.a_fmt)
    cb, db = elem_bits(p.c_fmt), elem_bits(p.d_fmt)
    if form.kind == "wgmma":
        if ab not in _WGMMA_A:
            raise UserError(
                f"probe generation for {inst.name} is not supported yet (wgmma with "
                f"{ab}-bit A elements)"
            )
        return _wgmma_layout(ab, db)
    if form.shape == "m8n8k4" and ab == 16:
        return _m8n8k4_f16(cb, db)
    if form.sparse:
        return _sparse_layout(form.shape, p.n_a, ab, cb, db)
    return _mma_layout(form.shape, ab, cb, db)


def _sparse_layout(shape: str, n_a: int, ab_bits: int, c_bits: int, d_bits: int) -> Layout:
    """An mma.sp form (PTX ISA, "Matrix fragments for sparse mma"): A is the compressed
    16 x n_a matrix of the kept elements, placed as the dense A of m16n8k{n_a}; B (K x 8)
    continues the dense B pattern along K (register j holds rows threadID_in_group * per
    + 4 * per * j onwards, per = elements to a 32-bit register); C and D as every m16n8."""
    M, N, K = (int(x) for x in re.match(r"m(\d+)n(\d+)k(\d+)$", shape).groups())
    try:
        na, fa, _, _ = _MMA_FORMS[(f"m16n8k{n_a}", ab_bits)]
    except KeyError:
        raise UserError(
            f"probe generation for mma.sp.{shape} with {ab_bits}-bit A is not supported yet"
        ) from None
    per = 32 // ab_bits
    a = _frag("A", M, n_a, 32, na, 32, ab_bits, fa)
    b = _frag("B", K, N, 32, K // 4, 32, ab_bits, _int_b(per))
    c = _frag("C", M, N, 32, 4, 32, c_bits, _c_m16n8)
    d = _frag("D", M, N, 32, 4, 32, d_bits, _c_m16n8)
    return Layout(
        f"mma.sp.{shape}.b{ab_bits}.{c_bits}.{d_bits}",
        M,
        N,
        K,
        32,
        (0,) * 32,
        a,
        b,
        c,
        d,
        f"PTX ISA §9.7.14.6 (Matrix fragments for sparse mma.{shape})",
    )


def all_layouts() -> dict[str, Layout]:
    """Every distinct layout the presets' mma and wgmma instructions use."""
    from ..spec.presets import PRESETS

    out: dict[str, Layout] = {}
    for preset in PRESETS.values():
        for inst in preset.instructions.values():
            if inst.kind in ("mma", "wgmma"):
                try:
                    lay = layout_for(inst)
                except UserError:  # a form without a probe yet (single-bit wgmma)
                    continue
                out.setdefault(lay.key, lay)
    return out
