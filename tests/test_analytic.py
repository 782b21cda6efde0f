"""The analytic bound of the literature (certify/analytic.py): its formula on cases
computed by hand, where it applies and where not, and how it compares with what the
project proves and attains. Where the composed U is at most the analytic bound, the unit
keeps it over the class (proved); where a real input's error exceeds it, the theorem's
hypothesis does not hold for the unit (refuted: with subnormal operands); in between,
witnesses stay below it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tensorcore_smt.certify.analytic import (
    HOLDS,
    NOT_APPLICABLE,
    RELAXED,
    gamma,
    gemm_analytic,
    instruction_analytic,
)
from tensorcore_smt.certify.bound import default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import Argument, gemm_bound, instruction_bound
from tensorcore_smt.certify.extremal import argument_rows
from tensorcore_smt.certify.sample import best_of, sample_best
from tensorcore_smt.gemm.hypothesis import parse_gemm
from tensorcore_smt.model.measure import Measure
from tensorcore_smt.spec.presets import parse_variant

NORMAL = default_class() + (parse_where("normal-only"),)
U23 = Fraction(1, 2**23)
FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"


def params(arch, instr=None):
    return parse_variant(arch).params(instr)


def test_gamma_by_hand():
    assert gamma(4, U23) == Fraction(4, 2**23 - 4)  # 4u / (1 - 4u)
    assert gamma(1, Fraction(1, 2)) == 1
    assert gamma(0, U23) == 0
    assert gamma(2**23, U23) is None and gamma(3, Fraction(1, 2)) is None  # n u >= 1: void


@pytest.mark.parametrize(
    "arch,instr,want",
    [
        # gamma_K(2^-23): K additions in binary32 rounded toward zero (Fasi et al.: 2u)
        ("volta", "m8n8k4.f32.f16.f16.f32", Fraction(4, 2**23 - 4)),
        ("hopper", "m16n8k16.f32.f16.f16.f32", Fraction(16, 2**23 - 16)),
        ("ampere", "m16n8k8.f32.tf32.tf32.f32", Fraction(8, 2**23 - 8)),
        # F = 13, rounded into E8M13: u = 2^-13, gamma_32 = 32 / (8192 - 32) = 1/255
        ("hopper", FP8, Fraction(1, 255)),
    ],
)
def test_instruction_bound_by_hand(arch, instr, want):
    a = instruction_analytic(params(arch, instr))
    assert a.applies and a.bound == want
    assert a.hypothesis == RELAXED  # truncating alignment: the theorem is only assumed
    assert "Fasi" in a.reason and "Blanchard" in a.source


def test_narrow_output_counts_its_rounding():
    # (3.3)-(3.4) with q = 1: (1 + gamma_1(u_FMA)) (1 + gamma_16(2^-23)) - 1, fp16 to nearest
    a = instruction_analytic(params("ampere", "m16n8k16.f16.f16.f16.f16"))
    want = (1 + Fraction(1, 2**11 - 1)) * (1 + Fraction(16, 2**23 - 16)) - 1
    assert a.bound == want and a.formula().startswith("prod(")


def test_ieee_fma_units_meet_the_hypothesis():
    a = instruction_analytic(params("hopper", "m16n8k16.f64.f64.f64.f64"))
    assert a.hypothesis == HOLDS and a.bound == Fraction(16, 2**53 - 16)


@pytest.mark.parametrize(
    "variant,instr,why",
    [
        ("cdna3", None, "round-down"),
        ("hopper[carry_bits=2]", "m16n8k16.f32.f16.f16.f32", "carry"),
        ("volta[split=markidis]", None, "split"),
    ],
)
def test_not_applicable_says_why(variant, instr, why):
    a = instruction_analytic(params(variant, instr))
    assert a.bound is None and a.hypothesis == NOT_APPLICABLE and why in a.reason
    assert a.formula() == "-"


def test_gemm_serial_is_algorithm_3_1():
    # q = 1024 / 16 block FMAs of b = 16: n = q b = 1024 additions at 2^-23, u_eff = 0
    a = gemm_analytic("hopper/serial", 1024)
    assert a.bound == gamma(1024, U23) and a.source.endswith("eq. (3.4)")
    drift = gemm_analytic("ampere/serial", 1024, against="hopper/serial")
    assert drift.bound == 2 * gamma(1024, U23) and " + " in drift.formula()


def test_gemm_promoted_and_void():
    # promote every 128 products: 4 wgmma of 32 in E8M13 (128 additions at 2^-13), then
    # 2 fp32 promotions and C in the epilogue (3 additions at 2^-24)
    a = gemm_analytic("hopper/cublas-fp8", 256, instr=FP8)
    want = (1 + gamma(128, Fraction(1, 2**13))) * (1 + gamma(3, Fraction(1, 2**24))) - 1
    assert a.bound == want and "counted" in a.source
    # a chain of 16384 products at 2^-13: n u = 2, the bound is void
    v = gemm_analytic("hopper/fast-accum", 16384, instr=FP8)
    assert v.bound is None and "void" in v.reason


def test_composed_bound_proves_the_analytic_bound_where_it_is_below():
    # Hopper fp16 with normal operands: U = 5.7e-7 <= gamma_16(2^-23) = 1.9e-6
    p = params("hopper", "m16n8k16.f32.f16.f16.f32")
    U = instruction_bound(p, NORMAL)
    assert isinstance(U, Argument)
    assert U.upper <= instruction_analytic(p, normal_inputs=True).bound
    # and a serial GEMM chain: the composed U counts one truncation per instruction step
    for hyp in ("hopper/serial", "ampere/serial"):
        g = gemm_bound(parse_gemm(hyp), 1024, NORMAL)
        assert isinstance(g, Argument) and g.upper <= gemm_analytic(hyp, 1024).bound


@pytest.mark.parametrize(
    "arch,instr",
    [
        ("volta", "m8n8k4.f32.f16.f16.f32"),
        ("hopper", "m16n8k16.f32.f16.f16.f32"),
        ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ],
    ids=lambda x: str(x),
)
def test_normal_operands_stay_below_the_analytic_bound(arch, instr):
    # The argument's worst-case rows and random rows of the normal-only class never exceed
    # the analytic bound. On Volta the exact loss bound (certify/alignment.py) proves it:
    # U = 4.7683681e-7 < gamma_4(2^-23) = 4.7683738e-7, and the worst-case shape reaches
    # 99.9 % of it; Ampere tf32's chain (U 5.96e-7 against 9.537e-7) proves it too.
    q = make_bound_query(arch, None, instr, Measure.NORMWISE, NORMAL)
    A = instruction_analytic(q.p, normal_inputs=True).bound
    worst = best_of(q, argument_rows(q, {}))
    rand = sample_best(q, 40, seed=5)
    assert 0 < rand.measure <= worst.measure <= A
    if arch == "volta":
        assert worst.measure > A * Fraction(999, 1000)
        assert instruction_bound(q.p, NORMAL).upper < A


def test_fp8_wgmma_exceeds_the_analytic_bound_with_normal_operands():
    # With u = 2^-13 for the E8M13 sum, gamma_32(2^-13) = 1/255; a witness of normal e4m3
    # operands (c at 2^E, 32 products cut just below the grid 2^(E-13)) reaches 3.95e-3,
    # re-run on the model and measured exactly: the unit truncates each of 33 terms to the
    # grid and then truncates the sum, one more loss than the theorem's 32 additions count.
    q = make_bound_query("hopper", None, FP8, Measure.NORMWISE, NORMAL)
    A = instruction_analytic(q.p, normal_inputs=True).bound
    assert A == Fraction(1, 255)
    worst = best_of(q, argument_rows(q, {}))
    U = instruction_bound(q.p, NORMAL).upper
    assert A < worst.measure <= U <= worst.measure * Fraction(17, 16)


@pytest.mark.parametrize(
    "arch,instr,times",
    [("volta", "m8n8k4.f32.f16.f16.f32", 300), ("hopper", "m16n8k16.f32.f16.f16.f32", 100)],
)
def test_subnormal_operands_refute_the_analytic_bound(arch, instr, times):
    # The finding: over the default class (subnormal fp16 operands allowed; exact
    # magnitudes still in fp32's normal range) the units exceed gamma_K(2^-23) by two
    # orders of magnitude. Products stay exact, but the alignment to an unnormalised
    # product exponent drops bits far above a subnormal product's value: the theorem's
    # hypothesis (every addition a rounding in precision u) does not hold for the unit.
    q = make_bound_query(arch, None, instr, Measure.NORMWISE, default_class())
    A = instruction_analytic(q.p).bound
    w = best_of(q, argument_rows(q, {}))
    assert w.measure > times * A


def test_a_random_tf32_row_with_subnormal_factors_refutes_it():
    # Found by certify/sweep.py among 2^20 random rows (seed 1) of Ampere's tf32 default
    # class: subnormal tf32 factors (0x1c000, 0xf0000, 0x7fc000, ...), an exact error
    # 2.06e-6 = 2.15 gamma_8(2^-23).
    row = {
        "a0": 0x741C000, "a1": 0x802CA000, "a2": 0x1C000, "a3": 0x73D24000,
        "a4": 0xF0000, "a5": 0xA71D8000, "a6": 0x3E9EA000, "a7": 0x15C000,
        "b0": 0x802A0000, "b1": 0x2D214000, "b2": 0xFC63C000, "b3": 0x7FC000,
        "b4": 0xE2D52000, "b5": 0x2BBBA000, "b6": 0xAB694000, "b7": 0x80328000,
        "c": 0x2441E32E,
    }  # fmt: skip
    q = make_bound_query(
        "ampere", None, "m16n8k8.f32.tf32.tf32.f32", Measure.NORMWISE, default_class()
    )
    A = instruction_analytic(q.p).bound
    w = best_of(q, [row])
    assert w is not None and w.measure > 2 * A
    assert w.measure <= instruction_bound(q.p, default_class()).upper
