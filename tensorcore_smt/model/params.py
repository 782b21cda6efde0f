"""The parameters of a dot-product-add unit: one frozen record per hypothesis."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from functools import cache
from typing import Any

from ..formats import Format, Rounding, Specials
from .rounding import Overflow
from .terms import AlignMode, ProductExponent


class Algorithm(Enum):
    """Algorithm families (MMA-Sim §IV names) plus the IEEE sequential reference."""

    FDA = "fda"  # fused dot-add, chained when K > L (all NVIDIA HMMA/QMMA/HGMMA)
    SFMA = "sfma"  # sequential IEEE FMAs (DMMA; fp32/fp64 MFMA)
    GPS = "gps"  # group pairwise sum with flush-to-zero (CDNA2 fp16/bf16)
    FDRDA = "fdrda"  # fused dot, round-down add of c (CDNA3 xf32/fp16/bf16)
    GFDRDA = "gfdrda"  # even/odd grouped FDRDA (CDNA3 fp8)
    # group-scaled fused dot-add (MMA-Sim §IV-E "GST-FDPA", block-scaled FP4 on Blackwell):
    # exact sums of G products, each scaled by its block's scale factors, then one fused sum
    GDFS = "gdfs"
    SEQUENTIAL = "sequential"  # IEEE products and additions one at a time (references)
    # integer multiply-add (PTX integer mma/wgmma/tcgen05 kind::i8, AMD v_mfma_i32_*i8):
    # exact products, exact sums of L products, the s32 accumulator (model/integer.py)
    INTEGER = "integer"


class IntClamp(Enum):
    """What an integer unit's s32 accumulator does with a sum outside its range (PTX ISA,
    mma "Integer type": with `.satfinite` the accumulated value is limited to
    MIN_INT32..MAX_INT32, without it the accumulated value wraps)."""

    WRAP = "wrap"  # modulo 2^32 (two's complement)
    SATFINITE = "satfinite"  # clamped to [-2^31, 2^31 - 1] after each group of L products


class BitOp(Enum):
    """What an integer unit does in place of a product (PTX ISA, mma "Single bit": .b1
    operands, the bit operation then popc: the count of set bits is the sum)."""

    MUL = "mul"  # the integer product a_k * b_k
    AND = "and"  # a_k AND b_k (.and.popc)
    XOR = "xor"  # a_k XOR b_k (.xor.popc)


class Order(Enum):
    """Summation order of the sequential algorithms."""

    C_FIRST = "c-first"  # ((c + p0) + p1) + ...
    C_LAST = "c-last"  # ((p0 + p1) + ...) + c
    PAIRWISE = "pairwise"  # c + pairwise tree of the products
    REVERSE = "reverse"  # ((c + p_{K-1}) + p_{K-2}) + ...


class CarryOverflow(Enum):
    """What an accumulator with too few carry bits does when a sum outgrows it."""

    WRAP = "wrap"  # the carry out of the top bit is lost (two's complement, any order)
    RENORMALIZE = "renormalize"  # shift right one bit (truncating) and bump the scale


class Tf32Input(Enum):
    """How a TF32 operand stored in 32 bits is read."""

    TRUNCATE = "truncate"  # low 13 bits treated as zero (MMA-Sim §IV-C step 0)
    FULL = "full"  # all 23 mantissa bits used (an fp32 operand)


class Split(Enum):
    """Single-precision products on a half-precision unit by operand splitting (Valpey et al. 2025
    §6): each fp32 input x becomes x_hi = RN_fp16(x) and a residual x_lo, and the unit
    computes the cross products."""

    NONE = "none"  # the unit itself, on its own operand formats
    MARKIDIS = "markidis"  # Markidis et al.: all four products accumulated in the unit, c inside
    OOTOMO_YOKOTA = "ootomo-yokota"  # residuals scaled by 2^split_scale; unit runs with c = 0,
    # the three partial results and c are added outside in fp32 round-to-nearest


class NanRule(Enum):
    """Which NaN a sequential FMA returns when an operand is NaN."""

    CANONICAL = "canonical"  # always the unit's one NaN (`nan_bits`)
    # the first NaN operand among b_k, the running sum, a_k, made quiet: NVIDIA DMMA on
    # H100 (results/hardware/h100: 4 x 10^6 random f64 rows, every NaN payload explained)
    B_ACC_A = "b-acc-a"
    # SEQUENTIAL: the first NaN among the operands of the last product the sum takes
    # (a_k, then b_k), then those of the product before it, ..., then c, made quiet and
    # widened to d's format (a payload moves up by the mantissa bits d has more; the
    # operand's format must share d's exponent field, as bf16 does fp32's); an invalid
    # operation with no NaN operand gives `nan_bits`. x86 VDPBF16PS: Intel SDM, Table 5-1
    # "NaN Propagation Priorities" (src1 low, src2 low, src1 high, src2 high, srcdest), which
    # is each of its two FMAs, odd product first, taking its a, b, then the running sum
    A_B_ACC = "a-b-acc"
    # SEQUENTIAL: as a-b-acc with the factors of each product the other way round (b_k,
    # then a_k, then the product before it, ..., then c). A CPU library's x86 FMA returns
    # the first NaN of its two factors in the order its kernel passes them, then that of
    # the addend (the running sum): which of a and b comes first is the kernel's choice
    # (OpenBLAS's kernels for one CPU and another, torch's CPU GEMM), not the ISA's, so
    # `tcsmt reveal` learns it from NaN probes (order/nans.py)
    B_A_ACC = "b-a-acc"


class GroupMap(Enum):
    """Which products share a fused group when K > L."""

    CONTIGUOUS = "contiguous"  # k = 0..L-1, then L..2L-1, ...
    # bytes 0-1 of every 32-bit register of 8-bit operands first (k mod 4 in {0, 1}), then
    # bytes 2-3: Hopper's FP8 mma.sync, whose F2FP.UNPACK_B converts the low and the high
    # half of each register for two HMMAs (results/hardware/h100/sass)
    BYTE_PAIRS = "byte-pairs"


class CAddend(Enum):
    """Where c enters a fused unit."""

    FUSED = "fused"  # c is a term of the first fused group
    # the groups run on c = +0 and c is added to their result by one IEEE addition in d's
    # format, round to nearest even (Hopper's FP8 mma.sync: HMMA with C = RZ, then FADD)
    AFTER = "after"


class FlushSign(Enum):
    """The sign of the zero a flushed subnormal input becomes (`flush_inputs`)."""

    POSITIVE = "positive"  # +0 (MMA-Sim §IV-B step 1)
    # the operand's own sign: x86 DAZ (Intel SDM Vol. 1, MXCSR "Denormals-Are-Zeros":
    # denormal source operands become zeros of the same sign)
    KEEP = "keep"


class Opposing(Enum):
    """How a fused adder takes the terms whose sign opposes its sign frame."""

    EXACT = "exact"  # every term added with its own sign exactly (two's complement)
    # a sign-magnitude adder whose sign frame is the sign of c (the running accumulator):
    # a term of the other sign is negated by flipping the bits of its aligned magnitude,
    # without the +1 (the end-around carry of a ones' complement adder dropped), and a
    # result below zero in that frame is read back by flipping its bits. gfx1151 (RDNA3.5)
    # V_DOT2_F32_F16/BF16 and WMMA: ROCm rocm-systems issue #12056, a model that matched
    # the silicon on 12 M cases
    ONES = "ones"


class Sparsity(Enum):
    """What a structured-sparse instruction (PTX mma.sp: of every `sparse_group`
    consecutive k of A, metadata selects `sparse_keep`) computes, as a dense unit."""

    NONE = "none"  # a dense instruction
    # the dense unit of K * keep / group products on the selected a_j and their b: the
    # groups of L run over the selected products in order (the sparse k32 unit is the
    # dense k16 unit on the selected elements)
    COMPRESSED = "compressed"
    # the dense unit of K products with a = +0 where the metadata selects nothing: the
    # groups of L run over all K positions (zero terms count as zeros do)
    EXPANDED = "expanded"


class ZeroSign(Enum):
    """Sign of an exactly-zero fused result."""

    POSITIVE = "positive"  # always +0 (NVIDIA fused units)
    IEEE = "ieee"  # IEEE 754 rules (-0 + -0 = -0)


@dataclass(frozen=True)
class ModelParams:
    """Everything that determines d = c + sum_k a_k b_k for one instruction and hypothesis.

    Names follow the papers: F fractional alignment bits, L fused group size, carry bits
    of integer headroom above the widest term (None: as many as the sum can need),
    e_zero the exponent zero terms contribute to the maximum (None: zeros ignored).
    """

    algorithm: Algorithm
    a_fmt: Format
    b_fmt: Format
    c_fmt: Format
    d_fmt: Format
    K: int
    L: int
    F: int = 24
    carry_bits: int | None = None
    carry_overflow: CarryOverflow = CarryOverflow.WRAP
    align: AlignMode = AlignMode.TRUNCATE
    product_exponent: ProductExponent = ProductExponent.UNNORMALIZED
    e_zero: int | None = None
    rounding: Rounding = Rounding.RZ
    rounding_fmt: Format | None = None  # None: d_fmt; E8M13 for FP8 on Ada/Hopper
    overflow: Overflow = Overflow.TO_INF
    nan_bits: int | None = None  # None: the output format's default quiet NaN
    group_map: GroupMap = GroupMap.CONTIGUOUS  # FDA: which products share a group
    c_add: CAddend = CAddend.FUSED  # FDA: c inside the first group, or added at the end
    # FDA and its block-scaled / GDFS steps (other algorithms take none): how terms of the
    # other sign than c are added
    opposing: Opposing = Opposing.EXACT
    # FDA: a and b converted (exactly) to this format before the unit multiplies them;
    # fp16: FP8 mma.sync on the f16 HMMA (F2FP.UNPACK_B), where an e4m3 subnormal
    # becomes a normal f16 and its product takes the normalised exponent
    unpack: Format | None = None
    nan_rule: NanRule = NanRule.CANONICAL  # SFMA: which NaN an FMA with a NaN operand returns
    tf32: Tf32Input = Tf32Input.TRUNCATE
    flush_inputs: bool = False  # subnormal a, b, c read as +0 (MMA-Sim §IV-B step 1)
    flush_sign: FlushSign = FlushSign.POSITIVE  # SEQUENTIAL, SFMA, FDA: a flushed input's sign
    # flush_inputs reads c as well as a and b (False: a and b only; gfx1151's bf16 dot2
    # flushes bf16 subnormal inputs, its fp32 c is not one: rocm-systems #12056)
    flush_c: bool = True
    flush_products: bool = False  # a rounded product in the subnormal range -> signed 0
    flush_sums: bool = False  # a rounded intermediate sum in the subnormal range -> signed 0
    flush_outputs: bool = False  # a subnormal d -> signed 0 (then the unit's zero sign)
    zero_sign: ZeroSign = ZeroSign.POSITIVE
    acc_fmt: Format = Format.FP32  # intermediate format of SEQUENTIAL / GPS / SFMA
    acc_rounding: Rounding = Rounding.RNE
    order: Order = Order.C_FIRST
    fused_products: bool = False  # SEQUENTIAL: FMA instead of a rounded product
    G: int = 4  # GPS group size
    F2: int = 31  # CDNA3: fraction bits of the dot product when c is added
    split: Split = Split.NONE  # composite algorithm on top of the unit (a_fmt, b_fmt: its inputs)
    split_fmt: Format = Format.FP16  # the unit's own a/b format under a split
    split_scale: int = 11  # Ootomo-Yokota: residuals are scaled by 2^split_scale
    # block scaling (PTX .block_scale; MMA-Sim §IV-C "Scale factor", §IV-E): the format
    # of the scale factors sa, sb (None: the instruction takes none), and how many
    # consecutive products share one scale factor of a and one of b (32: scale_vec::1X
    # and 2X with K 32 and 64; 16: 4X)
    scale_fmt: Format | None = None
    scale_block: int = 32
    # INTEGER: wrap-around or `.satfinite` clamping of the s32 accumulator (the clamp after
    # c and each group of L exact products in `order`: L >= K clamps the exact final sum
    # once, L = 1 after every product), and the product or bit operation of each term
    int_clamp: IntClamp = IntClamp.WRAP
    bit_op: BitOp = BitOp.MUL
    # structured sparsity (PTX mma.sp): K positions of b, K * sparse_keep / sparse_group
    # compressed a, one metadata index per a (model/sparse.py)
    sparse: Sparsity = Sparsity.NONE
    sparse_group: int = 4
    sparse_keep: int = 2

    def __post_init__(self) -> None:
        check_params(self)

    @property
    def n_scales(self) -> int:
        """Scale factors per operand row: one per block of `scale_block` products (0 when
        the unit takes none)."""
        if self.scale_fmt is None:
            return 0
        return -(-self.K // self.scale_block)

    def scale_of(self, k: int) -> int:
        """Index of the scale factor that applies to product k."""
        return k // self.scale_block

    @property
    def n_a(self) -> int:
        """Entries of a per dot product: K, or the selected K * keep / group of a
        structured-sparse instruction."""
        if self.sparse == Sparsity.NONE:
            return self.K
        return self.K // self.sparse_group * self.sparse_keep

    @property
    def out_fmt(self) -> Format:
        return self.rounding_fmt or self.d_fmt

    def no_rounded(self, kind: str) -> str | None:
        """Why the unit rounds no intermediate `kind` ("products" or "sums") that
        `flush_products` / `flush_sums` could act on; None when it does.

        Products are rounded on their own (into `acc_fmt`, FP32 for GPS) only by GPS and
        by SEQUENTIAL without fused products. Intermediate sums are the rounded results
        of every addition but the one that produces d: those of SEQUENTIAL, GPS and SFMA
        when K >= 2, and the results of all but the last group of a chained fused unit."""
        fused = self.algorithm in (
            Algorithm.FDA,
            Algorithm.FDRDA,
            Algorithm.GFDRDA,
            Algorithm.GDFS,
        )
        alg = self.algorithm.value
        if self.algorithm == Algorithm.INTEGER and kind in ("products", "sums"):
            return f"the integer unit rounds no {kind}: they are exact integers"
        if kind == "products":
            if self.algorithm == Algorithm.GPS:
                return None
            if self.algorithm == Algorithm.SEQUENTIAL and not self.fused_products:
                return None
            if fused:
                return f"{alg} keeps products exact: none is rounded into an intermediate format"
            return f"{alg} fuses each product into an FMA: no product is rounded on its own"
        if kind == "sums":
            if fused:
                if len(self.groups()) > 1:
                    return None
                return (
                    f"{alg} with one fused group (K={self.K} <= L={self.L}) sums every "
                    "term in one fused step whose result is d: no intermediate sum"
                )
            if self.K >= 2:
                return None
            return f"{alg} with K=1 rounds one addition, the one that produces d"
        raise ValueError(f"unknown intermediate {kind!r}; known: products, sums")

    def with_(self, **changes: Any) -> ModelParams:
        return dataclasses.replace(self, **changes)

    def k_order(self) -> list[int]:
        """The product indices in the order the fused groups take them (`groups()` are
        ranges of this order)."""
        if self.group_map == GroupMap.BYTE_PAIRS:
            return [k for k in range(self.K) if k % 4 < 2] + [
                k for k in range(self.K) if k % 4 >= 2
            ]
        return list(range(self.K))

    def groups(self) -> list[tuple[int, int]]:
        """Index ranges of the chained fused groups."""
        L = min(self.L, self.K)
        return [(i, min(i + L, self.K)) for i in range(0, self.K, L)]


PARAM_ENUMS: dict[str, type[Enum]] = {
    "Algorithm": Algorithm,
    "AlignMode": AlignMode,
    "ProductExponent": ProductExponent,
    "Rounding": Rounding,
    "Overflow": Overflow,
    "Order": Order,
    "Tf32Input": Tf32Input,
    "CarryOverflow": CarryOverflow,
    "ZeroSign": ZeroSign,
    "FlushSign": FlushSign,
    "NanRule": NanRule,
    "GroupMap": GroupMap,
    "CAddend": CAddend,
    "Opposing": Opposing,
    "Split": Split,
    "IntClamp": IntClamp,
    "BitOp": BitOp,
    "Sparsity": Sparsity,
}


@dataclass(frozen=True)
class IntRange:
    """The values an integer parameter may take: lo..hi, and `none` where the field is
    optional. `why` says where the bounds come from (shown nowhere but here)."""

    lo: int
    hi: int
    why: str
    text: str = ""  # the range in words, where lo..hi alone would mislead

    def describe(self, optional: bool) -> str:
        return (self.text or f"{self.lo}..{self.hi}") + (" or none" if optional else "")


_OPERANDS = frozenset(
    f
    for f in Format
    if f not in (Format.UE8M0, Format.UE4M3, Format.E8M13, Format.E8M31, Format.S32)
)
_ACCUMULATORS = frozenset((Format.FP64, Format.FP32, Format.FP16, Format.BF16, Format.S32))
_INT_OPERANDS = frozenset((Format.S8, Format.U8, Format.S4, Format.U4, Format.B1))
# c, d and the sequential references' accumulator may also be e5m2, the smallest IEEE
# format, so that a tiny instance of a question stays small for the solvers
_SMALL_IEEE = frozenset((Format.E5M2,))

PARAM_RANGES: dict[str, IntRange] = {
    "K": IntRange(1, 256, "products per output element; the widest instruction has K = 128"),
    # L > K means one group (groups() caps it); identify spaces try L = 2K
    "L": IntRange(1, 512, "fused group size; MMA-Sim Table III: 2 (tf32 Volta) to 32 (fp8)"),
    "F": IntRange(0, 64, "alignment fraction bits; papers: 13 (fp8 Ada/Hopper) to 35 (GDFS)"),
    "carry_bits": IntRange(
        0, 32, "integer headroom; Valpey et al. 2025 §4.3: 3 to 4; presets: fda.least_carry_bits"
    ),
    "e_zero": IntRange(-16383, 16383, "an exponent that fits the model's 16-bit exponents"),
    "nan_bits": IntRange(
        0, (1 << 64) - 1, "checked against d_fmt by check_params", "0..2^w-1 for a w-bit d"
    ),
    "G": IntRange(1, 64, "GPS / GDFS group size; MMA-Sim §IV-B: 2 or 4, §IV-E: 16"),
    "F2": IntRange(0, 64, "CDNA3 fraction bits when c is added; MMA-Sim §IV-D: 31"),
    "split_scale": IntRange(0, 64, "Ootomo-Yokota residual scale; Valpey et al. 2025 §6: 11"),
    "scale_block": IntRange(1, 256, "products per scale factor; PTX block_scale: 16 or 32"),
    "sparse_group": IntRange(1, 8, "k per metadata group; PTX mma.sp: 4 (2:4), 2 (tf32 1:2)"),
    "sparse_keep": IntRange(1, 8, "selected k per group; PTX mma.sp: 2, tf32 1"),
}
"""Allowed range of every integer parameter, checked before any arithmetic."""

PARAM_FORMATS: dict[str, frozenset[Format]] = {
    "a_fmt": _OPERANDS,
    "b_fmt": _OPERANDS,
    "c_fmt": _ACCUMULATORS | _SMALL_IEEE,
    "d_fmt": _ACCUMULATORS | _SMALL_IEEE,
    "rounding_fmt": (_ACCUMULATORS - {Format.S32}) | {Format.E8M13},
    "acc_fmt": (_ACCUMULATORS - {Format.S32}) | _SMALL_IEEE,
    "split_fmt": _OPERANDS - _INT_OPERANDS,
    "unpack": frozenset((Format.FP16, Format.BF16, Format.FP32)),
    "scale_fmt": frozenset((Format.UE8M0, Format.UE4M3)),
}
"""Formats each format parameter may take (scale-factor formats are no operands)."""


@cache
def _field_types() -> dict[str, str]:
    """Each parameter's annotation as text (read-only: one dict, made once)."""
    return {f.name: str(f.type) for f in fields(ModelParams)}


