"""Stated arguments are checked before they are trusted (smt/arguments.py,
model/integer_sums.py, certify/exact.py, certify/exact_gemm.py).

The integer-sum argument once bounded only the instruction's c by the alignment grid,
though a chained group's c is the running sum: on `hopper[F=12,L=4]` (P = 4, c = 8191)
and `hopper[F=10,L=8]` (P = 5, c = 0) the model is inexact where the argument said
exact. Each test compares with the exact integer sum of the model's own `simulate`."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.api import resolve, simulate_params
from tensorcore_smt.certify.exact import _lemma_query, exactness
from tensorcore_smt.certify.exact_gemm import gemm_exactness
from tensorcore_smt.cli import main
from tensorcore_smt.formats import round_fraction, value_of
from tensorcore_smt.model import integer_sums
from tensorcore_smt.model.integer_sums import argued_bound, extreme_rows
from tensorcore_smt.smt.answers import answer_json
from tensorcore_smt.smt.argument_rows import counterexample
from tensorcore_smt.smt.report import to_text
from tensorcore_smt.smt.solve import Limits, Verdict, answer

INSTR = "m16n8k16.f32.f16.f16.f32"
CASES = [("hopper[F=12,L=4]", 4, 8191), ("hopper[F=10,L=8]", 5, 0)]


def _run(p, a: list[int], b: list[int], c: int) -> Fraction:
    """d of one integer row on the concrete model, as a rational."""

    def enc(v: int, f) -> int:
        return round_fraction(Fraction(v), f)

    d = simulate_params(
        p,
        np.array([[enc(x, p.a_fmt) for x in a]], dtype=np.uint64),
        np.array([[enc(x, p.b_fmt) for x in b]], dtype=np.uint64),
        np.array([enc(c, p.c_fmt)], dtype=np.uint64),
    )
    return value_of(int(d[0]), p.d_fmt)


@pytest.mark.parametrize("arch,P,c", CASES)
def test_counterexamples_are_inexact_and_outside_the_argued_bound(arch, P, c):
    p = resolve(arch, INSTR)
    m = (1 << P) - 1
    d = _run(p, [m] * p.K, [m] * p.K, c)
    exact = c + p.K * m * m
    assert d != exact  # the model itself is inexact on this row
    got = argued_bound(p, P)
    # the argument no longer covers the row: no bound, or one below |c|
    assert isinstance(got, str) or got[0] < c or (c == 0 and got[0] < 0)


def test_fixed_bound_holds_at_b_and_is_tight():
    # hopper[F=12,L=4], P = 4: 4 groups, the last group's c is |c| + 12 * 15^2
    p = resolve("hopper[F=12,L=4]", INSTR)
    B, _ = argued_bound(p, 4)
    assert B == (1 << 13) - 1 - 12 * 15**2
    assert counterexample(p, 4, B) is None
    # one past the bound the all-largest row loses bits: the bound is tight
    assert _run(p, [15] * 16, [15] * 16, B + 1) != B + 1 + 16 * 225
    assert counterexample(p, 4, B + 1) is not None


@pytest.mark.parametrize("arch,P,c", CASES)
def test_extreme_rows_catch_the_old_bound(arch, P, c):
    """The rows at the old bound min(2^p - K m^2, 2^(F+1) - 1) find an inexact row: a
    row set that would have refuted the old argument."""
    p = resolve(arch, INSTR)
    m2 = ((1 << P) - 1) ** 2
    old = min((1 << 24) - p.K * m2, (1 << (p.F + 1)) - 1)
    ce = counterexample(p, P, old)
    assert ce is not None
    (a, b, cc), d = ce
    assert abs(cc) <= old and d == _run(p, a, b, cc) and d != cc + sum(x * y for x, y in zip(a, b))


def test_extreme_rows_stay_in_the_class():
    p = resolve("hopper[F=12,L=4]", INSTR)
    rows = list(extreme_rows(p, 4, 100))
    assert all(len(a) == len(b) == p.K for a, b, _ in rows)
    assert all(abs(x) <= 15 for a, b, _ in rows for x in a + b)
    assert {abs(c) for _, _, c in rows} <= {0, 99, 100}


def test_c_add_after_and_e_zero_conditions():
    # c_add=after: the chain runs from +0, a later group's c is the earlier products alone
    p = resolve("hopper[F=10,L=8,c_add=after]", INSTR)
    assert isinstance(argued_bound(p, 5), str)
    assert _run(p, [31] * 16, [31] * 16, 0) != 16 * 31**2  # the model is inexact there
    p = resolve("hopper[F=12,L=4,c_add=after]", INSTR)
    B, _ = argued_bound(p, 4)
    assert B == (1 << 24) - 16 * 225 and counterexample(p, 4, B) is None
    # zero terms at an exponent above F make the grid coarser than 1
    q = resolve("hopper[F=12,L=4,e_zero=20]", INSTR)
    assert "e_zero" in argued_bound(q, 4)
    assert _run(q, [15] * 15 + [0], [15] * 16, 1) != 1 + 15 * 225


# the classes |c| <= 8191 and |c| <= 2047 hold both counterexamples (c = 8191, c = 0)
@pytest.mark.parametrize("arch,P,cbits", [("hopper[F=12,L=4]", 4, 13), ("hopper[F=10,L=8]", 5, 11)])
def test_query_path_gives_a_witness_not_unsat(arch, P, cbits):
    o = answer(_lemma_query(arch, INSTR, P, cbits), Limits(timeout=30, search=5))
    assert o.verdict == Verdict.WITNESS
    w = o.witness
    p = resolve(arch, INSTR)
    a = [value_of(w.inputs[f"a{k}"], p.a_fmt) for k in range(p.K)]
    b = [value_of(w.inputs[f"b{k}"], p.b_fmt) for k in range(p.K)]
    c = value_of(w.inputs["c"], p.c_fmt)
    # the witness, re-run here, is inexact against the exact rational sum
    assert w.reproduces and _run(p, a, b, c) != c + sum(x * y for x, y in zip(a, b))


def test_too_large_a_bound_is_refuted_by_its_rows(monkeypatch):
    """An argument that claims more than the model does is caught by its rows at B: the
    answer is never unsat (here the search finds the witness)."""
    real = integer_sums.argued_bound

    def claims_too_much(p, P):
        got = real(p, P)
        return (1 << 13) - 1, got[1] if isinstance(got, tuple) else []

    monkeypatch.setattr(integer_sums, "argued_bound", claims_too_much)
    q = _lemma_query("hopper[F=12,L=4]", INSTR, 4, 13)
    o = answer(q, Limits(timeout=30, search=5))
    assert o.verdict == Verdict.WITNESS and not o.argued
    assert o.argument is not None and o.argument.contradiction is not None
    assert "was not used" in o.note
    data = answer_json(o, [])
    assert data["argument"]["contradiction"] and data["verdict"] == "witness"


def test_argued_answer_is_its_own_verdict_in_text_and_json():
    q = _lemma_query("hopper[F=12,L=4]", INSTR, 4, 12)  # |c| <= 4095 <= B = 5491
    o = answer(q, Limits(timeout=2))
    assert o.verdict == Verdict.UNSAT_BY_ARGUMENT and o.argued and o.method == "argument"
    assert o.argument.rows > 0 and o.argument.contradiction is None
    data = answer_json(o, [])
    assert data["verdict"] == "unsat-by-argument"
    assert data["argument"]["kind"] == "integer-sums" and data["argument"]["rows_checked"] > 0
    text = to_text(o, [])
    assert "unsat by argument" in text and "extreme rows" in text
    # --no-confirm: the rows still run, no solver is asked
    o = answer(q, Limits(timeout=2, confirm=False))
    assert o.verdict == Verdict.UNSAT_BY_ARGUMENT and not o.runs and "--no-confirm" in o.note


def test_a_solver_witness_overrides_a_wrong_argument(monkeypatch):
    """A wrong argument whose rows happen to pass: the solvers' reproducing witness wins."""
    from tensorcore_smt.smt import arguments

    def passes(q):
        got = real(q)
        if got is not None:
            got.run_check = lambda: (0, None)
        return got

    real = arguments.integer_sums_argument
    monkeypatch.setattr(arguments, "integer_sums_argument", passes)
    monkeypatch.setattr(
        integer_sums, "argued_bound", lambda p, P: ((1 << 14) - 1, ["claims too much"])
    )
    o = answer(_lemma_query("hopper[F=12,L=4]", INSTR, 4, 13), Limits(timeout=30, search=5))
    assert o.verdict == Verdict.WITNESS and o.witness.reproduces
    assert "was wrong" in o.note


