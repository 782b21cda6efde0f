"""A class that fixes every product to zero (issue 43, defect 5): `tcsmt bound volta
--where terms:0` is [0, 0], closed at once, by the argument of certify/zero_products.py,
and only where its conditions hold.

References: the concrete model run on every c of a 16-bit format with zero products,
against c itself read by numpy (the exact result), over a grid of variants (e_zero, F,
flushing, chained groups, d and the output narrower than c, ones' complement
opposing); each variant the argument claims must give d = c on every c of the class,
and the variants it refuses must include ones where some c of the class changes."""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.api import simulate_params
from tensorcore_smt.certify.bound import default_class
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import Argument, instruction_bound
from tensorcore_smt.certify.zero_products import no_free_product, why_not_exact
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.inputs.constraints import Constraint
from tensorcore_smt.inputs.kinds import ConstraintKind
from tensorcore_smt.model.params import Opposing
from tensorcore_smt.model.terms import AlignMode
from tensorcore_smt.spec.presets import PRESETS

TERMS0 = parse_where("terms:0")
DEFAULT = default_class() + (TERMS0,)
FINITE_ONLY = (Constraint(ConstraintKind.FINITE), TERMS0)


def test_volta_terms_0_is_closed_at_zero_at_once():
    """Failed before: the composed bound ignored that no product is free (U = 0.111)
    and the solvers ran the whole budget (45 s at --timeout 60), the interval open."""
    t0 = time.monotonic()
    cert = tc.bound("volta", constraints=DEFAULT, timeout=60)
    assert time.monotonic() - t0 < 10
    assert cert.lower == 0 and cert.upper == 0 and cert.closed
    assert cert.upper_method == "composed"


@pytest.mark.parametrize("measure", ["rel", "ulp"])
def test_every_measure_and_a_drift_are_zero_at_once(measure):
    """d = c on both sides: rel and ulp against the exact result, and the drift of
    volta against volta[F=24], are 0 (before, rel and ulp took no composed bound over a
    class of both signs and the solvers ran the budget)."""
    t0 = time.monotonic()
    for against in (None, "volta[F=24]"):
        cert = tc.bound("volta", against, measure=measure, constraints=DEFAULT, timeout=60)
        assert cert.upper == 0 and cert.lower == 0 and cert.closed
    assert time.monotonic() - t0 < 20


def test_nonzero_variant_is_not_claimed_and_its_witness_reruns():
    """e_zero = -100, above fp32's e_min: a c below 2^-100 is cut to the grid
    2^(-100 - 23); no zero is claimed, and the witness found re-runs on the model with
    the error the certificate states."""
    name = "volta[e_zero=-100]"
    cert = tc.bound(name, constraints=DEFAULT, timeout=5)
    assert cert.upper != 0
    assert cert.witness is not None and cert.lower > 0
    p = cert.query.params[0]
    w = cert.witness
    A = np.array([[w[f"a{k}"] for k in range(p.K)]], np.uint64)
    B = np.array([[w[f"b{k}"] for k in range(p.K)]], np.uint64)
    d = int(simulate_params(p, A, B, np.array([w["c"]], np.uint64), engine="numpy")[0])
    c = value_of(w["c"], p.c_fmt)
    assert all(v == 0 for k, v in w.items() if k != "c")
    assert Fraction(abs(value_of(d, p.d_fmt) - c)) / abs(c) == cert.lower


def test_fixed_zeros_count_and_a_nonzero_fix_does_not():
    """--where fix: of a_k or b_k to +0 or -0 for every k leaves no product free; one
    nonzero fixed operand (b3 = 1.0 with a3 free) leaves one."""
    p = PRESETS["volta"].instructions["m8n8k4.f32.f16.f16.f32"].params

    def fix(name: str, bits: int) -> Constraint:
        return Constraint(ConstraintKind.FIX, name, bits=bits)

    fixes = (fix("a0", 0), fix("a1", 0x8000), fix("b2", 0), fix("b3", 0))
    cons = default_class() + fixes
    assert no_free_product(p, cons) and why_not_exact(p, cons) is None
    cons = default_class() + fixes[:3] + (fix("b3", 0x3C00),)
    assert not no_free_product(p, cons) and why_not_exact(p, cons) is not None