def describe_range(name: str) -> str:
    """The allowed values of parameter `name`, in words (for errors and `list params`)."""
    ann = _field_types()[name]
    optional = "None" in ann
    if name in PARAM_RANGES:
        return PARAM_RANGES[name].describe(optional)
    if name in PARAM_FORMATS:
        names = sorted(f.spec.name for f in PARAM_FORMATS[name])
        return "one of " + ", ".join(names) + (", none" if optional else "")
    if ann == "bool":
        return "true or false"
    enum = PARAM_ENUMS.get(ann.replace(" | None", ""))
    if enum is not None:
        return "one of " + ", ".join(m.value for m in enum)
    return ann


def check_value(name: str, value: Any) -> None:
    """ValueError naming `name` and its range when `value` lies outside it."""
    if value is None:
        if "None" not in _field_types()[name]:
            raise ValueError(f"{name}: none is not allowed; allowed: {describe_range(name)}")
        return
    rng = PARAM_RANGES.get(name)
    if rng is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not rng.lo <= value <= rng.hi
    ):
        raise ValueError(f"{name}={value} is out of range; allowed: {describe_range(name)}")
    allowed = PARAM_FORMATS.get(name)
    if allowed is not None and value not in allowed:
        raise ValueError(
            f"{name}={getattr(value, 'spec', value).name} is not allowed; "
            f"allowed: {describe_range(name)}"
        )


