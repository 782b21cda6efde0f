"""A cheaper exact formulation of one class of fused dot-add units, for the GEMM runner.

The bit-vector model of a fused group (model/fda.py, steps 1-5) decodes every operand
into sign, exponent and significand, multiplies the significands as integers, shifts
each product to the group's alignment grid and adds the results in a register of a few
dozen bits, all as integer nodes with many boolean flags. For a whole class of units
the same steps 2-4 are a handful of fp64 and 64-bit integer operations per product:

 2. a product of two operands whose significands have at most 53 bits between them is
    exact in fp64 (p_k = a_k * b_k, no rounding, no overflow, no underflow);
 3. truncating the magnitude of a term to the grid 2^(e_max - F) (AlignMode.TRUNCATE)
    is trunc(p_k * 2^(F - e_max)): the scaling by a power of two is exact while the
    result is a normal fp64 number, and a result below 2^-1022 truncates to 0 whatever
    its last bit; fptosi truncates toward zero, so the sign is kept as the model keeps
    it (sign and truncated magnitude);
 4. the terms, each below 2^(F + 2) units of the grid, sum exactly in 64-bit integer
    lanes; a register that the model lets wrap never does when it has at least
    `least_carry_bits` carry bits, so the exact sum is what the model's register holds.

e_max is the largest of the terms' exponents as the model defines them (e_a + e_b for
unnormalised products, the operand's own exponent for c, emin for subnormals, `e_zero`
for a zero term), computed from the exponent fields. Steps 1 and 5 are the model's own
code (fda.special_values, fda._finish), compiled from its DAG: c's special values and
the normalisation and rounding of (sum, e_max - F) into d. Products of finite operands
are never NaN or Inf, so the fast kernel runs only on operand tables that hold finite
values (`finite_table`); any other GEMM runs the general kernel.

`reasons(p)` states the conditions, derived from the unit's parameters (formats, F,
carry bits, e_zero); a unit for which it returns any runs the general kernel. The
formulation is checked bit for bit against the numpy interpreter of the model in
tests/test_float_fda.py (random, extreme and special operands on every preset it
applies to).

B's decoding (value and term exponent) can be read from tables made once per element of
B (`operand_tables`, read off `decoded`) instead of being computed for every product;
each entry equals the step's own decoding of its pattern. With b's own value at hand,
the products of units for which `fp32_reasons` returns nothing (fp16, FP8) are formed,
scaled to the grid and truncated in fp32 and summed in int32 lanes: twice the lanes of a
register, each step exact by the same argument in fp32's range; those of units for which
`normalised_reasons` returns nothing (bf16) likewise from normalised operands a 2^-e_a
and b 2^-e_b, each product's scale 2^(e_a + e_b - e_max + F) built from pass 1's sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..bv.symbolic import Term
from ..formats import EXP_W, Format, Specials, decode
from ..model.fda import _finish, least_carry_bits, special_values
from ..model.params import (
    Algorithm,
    CAddend,
    CarryOverflow,
    GroupMap,
    ModelParams,
    Opposing,
    Sparsity,
    ZeroSign,
)
from ..model.rounding import Exact
from ..model.split import Split
from ..model.terms import EXP_MIN, AlignMode, ProductExponent
from .dag import KernelBackend
from .kernel_ir import row_loop, store_d
from .lower import Body

FP64_PRECISION = 53
FP64_EMIN, FP64_EMAX = -1022, 1023
PRODUCT_INT_BITS = 2
"""Integer bits of an unnormalised product's significand (two significands in [0, 2))."""


def _plain(fmt: Format, specials: tuple[Specials, ...]) -> bool:
    """A signed float format of at most fp32's exponent and fraction fields, no ignored bits."""
    s = fmt.spec
    return (
        s.specials in specials
        and s.signed
        and not s.ignored_low
        and not s.ignored_high
        and 0 < s.ebits <= 8
        and s.mbits <= 23
        and s.storage == 1 + s.ebits + s.mbits
    )