def _values(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Values of 16- and 32-bit patterns as float64, read by numpy (not by the model)."""
    if fmt == Format.FP16:
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == Format.BF16:
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    assert fmt == Format.FP32
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def _changed(p, cons) -> int:
    """How many c of the class (read by numpy: finite; with no-overflow |c| <= d's
    largest; with no-underflow c = 0 or |c| >= 2^e_min(d)) the unit with zero products
    returns other than c. c is every fp16 pattern."""
    c = np.arange(1 << 16, dtype=np.uint64)
    z = np.zeros((c.size, p.K), np.uint64)
    d = _values(np.asarray(simulate_params(p, z, z, c, engine="numpy"), np.uint64), p.d_fmt)
    cv = _values(c, p.c_fmt)
    kinds = {x.kind for x in cons}
    ok = np.isfinite(cv)
    spec = p.d_fmt.spec
    if ConstraintKind.NO_OVERFLOW in kinds:
        top = float(
            value_of((((1 << spec.ebits) - 2) << spec.mbits) | ((1 << spec.mbits) - 1), p.d_fmt)
        )
        ok &= np.abs(cv) <= top
    if ConstraintKind.NO_UNDERFLOW in kinds:
        ok &= (cv == 0) | (np.abs(cv) >= 2.0**spec.emin)
    return int((ok & (d != cv)).sum())


BASE = PRESETS["volta"].instructions["m8n8k4.f32.f16.f16.f16"].params  # c fp16, d fp32
HALF = PRESETS["volta"].instructions["m8n8k4.f16.f16.f16.f16"].params  # c, d fp16
VARIANTS = {
    "volta f16 c": BASE,
    "e_zero None": dataclasses.replace(BASE, e_zero=None),
    "e_zero -14": dataclasses.replace(BASE, e_zero=-14),
    "e_zero -10": dataclasses.replace(BASE, e_zero=-10),
    "e_zero -10 F 10": dataclasses.replace(BASE, e_zero=-10, F=10),
    "e_zero 3": dataclasses.replace(BASE, e_zero=3),
    "F 10": dataclasses.replace(BASE, F=10),
    "F 9": dataclasses.replace(BASE, F=9),
    "F 4": dataclasses.replace(BASE, F=4),
    "align exact": dataclasses.replace(BASE, align=AlignMode.EXACT, carry_bits=None),
    "round-down": dataclasses.replace(BASE, align=AlignMode.ROUND_DOWN, carry_bits=None),
    "chained": dataclasses.replace(BASE, L=2),
    "chained e_zero -20": dataclasses.replace(BASE, L=2, e_zero=-20),
    "flush inputs": dataclasses.replace(BASE, flush_inputs=True),
    "flush outputs": dataclasses.replace(BASE, flush_outputs=True),
    "fp16 d": HALF,
    "fp16 d flush": dataclasses.replace(HALF, flush_inputs=True, flush_outputs=True),
    "fp16 d e_zero -14": dataclasses.replace(HALF, e_zero=-14),
    "bf16 d": dataclasses.replace(HALF, d_fmt=Format.BF16, acc_fmt=Format.BF16),
    "ones": dataclasses.replace(BASE, opposing=Opposing.ONES),
}


@pytest.mark.parametrize("cons", [DEFAULT, FINITE_ONLY], ids=["default", "finite"])
def test_claims_hold_on_every_c_and_refusals_include_failures(cons):
    """Sound on every claimed variant; the conditions are not vacuous: e_zero above c's
    least exponent, F below c's fraction bits, a flushing unit without no-underflow and
    a d narrower than c each change some c of the class, and are refused."""
    claimed, refused_failing = [], []
    for name, p in VARIANTS.items():
        try:
            p = p.with_()
        except ValueError:
            continue  # a combination the model does not accept
        changed = _changed(p, cons)
        why = why_not_exact(p, cons)
        if why is None:
            claimed.append(name)
            assert changed == 0, f"{name}: claimed d = c, {changed} c change"
            arg = instruction_bound(p, cons)
            assert isinstance(arg, Argument) and arg.upper == 0
        elif changed:
            refused_failing.append(name)
    assert {"volta f16 c", "fp16 d", "e_zero None", "chained", "ones"} <= set(claimed)
    must_fail = {"e_zero -10 F 10", "e_zero 3", "F 9", "F 4", "bf16 d"}
    if cons is FINITE_ONLY:
        must_fail |= {"flush inputs", "fp16 d flush"}
    assert must_fail <= set(refused_failing), set(refused_failing)