def check_params(p: ModelParams) -> None:
    """Every field of `p` in its range, and the ranges that depend on other fields."""
    for name in _field_types():
        check_value(name, getattr(p, name))
    d = p.d_fmt.spec
    if p.nan_bits is not None and p.nan_bits >> d.storage:
        raise ValueError(
            f"nan_bits={p.nan_bits:#x} does not fit d's format {d.name}; "
            f"allowed: 0..{(1 << d.storage) - 1:#x} or none"
        )
    r = p.rounding_fmt
    if r is not None and (r.spec.storage, r.spec.ebits) != (d.storage, d.ebits):
        same = sorted(
            f.spec.name
            for f in PARAM_FORMATS["rounding_fmt"]
            if (f.spec.storage, f.spec.ebits) == (d.storage, d.ebits)
        )
        raise ValueError(
            f"rounding_fmt={r.spec.name} is not stored like d ({d.name}); "
            f"allowed with {d.name} d: {', '.join(same)} or none"
        )
    if p.split == Split.OOTOMO_YOKOTA and -2 * p.split_scale < d.emin:
        raise ValueError(
            f"split_scale={p.split_scale}: Ootomo-Yokota scales the residual products back "
            f"by 2^-2s, a normal {d.name} only for s in 0..{-d.emin // 2}"
        )
    _check_scaling(p)
    _check_integer(p)
    _check_output(p)
    _check_nan_rule(p)
    _check_split(p)
    if p.sparse != Sparsity.NONE and (
        p.sparse_keep >= p.sparse_group or p.K % p.sparse_group or p.scale_fmt is not None
    ):
        raise ValueError(
            f"sparse={p.sparse.value} needs sparse_keep < sparse_group dividing K "
            f"(K={p.K}, {p.sparse_keep} of {p.sparse_group}) and no scale_fmt"
        )
    if (
        p.opposing == Opposing.ONES
        and p.carry_bits is not None
        and p.carry_overflow == CarryOverflow.RENORMALIZE
    ):
        raise ValueError(
            "opposing=ones with carry_overflow=renormalize is not defined; allowed with "
            "limited carry bits: carry_overflow=wrap"
        )
    if p.unpack is not None:
        u = p.unpack.spec
        for s in (p.a_fmt.spec, p.b_fmt.spec):
            if s.mbits > u.mbits or s.emax > u.emax or s.emin - s.mbits < u.emin - u.mbits:
                raise ValueError(
                    f"unpack={u.name} cannot hold {s.name} operands exactly; allowed: a "
                    "format with at least their precision and range, or none"
                )