def rebias(fmt: Format) -> int:
    """127 - bias: `_Ir.value` gives a value of `fmt` times 2^-rebias(fmt)."""
    return 127 - fmt.spec.bias


def reasons(p: ModelParams) -> list[str]:
    """Why the fp64 formulation does not hold for unit `p` (empty: it holds)."""
    out = []
    plain = {
        "algorithm": p.algorithm == Algorithm.FDA,
        "no split, sparsity, unpacking or block scales": p.split == Split.NONE
        and p.sparse == Sparsity.NONE
        and p.unpack is None
        and p.scale_fmt is None,
        "c joins the fused sum": p.c_add == CAddend.FUSED,
        "alignment truncates": p.align == AlignMode.TRUNCATE,
        "unnormalised products": p.product_exponent == ProductExponent.UNNORMALIZED,
        "two's complement adder": p.opposing == Opposing.EXACT,
        "operands read as they are": not p.flush_inputs,
        "zeros are +0": p.zero_sign == ZeroSign.POSITIVE,
        "groups in index order": p.group_map == GroupMap.CONTIGUOUS,
    }
    out += [f"not: {k}" for k, ok in plain.items() if not ok]
    for name, f in (("a", p.a_fmt), ("b", p.b_fmt)):
        if not _plain(f, (Specials.IEEE, Specials.FN)) or f == Format.TF32:
            out.append(f"{name} format {f.spec.name} is not a plain float format")
    for name, f in (("c", p.c_fmt), ("d", p.d_fmt)):
        if not _plain(f, (Specials.IEEE,)):
            out.append(f"{name} format {f.spec.name} is not an IEEE format within fp32")
    if out:
        return out
    for f in {p.a_fmt, p.b_fmt}:
        if f.spec.storage > 16 or decoded(f).value is None:
            out.append(f"{f.spec.name} values are not read from a float32 table")
    if p.a_fmt.spec.precision + p.b_fmt.spec.precision > FP64_PRECISION:
        out.append("products have more significant bits than fp64 holds")
    if p.carry_bits is not None:
        if p.carry_overflow != CarryOverflow.WRAP:
            out.append("a renormalising register")
        elif p.carry_bits < least_carry_bits(p):
            out.append(f"{p.carry_bits} carry bits can wrap (least: {least_carry_bits(p)})")
    lo, hi = exponent_range(p)
    shifts = {rebias(p.a_fmt) + rebias(p.b_fmt), rebias(p.c_fmt), rebias(p.d_fmt)}
    for e in (lo, hi):
        for sh in shifts:
            if not FP64_EMIN <= p.F - e + sh <= FP64_EMAX:
                out.append(f"the alignment scale 2^({p.F} - {e} + {sh}) is not normal in fp64")
    for f in (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt):
        s = f.spec
        if s.emin - s.mbits < FP64_EMIN or s.emax > FP64_EMAX:
            out.append(f"{s.name} values are not normal fp64 numbers")
    a, b = p.a_fmt.spec, p.b_fmt.spec
    if a.emin + b.emin <= ZERO_BELOW or ZERO_EXP + max(a.emax, b.emax) >= ZERO_BELOW:
        out.append("exponents too wide to tell zero products from the exponent tables")
    if sum_bits(p) > 63:
        out.append("the group's sum may not fit 64-bit lanes")
    return out


def exponent_range(p: ModelParams) -> tuple[int, int]:
    """Least and greatest e_max of a group with a nonzero term (e_zero counted when set)."""
    a, b = p.a_fmt.spec, p.b_fmt.spec
    cs = [p.c_fmt.spec, p.d_fmt.spec]
    lo = min([a.emin + b.emin] + [c.emin for c in cs])
    hi = max([a.emax + b.emax] + [c.emax for c in cs])
    if p.e_zero is not None:
        lo, hi = min(lo, p.e_zero), max(hi, p.e_zero)
    return lo, hi


