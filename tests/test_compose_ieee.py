"""Composed bounds of the units built from IEEE operations (certify/compose_ieee.py:
SEQUENTIAL, GPS), the max form of chains (nodes.Composed.h), the overflow test of
chained roundings to nearest (compose.small_steps) and the rows on which an
intermediate rounding overflows (certify/overflow_rows.py): each checked against the
concrete model, and random rows never above U."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.certify.bound import bound, default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import (
    Argument,
    Refusal,
    instruction_bound,
    rounds_up_midway,
    small_steps,
)
from tensorcore_smt.certify.compose_ieee import normal_sums
from tensorcore_smt.certify.overflow_rows import overflow_witness
from tensorcore_smt.certify.sample import sample_best
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.model.measure import Measure, exact_value
from tensorcore_smt.spec.presets import parse_variant

NORMAL = default_class() + (parse_where("normal-only"),)
# sums below half of fp32's largest value: no rounding can overflow
SMALL = NORMAL + tuple(
    parse_where(w)
    for w in (
        "exponent-window:c=-126:125",
        "exponent-window:a=-126:60",
        "exponent-window:b=-126:60",
    )
)
U24 = Fraction(1, 2**24)


def _sampled_below(arch, instr, cons, upper, rows=600, seed=5):
    q = make_bound_query(arch, None, instr, Measure.NORMWISE, cons)
    best = sample_best(q, rows, seed=seed)
    assert best is not None and best.rows > rows // 4
    assert best.measure <= upper
    return best.measure


def test_exact_groups_rounded_twice_close_at_two_roundings():
    # CDNA1 fp16: two exact groups of four, each rounded to nearest into fp32. The max
    # form charges the first group's subnormal rounding nothing: U = (1 + u)^2 - 1,
    # where the plain form gave 3u.
    p = parse_variant("cdna1").params("v_mfma_f32_32x32x8f16")
    assert rounds_up_midway(p) and small_steps(p, default_class())
    arg = instruction_bound(p, default_class())
    assert isinstance(arg, Argument)
    assert arg.upper >= (1 + U24) ** 2 - 1 and arg.upper < 2 * U24 * (1 + 2**-20)
    cert = bound("cdna1", constraints=default_class(), timeout=60, sample_rows=300)
    assert cert.closed and cert.lower <= cert.upper
    _sampled_below("cdna1", None, NORMAL, arg.upper)


def test_fma_chain_max_form_is_the_product_of_its_roundings():
    p = parse_variant("cdna3").params("v_mfma_f32_16x16x4_f32")  # 4 FMAs into fp32
    arg = instruction_bound(p, SMALL)
    assert isinstance(arg, Argument)
    assert arg.upper >= (1 + U24) ** 4 - 1 and arg.upper < 4 * U24 * (1 + 2**-20)
    _sampled_below("cdna3", "v_mfma_f32_16x16x4_f32", SMALL, arg.upper)


@pytest.mark.parametrize(
    "arch,instr,cons",
    [
        ("cdna2", "v_mfma_f32_32x32x8f16", NORMAL),  # GPS, flushed sums
        ("cdna2", "v_mfma_f32_16x16x16f16", NORMAL),
        ("x86-avx512bf16", "vdpbf16ps", SMALL),  # two FMAs, DAZ/FTZ
        (
            "ampere[algorithm=sequential,order=pairwise,acc_rounding=rz]",
            "m16n8k8.f32.f16.f16.f32",
            NORMAL,
        ),
        ("ampere[algorithm=sequential,order=c-last]", "m16n8k8.f32.f16.f16.f32", NORMAL),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_ieee_trees_bound_random_rows(arch, instr, cons):
    p = parse_variant(arch).params(instr)
    arg = instruction_bound(p, cons)
    assert isinstance(arg, Argument), arg
    _sampled_below(arch, instr, cons, arg.upper)


def test_gps_sums_stay_normal_so_no_flush_acts():
    # fp16 products are multiples of 2^-48: with c normal no sum CDNA2 forms is
    # subnormal, so its flushes never act and U is four roundings on the deepest path
    # (two pairwise levels, c, the next group); bf16 products reach 2^-266: no such claim
    fp16 = parse_variant("cdna2").params("v_mfma_f32_32x32x8f16")
    bf16 = parse_variant("cdna2").params("v_mfma_f32_32x32x8bf16_1k")
    assert normal_sums(fp16, Format.FP32, True) and not normal_sums(fp16, Format.FP32, False)
    assert not normal_sums(bf16, Format.FP32, True)
    arg = instruction_bound(fp16, NORMAL)
    assert isinstance(arg, Argument)
    assert (1 + U24) ** 4 - 1 <= arg.upper < 4 * U24 * (1 + 2**-20)
    cert = bound("cdna2", constraints=NORMAL, timeout=4, sample_rows=300)
    assert cert.upper == arg.upper and 0 < cert.lower <= cert.upper
    _sampled_below("cdna2", "v_mfma_f32_32x32x8f16", NORMAL, arg.upper, rows=1500)


def test_small_steps_refuses_wide_products():
    bf16 = parse_variant("cdna2").params("v_mfma_f32_32x32x8bf16_1k")
    fp16 = parse_variant("cdna2").params("v_mfma_f32_32x32x8f16")
    assert small_steps(fp16, NORMAL) and not small_steps(bf16, NORMAL)
    why = instruction_bound(bf16, NORMAL)
    assert isinstance(why, Refusal) and "overflow" in why.reason


@pytest.mark.parametrize(
    "arch,instr",
    [
        ("x86-avx512bf16", "vdpbf16ps"),
        ("ampere", "m8n8k4.f64.f64.f64.f64"),
        ("cdna3", "v_mfma_f32_32x32x2_f32"),
        ("cdna2", "v_mfma_f32_32x32x8bf16_1k"),
    ],
)
def test_overflow_rows_are_in_class_finite_exactly_and_infinite_on_the_unit(arch, instr):
    q = make_bound_query(arch, None, instr, Measure.NORMWISE, NORMAL)
    w = overflow_witness(q)
    assert w is not None and math.isinf(w.measure)
    p = q.p
    a = [w.inputs[f"a{k}"] for k in range(p.K)]
    b = [w.inputs[f"b{k}"] for k in range(p.K)]
    e, mag = exact_value(a, b, w.inputs["c"], (p.a_fmt, p.b_fmt, p.c_fmt))
    assert isinstance(e, Fraction) and isinstance(mag, Fraction)
    d = simulate_params(
        p,
        np.array([a], dtype=np.uint64),
        np.array([b], dtype=np.uint64),
        np.array([w.inputs["c"]], dtype=np.uint64),
    )
    assert not isinstance(value_of(int(d[0]), p.d_fmt), Fraction)  # Inf on the unit
    # the bound reports it: closed at infinity, no solver asked
    cert = bound(arch, instr=instr, constraints=NORMAL, timeout=30, sample_rows=0)
    assert cert.closed and math.isinf(cert.lower) and cert.upper is None
    assert cert.steps[0].solver == "overflow row"


def test_no_overflow_row_where_steps_are_small():
    q = make_bound_query("cdna1", None, None, Measure.NORMWISE, default_class())
    assert overflow_witness(q) is None