_SCALED = (Algorithm.FDA, Algorithm.GDFS, Algorithm.GFDRDA)

_FP32_OUT = (Algorithm.GPS, Algorithm.FDRDA, Algorithm.GFDRDA)
"""Algorithms whose last step is a conversion to fp32 (MMA-Sim §IV-B, §IV-F, §IV-H):
their d is an fp32 value, whatever d_fmt another unit would round to."""


def _check_output(p: ModelParams) -> None:
    """GPS, FDRDA and GFDRDA produce fp32 results (their last step converts to fp32):
    another d format would be read from bits of the wrong width."""
    if p.algorithm in _FP32_OUT and p.d_fmt != Format.FP32:
        raise ValueError(
            f"d_fmt={p.d_fmt.spec.name} with algorithm={p.algorithm.value}, whose result is "
            "an fp32 value; allowed: fp32"
        )


def _check_nan_rule(p: ModelParams) -> None:
    """A NaN rule that returns an operand's own NaN (b-acc-a in SFMA, a-b-acc or b-a-acc
    in SEQUENTIAL) widens it into d's format: each operand it can return must be in d's
    format, or in one with d's exponent field, no more mantissa bits and no ignored low
    bits (bf16 into fp32), so that its payload has a place in d."""
    if p.nan_rule == NanRule.CANONICAL:
        return
    d = p.d_fmt
    if p.nan_rule == NanRule.B_ACC_A and p.algorithm == Algorithm.SFMA:
        operands = {"a_fmt": p.a_fmt, "b_fmt": p.b_fmt}
    elif p.nan_rule in (NanRule.A_B_ACC, NanRule.B_A_ACC) and p.algorithm == Algorithm.SEQUENTIAL:
        full = p.tf32 == Tf32Input.FULL
        operands = {
            n: Format.FP32 if f == Format.TF32 and full else f
            for n, f in (("a_fmt", p.a_fmt), ("b_fmt", p.b_fmt), ("c_fmt", p.c_fmt))
        }
    else:
        return
    o = d.spec
    for name, f in operands.items():
        s = f.spec
        if f != d and (s.ebits != o.ebits or s.mbits > o.mbits or s.ignored_low):
            raise ValueError(
                f"{name}={s.name} with nan_rule={p.nan_rule.value}, which returns an "
                f"operand's NaN in d's format {o.name}; allowed: {o.name} or a format with "
                f"its {o.ebits}-bit exponent field and at most {o.mbits} mantissa bits "
                "(or nan_rule=canonical)"
            )