def sum_bits(p: ModelParams) -> int:
    """Bits of a two's complement integer holding any group's sum on the grid
    2^(e_max - F): each product below 2^(F + 2), c below 2^(F + 1)."""
    L = max(hi - lo for lo, hi in p.groups())
    bound = L * (1 << (p.F + PRODUCT_INT_BITS)) + (1 << (p.F + 1))
    return bound.bit_length() + 1


def applies(p: ModelParams) -> bool:
    """Whether the fp64 formulation holds for unit `p`."""
    return not reasons(p)


FP32_PRECISION = 24
FP32_EMIN, FP32_EMAX = -126, 127


def fp32_reasons(p: ModelParams) -> list[str]:
    """Why the products of unit `p` (for which `applies`) cannot be formed, scaled,
    truncated and summed in fp32 and 32-bit lanes (empty: they can). With a and b read
    as their fp32 values: a_k b_k is exact in fp32 (significands of at most 24 bits
    together, every product a normal fp32 number); trunc(a_k b_k 2^(F - e_max)) is exact
    while the scale 2^(F - e_max) is a normal fp32 number, which it is for every e_max a
    group with a nonzero product can have (a result below 2^-126 truncates to 0 whatever
    its last bits); a term is below 2^(F + 2) and the products of a group sum in int32."""
    out = []
    a, b = p.a_fmt.spec, p.b_fmt.spec
    if a.precision + b.precision > FP32_PRECISION:
        out.append("products have more significant bits than fp32 holds")
    if (a.emin - a.mbits) + (b.emin - b.mbits) < FP32_EMIN:
        out.append("the least product is not a normal fp32 number")
    if (a.emax + 1) + (b.emax + 1) > FP32_EMAX + 1:
        out.append("the greatest product is not a finite fp32 number")
    lo, hi = exponent_range(p)
    if p.F - hi < FP32_EMIN:
        out.append(f"the scale 2^({p.F} - {hi}) is not a normal fp32 number")
    if a.emin + b.emin < p.F - FP32_EMAX:
        out.append("a nonzero product's scale can be past fp32's range")
    out += _int32_sum(p)
    return out


def _int32_sum(p: ModelParams) -> list[str]:
    """Why a group's truncated products may not sum in int32 (each below 2^(F + 2))."""
    L = max(hi_k - lo_k for lo_k, hi_k in p.groups())
    if L * ((1 << (p.F + PRODUCT_INT_BITS)) - 1) > (1 << 31) - 1:
        return ["a group's products may not sum in 32-bit lanes"]
    return []


def normalised_reasons(p: ModelParams) -> list[str]:
    """Why the products of unit `p` (for which `applies`) cannot be formed in fp32 from
    normalised operands (empty: they can). With a' = a 2^-e_a and b' = b 2^-e_b in [0, 2)
    (the term exponents of the model's decode), a' b' < 4 is exact in fp32 (significands
    of at most 24 bits together) and the term is trunc(a' b' 2^(e_a + e_b - e_max + F)):
    the scale is a normal fp32 number up to 2^F, or below 2^-126, where the term is
    below 2^-124 and truncates to 0 (the scale is taken as 0 there)."""
    out = []
    a, b = p.a_fmt.spec, p.b_fmt.spec
    if a.precision + b.precision > FP32_PRECISION:
        out.append("products have more significant bits than fp32 holds")
    if p.F > FP32_EMAX:
        out.append(f"the scale 2^{p.F} is not a finite fp32 number")
    return out + _int32_sum(p)


def tables_normalised(p: ModelParams) -> bool:
    """Whether the step reading B's tables forms the products from normalised operands
    (`normalised_reasons` holds, `fp32_reasons` does not: bf16), so that B's value table
    holds `normalised_values`."""
    return bool(fp32_reasons(p)) and not normalised_reasons(p)


