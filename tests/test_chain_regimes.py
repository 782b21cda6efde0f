"""Chained fused groups bounded case by case (certify/chain_regimes.py): the pieces
against brute force, the pruning keeps every case that can be the worst, and Ampere's
tf32 chain (two groups of four) closes with a witness that reproduces; rows near the
worst case never exceed U."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from tensorcore_smt.certify.alignment import Entry, Slot
from tensorcore_smt.certify.bound import bound, default_class, make_bound_query
from tensorcore_smt.certify.chain_regimes import Alt, RegimeCase, max_loss, prune
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import instruction_bound
from tensorcore_smt.certify.extremal import _mutate, argument_rows
from tensorcore_smt.certify.sample import best_of
from tensorcore_smt.model.measure import Measure
from tensorcore_smt.spec.presets import parse_variant

NORMAL = default_class() + (parse_where("normal-only"),)
TF32 = "m16n8k8.f32.tf32.tf32.f32"


def test_max_loss_is_the_largest_cut_of_any_term():
    rng = random.Random(2)
    for _ in range(200):
        entries = []
        for e in rng.sample(range(-4, 4), 3):
            lo = rng.randint(1, 40)
            entries.append(Entry(e, e - 4, lo, lo + rng.randint(0, 40)))
        s = Slot(tuple(sorted(entries)), 1)
        E, F = rng.randint(-4, 4), rng.randint(0, 6)
        want = Fraction(0)
        for x in s.entries:
            if x.e > E:
                continue
            k = E - F - x.lsb
            for n in range(x.lo, x.hi + 1):
                cut = (n % (1 << k)) if k > 0 else 0
                want = max(want, cut * Fraction(2) ** x.lsb)
        assert max_loss(s, E, F) == want


def test_prune_keeps_every_case_that_can_be_the_worst():
    one, two = Fraction(1), Fraction(2)

    def case(name, *alts):
        return RegimeCase(name, name, [Alt(*a) for a in alts])

    a = case("a", (two, 0 * one), (one, two))
    dominated = case("dominated", (one, 0 * one), (one, one))  # each of a's is above one
    incomparable = case("incomparable", (0 * one, 3 * one))
    kept = prune([dominated, a, incomparable])
    assert a in kept and incomparable in kept and dominated not in kept
    # neither dominates: (0, 5) is below nothing of c, (1, 1) below nothing of b
    b = case("b", (two, 0 * one), (0 * one, 5 * one))
    c = case("c", (two, 0 * one), (one, one))
    assert len(prune([b, c])) == 2


def test_tf32_chain_closes_with_normal_operands():
    cert = bound("ampere", instr=TF32, constraints=NORMAL, timeout=30, sample_rows=100)
    assert cert.closed and cert.upper_method == "composed"
    assert cert.upper <= cert.lower * Fraction(17, 16)
    assert any("case by case" in line for line in cert.argument)
    # 10 grid units of 2^-24 at most: 5 per group (four cuts and one truncation)
    assert cert.upper <= Fraction(10, 2**24)
    assert cert.lower > Fraction(99, 10 * 2**24)


@pytest.mark.parametrize("instr", [TF32, "m16n8k16.f32.f16.f16.f32"])
@pytest.mark.parametrize("cls", ["default", "normal"])
def test_rows_near_the_chain_worst_case_never_exceed_the_bound(cls, instr):
    cons = default_class() if cls == "default" else NORMAL
    q = make_bound_query("ampere", None, instr, Measure.NORMWISE, cons)
    U = instruction_bound(q.p, cons).upper
    rng = random.Random(5)
    seeds = argument_rows(q, {})
    rows = list(seeds)
    for _ in range(500):
        row = rng.choice(seeds)
        for _ in range(rng.randint(1, 4)):
            row = _mutate(row, q, rng, {})
        rows.append(row)
    best = best_of(q, rows)
    assert best is not None and 0 < best.measure <= U


def test_chain_cases_apply_only_where_their_preconditions_hold():
    from tensorcore_smt.certify.chain_regimes import chain_upper

    one_group = parse_variant("hopper").params(None)
    assert chain_upper(one_group, NORMAL, lambda op, f: True, Fraction(1)) is None
    p = parse_variant("ampere").params(TF32)
    got = chain_upper(p, NORMAL, lambda op, f: True, Fraction(1))
    assert got is not None and got <= Fraction(10, 2**24)
    # nothing below a cap it cannot beat
    assert chain_upper(p, NORMAL, lambda op, f: True, Fraction(1, 2**30)) is None


def test_tf32_chain_closes_in_the_default_class_by_mass():
    # subnormal tf32 factors: a product of a subnormal and 2^25 sets the grid far above
    # its value; c and the other products just below the grid are lost whole. The two
    # groups cannot both reach that ratio on the same mass, so charging each loss to the
    # products it comes from (chain_mass.py) gives the single group's figure, not twice it
    import numpy as np

    import tensorcore_smt as tc
    from tensorcore_smt.formats import value_of
    from tensorcore_smt.model.measure import exact_value, measure_value

    cert = bound("ampere", instr=TF32, timeout=30, sample_rows=100)
    assert cert.closed and cert.upper <= cert.lower * Fraction(17, 16)
    assert any("by mass" in line for line in cert.argument)
    assert Fraction(1, 2**12) * Fraction(99, 100) < cert.lower <= cert.upper
    p = parse_variant("ampere").params(TF32)
    w = cert.witness
    a = [w[f"a{k}"] for k in range(p.K)]
    b = [w[f"b{k}"] for k in range(p.K)]
    d = tc.simulate(
        "ampere",
        TF32,
        np.array([a], np.uint64),
        np.array([b], np.uint64),
        np.array([w["c"]], np.uint64),
    )
    e, den = exact_value(a, b, w["c"], (p.a_fmt, p.b_fmt, p.c_fmt))
    got = measure_value(value_of(int(d[0]), p.d_fmt), e, den, Measure.NORMWISE, p.d_fmt)
    assert got == cert.lower


def test_fp16_chain_closes_by_induction_over_its_groups():
    # Ampere's fp16 unit: two groups of eight; two smallest subnormals make a product
    # 2^-48 aligned at 2^-28 (grid 2^-52): c just below the grid is lost, 1/17. By mass
    # the second group's accumulator loss is charged to a product of 2^-48 (1/16); by
    # induction it is paid by the mass the accumulator carries, and U comes within 1/16
    from tensorcore_smt.certify.chain_induction import chain_induction_upper

    p = parse_variant("ampere").params(None)
    U = chain_induction_upper(p, lambda op, f: False)
    assert Fraction(1, 17) < U < Fraction(1, 17) * Fraction(17, 16)
    cert = bound("ampere", timeout=30, sample_rows=100)
    assert cert.closed and cert.lower == Fraction(2**24 - 1, 17 * 2**24 - 1)
    assert any("induction" in line for line in cert.argument)