def _roundable(f: Format) -> bool:
    """`f` is a format the model can round into (model/rounding.py)."""
    s = f.spec
    return s.specials in (Specials.IEEE, Specials.FN) and not s.ignored_high


def _check_split(p: ModelParams) -> None:
    """A split (model/split.py) rounds each input x into split_fmt, subtracts and scales
    the residual in x's own format, and chains the unit on split_fmt operands: c and d
    share a format, the inputs are wider than split_fmt and formats the model rounds in,
    2^split_scale is a normal number of the inputs' formats, and the unit on split_fmt
    operands is itself a valid unit."""
    if p.split == Split.NONE:
        return
    if p.c_fmt != p.d_fmt:
        raise ValueError(
            f"split={p.split.value} chains the unit, so c and d need the same format; "
            f"c_fmt={p.c_fmt.spec.name}, d_fmt={p.d_fmt.spec.name}"
        )
    inner = p.split_fmt.spec
    if not _roundable(p.split_fmt):
        raise ValueError(
            f"split_fmt={inner.name}: inputs are rounded into it, and the model rounds only "
            "into IEEE-like formats; allowed: bf16, e2m1, e2m3, e3m2, e4m3, e5m2, fp16, fp32, "
            "fp64 (not fnuz, not tf32)"
        )
    scale = p.split_scale if p.split == Split.OOTOMO_YOKOTA else 0
    for name, f in (("a_fmt", p.a_fmt), ("b_fmt", p.b_fmt)):
        s = f.spec
        if not _roundable(f) or s.precision <= inner.precision:
            raise ValueError(
                f"{name}={s.name} with split={p.split.value}: splitting needs wider inputs, "
                f"a format wider than split_fmt={inner.name} that the model rounds in; "
                "allowed: such a format (fp32 for an fp16 or bf16 unit)"
            )
        if scale > s.emax:
            raise ValueError(
                f"split_scale={scale}: the residual of an {s.name} {name[0]} is scaled by "
                f"2^{scale}, a normal {s.name} only for split_scale in 0..{s.emax}"
            )
    try:
        dataclasses.replace(p, split=Split.NONE, a_fmt=p.split_fmt, b_fmt=p.split_fmt)
    except ValueError as e:
        raise ValueError(
            f"split={p.split.value} runs the unit on split_fmt operands: {e}"
        ) from None


