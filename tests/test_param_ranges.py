"""Every accepted parameter value is one the model computes correctly (issue 42, item 4).

A variant is either refused in one line (ValueError from ModelParams, UserError and exit
code 2 from a variant expression) or computed as its parameters say. Checked here:

- `cdna3[F2=12]` (F2 + 1 < F): c = 2047 with zero products gives 2047 (the addends were
  once added with a negative shift, which gave 0);
- fused units (FDA, chained groups; FDRDA and GFDRDA of CDNA3) against references
  written here in exact rationals (fractions.Fraction) from the units' descriptions, over
  a Hypothesis grid of F, F2, L, K, carry bits, e_zero, alignment and rounding modes,
  product exponents and operand/output formats;
- every accepted variant of every algorithm family (FDA, SFMA, GPS, FDRDA, GFDRDA, GDFS,
  SEQUENTIAL, INTEGER, splits) runs without an internal exception, returns bits of d's
  width, and its concrete, vector and symbolic (z3) interpreters agree;
- cross-parameter refusals: a d format the unit cannot produce, a NaN rule whose
  operand cannot be widened into d, a split the model cannot run.
"""

from __future__ import annotations

import dataclasses
import struct
from fractions import Fraction
from math import floor

import numpy as np
import pytest
import z3
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tensorcore_smt as tc
from tensorcore_smt.api import simulate_one, simulate_params
from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate
from tensorcore_smt.bv.to_z3 import to_z3
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format, Rounding, Specials, round_fraction
from tensorcore_smt.model import dot_add
from tensorcore_smt.model.params import (
    CONDITIONS,
    IGNORED,
    READS,
    Algorithm,
    BitOp,
    CarryOverflow,
    IntClamp,
    ModelParams,
    NanRule,
    Order,
    Split,
    ZeroSign,
    unread,
)
from tensorcore_smt.model.rounding import Overflow
from tensorcore_smt.model.terms import AlignMode, ProductExponent
from tensorcore_smt.spec.presets import PRESETS

# --- an independent decoder --------------------------------------------------------------


def value(bits: int, fmt: Format) -> tuple[Fraction, int, bool]:
    """(exact value, exponent e with |value| = sig * 2^(e - mbits), is zero) of a finite
    pattern of a floating-point format, read from its fields: a subnormal has e = emin."""
    s = fmt.spec
    bits >>= s.ignored_low
    mant = bits & ((1 << s.mbits) - 1)
    efield = (bits >> s.mbits) & ((1 << s.ebits) - 1)
    neg = bool(bits >> (s.mbits + s.ebits) & 1)
    bias = s.bias  # 2^(ebits-1) - 1, one more in the fnuz formats
    if efield == 0:
        sig, e = mant, 1 - bias
    else:
        sig, e = mant | (1 << s.mbits), efield - bias
    v = Fraction(sig) * Fraction(2) ** (e - s.mbits)
    return (-v if neg else v), e, sig == 0


def inf_sign(bits: int, fmt: Format) -> int | None:
    """+1 or -1 for an infinity of an IEEE-like format, None for any other pattern."""
    s = fmt.spec
    if s.specials != Specials.IEEE:
        return None
    body = bits >> s.ignored_low
    if (body >> s.mbits) & ((1 << s.ebits) - 1) != (1 << s.ebits) - 1:
        return None
    return -1 if body >> (s.ebits + s.mbits) & 1 else 1


def is_nan(bits: int, fmt: Format) -> bool:
    """A NaN pattern of an IEEE-like format (exponent field all ones, fraction not 0)."""
    s = fmt.spec
    body = bits >> s.ignored_low
    top = (body >> s.mbits) & ((1 << s.ebits) - 1) == (1 << s.ebits) - 1
    return s.specials == Specials.IEEE and top and body & ((1 << s.mbits) - 1) != 0


def finite_bits(draw, fmt: Format, e_lo: int | None = None, e_hi: int | None = None) -> int:
    """A finite pattern of `fmt` with its exponent field in [e_lo, e_hi] (default: all
    finite ones)."""
    s = fmt.spec
    top = (1 << s.ebits) - 1
    last = top - 1 if s.specials == Specials.IEEE else top
    lo = 0 if e_lo is None else max(0, e_lo)
    hi = last if e_hi is None else min(last, e_hi)
    efield = draw(st.integers(lo, max(lo, hi)))
    mant = draw(st.integers(0, (1 << s.mbits) - 1))
    if s.specials == Specials.FN and efield == top and mant == (1 << s.mbits) - 1:
        mant -= 1
    sign = draw(st.integers(0, 1))
    if s.specials == Specials.FNUZ and efield == 0 and mant == 0:
        sign = 0  # the fnuz formats' NaN is -0's pattern
    return ((sign << (s.ebits + s.mbits)) | (efield << s.mbits) | mant) << s.ignored_low


def _floor_to(x: Fraction, q: int) -> Fraction:
    """x floored to a multiple of 2^q."""
    u = Fraction(2) ** q
    return floor(x / u) * u


def _trunc_to(x: Fraction, q: int) -> Fraction:
    """x truncated toward zero to a multiple of 2^q."""
    return _floor_to(x, q) if x >= 0 else -_floor_to(-x, q)


def _lead(x: Fraction) -> int:
    """floor(log2 |x|) of a nonzero rational."""
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


# --- the fused dot-add (FDA) in rationals ----------------------------------------------------

_OVERFLOW_TO_INF = {Overflow.IEEE: None, Overflow.TO_INF: True, Overflow.SATURATE: False}


def fda_group_ref(a: list[int], b: list[int], c: int, c_fmt: Format, p: ModelParams) -> int:
    """One fused group as the FDA's description reads (model/fda.py docstring, MMA-Sim
    §IV-C): exact products with exponent e_a + e_b (or their leading one's), each term
    cut to 2^(e_max - F) (toward zero, down, or kept), the fixed-point sum wrapped in a
    register of sign + int_bits + carry_bits + F bits, one rounding into d; a zero
    result is +0."""
    if inf_sign(c, c_fmt) is not None:
        return c  # an infinite c (a chained group's overflow) and finite products
    terms: list[tuple[Fraction, int, bool, int]] = []
    vc, ec, zc = value(c, c_fmt)
    terms.append((vc, ec, zc, 1))
    for x, y in zip(a, b):
        va, ea, za = value(x, p.a_fmt)
        vb, eb, zb = value(y, p.b_fmt)
        v = va * vb
        if p.product_exponent == ProductExponent.UNNORMALIZED:
            terms.append((v, ea + eb, v == 0, 2))
        else:
            terms.append((v, _lead(v) if v else ea + eb, v == 0, 1))
    exps = [e for v, e, z, _ in terms if not z]
    if p.e_zero is not None:
        exps += [p.e_zero for v, e, z, _ in terms if z]
    if not exps or all(z for _, _, z, _ in terms):
        return 0
    e_max = max(exps)
    q = e_max - p.F
    if p.align == AlignMode.TRUNCATE:
        total = sum(_trunc_to(v, q) for v, *_ in terms)
    elif p.align == AlignMode.ROUND_DOWN:
        total = sum(_floor_to(v, q) for v, *_ in terms)
    else:
        total = sum(v for v, *_ in terms)
    if p.carry_bits is not None:
        assert p.align != AlignMode.EXACT and p.carry_overflow == CarryOverflow.WRAP
        width = p.F + max(t[3] for t in terms) + p.carry_bits + 1
        units = int(total / Fraction(2) ** q) % (1 << width)
        units -= (units >> (width - 1)) << width
        total = units * Fraction(2) ** q
    d = round_fraction(total, p.d_fmt, p.rounding, overflow_to_inf=_OVERFLOW_TO_INF[p.overflow])
    if d & ((1 << (p.d_fmt.spec.storage - 1)) - 1) == 0:
        return 0  # zero_sign=positive: a result that rounds to zero is +0
    return d