ZERO_EXP = -(1 << 14)
"""The exponent table's entry for a zero: a product with a zero factor gets an exponent
below ZERO_BELOW (the model gives a zero term e_zero instead), every other product one
above it (the formats' exponents lie within fp64's, |e| <= 1023 each)."""
ZERO_BELOW = -(1 << 13)


@dataclass(frozen=True)
class Decoded:
    """Every bit pattern of a format as the model's decode reads it: `value` (float32,
    exact: None when some finite value is not), `exp` (the term exponent, int16;
    ZERO_EXP for a zero) and `finite`."""

    value: np.ndarray | None
    exp: np.ndarray
    finite: np.ndarray


@cache
def decoded(fmt: Format) -> Decoded:
    """The model's decode (formats.decode) of every pattern of `fmt` (at most 16 bits),
    on the vector interpreter: value = (-1)^sign sig 2^(exp - mbits)."""
    from ..bv.chunks import host_bits
    from ..bv.core import BV
    from ..bv.vector import VECTOR

    w = fmt.spec.storage
    n = 1 << w
    pats = np.arange(n, dtype=np.uint64)
    u = decode(BV(VECTOR, VECTOR.lanes(pats, w), w), fmt)

    def host(x: BV) -> np.ndarray:
        return np.asarray(host_bits(VECTOR, x, n)).astype(np.uint64)

    finite = host((u.is_nan | u.is_inf).to_bv()) == 0
    zero = host(u.is_zero.to_bv()) == 1
    sign = host(u.sign.to_bv()) == 1
    sig = host(u.sig).astype(np.float64)
    exp = host(u.exp).astype(np.int64)
    exp = np.where(exp >= 1 << (EXP_W - 1), exp - (1 << EXP_W), exp)
    value = np.where(sign, -1.0, 1.0) * np.ldexp(sig, (exp - u.mbits).astype(np.int32))
    value = np.where(finite, value, 0.0)
    v32 = value.astype(np.float32)
    exact = bool((v32.astype(np.float64) == value).all())
    exp = np.where(zero, ZERO_EXP, exp)
    return Decoded(v32 if exact else None, exp.astype(np.int16), finite)


B_TABLES = ("bval", "bexp")
"""The chain kernel's extra pointer parameters when B's decoding is read from tables
(`operand_tables`, laid out as B): its values (float32) and term exponents (int16)."""