def _check_integer(p: ModelParams) -> None:
    """Integer formats go with the integer algorithm and with nothing else: a and b of
    s8/u8/s4/u4 (products) or b1 (and/xor), c and d s32; the clamp applies in the
    order c first or c last."""
    fmts = {"a_fmt": p.a_fmt, "b_fmt": p.b_fmt, "c_fmt": p.c_fmt, "d_fmt": p.d_fmt}
    ints = {n for n, f in fmts.items() if f.spec.is_integer}
    if p.algorithm != Algorithm.INTEGER:
        if ints:
            n = sorted(ints)[0]
            raise ValueError(
                f"{n}={fmts[n].spec.name} is an integer format; allowed with algorithm "
                f"{p.algorithm.value}: floating-point formats (integer formats need algorithm=integer)"
            )
        if p.int_clamp != IntClamp.WRAP or p.bit_op != BitOp.MUL:
            raise ValueError("int_clamp and bit_op need algorithm=integer; allowed: wrap, mul")
        return
    for n in ("a_fmt", "b_fmt"):
        if fmts[n] not in _INT_OPERANDS:
            allowed = ", ".join(sorted(f.spec.name for f in _INT_OPERANDS))
            raise ValueError(
                f"{n}={fmts[n].spec.name} with algorithm=integer; allowed: one of {allowed}"
            )
    for n in ("c_fmt", "d_fmt"):
        if fmts[n] != Format.S32:
            raise ValueError(f"{n}={fmts[n].spec.name} with algorithm=integer; allowed: s32")
    single = (p.a_fmt == Format.B1, p.b_fmt == Format.B1)
    if any(single) and (not all(single) or p.bit_op == BitOp.MUL):
        raise ValueError("b1 operands need a and b both b1 and bit_op and or xor")
    if p.bit_op != BitOp.MUL and not all(single):
        raise ValueError(f"bit_op={p.bit_op.value} needs b1 a and b; allowed: mul")
    if p.order not in (Order.C_FIRST, Order.C_LAST):
        raise ValueError(f"order={p.order.value} with algorithm=integer; allowed: c-first, c-last")
    if p.scale_fmt is not None or p.split != Split.NONE:
        raise ValueError("algorithm=integer takes no scale_fmt and no split; allowed: none")


def _check_scaling(p: ModelParams) -> None:
    """The block-scaling fields against the algorithm: scale factors enter the FDA
    products (MMA-Sim §IV-C "Scale factor") or the GDFS groups, which must lie inside
    one block and one fused step (§IV-E: G = 16 divides the block of 16 or 32, and
    L = 64)."""
    if p.algorithm == Algorithm.GDFS and p.scale_fmt is None:
        raise ValueError("algorithm=gdfs needs scale_fmt; allowed: one of ue4m3, ue8m0")
    if p.scale_fmt is None:
        return
    if p.algorithm not in _SCALED:
        raise ValueError(
            f"scale_fmt={p.scale_fmt.spec.name} needs algorithm fda, gdfs or gfdrda, "
            f"not {p.algorithm.value}; allowed with {p.algorithm.value}: none"
        )
    if p.split != Split.NONE:
        raise ValueError("scale_fmt is not allowed with split; allowed: none")
    if p.algorithm == Algorithm.GDFS:
        for name, n in (("scale_block", p.scale_block), ("L", min(p.L, p.K)), ("K", p.K)):
            if n % p.G:
                raise ValueError(
                    f"{name}={n} is not a multiple of the GDFS group size G={p.G}; "
                    f"allowed: multiples of {p.G}"
                )


# --- which parameters each family reads ------------------------------------------------------

_GROUPING = ("group_map", "c_add", "unpack")
_IEEE_STEPS = ("acc_fmt", "acc_rounding", "order", "fused_products")
_FUSED_REGISTER = (
    "L",
    "F",
    "F2",
    "carry_bits",
    "carry_overflow",
    "align",
    "product_exponent",
    "e_zero",
    "opposing",
    "zero_sign",
    "G",
)
_INT_ONLY = ("int_clamp", "bit_op")


def _why(*groups: tuple[tuple[str, ...], str]) -> dict[str, str]:
    return {name: why for names, why in groups for name in names}