def fda_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """The FDA chain: groups of L products in index order, each group's result in d's
    format as the next group's c."""
    fmt = p.c_fmt
    for lo in range(0, p.K, p.L):
        c = fda_group_ref(a[lo : lo + p.L], b[lo : lo + p.L], c, fmt, p)
        fmt = p.d_fmt
    return c


# --- CDNA3's FDRDA and GFDRDA in rationals -----------------------------------------------------


def _trunc_dot(vals: list[tuple[Fraction, int]], F: int) -> tuple[Fraction, int | None]:
    """Products cut toward zero to 2^(e - F) at their largest exponent e (None: no
    nonzero product)."""
    live = [(v, e) for v, e in vals if v != 0]
    if not live:
        return Fraction(0), None
    e = max(e for _, e in live)
    return sum(_trunc_to(v, e - F) for v, _ in live), e


def cdna3_group_ref(
    a: list[int], b: list[int], c: int, c_fmt: Format, p: ModelParams, grouped: bool
) -> int:
    """One FDRDA (grouped=False) or GFDRDA group as MMA-Sim §IV-F / §IV-H describe it:
    products cut to F bits at their largest exponent (GFDRDA: evens and odds apart, then
    both floored to F bits at the larger exponent); at e_max = max(e_dot, e_c) the dot
    product floored to F2 + 1 fraction bits and c to F (GFDRDA: c dropped when
    e_c < e_max - F - 1); their exact sum floored to 32 significant bits (E8M31) and
    rounded to fp32, nearest even. A zero sum is +0."""
    if is_nan(c, c_fmt):
        return 0x7FFFFFFF  # a chained group's NaN (an earlier group's inf - inf) stays NaN
    prods = []
    for x, y in zip(a, b):
        va, ea, _ = value(x, p.a_fmt)
        vb, eb, _ = value(y, p.b_fmt)
        prods.append((va * vb, ea + eb))
    # infinities: c's, and (FDRDA) products of magnitude 2^128 or more; both signs: NaN
    infs = {inf_sign(c, c_fmt)} - {None}
    if not grouped:
        infs |= {1 if v > 0 else -1 for v, _ in prods if abs(v) >= 2**128}
    if infs:
        return 0x7FFFFFFF if len(infs) == 2 else f32(float("inf") * infs.pop())
    if grouped:
        s_even, e_even = _trunc_dot(prods[0::2], p.F)
        s_odd, e_odd = _trunc_dot(prods[1::2], p.F)
        es = [e for e in (e_even, e_odd) if e is not None]
        e_dot = max(es) if es else None
        dot = Fraction(0)
        if e_dot is not None:
            dot = _floor_to(s_even, e_dot - p.F) + _floor_to(s_odd, e_dot - p.F)
    else:
        dot, e_dot = _trunc_dot(prods, p.F)
    vc, ec, _ = value(c, c_fmt)
    e_max = ec if e_dot is None else max(e_dot, ec)
    c_part = _floor_to(vc, e_max - p.F)
    if grouped and ec < e_max - (p.F + 1):
        c_part = Fraction(0)
    total = _floor_to(dot, e_max - p.F2 - 1) + c_part
    if total == 0:
        return 0
    # E8M31: 31 fraction bits below the leading one, subnormal below 2^-126, toward -inf
    mid = _floor_to(total, max(_lead(total), -126) - 31)
    return round_fraction(mid, Format.FP32, Rounding.RNE)


def cdna3_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """The CDNA3 chain: groups of L products, each group's fp32 result the next c."""
    fmt = p.c_fmt
    grouped = p.algorithm == Algorithm.GFDRDA
    for lo in range(0, p.K, p.L):
        c = cdna3_group_ref(a[lo : lo + p.L], b[lo : lo + p.L], c, fmt, p, grouped)
        fmt = Format.FP32
    return c


# --- the interpreters ----------------------------------------------------------------------


def symbolic_value(p: ModelParams, a: list[int], b: list[int], c: int) -> tuple[int, int]:
    """d of one row from the symbolic interpreter: (z3's value of the term with the
    inputs substituted, the DAG evaluator's value)."""
    sb = SymbolicBackend()
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    av = [sb.var(f"a{k}", wa) for k in range(p.n_a)]
    bv = [sb.var(f"b{k}", wb) for k in range(p.K)]
    d = dot_add(av, bv, sb.var("c", wc), p)
    assert d.w == p.d_fmt.spec.storage
    (expr,), zvars = to_z3([d.v])
    env = {f"a{k}": x for k, x in enumerate(a)} | {f"b{k}": y for k, y in enumerate(b)}
    env["c"] = c
    widths = {f"a{k}": wa for k in range(p.n_a)} | {f"b{k}": wb for k in range(p.K)}
    widths["c"] = wc
    subs = [(zvars[n], z3.BitVecVal(v, widths[n])) for n, v in env.items() if n in zvars]
    val = z3.simplify(z3.substitute(expr, *subs) if subs else expr)
    assert z3.is_bv_value(val)
    return val.as_long(), evaluate(d.v, env)


def all_interpreters(p: ModelParams, a: list[int], b: list[int], c: int, symbolic: bool) -> int:
    """d from the concrete interpreter, after checking its width and that the vector
    interpreter (and, with `symbolic`, z3 and the DAG evaluator) give the same bits."""
    d = simulate_one(p, a, b, c)
    assert 0 <= d < 1 << p.d_fmt.spec.storage
    vec = simulate_params(
        p,
        np.array([a], dtype=np.uint64),
        np.array([b], dtype=np.uint64),
        np.array([c], dtype=np.uint64),
    )
    assert int(vec[0]) == d, f"vector {int(vec[0]):#x} != concrete {d:#x}"
    if symbolic:
        assert symbolic_value(p, a, b, c) == (d, d)
    return d


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# --- the reported case ---------------------------------------------------------------------


