"""The monotonicity argument (model/monotone.py, smt/arguments.py): CDNA3's FDRDA units
never lower d when c alone grows over nonnegative inputs. Checked where it could fail:
the library query is answered by the argument, random pairs at binade edges never
decrease on the concrete model, and where the stated condition p_c <= F2 + 1 fails
(F2 = 20) the argument declines and a constructed row does decrease."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.formats import Format, round_fraction, value_of
from tensorcore_smt.model.monotone import monotone_in_c
from tensorcore_smt.smt.arguments import argued_monotone
from tensorcore_smt.smt.library import get
from tensorcore_smt.smt.solve import Limits, Verdict, answer
from tensorcore_smt.spec.presets import parse_variant


def _query(arch: str):
    return {spec.id: q for spec, q in get("monotonicity").bind(arch, None)}["c-grows"]


def test_library_query_is_answered_by_the_argument():
    q = _query("cdna3")
    # --no-confirm: the argument and its extreme rows answer, no solver is asked
    o = answer(q, Limits(timeout=5, confirm=False))
    assert o.verdict == Verdict.UNSAT_BY_ARGUMENT and o.argued and o.method == "argument"
    assert "F2 + 1 = 32" in o.note and o.argument.rows > 0 and not o.runs
    # NVIDIA's truncating FDA is not monotone: no argument, the search finds the witness
    assert argued_monotone(_query("volta")) is None


def _run(p, a, b, c):
    return simulate_params(
        p,
        np.array(a, dtype=np.uint64),
        np.array(b, dtype=np.uint64),
        np.array(c, dtype=np.uint64),
    )


def _f32(v: Fraction) -> int:
    return round_fraction(v, Format.FP32)


@pytest.mark.slow  # about 13 s
def test_pairs_at_binade_edges_never_decrease():
    p = parse_variant("cdna3").params("v_mfma_f32_32x32x8_f16")
    assert monotone_in_c(p) is not None
    rng = random.Random(7)
    a, b, c1, c2 = [], [], [], []
    for _ in range(20000):
        E = rng.randint(-20, 30)
        below = Fraction(2) ** E - Fraction(2) ** (E - 24) * rng.randint(1, 4)
        lo = below if rng.random() < 0.7 else below * Fraction(rng.randint(1, 8), 8)
        hi = Fraction(2) ** E * Fraction(rng.randint(8, 9), 8)
        row_a = [
            round_fraction(Fraction(rng.randint(0, 2047), 1 << rng.randint(0, 18)), p.a_fmt)
            for _ in range(p.K)
        ]
        row_b = [
            round_fraction(Fraction(rng.randint(0, 2047), 1 << rng.randint(0, 18)), p.b_fmt)
            for _ in range(p.K)
        ]
        a.append(row_a)
        b.append(row_b)
        c1.append(_f32(lo))
        c2.append(_f32(hi))
    d1 = _run(p, a, b, c1)
    d2 = _run(p, a, b, c2)
    for x, y in zip(d1, d2):
        vx, vy = value_of(int(x), p.d_fmt), value_of(int(y), p.d_fmt)
        assert vy >= vx


def test_the_condition_is_needed():
    # F2 = 20 < p_c - 1: a larger c coarsens the dot product's floor by more than c grew
    p = parse_variant("cdna3[F2=20]").params("v_mfma_f32_32x32x8_f16")
    assert monotone_in_c(p) is None
    E = 0
    D = Fraction(3, 1 << 22)  # on the grid 2^(E-1-21), not on 2^(E-21)
    a = [round_fraction(D, p.a_fmt)] + [0] * (p.K - 1)
    b = [round_fraction(Fraction(1), p.b_fmt)] + [0] * (p.K - 1)
    c1 = _f32(Fraction(2) ** E - Fraction(2) ** (E - 24))
    c2 = _f32(Fraction(2) ** E)
    d1, d2 = _run(p, [a, a], [b, b], [c1, c2])
    assert value_of(int(d2), p.d_fmt) < value_of(int(d1), p.d_fmt)
    # the same row on the hardware's F2 = 31 does not decrease
    q = parse_variant("cdna3").params("v_mfma_f32_32x32x8_f16")
    e1, e2 = _run(q, [a, a], [b, b], [c1, c2])
    assert value_of(int(e2), q.d_fmt) >= value_of(int(e1), q.d_fmt)