IGNORED: dict[Algorithm, dict[str, str]] = {
    Algorithm.FDA: _why(
        (("flush_products",), "its products are exact, none is rounded on its own"),
        (_IEEE_STEPS, "it adds every term of a group in one fixed-point sum, not by IEEE steps"),
        (("G",), "it has no groups of G (GPS's pairwise groups, GDFS's scaled groups)"),
        (("F2",), "F2 is the grid of CDNA3's dot product (fdrda, gfdrda)"),
        (_INT_ONLY, "they are the integer unit's"),
    ),
    Algorithm.GDFS: _why(
        (
            ("product_exponent",),
            "each group of G products is summed exactly, with the exponent of its scale factors",
        ),
        (
            _GROUPING,
            "its steps take consecutive groups of G products, c in the first, and "
            "read the operands as given",
        ),
        (("flush_products",), "its products are exact, none is rounded on its own"),
        (_IEEE_STEPS, "it adds every term of a step in one fixed-point sum, not by IEEE steps"),
        (("F2",), "F2 is the grid of CDNA3's dot product (fdrda, gfdrda)"),
        (_INT_ONLY, "they are the integer unit's"),
    ),
    Algorithm.SFMA: _why(
        (
            _FUSED_REGISTER,
            "each product enters one IEEE fused multiply-add in d's format, "
            "with no fused group, alignment or fixed-point register",
        ),
        (("rounding_fmt", "overflow"), "its FMAs round in d's format with IEEE overflow"),
        (_IEEE_STEPS, "its FMAs run in d's format with `rounding`, in index order"),
        (_GROUPING, "they say how a fused unit groups products, adds c or converts operands"),
        (("flush_c",), "flush_inputs reads c as well as a and b"),
        (("flush_products",), "its products are fused into FMAs, none is rounded on its own"),
        (_INT_ONLY, "they are the integer unit's"),
    ),
    Algorithm.GPS: _why(
        (
            tuple(n for n in _FUSED_REGISTER if n != "G") + _GROUPING + ("fused_products",),
            "its products and sums are IEEE fp32 operations, pairwise in groups of G",
        ),
        (
            ("rounding", "rounding_fmt", "overflow", "acc_fmt", "acc_rounding", "order"),
            "every product and sum rounds to nearest even in fp32, the groups added in order",
        ),
        (("tf32",), "it reads every operand in its own format"),
        (("flush_sign", "flush_c"), "flush_inputs reads a, b and c, zeros included, as +0"),
        (_INT_ONLY, "they are the integer unit's"),
    ),
    Algorithm.SEQUENTIAL: _why(
        (
            tuple(n for n in _FUSED_REGISTER if n != "zero_sign") + _GROUPING,
            "it adds IEEE-rounded values one at a time in acc_fmt, with no fused group, "
            "alignment or fixed-point register",
        ),
        (("rounding_fmt", "overflow"), "it converts to d with IEEE overflow"),
        (("zero_sign",), "its zeros take the IEEE signs"),
        (("flush_c",), "flush_inputs reads c as well as a and b"),
        (_INT_ONLY, "they are the integer unit's"),
    ),
}
"""Per algorithm family, the parameters its model never reads and why (model/*.py):
a variant that sets one to another value than the preset's describes the same unit."""

_CDNA3_IGNORED = _why(
    (
        ("rounding", "rounding_fmt", "overflow"),
        "its sums round to nearest even (floored to 31 fraction bits, then rounded to fp32)",
    ),
    (
        ("carry_bits", "carry_overflow", "e_zero", "opposing", "zero_sign"),
        "its fixed-point "
        "sums are exact above F bits, zero products are ignored and a zero sum is +0",
    ),
    (("product_exponent",), "its products align by e_a + e_b"),
    (_GROUPING, "its groups are contiguous, c enters the first and operands are read as given"),
    (_IEEE_STEPS + ("G",), "it has no IEEE steps and no groups of G"),
    (("flush_sign", "flush_c"), "flush_inputs reads a, b and c as +0"),
    (("flush_products",), "its products are exact, none is rounded on its own"),
    (_INT_ONLY, "they are the integer unit's"),
)
IGNORED[Algorithm.FDRDA] = _CDNA3_IGNORED
IGNORED[Algorithm.GFDRDA] = _CDNA3_IGNORED

_INTEGER_READS = frozenset(
    (
        "algorithm",
        "a_fmt",
        "b_fmt",
        "c_fmt",
        "d_fmt",
        "K",
        "L",
        "order",
        "int_clamp",
        "bit_op",
        "sparse",
        "sparse_group",
        "sparse_keep",
    )
)
IGNORED[Algorithm.INTEGER] = {
    f.name: "its terms and sums are exact integers in an s32 accumulator"
    for f in fields(ModelParams)
    if f.name not in _INTEGER_READS
}

READS: dict[Algorithm, frozenset[str]] = {
    alg: frozenset(f.name for f in fields(ModelParams)) - set(IGNORED[alg]) for alg in Algorithm
}
"""Per algorithm family, the parameters its model reads (the complement of IGNORED)."""


@dataclass(frozen=True)
class ReadWhen:
    """A parameter its family reads only where `acts` holds; `why` says why not."""

    acts: Callable[[ModelParams], bool]
    why: str


def _acc_rounds_into_d(p: ModelParams) -> bool:
    """Whether converting a SEQUENTIAL sum from acc_fmt into d can round."""
    a, d = p.acc_fmt.spec, p.d_fmt.spec
    exact = (
        d.precision >= a.precision
        and d.emax >= a.emax
        and d.emin - d.mbits <= a.emin - a.mbits
        and d.specials == Specials.IEEE
    )
    return not exact


