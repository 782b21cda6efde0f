"""Solver proofs that the fp64 formulation (engine/float_fda.py) equals the bit-vector
model, for every unit the compiled GEMM runner uses it on.

The runner takes the formulation for a unit where float_fda.applies and both operand
formats have at least compiled.FLOAT_MIN_BITS bits (today: the bf16 and fp16 instructions
of the NVIDIA presets, `_units`). Its step differs from the model's in two places, each
stated here as a query that has a model exactly when the two disagree:

- a product term: trunc(fp64(a) * fp64(b) * 2^(F - e_max + shift)) (an fp64 multiply, a
  scaling by a power of two, fptosi) against the model's term (model/terms.py
  product_addend, then align with AlignMode.TRUNCATE, signed), for all finite a and b and
  every e_max from the product's exponent up to the unit's greatest;
- c's term: trunc(fp64(c) * 2^(F - e_max + shift)) against the model's aligned c
  (operand_addend), for all finite c and the same e_max.

The rest of the step is the model's own code (the exponent table is checked on every
pattern in tests/test_float_fda.py, the tail is compiled from the model's DAG, and the sum
of at most `L + 1` terms fits its 64-bit lanes by float_fda.sum_bits).

A whole product query for bf16 or fp16 did not end within minutes on either solver: the
fp64 multiplier (53 x 53 bits) and the model's integer one (8 x 8 or 11 x 11) are
different circuits. The query is therefore split by a's significand field: one query per
value, each with a multiplier by a constant (bf16: 128 queries of 2-11 s on bitwuzla;
fp16: 1024). The fast tests prove a few of these cases; the slow ones prove every case,
for every lemma class of the units (bitwuzla, and z3 on the c term and a sample of cases).
"""

from __future__ import annotations

from enum import Enum

import pytest
from ieee_proofs import bitwuzla_unsat, z3_unsat

from tensorcore_smt.engine import float_fda
from tensorcore_smt.formats import EXP_W, Format
from tensorcore_smt.gemm import compiled
from tensorcore_smt.model.params import ModelParams


class Term(Enum):
    """Which term of the step a query is about."""

    PRODUCT = "product"
    C = "c"


def _units() -> list[tuple[str, str, ModelParams]]:
    """(preset, instruction, params) of every unit the runner takes the formulation for
    (float_fda.applies, operands of at least FLOAT_MIN_BITS bits)."""
    from tensorcore_smt.spec.catalogue import PRESETS

    out = []
    for arch, preset in PRESETS.items():
        for name, ins in preset.instructions.items():
            p = ins.params
            narrow = min(p.a_fmt.spec.storage, p.b_fmt.spec.storage) < compiled.FLOAT_MIN_BITS
            if float_fda.applies(p) and not narrow:
                out.append((arch, name, p))
    return out


def _classes(term: Term) -> dict[tuple, ModelParams]:
    """One unit per distinct query, keyed by the formats of its term and F: the query
    depends on those and on the unit's greatest e_max, and the one with the greatest
    e_max of a key holds for the others (its e_max ranges over theirs)."""
    out: dict[tuple, ModelParams] = {}
    for _, _, p in _units():
        fmts = (p.a_fmt, p.b_fmt) if term == Term.PRODUCT else (p.c_fmt,)
        key = (fmts, p.F)
        hi = float_fda.exponent_range(p)[1]
        if key not in out or hi > float_fda.exponent_range(out[key])[1]:
            out[key] = p  # e_max up to the greatest hi covers every smaller one
    return out


def _value(z3, x, fmt: Format):
    """float_fda._Ir.value on z3 bit vectors: the fields placed as fp32's, widened."""
    w, s = fmt.spec.storage, fmt.spec
    if w == 32:
        f32 = z3.fpBVToFP(x, z3.Float32())
    else:
        x32 = z3.ZeroExt(32 - w, x)
        mag = (x32 & ((1 << (w - 1)) - 1)) << (23 - s.mbits)
        sign = (x32 & (1 << (w - 1))) << (32 - w)
        f32 = z3.fpBVToFP(mag | sign, z3.Float32())
    return z3.fpToFP(z3.RNE(), f32, z3.Float64())


def lemma(p: ModelParams, term: Term, a_sig: int | None = None):
    """A z3 formula satisfiable exactly when the formulation's `term` differs from the
    model's for unit `p` (module docstring); `a_sig`: a's significand field fixed."""
    import z3

    from tensorcore_smt.bv.symbolic import SymbolicBackend
    from tensorcore_smt.bv.to_z3 import to_z3
    from tensorcore_smt.formats import decode
    from tensorcore_smt.model.terms import (
        Addend,
        AlignMode,
        ProductExponent,
        align,
        operand_addend,
        product_addend,
    )

    s = SymbolicBackend()
    F = p.F
    e_max = s.var("emax", EXP_W)
    if term == Term.PRODUCT:
        fa, fb = p.a_fmt, p.b_fmt
        a, b = s.var("a", fa.spec.storage), s.var("b", fb.spec.storage)
        ua, ub = decode(a, fa), decode(b, fb)
        t = product_addend(ua, ub, ProductExponent.UNNORMALIZED)
        finite = ~(ua.is_nan | ua.is_inf | ub.is_nan | ub.is_inf)
        shift = float_fda.rebias(fa) + float_fda.rebias(fb)
    else:
        fc = p.c_fmt
        c = s.var("c", fc.spec.storage)
        uc = decode(c, fc)
        t = operand_addend(uc)
        finite = ~(uc.is_nan | uc.is_inf)
        shift = float_fda.rebias(fc)
    win = max(F, t.fb) + t.int_bits + 1
    kept, _ = align(
        Addend(t.sign, t.mag, t.exp, t.fb, t.is_zero), e_max, F, win, AlignMode.TRUNCATE
    )
    signed = t.sign.ite(-kept.resize(64), kept.resize(64))
    (model, exp, fin), env = to_z3([signed.v, t.exp.v, finite.v])
    if term == Term.PRODUCT:
        x = z3.fpMul(z3.RNE(), _value(z3, env["a"], fa), _value(z3, env["b"], fb))
    else:
        x = _value(z3, env["c"], fc)
    arg = z3.SignExt(16, F - env["emax"]) + shift + 1023  # float_fda._Ir.pow2
    bits = z3.Concat(z3.BitVecVal(0, 1), z3.Extract(10, 0, arg), z3.BitVecVal(0, 52))
    scaled = z3.fpMul(z3.RNE(), x, z3.fpBVToFP(bits, z3.Float64()))
    fast = z3.fpToSBV(z3.RTZ(), scaled, z3.BitVecSort(64))
    hi = float_fda.exponent_range(p)[1]
    goal = [fin, exp <= env["emax"], env["emax"] <= hi, fast != model]
    if a_sig is not None:
        goal.append(z3.Extract(p.a_fmt.spec.mbits - 1, 0, env["a"]) == a_sig)
    return z3.And(*goal)


