"""Composed rel and ulp bounds over classes of one sign (certify/bound.py, one_sign):
|e| = M there, so rel is the normwise U and ulp at most 2^p times it; against a second
variant |d_Y| >= M (1 - U_Y). Random rows of the class never exceed them; without one
sign nothing is composed."""

from __future__ import annotations

import random

import pytest

from tensorcore_smt.certify.bound import bound, default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.sample import _draw, best_of
from tensorcore_smt.model.measure import Measure

POS = default_class() + (parse_where("positive"),)


def sample_best(q, rows, seed):
    """The largest measure over random rows with every sign bit cleared."""
    rng = random.Random(seed)
    drawn = [
        {o.name: _draw(rng, o.fmt, 8) & ~(1 << (o.fmt.spec.storage - 1)) for o in q.operands}
        for _ in range(rows)
    ]
    return best_of(q, drawn)


@pytest.mark.parametrize("arch", ["hopper", "volta", "cdna3"])
def test_rel_is_the_normwise_bound_over_one_sign(arch):
    rel = bound(arch, measure="rel", constraints=POS, timeout=1, sample_rows=200)
    nw = bound(arch, measure="normwise", constraints=POS, timeout=1, sample_rows=200)
    assert rel.upper_method == "composed" and rel.upper == nw.upper
    q = make_bound_query(arch, None, None, Measure.REL, POS)
    best = sample_best(q, 500, seed=4)
    assert best is not None and best.measure <= rel.upper


@pytest.mark.slow  # about 12 s
def test_ulp_and_drift_over_one_sign():
    ulp = bound("hopper", measure="ulp", constraints=POS, timeout=1, sample_rows=200)
    rel = bound("hopper", measure="rel", constraints=POS, timeout=1, sample_rows=200)
    assert ulp.upper == rel.upper * 2**24 and ulp.lower <= ulp.upper
    q = make_bound_query("hopper", None, None, Measure.ULP, POS)
    best = sample_best(q, 500, seed=4)
    assert best is not None and best.measure <= ulp.upper
    drift = bound("ampere", "hopper", measure="ulp", constraints=POS, timeout=1, sample_rows=200)
    assert drift.upper_method == "composed" and any("1 - U_Y" in x for x in drift.argument)
    qd = make_bound_query("ampere", "hopper", None, Measure.ULP, POS)
    best = sample_best(qd, 500, seed=4)
    assert best is not None and best.measure <= drift.upper


def test_nothing_composed_without_one_sign():
    cert = bound("hopper", measure="rel", constraints=default_class(), timeout=1, sample_rows=50)
    assert cert.upper_method != "composed"