def operand_tables(
    table: np.ndarray, fmt: Format, normalised: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """B's decoding done once per element instead of once per product: the model's
    decode (`decoded(fmt)`: value as float32, exact, and term exponent) of every element
    of the operand table, in its shape (C order); `normalised`: the value times
    2^-exponent (`normalised_values`) instead of the value. (Values as float16, 2 bytes
    an element, exact for fp16, FP8 and bf16's normalised values, were measured slower:
    the conversion is one more vector instruction a product, where a float32 operand is
    read by the multiplication itself.)"""
    d = decoded(fmt)
    if d.value is None:
        raise ValueError(f"{fmt.spec.name} values are not float32 numbers")
    t = np.ascontiguousarray(table)
    return (normalised_values(fmt) if normalised else d.value)[t], d.exp[t]


@cache
def normalised_values(fmt: Format) -> np.ndarray:
    """float32 of every pattern of `fmt`: value times 2^-(term exponent), in [0, 2)
    (significand bits over 2^mbits; 0 for zeros, NaN and Inf), exact."""
    d = decoded(fmt)
    assert d.value is not None
    e = np.where(d.exp == ZERO_EXP, 0, d.exp).astype(np.int32)
    v = np.ldexp(d.value.astype(np.float64), -e)
    out = v.astype(np.float32)
    if not (np.array_equal(out.astype(np.float64), v) and (np.abs(v) < 2).all()):
        raise ValueError(f"{fmt.spec.name}: normalised values not exact in float32")
    return out


@cache
def special_mask(fmt: Format) -> int | None:
    """m such that a pattern x of `fmt` is NaN or Inf exactly when x & m == m, read off
    the model's decode of every pattern (the all-ones exponent field of IEEE formats;
    e4m3's NaN alone has none: None)."""
    s = fmt.spec
    m = ((1 << s.ebits) - 1) << s.mbits
    pats = np.arange(1 << s.storage, dtype=np.uint64)
    if np.array_equal(~decoded(fmt).finite, (pats & m) == m):
        return m
    return None


CHUNK = 1 << 16
"""Elements per step of `finite_table`'s pass (a few hundred kilobytes of temporaries)."""


def finite_table(table: np.ndarray, fmt: Format) -> bool:
    """Whether every pattern of an operand table is a finite value of `fmt`: one pass of
    x & m == m where `special_mask` holds, else a look-up of every pattern."""
    if fmt.spec.storage > 16:
        return False
    flat = np.asarray(table).reshape(-1)
    m = special_mask(fmt)
    if m is None:
        return bool(decoded(fmt).finite[flat].all())
    m = flat.dtype.type(m)
    for i in range(0, len(flat), CHUNK):
        if ((flat[i : i + CHUNK] & m) == m).any():
            return False
    return True


# --- the kernel's step ------------------------------------------------------------


@dataclass(frozen=True)
class Tail:
    """Steps 1 and 5 of a group as the model's DAG: variables `acc` (the sum, `acc_w`
    bits, two's complement), `emax` (EXP_W bits) and `c` (c's bits)."""

    root: Term
    acc_w: int


def tail(p: ModelParams, c_fmt: Format, flush: bool) -> Tail:
    """The DAG of c's special values and of the rounding of the group's exact sum."""
    s = KernelBackend()
    acc_w = sum_bits(p)
    acc = s.var("acc", acc_w)
    e_max = s.var("emax", EXP_W)
    c = s.var("c", c_fmt.spec.storage)
    uc = decode(c, c_fmt)
    is_nan, is_inf, neg_inf = special_values(c.b, [], [], uc)
    exact = Exact(acc.is_neg(), acc.abs(), e_max - p.F)
    return Tail(_finish(exact, [], p, flush, is_nan, is_inf, neg_inf).v, acc_w)


class _Ir:
    """LLVM instructions of the fp64 formulation, appended to a Body."""

    def __init__(self, body: Body) -> None:
        self.b = body

    def __call__(self, text: str) -> str:
        return self.b.emit(text)

    def pow2(self, e: str) -> str:
        """2^e as fp64 (e: i32, a normal exponent)."""
        biased = self(f"add i32 {e}, {-FP64_EMIN + 1}")
        wide = self(f"zext i32 {biased} to i64")
        bits = self(f"shl i64 {wide}, 52")
        return self(f"bitcast i64 {bits} to double")

    def pow2_f32(self, e: str) -> str:
        """2^e as fp32 (e: i32, a normal exponent)."""
        biased = self(f"add i32 {e}, {-FP32_EMIN + 1}")
        bits = self(f"shl i32 {biased}, 23")
        return self(f"bitcast i32 {bits} to float")

    def value(self, x: str, fmt: Format) -> str:
        """The fp64 value of a finite pattern `x` (i{storage}) times 2^-rebias(fmt): its
        fields placed as fp32's (magnitude shifted up to fp32's 23 fraction bits, sign to
        bit 31), which reads the exponent field with fp32's bias 127, subnormals
        included (tests/test_float_fda.py checks every pattern of each format)."""
        s = fmt.spec
        xi = self(f"zext i{s.storage} {x} to i32") if s.storage < 32 else x
        if s.storage < 32 and 23 - s.mbits == 32 - s.storage:
            # sign and magnitude move up by the same amount (bf16): one shift
            xi = self(f"shl i32 {xi}, {32 - s.storage}")
        elif s.storage < 32:
            mag = self(f"and i32 {xi}, {(1 << (s.storage - 1)) - 1}")
            mag = self(f"shl i32 {mag}, {23 - s.mbits}")
            sign = self(f"and i32 {xi}, {1 << (s.storage - 1)}")
            sign = self(f"shl i32 {sign}, {32 - s.storage}")
            xi = self(f"or i32 {mag}, {sign}")
        return self(f"fpext float {self(f'bitcast i32 {xi} to float')} to double")

    def exponent(self, x: str, fmt: Format) -> str:
        """The term exponent of a pattern `x` as the model's decode gives it, i32:
        max(field, 1) - bias, or ZERO_EXP for a zero."""
        s = fmt.spec
        xi = self(f"zext i{s.storage} {x} to i32") if s.storage < 32 else x
        field = self(f"and i32 {self(f'lshr i32 {xi}, {s.mbits}')}, {(1 << s.ebits) - 1}")
        ef = self(f"call i32 @llvm.umax.i32(i32 {field}, i32 1)")
        e = self(f"sub i32 {ef}, {s.bias}")
        body = self(f"and i32 {xi}, {(1 << (s.storage - 1)) - 1}")
        zero = self(f"icmp eq i32 {body}, 0")
        return self(f"select i1 {zero}, i32 {ZERO_EXP}, i32 {e}")

    def add_f32_terms(self, total: str, it: str, terms: list[tuple[str, str, str]]) -> str:
        """total + the sum of trunc(a * b * scale) over `terms` (fp32 values a, b and a
        power-of-two scale, each product and scaling exact: fp32_reasons), the sum in
        i32 and then added to `total` (type `it`)."""
        part = "0"
        for a, b, scale in terms:
            x = self(f"fmul float {self(f'fmul float {a}, {b}')}, {scale}")
            part = self(f"add i32 {part}, {self(f'fptosi float {x} to i32')}")
        wide = self(f"sext i32 {part} to {it}") if it != "i32" else part
        return self(f"add {it} {total}, {wide}")

    def is_special(self, x: str, fmt: Format) -> str:
        """i1: the IEEE pattern `x` has an all-ones exponent field (Inf or NaN)."""
        s = fmt.spec
        mask = ((1 << s.ebits) - 1) << s.mbits
        f = self(f"and i{s.storage} {x}, {mask}")
        return self(f"icmp eq i{s.storage} {f}, {mask}")


def _double(x: float) -> str:
    """An fp64 constant as LLVM IR writes it exactly (its bits in hexadecimal)."""
    return f"0x{np.float64(x).view(np.uint64):016X}"


def emit_step(
    p: ModelParams,
    body: Body,
    operand: Callable[[str, int], str],
    acc_ty: str,
    index: Callable[[str, int], str] | None = None,
) -> str:
    """The instruction step d = acc + sum a_k b_k of unit `p` (for which `applies`),
    every group in turn: its exact sum in fp64 and i64 lanes (the products in fp32 and
    int32 lanes where they fit), then the model's tail.
    `operand(stem, k)`: the bits of a_k ("a"), b_k ("b") or the accumulator ("acc", 0).
    `index`: None, or `index("b", k)` the element index of b_k in B, whose value and
    term exponent are then loaded from the `B_TABLES` (`operand_tables`) instead of
    decoded from its bits; the products are then formed, scaled and truncated in fp32
    where `fp32_reasons` says they can be."""
    ir = _Ir(body)
    f32 = index is not None and not fp32_reasons(p)
    n32 = index is not None and tables_normalised(p)
    rb = 0 if index is not None else rebias(p.b_fmt)  # the tables hold b's own value

    def load(stem: str, k: int, what: int) -> str:
        """a_k's or b_k's value (what 0: fp64, or its own value in fp32 where the
        products are in fp32) or term exponent (i32; what 1)."""
        fmt = p.a_fmt if stem == "a" else p.b_fmt
        if stem == "b" and index is not None:
            ty, table = ("float", B_TABLES[0]) if what == 0 else ("i16", B_TABLES[1])
            ptr = ir(f"getelementptr inbounds {ty}, ptr %{table}, i64 {index(stem, k)}")
            x = ir(f"load {ty}, ptr {ptr}, align {4 if what == 0 else 2}")
            if what == 0:
                return x if f32 or n32 else ir(f"fpext float {x} to double")
            return ir(f"sext i16 {x} to i32")
        x = operand(stem, k)
        if what == 0 and f32:  # a's own value in fp32 (exact: fp32_reasons)
            v = ir(f"fmul double {ir.value(x, fmt)}, {_double(2.0 ** rebias(fmt))}")
            return ir(f"fptrunc double {v} to float")
        if what == 0 and n32:  # a 2^-e_a in fp32 (exact: in [0, 2), normalised_reasons)
            s = fmt.spec
            e = ir(f"call i32 @llvm.smax.i32(i32 {ir.exponent(x, fmt)}, i32 {s.emin})")
            sh = ir.pow2(ir(f"sub i32 {rebias(fmt)}, {e}"))
            return ir(f"fptrunc double {ir(f'fmul double {ir.value(x, fmt)}, {sh}')} to float")
        return ir.value(x, fmt) if what == 0 else ir.exponent(x, fmt)

    e_zero = EXP_MIN if p.e_zero is None else p.e_zero
    c = operand("acc", 0)
    c_fmt = p.c_fmt
    groups = p.groups()
    wide = sum_bits(p) > 32
    it = "i64" if wide else "i32"
    for gi, (lo, hi) in enumerate(groups):
        flush = p.flush_outputs if gi == len(groups) - 1 else p.flush_sums
        cv, ce = ir.value(c, c_fmt), ir.exponent(c, c_fmt)
        cspecial = ir.is_special(c, c_fmt)
        cv = ir(f"select i1 {cspecial}, double 0.0, double {cv}")
        czero = ir(f"icmp eq i32 {ce}, {ZERO_EXP}")
        e_max = ir(f"select i1 {czero}, i32 {e_zero}, i32 {ce}")
        # pass 1: e_max from the exponent tables alone (a zero factor: e_zero). A zero
        # product's e_a + e_b lies below ZERO_BELOW, every other one above: the largest
        # and least sums say which terms there are, and a zero term stands for e_zero
        hi_s = lo_s = None
        sums = []
        for k in range(lo, hi):
            e = ir(f"add i32 {load('a', k, 1)}, {load('b', k, 1)}")
            sums.append(e)
            if hi_s is None:
                hi_s = lo_s = e
                continue
            hi_s = ir(f"call i32 @llvm.smax.i32(i32 {hi_s}, i32 {e})")
            lo_s = ir(f"call i32 @llvm.smin.i32(i32 {lo_s}, i32 {e})")
        if hi_s is not None:
            all_zero = ir(f"icmp slt i32 {hi_s}, {ZERO_BELOW}")
            t = ir(f"select i1 {all_zero}, i32 {e_zero}, i32 {hi_s}")
            some_zero = ir(f"icmp slt i32 {lo_s}, {ZERO_BELOW}")
            tz = ir(f"call i32 @llvm.smax.i32(i32 {t}, i32 {e_zero})")
            t = ir(f"select i1 {some_zero}, i32 {tz}, i32 {t}")
            e_max = ir(f"call i32 @llvm.smax.i32(i32 {e_max}, i32 {t})")
        # all terms zero with e_zero unset: e_max is EXP_MIN and every term 0, so any
        # normal scale gives the same sum; the clamp keeps the scale a normal number
        lo_e, hi_e = exponent_range(p)
        clamped = ir(f"call i32 @llvm.smax.i32(i32 {e_max}, i32 {lo_e})")
        clamped = ir(f"call i32 @llvm.smin.i32(i32 {clamped}, i32 {hi_e})")
        grid = ir(f"sub i32 {p.F}, {clamped}")
        c_scale = ir.pow2(ir(f"add i32 {grid}, {rebias(c_fmt)}"))
        # pass 2: the products, scaled to the grid, truncated and summed
        total = ir(f"fptosi double {ir(f'fmul double {cv}, {c_scale}')} to {it}")
        if f32:
            # e_max below F - 127 only where every product is 0 (fp32_reasons)
            e32 = ir(f"call i32 @llvm.smax.i32(i32 {clamped}, i32 {p.F - FP32_EMAX})")
            scale = ir.pow2_f32(ir(f"sub i32 {p.F}, {e32}"))
            terms = [(load("a", k, 0), load("b", k, 0), scale) for k in range(lo, hi)]
            total = ir.add_f32_terms(total, it, terms)
        elif n32:
            # the scale 2^(e_a + e_b - e_max + F), biased as fp32's; 0 below 2^-126
            base = ir(f"sub i32 {p.F - FP32_EMIN + 1}, {clamped}")
            terms = []
            for k, e in zip(range(lo, hi), sums):
                biased = ir(f"add i32 {e}, {base}")
                biased = ir(f"call i32 @llvm.smax.i32(i32 {biased}, i32 0)")
                bits = ir(f"shl i32 {biased}, 23")
                scale = ir(f"bitcast i32 {bits} to float")
                terms.append((load("a", k, 0), load("b", k, 0), scale))
            total = ir.add_f32_terms(total, it, terms)
        else:
            scale = ir.pow2(ir(f"add i32 {grid}, {rebias(p.a_fmt) + rb}"))
            for k in range(lo, hi):
                prod = ir(f"fmul double {load('a', k, 0)}, {load('b', k, 0)}")
                x = ir(f"fmul double {prod}, {scale}")
                total = ir(f"add {it} {total}, {ir(f'fptosi double {x} to {it}')}")
        tl = tail(p, c_fmt, flush)
        acc = ir(f"trunc {it} {total} to i{tl.acc_w}") if tl.acc_w < int(it[1:]) else total
        emax16 = ir(f"trunc i32 {e_max} to i{EXP_W}")
        env = {"acc": acc, "emax": emax16, "c": c}
        gb = Body(lambda t, _b, env=env: env[t.params[0]], prefix=f"{body.fresh()[1:]}g")
        (d,) = gb.lower([tl.root])
        body.lines += gb.lines
        body.declarations.update(gb.declarations)
        c, c_fmt = d, p.d_fmt
    if p.d_fmt.spec.storage != int(acc_ty[1:]):
        raise ValueError(f"d of {p.d_fmt.spec.storage} bits in an {acc_ty} accumulator")
    return c


DECLARATIONS = [
    "declare i32 @llvm.smax.i32(i32, i32)",
    "declare i32 @llvm.smin.i32(i32, i32)",
    "declare i32 @llvm.umax.i32(i32, i32)",
]
"""Intrinsics the step calls (LLVM Language Reference, 'llvm.smax.*')."""


def decode_module(fmt: Format, what: int) -> str:
    """A kernel `void tcsmt_kernel(i64 lo, i64 hi, ptr x, ptr out)` writing, for each
    pattern x[i] of `fmt`, the bits of `_Ir.value` (fp64; what 0) or `_Ir.exponent`
    (sign-extended; what 1) into out[i] (uint64): the step's decoding on its own, so
    that every pattern of a format can be checked."""
    s = fmt.spec
    body = Body(lambda t, _b: "")
    ir = _Ir(body)
    ptr = ir(f"getelementptr inbounds i{s.storage}, ptr %x, i64 %row")
    x = ir(f"load i{s.storage}, ptr {ptr}, align {max(1, s.storage // 8)}")
    if what == 0:
        r = ir(f"bitcast double {ir.value(x, fmt)} to i64")
    else:
        r = ir(f"sext i32 {ir.exponent(x, fmt)} to i64")
    store_d(body, r, 64, 64)
    return "\n".join(DECLARATIONS) + "\n" + row_loop("ptr noalias readonly %x", body.lines)