CONDITIONS: dict[str, tuple[tuple[frozenset[Algorithm] | None, ReadWhen], ...]] = {
    "carry_overflow": (
        (None, ReadWhen(lambda p: p.carry_bits is not None, "it acts only with carry_bits set")),
    ),
    "split_fmt": ((None, ReadWhen(lambda p: p.split != Split.NONE, "it acts only with a split")),),
    "split_scale": (
        (
            None,
            ReadWhen(
                lambda p: p.split == Split.OOTOMO_YOKOTA,
                "only split=ootomo-yokota scales residuals",
            ),
        ),
    ),
    "scale_block": (
        (None, ReadWhen(lambda p: p.scale_fmt is not None, "it acts only with scale_fmt set")),
    ),
    "flush_sign": (
        (None, ReadWhen(lambda p: p.flush_inputs, "it acts only with flush_inputs=true")),
    ),
    "flush_c": ((None, ReadWhen(lambda p: p.flush_inputs, "it acts only with flush_inputs=true")),),
    "sparse_group": (
        (None, ReadWhen(lambda p: p.sparse != Sparsity.NONE, "it acts only with sparse set")),
    ),
    "sparse_keep": (
        (None, ReadWhen(lambda p: p.sparse != Sparsity.NONE, "it acts only with sparse set")),
    ),
    "tf32": ((None, ReadWhen(lambda p: Format.TF32 in (p.a_fmt, p.b_fmt), "no operand is tf32")),),
    "F": (
        (
            frozenset((Algorithm.FDA, Algorithm.GDFS)),
            ReadWhen(lambda p: p.align != AlignMode.EXACT, "align=exact keeps every bit"),
        ),
    ),
    "align": (
        (
            frozenset((Algorithm.FDRDA, Algorithm.GFDRDA)),
            ReadWhen(
                lambda p: p.align != AlignMode.EXACT,
                "it floors (round-down) or truncates; align=exact floors as round-down",
            ),
        ),
    ),
    "rounding": (
        (
            frozenset((Algorithm.SEQUENTIAL,)),
            ReadWhen(_acc_rounds_into_d, "every acc_fmt value is a value of d (no rounding)"),
        ),
    ),
    "L": (
        (
            frozenset((Algorithm.INTEGER,)),
            ReadWhen(
                lambda p: p.int_clamp == IntClamp.SATFINITE,
                "wrap-around sums modulo 2^32 in any grouping",
            ),
        ),
    ),
    "order": (
        (
            frozenset((Algorithm.INTEGER,)),
            ReadWhen(
                lambda p: p.int_clamp == IntClamp.SATFINITE,
                "wrap-around sums modulo 2^32 in any order",
            ),
        ),
        (
            frozenset((Algorithm.SEQUENTIAL,)),
            ReadWhen(
                lambda p: not p.fused_products or p.order in (Order.C_FIRST, Order.REVERSE),
                "a chain of FMAs (fused_products=true) takes c first, in index order or "
                "reversed; c-last and pairwise are orders of rounded products",
            ),
        ),
    ),
    "nan_rule": (
        (
            None,
            ReadWhen(
                lambda p: p.nan_rule != NanRule.B_ACC_A or p.algorithm == Algorithm.SFMA,
                "b-acc-a is SFMA's rule",
            ),
        ),
    ),
}
"""Parameters a family reads only with some values of the others (None: every family
that reads the parameter at all)."""


def unread(p: ModelParams, name: str) -> str | None:
    """Why parameter `name` cannot change any output of `p` (its family never reads it,
    or the other parameters leave it nothing to act on); None when it can."""
    why = IGNORED[p.algorithm].get(name)
    if why is not None:
        return why
    for algs, rule in CONDITIONS.get(name, ()):
        if (algs is None or p.algorithm in algs) and not rule.acts(p):
            return rule.why
    return None


def check_overrides(base: ModelParams, p: ModelParams, names: list[str], unit: str) -> None:
    """ValueError naming the first of `names` (parameters a variant sets) that `p`, the
    variant's model, does not read while it differs from `base`, the preset's own
    model: such a variant is the preset's unit under another name. `unit` names it in
    the message ("cdna3 (fdrda) does not read rounding: ...")."""
    defaults = {f.name: f.default for f in fields(ModelParams)}
    for name in names:
        if getattr(p, name) == getattr(base, name):
            continue
        if p.algorithm != base.algorithm and getattr(p, name) == defaults[name]:
            continue  # a field of the preset's own family put back to its default
        why = unread(p, name)
        if why is not None:
            raise ValueError(f"{unit} ({p.algorithm.value}) does not read {name}: {why}")


def param_names() -> list[str]:
    return [f.name for f in fields(ModelParams)]


def parse_value(name: str, text: str) -> Any:
    """Parse a variant override `name=text` into the field's type and check it against
    the parameter's range; ValueError naming the parameter and its range if bad."""
    value = _parse_raw(name, text)
    check_value(name, value)
    return value


def _parse_raw(name: str, text: str) -> Any:
    ann = _field_types().get(name)
    if ann is None:
        raise ValueError(f"unknown model parameter {name!r}; known: {', '.join(param_names())}")
    t = text.strip()
    low = t.lower()
    if "None" in ann and low in ("none", "exact", "ignore", "ignored", "default"):
        return None
    if ann.startswith("int") or ann.startswith("int |"):
        try:
            return int(t, 0)
        except ValueError:
            raise ValueError(
                f"{name}: {text!r} is not an integer; allowed: {describe_range(name)}"
            ) from None
    if ann == "bool":
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}: {text!r} is not true/false")
    if "Format" in ann:
        try:
            return Format.parse(t)
        except ValueError:
            raise ValueError(
                f"{name}: {text!r} is not a format; allowed: {describe_range(name)}"
            ) from None
    enum = PARAM_ENUMS.get(ann.replace(" | None", ""))
    if enum is not None:
        for member in enum:
            if member.value == low or member.name.lower() == low:
                return member
        raise ValueError(f"{name}: {text!r} is not one of {', '.join(m.value for m in enum)}")
    raise ValueError(f"{name}: cannot parse {text!r}")
