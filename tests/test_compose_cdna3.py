"""CDNA3's composed bound (certify/compose_cdna3.py, FDRDA and GFDRDA) checked where it
could fail: random and searched rows never exceed U, the worst-case rows of
extremal_cdna3.py reproduce their measure on the reference interpreter and close the
interval of the fp16 instruction to 1/16 in both classes, and the units the argument
does not cover stay refused (a bf16 chain really reaches Inf inside the class)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.certify.bound import default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import Argument, Refusal, instruction_bound
from tensorcore_smt.certify.extremal import structured_best
from tensorcore_smt.certify.extremal_cdna3 import fdrda_rows
from tensorcore_smt.certify.sample import best_of, sample_best
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.model.measure import Measure, exact_value, measure_value
from tensorcore_smt.spec.presets import parse_variant

NORMAL = default_class() + (parse_where("normal-only"),)
CLASSES = {"default": default_class(), "normal": NORMAL}
F16 = "v_mfma_f32_32x32x8_f16"


def _upper(instr, cons) -> Fraction:
    arg = instruction_bound(parse_variant("cdna3").params(instr), cons)
    assert isinstance(arg, Argument), arg
    return arg.upper


@pytest.mark.parametrize(
    "instr",
    [
        F16,
        pytest.param("v_mfma_f32_16x16x16_f16", marks=pytest.mark.slow),
        "v_mfma_f32_32x32x16_bf8_fp8",
    ],
    ids=str,
)
@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_rows_never_exceed_the_composed_bound(instr, cls):
    cons = CLASSES[cls]
    U = _upper(instr, cons)
    q = make_bound_query("cdna3", None, instr, Measure.NORMWISE, cons)
    found = [sample_best(q, 200, seed=7, window=w) for w in (2, 30)]
    found.append(best_of(q, fdrda_rows(q, {})))
    found.append(structured_best(q, 0.3, seed=2))  # the worst-case rows, then mutated
    worst = max(b.measure for b in found if b is not None)
    assert 0 < worst <= U


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_witness_reproduces_and_closes_the_fp16_interval(cls):
    cons = CLASSES[cls]
    U = _upper(F16, cons)
    q = make_bound_query("cdna3", None, F16, Measure.NORMWISE, cons)
    best = best_of(q, fdrda_rows(q, {}))
    assert best is not None
    w = best.inputs
    a = [w[f"a{k}"] for k in range(8)]
    b = [w[f"b{k}"] for k in range(8)]
    d = tc.simulate_one("cdna3", F16, a, b, w["c"])  # the reference interpreter
    e, n = exact_value(a, b, w["c"], (Format.FP16, Format.FP16, Format.FP32))
    L = measure_value(value_of(d, Format.FP32), e, n, Measure.NORMWISE, Format.FP32)
    assert L == best.measure
    assert L <= U <= L * Fraction(17, 16)


def test_a_tiny_negative_c_is_floored_to_a_whole_step():
    # a0 b0 = 2^-48 (two subnormal fp16 factors) at e_dot = -28: c = -2^-149 is floored
    # to -2^-52, a normwise error of 1/16 (the default class's worst case)
    a, b, c = [1] + [0] * 7, [1] + [0] * 7, 0x80000001
    d = tc.simulate("cdna3", F16, np.array([a], np.uint64), np.array([b], np.uint64), [c])
    assert value_of(int(d[0]), Format.FP32) == 15 * Fraction(1, 2**52)
    e, n = exact_value(a, b, c, (Format.FP16, Format.FP16, Format.FP32))
    m = measure_value(value_of(int(d[0]), Format.FP32), e, n, Measure.NORMWISE, Format.FP32)
    assert m == (Fraction(1, 2**52) - Fraction(1, 2**149)) / n
    assert m < _upper(F16, default_class()) < m * (1 + Fraction(1, 2**16))


@pytest.mark.parametrize("instr", ["v_mfma_f32_32x32x8_bf16", "v_mfma_f32_16x16x8_xf32"])
def test_units_with_wide_products_stay_refused(instr):
    p = parse_variant("cdna3").params(instr)
    for cons in CLASSES.values():
        r = instruction_bound(p, cons)
        assert isinstance(r, Refusal) and "output range" in r.reason


def test_a_bf16_chain_reaches_inf_inside_the_class():
    # why bf16 is refused: c = max - 2 ulp, group 0 adds 2^103 (a tie, rounded up to
    # max - ulp), group 1 adds 1.5 ulp: M = max, the class has no overflow, d = Inf
    a, b = [0] * 16, [0] * 16
    a[0], b[0] = 0x5980, 0x5900  # 2^52 * 2^51
    a[8], b[8] = 0x59C0, 0x5980  # 1.5 * 2^52 * 2^52
    c = 0x7F7FFFFD
    instr = "v_mfma_f32_16x16x16_bf16"
    d = tc.simulate_one("cdna3", instr, a, b, c)
    _, n = exact_value(a, b, c, (Format.BF16, Format.BF16, Format.FP32))
    assert n == (2 - Fraction(1, 2**23)) * Fraction(2) ** 127
    assert d == 0x7F800000


def test_other_refusals():
    p = parse_variant("cdna3[F2=20]").params(None)
    r = instruction_bound(p, NORMAL)
    assert isinstance(r, Refusal) and "F2" in r.reason
    no_nu = tuple(c for c in default_class() if c.kind.value != "no-underflow")
    r = instruction_bound(parse_variant("cdna3").params(None), no_nu)
    assert isinstance(r, Refusal) and "underflow" in r.reason