def test_the_units_are_the_16_bit_nvidia_fda_instructions():
    """What the proofs below cover: every bf16 and fp16 instruction the formulation
    applies to, and no 8-bit one (those run the general kernel)."""
    units = _units()
    fmts = {p.a_fmt for _, _, p in units} | {p.b_fmt for _, _, p in units}
    assert fmts == {Format.BF16, Format.FP16}
    archs = {a for a, _, _ in units}
    assert {"volta", "ampere", "hopper", "blackwell"} <= archs
    assert not any(a.startswith("cdna") for a in archs)  # round-down alignment
    assert ("hopper", "wgmma.m64n8k16.f32.bf16.bf16") in {(a, n) for a, n, _ in units}


def _first(term: Term, fmt: Format) -> ModelParams:
    return next(p for (fmts, _), p in _classes(term).items() if fmts[0] == fmt)


@pytest.mark.parametrize("fmt,a_sig", [(Format.BF16, 0), (Format.BF16, 1), (Format.FP16, 0)])
def test_product_term_proved_for_one_significand(fmt, a_sig):
    """bitwuzla: unsat for one value of a's significand field (a few seconds)."""
    assert bitwuzla_unsat(lemma(_first(Term.PRODUCT, fmt), Term.PRODUCT, a_sig))


def _ids(key: tuple) -> str:
    fmts, F = key
    return "x".join(f.spec.name for f in fmts) + f"-F{F}"


@pytest.mark.parametrize("key", list(_classes(Term.C)), ids=_ids)
def test_c_term_proved(key):
    """bitwuzla: c's term for each class of the units (no multiplier: 1-2 s)."""
    assert bitwuzla_unsat(lemma(_classes(Term.C)[key], Term.C))


@pytest.mark.slow
@pytest.mark.parametrize("key", list(_classes(Term.C)), ids=_ids)
def test_z3_agrees_on_the_c_term(key):
    """z3 on the same queries: unsat too (3-15 s each)."""
    assert z3_unsat(lemma(_classes(Term.C)[key], Term.C))


@pytest.mark.parametrize("key", list(_classes(Term.PRODUCT)), ids=_ids)
def test_every_product_class_is_proved_in_the_slow_suite(key):
    """The slow proofs below cover every class of the units (this test fails when a
    unit of a new class appears that they do not list)."""
    assert key in PRODUCT_CLASSES


def test_a_wrong_formulation_is_found(monkeypatch):
    """The same queries with fptosi rounding to nearest instead of truncating: sat, on
    the product (a fixed significand) and on c."""
    import z3

    monkeypatch.setattr(z3, "RTZ", z3.RNE)
    p = _first(Term.PRODUCT, Format.BF16)
    assert not bitwuzla_unsat(lemma(p, Term.PRODUCT, 0))
    assert not bitwuzla_unsat(lemma(p, Term.C))


PRODUCT_CLASSES = [
    ((Format.BF16, Format.BF16), 24),
    ((Format.BF16, Format.BF16), 25),
    ((Format.FP16, Format.FP16), 23),
    ((Format.FP16, Format.FP16), 24),
    ((Format.FP16, Format.FP16), 25),
]
"""The product queries' classes (formats, F) the slow proofs run, one test each."""


@pytest.mark.slow
@pytest.mark.parametrize("key", PRODUCT_CLASSES, ids=_ids)
def test_product_term_proved_for_every_significand(key):
    """bitwuzla: unsat for every value of a's significand field (bf16: 128 queries,
    about 10 minutes on one core; fp16: 1024)."""
    p = _classes(Term.PRODUCT)[key]
    failed = [
        v for v in range(1 << p.a_fmt.spec.mbits) if not bitwuzla_unsat(lemma(p, Term.PRODUCT, v))
    ]
    assert not failed, f"the formulation differs from the model for a's significand {failed}"


@pytest.mark.slow
@pytest.mark.parametrize("a_sig", [0, 1, 64, 127])
def test_z3_agrees_on_product_cases(a_sig):
    """z3 on a sample of the bf16 cases: unsat too."""
    assert z3_unsat(lemma(_first(Term.PRODUCT, Format.BF16), Term.PRODUCT, a_sig))