@pytest.mark.parametrize("F2", [0, 1, 12, 22, 23, 31, 64])
def test_cdna3_f2_below_f_keeps_c(F2: int) -> None:
    """cdna3[F2=12], a = b = 0, c = 2047: d = 2047 on every interpreter and for every
    F2 (the dot product is 0, and c = 2047 is exact on c's grid of F = 24 bits)."""
    p = tc.resolve(f"cdna3[F2={F2}]")
    assert p.F2 + 1 < p.F or F2 >= 23
    zeros = [0] * p.K
    d = all_interpreters(p, zeros, zeros, f32(2047.0), symbolic=True)
    assert d == f32(2047.0)
    out = tc.simulate(
        f"cdna3[F2={F2}]",
        None,
        np.zeros((1, p.K), np.uint16),
        np.zeros((1, p.K), np.uint16),
        np.array([f32(2047.0)], np.uint32),
    )
    assert int(out[0]) == f32(2047.0)


def test_cdna3_f2_below_f_cli() -> None:
    zeros = ",".join(["0"] * 8)
    args = ["simulate", "--arch", "cdna3[F2=12]", "--a", zeros, "--b", zeros]
    r = CliRunner().invoke(main, [*args, "--c", f"{f32(2047.0):x}"])
    assert r.exit_code == 0, r.output
    assert f"{f32(2047.0):#010x}" in r.output


def test_cdna3_f2_below_f_sums_on_the_finer_grid() -> None:
    """F2 + 1 < F with both addends nonzero: the dot product floored to F2 + 1 = 3
    fraction bits at e_max, c kept to F = 24: 1 + 2^-10 (a product) + (-2^-20) (c)
    gives floor((1 + 2^-10) / 2^-3) 2^-3 - 2^-20 = 1 - 2^-20, the reference's value."""
    p = tc.resolve("cdna3[F2=2]")
    one, tiny = 0x3C00, 0x1400  # fp16 1.0 and 2^-10
    a = [one, tiny] + [0] * (p.K - 2)
    b = [one, one] + [0] * (p.K - 2)
    c = f32(-(2.0**-20))
    d = all_interpreters(p, a, b, c, symbolic=True)
    assert d == f32(1 - 2.0**-20) == cdna3_ref(a, b, c, p)


# --- refusals -------------------------------------------------------------------------------


REFUSED = [
    ("cdna3[d_fmt=fp16]", "d_fmt=fp16 with algorithm=fdrda"),
    ("cdna2[d_fmt=bf16]", "d_fmt=bf16 with algorithm=gps"),
    ("cdna3[d_fmt=fp64]", "d_fmt=fp64 with algorithm=fdrda"),
    ("hopper[split=ootomo-yokota,split_fmt=e4m3fnuz]", "split_fmt=e4m3fnuz"),
    ("hopper[split=markidis,d_fmt=fp16]", "c and d need the same format"),
    ("hopper[split=markidis,a_fmt=e5m2,b_fmt=e5m2,split_fmt=e4m3]", "splitting needs wider"),
    (
        "hopper[split=ootomo-yokota,a_fmt=fp16,b_fmt=fp16,split_fmt=e4m3,split_scale=20]",
        "split_scale=20",
    ),
    ("volta[algorithm=sfma,L=1,nan_rule=b-acc-a]", "nan_rule=b-acc-a"),
]


@pytest.mark.parametrize("variant, words", REFUSED)
def test_refused_in_one_line(variant: str, words: str) -> None:
    """Values the model would compute wrongly (or fail on mid-run) are refused where the
    variant is parsed: UserError via the API, one line and exit code 2 from the CLI."""
    with pytest.raises(UserError, match=words.replace("[", r"\[")):
        tc.resolve(variant)
    zeros = ",".join(["0"] * 16)
    r = CliRunner().invoke(
        main, ["simulate", "--arch", variant, "--a", zeros, "--b", zeros, "--c", "0"]
    )
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.output


def test_gfdrda_group_of_one_product() -> None:
    """L = 1 on a GFDRDA unit: each group has an even product and no odd one (was an
    IndexError); the result is the reference's."""
    p = tc.resolve("cdna3[L=1]", "v_mfma_f32_16x16x32_fp8_fp8").with_(K=3)
    a, b = [0x40, 0x38, 0x41], [0x44, 0x3A, 0xC0]
    d = all_interpreters(p, a, b, f32(0.75), symbolic=True)
    assert d == cdna3_ref(a, b, f32(0.75), p)


# --- the generated grid: fused units against their references --------------------------------