def test_exactness_and_gemm_exactness_are_sound():
    r = exactness("hopper[F=12,L=4]", 4, instr=INSTR, timeout=10, limits=Limits(timeout=5))
    assert r.argued_B == (1 << 13) - 1 - 12 * 225 and r.argued_rows > 0
    assert r.argued_contradiction is None and r.above_witness is not None
    g = gemm_exactness("hopper[F=10,L=8]", 5, instr=INSTR)
    # no instruction lemma: nothing is claimed for K = 16, where the model is inexact
    assert g.K is None
    g = gemm_exactness("hopper[F=12,L=4]", 4, instr=INSTR)
    assert g.K is not None and g.sound_rows > 0 and g.contradiction is None
    p = resolve("hopper[F=12,L=4]", INSTR)
    assert (g.K // p.K - 1) * p.K * 225 <= g.B


def test_gemm_exactness_withdraws_a_claim_its_rows_refute(monkeypatch):
    from tensorcore_smt.certify import exact_gemm

    monkeypatch.setattr(exact_gemm, "counterexample", lambda p, P, B: None)
    monkeypatch.setattr(exact_gemm, "argued_bound", lambda p, P: ((1 << 13) - 1, ["too much"]))
    g = gemm_exactness("hopper[F=12,L=4]", 4, instr=INSTR, witness=False)
    assert g.K is None and g.contradiction is not None


def test_cli_exact_reports_the_checked_argument():
    r = CliRunner().invoke(
        main, ["exact", "hopper[F=12,L=4]", "--slices", "4", "--instr", INSTR, "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["accumulator_bound"] == (1 << 13) - 1 - 12 * 225
    assert data["accumulator_argument_rows"] > 0
    assert data["accumulator_argument_contradiction"] is None
    r = CliRunner().invoke(
        main,
        ["exact", "hopper[F=10,L=8]", "--slices", "5", "--instr", INSTR, "--timeout", "10"],
    )
    assert "(argument)" not in r.output
