"""The concrete search before the solvers (smt/search.py): it finds the witnesses of
queries the solvers take minutes on, every witness re-runs on the concrete model through
another path (`simulate_one`, exact rationals), it never claims a witness for a query
that is proved unsat, its verdicts on the vector interpreter are the concrete
interpreter's, and the reports name it as the method (no solver involved)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
from click.testing import CliRunner

from tensorcore_smt.api import simulate_one
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.smt.library import get
from tensorcore_smt.smt.query import (
    SECOND,
    Constraint,
    ConstraintKind,
    Goal,
    make_query,
    recheck,
)
from tensorcore_smt.smt.report import exact_result
from tensorcore_smt.smt.search import candidates, evaluate, search
from tensorcore_smt.smt.solve import Limits, Verdict, answer


def _query(prop: str, arch: str, qid: str):
    return next(q for spec, q in get(prop).bind(arch, None) if spec.id == qid)


def _simulate(q, u: dict[str, int], variant: str) -> int:
    K = q.p.K
    a, b = [u[f"a{i}"] for i in range(K)], [u[f"b{i}"] for i in range(K)]
    return simulate_one(variant, q.instruction, a, b, u["c"])


def test_finds_a_monotonicity_witness_that_simulate_reproduces():
    """Hopper's library query (a solver takes about two minutes): the search's u <= u_2
    gives d(u_2) < d(u) through `simulate_one`, with a and b shared and c <= c_2."""
    q = _query("monotonicity", "hopper", "c-grows")
    run = search(q, 5.0, seed=0)
    w = run.witness
    assert w is not None and w.reproduces and run.seconds < 5.0
    u, u2 = q.input_sets(w.inputs)
    assert all(u[k] == u2[k] for k in u if k != "c")
    c, c2 = (value_of(x, Format.FP32) for x in (w.inputs["c"], w.inputs["c" + SECOND]))
    assert 0 <= c <= c2
    d, d2 = (_simulate(q, s, "hopper") for s in (u, u2))
    assert (d, d2) == w.outputs
    assert value_of(d2, Format.FP32) < value_of(d, Format.FP32)


def test_finds_a_markidis_vs_ootomo_witness_measured_exactly():
    """Volta's Property 5 query (about 48 s for the solvers): Markidis's error is smaller
    than Ootomo-Yokota's, measured with exact rationals, within the query's class."""
    q = _query("markidis-vs-ootomo", "volta", "markidis-more-accurate")
    w = search(q, 5.0, seed=0).witness
    assert w is not None and w.reproduces and w.constraint_ok
    ins = w.inputs
    assert all(ins[f"a{k}"] == ins[f"b{k}"] == 0 for k in range(4, q.p.K))  # terms 4
    exact = exact_result(q, ins)
    outs = [_simulate(q, ins, v) for v in q.variants]
    assert tuple(outs) == w.outputs
    ex, ey = (abs(value_of(o, Format.FP32) - exact) for o in outs)
    assert isinstance(exact, Fraction) and ex < ey


def test_never_claims_a_witness_for_a_proved_query():
    """Queries the solvers prove unsat: Volta's carry bits (k+1 adds nothing) and an IEEE
    RNE sequential sum's monotonicity (tests/test_monotonicity.py proves both)."""
    carry = _query("carry-bits", "volta", "k-plus-1")
    e5m2 = ",".join(f"{k}=e5m2" for k in ("a_fmt", "b_fmt", "c_fmt", "d_fmt", "acc_fmt"))
    ieee = make_query(
        f"volta[algorithm=sequential,acc_rounding=rne,rounding=rne,{e5m2}]",
        None,
        "m8n8k4.f16.f16.f16.f16",
        Goal.NON_MONOTONE,
        (Constraint(ConstraintKind.TERMS, "ab", lo=1), Constraint(ConstraintKind.POSITIVE)),
    )
    for q in (carry, ieee):
        run = search(q, 1.0, seed=0)
        assert run.witness is None and run.rows >= 2048


def test_vector_verdicts_are_the_concrete_interpreters():
    """Every candidate row the vector interpreter calls a witness, and a sample of the
    others, gets the same verdict from the concrete interpreter (`recheck`)."""
    for q in (
        _query("monotonicity", "volta", "c-grows"),
        _query("markidis-vs-ootomo", "volta", "ootomo-more-accurate"),
    ):
        rows = candidates(q, np.random.default_rng(3), 512)
        ok, goal = evaluate(q, rows)
        hits = ok & goal
        assert hits.any()
        names = [o.name for o in q.operands]
        for i in list(np.flatnonzero(hits)[:20]) + list(np.flatnonzero(~hits)[:20]):
            w = recheck(q, {n: int(rows[n][i]) for n in names})
            assert (w.constraint_ok and w.goal_ok) == bool(hits[i]), i


def test_candidates_follow_the_class():
    """Fixed inputs and the products a class leaves out are as the class says; most rows
    of a narrow class (fp16-representable a and b in 2^-15..2^14, four terms) are in it."""
    q = _query("markidis-vs-ootomo", "ampere", "markidis-more-accurate")
    rows = candidates(q, np.random.default_rng(0), 2048)
    assert all((rows[f"a{k}"] == 0).all() and (rows[f"b{k}"] == 0).all() for k in range(4, 8))
    assert evaluate(q, rows)[0].mean() > 0.5


def test_answer_reports_the_search_and_skips_the_solvers():
    q = _query("monotonicity", "volta", "c-grows")
    o = answer(q, Limits(timeout=30, search=5.0))
    assert o.verdict == Verdict.WITNESS and o.method == "search" and o.runs[0].solver == "search"
    assert o.witness.reproduces and o.search.witness is o.witness and not o.confirmations


def test_find_json_and_text_name_the_method():
    r = CliRunner().invoke(
        main, ["find", "--property", "monotonicity", "--arch", "volta", "--json"]
    )
    assert r.exit_code == 0, r.output
    (qj,) = json.loads(r.output)["queries"]
    assert qj["method"] == "search" and qj["solver"]["solver"] == "search"
    assert qj["search"]["found"] and qj["search"]["rows"] >= 1
    assert qj["agreeing_solvers"] == [] and qj["witness"]["reproduces"]
    assert "no solver was run" in qj["note"]
    r = CliRunner().invoke(main, ["find", "--property", "monotonicity", "--arch", "volta"])
    assert r.exit_code == 0, r.output
    assert "[c-grows] sat (search, " in r.output
    assert "answer:      search: sat in " in r.output and "no solver was run" in r.output
    assert "the concrete search (2 s)" in r.output


def test_a_named_solver_runs_without_the_search():
    """`--solver NAME` asks that solver alone: no search unless --search is given."""
    args = ["find", "--property", "precision-product", "--arch", "volta", "--json"]
    r = CliRunner().invoke(main, [*args, "--solver", "bitwuzla"])
    assert r.exit_code == 0, r.output
    for qj in json.loads(r.output)["queries"]:
        assert "search" not in qj and qj["method"] == "solver"
        assert qj["solver"]["solver"] == "bitwuzla" and qj["agreeing_solvers"] == ["bitwuzla"]
    r = CliRunner().invoke(main, [*args, "--solver", "bitwuzla", "--search", "2"])
    assert r.exit_code == 0, r.output
    assert {qj["method"] for qj in json.loads(r.output)["queries"]} == {"search"}