_FDA_BASES = [("volta", None), ("ampere", None), ("hopper", None)]
_CDNA3_BASES = [("cdna3", None), ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8")]
_OPERANDS = [Format.FP16, Format.BF16, Format.E5M2, Format.E4M3, Format.E3M2, Format.E2M1]
_OUTPUTS = [Format.FP32, Format.FP16, Format.BF16, Format.E5M2]


@st.composite
def fda_variants(draw) -> ModelParams:
    arch, instr = draw(st.sampled_from(_FDA_BASES))
    base = tc.resolve(arch, instr)
    align = draw(st.sampled_from(list(AlignMode)))
    K = draw(st.integers(1, 5))
    ch = dict(
        K=K,
        L=draw(st.integers(1, K + 2)),
        F=draw(st.one_of(st.integers(0, 8), st.sampled_from([13, 23, 24, 25, 40, 64]))),
        align=align,
        product_exponent=draw(st.sampled_from(list(ProductExponent))),
        e_zero=draw(st.one_of(st.none(), st.integers(-40, 20), st.sampled_from([-16383, 16383]))),
        carry_bits=None
        if align == AlignMode.EXACT
        else draw(st.one_of(st.none(), st.integers(0, 6))),
        carry_overflow=CarryOverflow.WRAP,
        rounding=draw(st.sampled_from(list(Rounding))),
        overflow=draw(st.sampled_from(list(Overflow))),
        a_fmt=draw(st.sampled_from(_OPERANDS)),
        b_fmt=draw(st.sampled_from(_OPERANDS)),
        d_fmt=draw(st.sampled_from(_OUTPUTS)),
        rounding_fmt=None,
        nan_bits=None,
        zero_sign=ZeroSign.POSITIVE,
    )
    try:
        return base.with_(**ch)
    except ValueError:
        assume(False)
        raise


@st.composite
def cdna3_variants(draw) -> ModelParams:
    arch, instr = draw(st.sampled_from(_CDNA3_BASES))
    base = tc.resolve(arch, instr)
    K = draw(st.integers(1, 5))
    ch = dict(
        K=K,
        L=draw(st.integers(1, K + 1)),
        F=draw(st.one_of(st.integers(0, 8), st.sampled_from([13, 24, 40, 64]))),
        F2=draw(st.one_of(st.integers(0, 8), st.sampled_from([12, 22, 23, 31, 40, 64]))),
        a_fmt=draw(st.sampled_from([Format.FP16, Format.BF16, Format.E4M3, Format.E5M2])),
        b_fmt=draw(st.sampled_from([Format.FP16, Format.BF16, Format.E4M3, Format.E5M2])),
        c_fmt=draw(st.sampled_from([Format.FP32, Format.FP16, Format.BF16])),
    )
    return base.with_(**ch)


@st.composite
def rows(draw, p: ModelParams) -> tuple[list[int], list[int], int]:
    """Finite a, b, c: exponents in a window around the middle of each format (so that
    terms overlap, cancel and carry), or anywhere."""

    def one(fmt: Format) -> int:
        s = fmt.spec
        mid = s.bias
        if draw(st.booleans()):
            return finite_bits(draw, fmt, mid - 4, mid + 3)
        return finite_bits(draw, fmt)

    a = [one(p.a_fmt) for _ in range(p.K)]
    b = [one(p.b_fmt) for _ in range(p.K)]
    c = one(p.c_fmt)
    if draw(st.booleans()) and p.K >= 2:  # cancel the first product with the second
        a[1], b[1] = a[0] ^ (1 << (p.a_fmt.spec.storage - 1)), b[0]
        if p.a_fmt != p.b_fmt:
            a[1] = a[0] ^ (1 << (p.a_fmt.spec.storage - 1))
    return a, b, c


_FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@_FAST
@given(data=st.data())
def test_fda_grid_matches_rationals(data) -> None:
    p = data.draw(fda_variants())
    for _ in range(3):
        a, b, c = data.draw(rows(p))
        got = all_interpreters(p, a, b, c, symbolic=False)
        assert got == fda_ref(a, b, c, p), (a, b, c)


@_FAST
@given(data=st.data())
def test_cdna3_grid_matches_rationals(data) -> None:
    p = data.draw(cdna3_variants())
    for _ in range(3):
        a, b, c = data.draw(rows(p))
        got = all_interpreters(p, a, b, c, symbolic=False)
        assert got == cdna3_ref(a, b, c, p), (a, b, c)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_grid_symbolic_agrees(data) -> None:
    """The SMT encoding of drawn FDA and CDNA3 variants gives the concrete bits."""
    p = data.draw(st.one_of(fda_variants(), cdna3_variants()))
    a, b, c = data.draw(rows(p))
    all_interpreters(p, a, b, c, symbolic=True)


@pytest.mark.slow
@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_fused_grid_wide(data) -> None:
    p = data.draw(st.one_of(fda_variants(), cdna3_variants()))
    ref = cdna3_ref if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA) else fda_ref
    for i in range(4):
        a, b, c = data.draw(rows(p))
        assert all_interpreters(p, a, b, c, symbolic=i == 0) == ref(a, b, c, p)


# --- every family: accepted variants run, at d's width, on every interpreter ---------------


def _family_bases() -> list[ModelParams]:
    """One instruction model of each (algorithm, split, block scaling) of the presets."""
    seen: dict[tuple, ModelParams] = {}
    for preset in PRESETS.values():
        for ins in preset.instructions.values():
            q = ins.params
            if q.sparse.value != "none":
                continue
            seen.setdefault((q.algorithm, q.split, q.scale_fmt is not None), q)
    return list(seen.values())


FAMILIES = _family_bases()
_ANY_FMT = [
    Format.FP16,
    Format.BF16,
    Format.FP32,
    Format.TF32,
    Format.E5M2,
    Format.E4M3,
    Format.E2M1,
    Format.E3M2,
    Format.FP64,
    Format.E4M3FNUZ,
]


@st.composite
def any_variant(draw) -> ModelParams:
    """A preset family's model with a few parameters drawn from their whole ranges."""
    base = draw(st.sampled_from(FAMILIES))
    pick = {
        "F": st.integers(0, 64),
        "F2": st.integers(0, 64),
        "L": st.integers(1, 9),
        "carry_bits": st.one_of(st.none(), st.integers(0, 32)),
        "carry_overflow": st.sampled_from(list(CarryOverflow)),
        "e_zero": st.one_of(st.none(), st.integers(-16383, 16383)),
        "align": st.sampled_from(list(AlignMode)),
        "product_exponent": st.sampled_from(list(ProductExponent)),
        "rounding": st.sampled_from(list(Rounding)),
        "overflow": st.sampled_from(list(Overflow)),
        "a_fmt": st.sampled_from(_ANY_FMT),
        "b_fmt": st.sampled_from(_ANY_FMT),
        "c_fmt": st.sampled_from([Format.FP16, Format.BF16, Format.FP32, Format.FP64]),
        "d_fmt": st.sampled_from([Format.FP16, Format.BF16, Format.FP32, Format.FP64]),
        "acc_fmt": st.sampled_from([Format.FP16, Format.BF16, Format.FP32, Format.E5M2]),
        "order": st.sampled_from(list(Order)),
        "G": st.integers(1, 8),
        "split": st.sampled_from(list(Split)),
        "split_scale": st.integers(0, 64),
        "scale_block": st.integers(1, 8),
        "nan_rule": st.sampled_from(list(NanRule)),
        "fused_products": st.booleans(),
        "flush_inputs": st.booleans(),
        "flush_sums": st.booleans(),
    }
    names = draw(st.lists(st.sampled_from(sorted(pick)), min_size=1, max_size=5, unique=True))
    ch = {n: draw(pick[n]) for n in names}
    if base.K > 8 and base.scale_fmt is None:
        ch["K"] = draw(st.integers(1, 6))
    try:
        return base.with_(**ch)
    except ValueError as e:
        assert "\n" not in str(e)
        assume(False)
        raise


def _random_row(p: ModelParams, seed: int) -> tuple[list[int], list[int], int]:
    rng = np.random.default_rng(seed)
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    a = [int(x) for x in rng.integers(0, 1 << wa, p.n_a, dtype=np.uint64)]
    b = [int(x) for x in rng.integers(0, 1 << wb, p.K, dtype=np.uint64)]
    return a, b, int(rng.integers(0, 1 << min(wc, 63), dtype=np.uint64))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(p=any_variant(), seed=st.integers(0, 2**32 - 1))
def test_every_family_runs_at_d_width(p: ModelParams, seed: int) -> None:
    a, b, c = _random_row(p, seed)
    all_interpreters(p, a, b, c, symbolic=False)


@pytest.mark.slow
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(p=any_variant(), seed=st.integers(0, 2**32 - 1))
def test_every_family_runs_at_d_width_wide(p: ModelParams, seed: int) -> None:
    for i in range(3):
        a, b, c = _random_row(p, seed + i)
        all_interpreters(p, a, b, c, symbolic=i == 0)


def test_negative_constant_shift_is_an_error() -> None:
    """A shift by a negative constant would be read modulo the width; it is refused."""
    from tensorcore_smt.bv.concrete import CONCRETE

    x = BV(CONCRETE, 5, 8)
    for op in (lambda: x << -1, lambda: x.lshr(-2), lambda: x.ashr(-3)):
        with pytest.raises(ValueError, match="negative"):
            op()


# --- parameters a unit never reads are refused ---------------------------------------------

UNREAD = [
    ("cdna3[rounding=rz]", "cdna3 (fdrda) does not read rounding: its sums round to nearest even"),
    ("cdna3[overflow=saturate]", "cdna3 (fdrda) does not read overflow"),
    ("cdna3[rounding_fmt=e8m13]", "cdna3 (fdrda) does not read rounding_fmt"),
    ("cdna3[carry_bits=3]", "cdna3 (fdrda) does not read carry_bits"),
    ("cdna3[align=exact]", "cdna3 (fdrda) does not read align"),
    ("cdna2[L=2]", "cdna2 (gps) does not read L"),
    ("cdna2[rounding=rz]", "cdna2 (gps) does not read rounding"),
    ("volta[flush_products=true]", "volta (fda) does not read flush_products"),
    ("volta[G=2]", "volta (fda) does not read G"),
    ("volta[acc_fmt=fp16]", "volta (fda) does not read acc_fmt"),
    ("volta[carry_bits=none,carry_overflow=renormalize]", "does not read carry_overflow"),
    ("volta[split_scale=5]", "volta (fda) does not read split_scale"),
    ("volta[F=20,align=exact]", "volta (fda) does not read F: align=exact"),
    ("x86-avx512bf16[rounding=rz]", "does not read rounding"),
    ("x86-avx512bf16[order=pairwise]", "does not read order"),
    ("x86-avx512bf16[L=4]", "x86-avx512bf16 (sequential) does not read L"),
    ("cdna1[nan_rule=b-acc-a]", "cdna1 (fda) does not read nan_rule"),
]


@pytest.mark.parametrize("variant, words", UNREAD)
def test_unread_parameter_refused_in_one_line(variant: str, words: str) -> None:
    """A variant that changes a parameter its unit never reads names the preset's unit
    as another hypothesis (`prove cdna3 'cdna3[rounding=rz]'` would "prove" them equal):
    refused with the parameter, the unit and why, exit code 2 from the CLI."""
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        tc.resolve(variant)
    r = CliRunner().invoke(main, ["simulate", "--arch", variant, "--a", "0", "--b", "0"])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and words in lines[0], r.output


def test_prove_refuses_an_unread_parameter() -> None:
    r = CliRunner().invoke(main, ["prove", "cdna3", "cdna3[rounding=rz]"])
    assert r.exit_code == 2 and "does not read rounding" in r.output, r.output


@pytest.mark.parametrize(
    "variant, instr",
    [
        ("cdna3[rounding=rne]", None),  # the preset's own value
        ("cdna3[F2=12]", None),
        ("x86-avx512bf16[order=c-first]", None),
        ("x86-avx512bf16[order=c-last,fused_products=false]", None),
        ("x86-avx512bf16[acc_fmt=fp64,rounding=rz]", None),  # fp64 sums round into fp32
        ("volta[carry_bits=2,carry_overflow=renormalize]", None),
        ("ampere[tf32=full]", "m16n8k4.f32.tf32.tf32.f32"),
        ("hopper[L=1,order=c-last]", "m16n8k32.satfinite.s32.u4.s4.s32"),
        ("rocjitsu-rdna3", None),  # opposing put back to its default under sequential
        ("volta[algorithm=sfma,nan_rule=b-acc-a,a_fmt=fp32,b_fmt=fp32]", None),
    ],
)
def test_read_parameters_accepted(variant: str, instr: str | None) -> None:
    tc.resolve(variant, instr)


def test_every_parameter_is_read_or_ignored_by_every_family() -> None:
    """The table covers every field for every family, and names no unknown one."""
    names = {f.name for f in dataclasses.fields(ModelParams)}
    for alg in Algorithm:
        assert READS[alg] | set(IGNORED[alg]) == names
        assert not READS[alg] & set(IGNORED[alg])
        assert all(why and "\n" not in why for why in IGNORED[alg].values())
    assert set(CONDITIONS) <= names
    # the cases
    assert "rounding" in IGNORED[Algorithm.FDRDA] and "overflow" in IGNORED[Algorithm.GFDRDA]
    assert "L" in IGNORED[Algorithm.GPS] and "rounding_fmt" in IGNORED[Algorithm.FDRDA]


def test_presets_and_aliases_parse_on_every_instruction() -> None:
    """Presets set fields their family ignores (defaults): only overrides are checked, so
    every preset instruction and every alias's own instructions still resolve."""
    from tensorcore_smt.spec.published import own_instructions
    from tensorcore_smt.spec.variants import ALIASES, parse_variant

    for name in PRESETS:
        v = parse_variant(name)
        for ins in v.preset.instructions:
            v.params(ins)
    for alias in ALIASES:
        for instr in own_instructions(alias):
            parse_variant(alias).params(instr)


_ALTERNATIVES: dict[str, list] = {
    "L": [1, 2, 3],
    "F": [0, 5, 30],
    "F2": [0, 12, 40],
    "G": [1, 2],
    "carry_bits": [None, 0, 2],
    "e_zero": [None, -20, 5],
    "nan_bits": [None, 1],
    "split_scale": [3],
    "scale_block": [16, 64],
}


def _alternatives(name: str) -> list:
    if name in _ALTERNATIVES:
        return _ALTERNATIVES[name]
    t = str({f.name: f.type for f in dataclasses.fields(ModelParams)}[name])
    if t == "bool":
        return [True, False]
    if "Format" in t:
        return [Format.FP16, Format.BF16, Format.FP32, Format.E8M13, Format.TF32, Format.E5M2]
    from tensorcore_smt.model.params import PARAM_ENUMS

    return list(PARAM_ENUMS[t.replace(" | None", "")])


def _probe_rows(p: ModelParams, seed: int, n: int) -> tuple[np.ndarray, ...]:
    """Random bit patterns (NaN, Inf, subnormal, any exponent), middle exponents and
    subnormals, and rows whose first two products cancel."""
    rng = np.random.default_rng(seed)

    def pats(fmt: Format, shape) -> np.ndarray:
        s = fmt.spec
        x = rng.integers(0, 1 << min(s.storage, 63), shape, dtype=np.uint64)
        if s.is_integer:
            return x
        k = shape[0] // 2
        e = rng.integers(0, 3, shape).astype(np.uint64)
        e[:k] = rng.integers(max(1, s.bias - 3), s.bias + 3, e[:k].shape).astype(np.uint64)
        m = rng.integers(0, 1 << s.mbits, shape, dtype=np.uint64)
        sg = rng.integers(0, 2, shape, dtype=np.uint64) << np.uint64(s.ebits + s.mbits)
        y = (sg | (e << np.uint64(s.mbits)) | m) << np.uint64(s.ignored_low)
        y[-(shape[0] // 4) :] = x[-(shape[0] // 4) :]
        return y

    a, b, c = pats(p.a_fmt, (n, p.n_a)), pats(p.b_fmt, (n, p.K)), pats(p.c_fmt, (n,))
    if p.K >= 2 and not p.a_fmt.spec.is_integer and p.a_fmt == p.b_fmt:
        a[: n // 4, 1] = a[: n // 4, 0] ^ np.uint64(1 << (p.a_fmt.spec.storage - 1))
        b[: n // 4, 1] = b[: n // 4, 0]
    return a, b, c


def _contexts(base: ModelParams) -> list[ModelParams]:
    """The family's model, and beside it with the switches that let others act."""
    out = [base]
    for ch in (
        dict(flush_inputs=True),
        dict(K=min(base.K, 8), L=1),
        dict(carry_bits=2),
        dict(int_clamp=IntClamp.SATFINITE),
        dict(a_fmt=Format.TF32, b_fmt=Format.TF32),
    ):
        try:
            out.append(base.with_(**ch))
        except ValueError:
            pass
    return out


_WIDE = [pytest.param(True, marks=pytest.mark.slow), False]


@pytest.mark.parametrize("wide", _WIDE, ids=["wide", "base"])
@pytest.mark.parametrize("base", FAMILIES, ids=lambda q: f"{q.algorithm.value}-{q.K}")
def test_unread_parameters_never_change_an_output(base: ModelParams, wide: bool) -> None:
    """What the table says a family does not read changes no output: every other value
    of such a parameter, on random and extreme rows of the family's model (wide: and of
    the model with the switches that let the conditional parameters act)."""
    if base.K > 16 and base.algorithm != Algorithm.GDFS:
        base = base.with_(K=16, L=min(base.L, 16))
    for ctx in _contexts(base) if wide else [base]:
        rows = _probe_rows(ctx, 7, 64)
        ref = simulate_params(ctx, *rows, engine="numpy")
        for name in param_names_of(ctx):
            for v in _alternatives(name):
                if v == getattr(ctx, name):
                    continue
                try:
                    q = ctx.with_(**{name: v})
                except ValueError:
                    continue
                if unread(q, name) is None:
                    continue
                same = _SAME_AS.get((name, v))
                want = ref
                if same is not None and same != getattr(ctx, name):
                    # a value the unit reads as another one: the same outputs as that one
                    want = simulate_params(ctx.with_(**{name: same}), *rows, engine="numpy")
                out = simulate_params(q, *rows, engine="numpy")
                assert (out == want).all(), (ctx.algorithm.value, name, v)


_SAME_AS = {
    ("order", Order.C_LAST): Order.C_FIRST,  # an FMA chain
    ("order", Order.PAIRWISE): Order.C_FIRST,
    ("nan_rule", NanRule.B_ACC_A): NanRule.CANONICAL,  # outside SFMA
    ("align", AlignMode.EXACT): AlignMode.ROUND_DOWN,  # CDNA3's floors
}
"""Values of a parameter a family reads only in part: the value it computes instead."""


def param_names_of(p: ModelParams) -> list[str]:
    fixed = {"algorithm", "a_fmt", "b_fmt", "c_fmt", "d_fmt", "K", "split", "scale_fmt", "sparse"}
    fixed |= {"sparse_group", "sparse_keep"}
    return [f.name for f in dataclasses.fields(p) if f.name not in fixed]


# --- IEEE-built families (SFMA, SEQUENTIAL, GPS) in rationals ----------------------------------

RNE, RTN = Rounding.RNE, Rounding.RTN


class NotFinite(Exception):
    """A reference step left the finite numbers (the row is not compared)."""


def rd(bits: int, fmt: Format) -> tuple[Fraction, bool]:
    """(value, sign bit) of a finite pattern (NotFinite for Inf and NaN)."""
    s = fmt.spec
    body = bits >> s.ignored_low
    if (
        s.specials == Specials.IEEE
        and (body >> s.mbits) & ((1 << s.ebits) - 1) == (1 << s.ebits) - 1
    ):
        raise NotFinite
    v, _, _ = value(bits, fmt)
    return v, bool(body >> (s.ebits + s.mbits) & 1)


def enc(v: Fraction, neg: bool, fmt: Format, mode: Rounding, flush: bool) -> int:
    """v rounded into fmt; a zero v takes sign `neg`; under `flush` a subnormal result is a
    zero of v's sign (IEEE 754 rounding, then flush-to-zero on the rounded value)."""
    s = fmt.spec
    r = round_fraction(v, fmt, mode, negative_zero=neg)
    body = r >> s.ignored_low
    if (body >> s.mbits) & ((1 << s.ebits) - 1) == (1 << s.ebits) - 1:
        raise NotFinite
    if flush and v != 0 and (body >> s.mbits) & ((1 << s.ebits) - 1) == 0:
        r = (int(v < 0) << (s.storage - 1)) if s.signed else 0
    return r


def sum_zero_sign(xs: list[tuple[Fraction, bool]], mode: Rounding) -> bool:
    """IEEE sign of an exactly zero sum: the common sign of zero addends, else -0 only
    rounding toward -inf."""
    if all(v == 0 for v, _ in xs) and len({n for _, n in xs}) == 1:
        return xs[0][1]
    return mode == RTN


def op(xs, fmt: Format, mode: Rounding, flush: bool) -> tuple[Fraction, bool]:
    """The IEEE sum of exact addends xs (value, sign) rounded into fmt, read back."""
    total = sum(v for v, _ in xs)
    return rd(enc(total, sum_zero_sign(xs, mode), fmt, mode, flush), fmt)


def flushed(x: tuple[Fraction, bool], fmt: Format, keep: bool) -> tuple[Fraction, bool]:
    """A subnormal input read as a zero (of its sign under keep, else +0)."""
    v, n = x
    if v != 0 and abs(v) < Fraction(2) ** fmt.spec.emin:
        return Fraction(0), n and keep
    return x


def prod(x, y) -> tuple[Fraction, bool]:
    return x[0] * y[0], x[1] != y[1]


def sfma_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """MMA-Sim §IV-A: d = c; d = fma(a_k, b_k, d) in d's format, each FMA rounded once."""
    keep = p.flush_sign.value == "keep"
    rdf = (lambda x, f: flushed(rd(x, f), f, keep)) if p.flush_inputs else rd
    d = op([rdf(c, p.c_fmt)], p.d_fmt, p.rounding, False)
    for k in range(p.K):
        last = k == p.K - 1
        flush = p.flush_outputs if last else p.flush_sums
        d = op([prod(rdf(a[k], p.a_fmt), rdf(b[k], p.b_fmt)), d], p.d_fmt, p.rounding, flush)
    return enc(d[0], d[1], p.d_fmt, p.rounding, False)


def seq_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """Products rounded into acc_fmt (or fused into FMAs), added one at a time in the
    order, each addition rounded with acc_rounding (flushed but the last), then d."""
    acc, mode = p.acc_fmt, p.acc_rounding
    keep = p.flush_sign.value == "keep"
    rdf = (lambda x, f: flushed(rd(x, f), f, keep)) if p.flush_inputs else rd
    ua = [rdf(x, p.a_fmt) for x in a]
    ub = [rdf(y, p.b_fmt) for y in b]
    uc = op([rdf(c, p.c_fmt)], acc, mode, False)
    idx = list(range(p.K))[:: -1 if p.order == Order.REVERSE else 1]
    if p.fused_products:
        d = uc
        for k in idx:
            d = op([prod(ua[k], ub[k]), d], acc, mode, p.flush_sums and k != idx[-1])
    else:
        prods = [op([prod(x, y)], acc, mode, p.flush_products) for x, y in zip(ua, ub)]

        def add(x, y, last=False):
            return op([x, y], acc, mode, p.flush_sums and not last)

        def tree(xs):
            if len(xs) == 1:
                return xs[0]
            return add(tree(xs[: len(xs) // 2]), tree(xs[len(xs) // 2 :]))

        if p.order in (Order.C_FIRST, Order.REVERSE):
            d = uc
            for i, k in enumerate(idx):
                d = add(d, prods[k], i == len(idx) - 1)
        elif p.order == Order.C_LAST:
            d = prods[0]
            for q in prods[1:]:
                d = add(d, q)
            d = add(d, uc, True)
        else:
            d = add(uc, tree(prods), True)
    return enc(d[0], d[1], p.d_fmt, p.rounding, p.flush_outputs)


def gps_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """MMA-Sim Algorithm 3: inputs below 2^emin (zeros too) read as +0; fp32 products;
    groups of G summed pairwise; each group added to the running sum from c; every
    operation fp32 round to nearest even, with the flushes p asks for."""

    def inp(x: int, f: Format):
        v, n = rd(x, f)
        if p.flush_inputs and abs(v) < Fraction(2) ** f.spec.emin:
            return Fraction(0), False
        return v, n

    F32 = Format.FP32
    prods = [
        op([prod(inp(x, p.a_fmt), inp(y, p.b_fmt))], F32, RNE, p.flush_products)
        for x, y in zip(a, b)
    ]

    def tree(xs):
        if len(xs) == 1:
            return xs[0]
        return op([tree(xs[: len(xs) // 2]), tree(xs[len(xs) // 2 :])], F32, RNE, p.flush_sums)

    d = op([inp(c, p.c_fmt)], F32, RNE, False)
    starts = list(range(0, p.K, p.G))
    for lo in starts:
        flush = p.flush_outputs if lo == starts[-1] else p.flush_sums
        d = op([d, tree(prods[lo : lo + p.G])], F32, RNE, flush)
    return enc(d[0], d[1], F32, RNE, False)


_IEEE_FMTS = [Format.FP16, Format.BF16, Format.FP32, Format.E5M2, Format.E4M3]


@st.composite
def ieee_variants(draw) -> ModelParams:
    """SFMA, SEQUENTIAL and GPS over their parameters (formats, K, G, order, roundings,
    the four flushes and the flushed inputs' sign)."""
    alg = draw(st.sampled_from([Algorithm.SFMA, Algorithm.SEQUENTIAL, Algorithm.GPS]))
    base = tc.resolve("x86-avx512bf16")
    K = draw(st.integers(1, 6))
    fa = draw(st.sampled_from(_IEEE_FMTS))
    ch = dict(
        algorithm=alg,
        K=K,
        L=1,
        a_fmt=fa,
        b_fmt=draw(st.sampled_from([fa, *_IEEE_FMTS])),
        c_fmt=draw(st.sampled_from([Format.FP32, Format.FP16, Format.BF16])),
        d_fmt=Format.FP32 if alg == Algorithm.GPS else draw(st.sampled_from(_IEEE_FMTS[:3])),
        acc_fmt=draw(st.sampled_from([Format.FP32, Format.FP16, Format.BF16, Format.FP64])),
        acc_rounding=draw(st.sampled_from(list(Rounding))),
        rounding=draw(st.sampled_from(list(Rounding))),
        order=draw(st.sampled_from(list(Order))),
        fused_products=draw(st.booleans()),
        G=draw(st.integers(1, 5)),
        flush_inputs=draw(st.booleans()),
        flush_sign=draw(st.sampled_from(list(type(base.flush_sign)))),
        flush_products=draw(st.booleans()),
        flush_sums=draw(st.booleans()),
        flush_outputs=draw(st.booleans()),
        nan_rule=NanRule.CANONICAL,
        nan_bits=None,
        zero_sign=ZeroSign.POSITIVE,
    )
    if alg == Algorithm.SEQUENTIAL and ch["fused_products"]:
        ch["order"] = draw(st.sampled_from([Order.C_FIRST, Order.REVERSE]))
    try:
        return base.with_(**ch)
    except ValueError:
        assume(False)
        raise


_IEEE_REFS = {Algorithm.SFMA: sfma_ref, Algorithm.SEQUENTIAL: seq_ref, Algorithm.GPS: gps_ref}


def _check_ieee(p: ModelParams, a, b, c, symbolic: bool) -> None:
    try:
        want = _IEEE_REFS[p.algorithm](a, b, c, p)
    except NotFinite:
        return
    got = all_interpreters(p, a, b, c, symbolic=symbolic)
    assert got == want, (p.algorithm.value, a, b, c, hex(got), hex(want))


@_FAST
@given(data=st.data())
def test_ieee_families_match_rationals(data) -> None:
    p = data.draw(ieee_variants())
    for _ in range(3):
        _check_ieee(p, *data.draw(rows(p)), symbolic=False)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_ieee_families_match_rationals_wide(data) -> None:
    p = data.draw(ieee_variants())
    for i in range(4):
        _check_ieee(p, *data.draw(rows(p)), symbolic=i == 0)


# --- INTEGER and FDA's renormalising register in exact arithmetic -------------------------------


def _int_of(bits: int, fmt: Format) -> int:
    s = fmt.spec
    return bits - (1 << s.storage) if s.signed and bits >> (s.storage - 1) else bits


def integer_ref(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """PTX ISA integer mma: exact terms (products, or a AND/XOR b of .b1), sums of L in
    index order; wrap: c + sum modulo 2^32; satfinite: c and the group sums added in
    `order`, the sum limited to [-2^31, 2^31 - 1] after every addition."""
    x = [_int_of(v, p.a_fmt) for v in a]
    y = [_int_of(v, p.b_fmt) for v in b]
    op_ = {BitOp.MUL: lambda u, v: u * v, BitOp.AND: lambda u, v: u & v}
    op_[BitOp.XOR] = lambda u, v: u ^ v
    terms = [op_[p.bit_op](u, v) for u, v in zip(x, y)]
    cv = _int_of(c, Format.S32)
    if p.int_clamp == IntClamp.WRAP:
        return (cv + sum(terms)) % (1 << 32)
    sums = [sum(terms[i : i + p.L]) for i in range(0, p.K, p.L)]
    addends = [cv, *sums] if p.order == Order.C_FIRST else [*sums, cv]
    acc = addends[0]
    for s_ in addends[1:]:
        acc = min(max(acc + s_, -(1 << 31)), (1 << 31) - 1)
    return acc % (1 << 32)


@_FAST
@given(data=st.data())
def test_integer_grid_matches_exact_integers(data) -> None:
    base = tc.resolve("turing", "m8n8k16.s32.s8.s8.s32")
    fmts = [Format.S8, Format.U8, Format.S4, Format.U4]
    K = data.draw(st.integers(1, 8))
    bit = data.draw(st.sampled_from(list(BitOp)))
    fa = Format.B1 if bit != BitOp.MUL else data.draw(st.sampled_from(fmts))
    fb = Format.B1 if bit != BitOp.MUL else data.draw(st.sampled_from(fmts))
    p = base.with_(
        K=K,
        L=data.draw(st.integers(1, K + 1)),
        a_fmt=fa,
        b_fmt=fb,
        bit_op=bit,
        int_clamp=data.draw(st.sampled_from(list(IntClamp))),
        order=data.draw(st.sampled_from([Order.C_FIRST, Order.C_LAST])),
    )
    edge = st.sampled_from([0, 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, (1 << 31) - 300])
    for _ in range(3):
        a = [data.draw(st.integers(0, (1 << fa.spec.storage) - 1)) for _ in range(K)]
        b = [data.draw(st.integers(0, (1 << fb.spec.storage) - 1)) for _ in range(K)]
        c = data.draw(st.one_of(edge, st.integers(0, (1 << 32) - 1)))
        if data.draw(st.booleans()):  # extreme terms of one sign, c at the range's edge
            a, b = [(1 << (fa.spec.storage - 1))] * K, [(1 << (fb.spec.storage - 1))] * K
        assert all_interpreters(p, a, b, c, symbolic=False) == integer_ref(a, b, c, p)


def renormalize_group_ref(a: list[int], b: list[int], c: int, c_fmt: Format, p) -> int:
    """FDA with carry_overflow=renormalize (model/fda.py step 4): terms cut to
    2^(e_max - F) (truncated or floored), then added in order c, p0, p1, ...; a term
    enters shifted right by the bits dropped so far (truncated or floored); a partial sum
    of magnitude >= 2^(F + int_bits + carry_bits) units is halved (truncated or floored)
    and every later unit is worth twice as much; one rounding into d."""
    if inf_sign(c, c_fmt) is not None:
        return c
    vc, ec, zc = value(c, c_fmt)
    terms = [(vc, ec, zc, 1)]
    for x, y in zip(a, b):
        va, ea, _ = value(x, p.a_fmt)
        vb, eb, _ = value(y, p.b_fmt)
        terms.append((va * vb, ea + eb, va * vb == 0, 2))
    exps = [e for _, e, z, _ in terms if not z]
    if not exps:
        return 0
    q = max(exps) - p.F
    down = p.align == AlignMode.ROUND_DOWN
    cut = _floor_to if down else _trunc_to
    units = [int(cut(v, q) / Fraction(2) ** q) for v, *_ in terms]
    cap = 1 << (p.F + max(t[3] for t in terms) + p.carry_bits)

    def shift(x: int, s: int) -> int:
        return x >> s if down or x >= 0 else -((-x) >> s)

    acc = scale = 0
    for u in units:
        acc += shift(u, scale)
        if abs(acc) >= cap:
            acc, scale = shift(acc, 1), scale + 1
    total = acc * Fraction(2) ** (q + scale)
    d = round_fraction(total, p.d_fmt, p.rounding, overflow_to_inf=_OVERFLOW_TO_INF[p.overflow])
    return 0 if d & ((1 << (p.d_fmt.spec.storage - 1)) - 1) == 0 else d


@_FAST
@given(data=st.data())
def test_fda_renormalize_matches_rationals(data) -> None:
    base = tc.resolve("volta")
    K = data.draw(st.integers(1, 5))
    p = base.with_(
        K=K,
        L=K,
        F=data.draw(st.one_of(st.integers(0, 6), st.sampled_from([13, 23, 24]))),
        carry_bits=data.draw(st.integers(0, 3)),
        carry_overflow=CarryOverflow.RENORMALIZE,
        align=data.draw(st.sampled_from([AlignMode.TRUNCATE, AlignMode.ROUND_DOWN])),
        rounding=data.draw(st.sampled_from(list(Rounding))),
        a_fmt=data.draw(st.sampled_from([Format.FP16, Format.E4M3, Format.E2M1])),
        b_fmt=data.draw(st.sampled_from([Format.FP16, Format.E4M3, Format.E2M1])),
        e_zero=None,
        zero_sign=ZeroSign.POSITIVE,
    )
    for _ in range(3):
        a, b, c = data.draw(rows(p))
        got = all_interpreters(p, a, b, c, symbolic=False)
        assert got == renormalize_group_ref(a, b, c, p.c_fmt, p), (a, b, c)


@pytest.mark.parametrize("e_zero", [439, 1000, 16383])
def test_exact_alignment_register_reaches_a_high_e_zero(e_zero: int) -> None:
    """align=exact with zero terms at a large e_zero: e_max is e_zero, so the register
    must reach from there down to c's lowest bit; the vector interpreter (fixed widths)
    gave 0 for c = 2^-149 where the concrete one gave c (found by the FDA grid)."""
    base = tc.resolve("hopper", "m16n8k16.f32.f16.f16.f32")
    p = dataclasses.replace(base, K=4, L=2, F=0, align=AlignMode.EXACT, e_zero=e_zero)
    assert all_interpreters(p, [0] * 4, [0] * 4, 1, symbolic=False) == 1


def test_cdna3_chained_nan_stays_nan() -> None:
    """FDRDA with one product a group: e4m3 64 times bf16 2^122 is 2^128, an infinity,
    and the next group's -2^128 makes inf - inf, a NaN that the last group (a zero
    product) keeps: canonical NaN on every interpreter and in the rational chain (which
    once read the NaN c as an infinity by its exponent field and gave +inf)."""
    p = tc.resolve("cdna3", None).with_(
        K=3, L=1, F=0, F2=0, a_fmt=Format.E4M3, b_fmt=Format.BF16, c_fmt=Format.FP32
    )
    assert p.algorithm == Algorithm.FDRDA
    a, b = [0x68, 0xE8, 0], [0x7C80, 0x7C80, 0]
    assert all_interpreters(p, a, b, 0, symbolic=True) == 0x7FFFFFFF == cdna3_ref(a, b, 0, p)
    assert cdna3_ref(a[:1], b[:1], 0, p.with_(K=1)) == f32(float("inf"))
