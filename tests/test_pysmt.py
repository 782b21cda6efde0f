"""Yices 2 and Boolector through pySMT (tensorcore_smt/solvers/via_pysmt.py).

pySMT's SMT-LIB parser reads every committed query of queries/ into the same declared
inputs the file declares; the two solvers answer the project's queries through it (the
answers re-checked on the concrete model, unsat answers against bitwuzla's); an
FP-theory query, which pySMT cannot express, is refused for them and left out of a
portfolio. tests/test_solvers.py runs its per-solver tests (sat with a reproducing
model, unsat, query time, exports, a script the solver rejects) on them too.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.solvers import Answer, SolveJob, available, portfolio, solve
from tensorcore_smt.solvers.backends import BACKENDS, Theory
from tensorcore_smt.solvers.runner import confirmed_portfolio

ROOT = Path(__file__).parent.parent
QUERY_FILES = sorted((ROOT / "queries").glob("*.smt2"))
BRIDGED = [n for n, b in BACKENDS.items() if Theory.FP not in b.theories]

_missing = [n for n in BRIDGED if n not in available()]
needs_bridge = pytest.mark.skipif(
    bool(_missing),
    reason=f"{', '.join(_missing)} not installed: `make install` installs the pysmt extra "
    "(pip install -e '.[pysmt]')",
)
needs_pysmt = pytest.mark.skipif(
    importlib.util.find_spec("pysmt") is None,
    reason="pySMT not installed: `make install` installs the pysmt extra",
)

from test_solvers import FIXED, job, small_query  # noqa: E402

from tensorcore_smt.smt.query import make_query, parse_fix, recheck  # noqa: E402


def test_the_bridged_solvers_are_yices_and_boolector_bit_vectors_only():
    assert BRIDGED == ["yices", "boolector"]
    for name in ("bitwuzla", "z3", "cvc5"):
        assert BACKENDS[name].theories == frozenset(Theory)


@needs_pysmt
@pytest.mark.parametrize("path", QUERY_FILES, ids=lambda p: p.name)
def test_pysmt_parser_reads_every_query_file(path):
    """Every query file parses; its declared inputs are the file's `declare-fun`s, with
    their widths, and the assertion reads only declared inputs."""
    from tensorcore_smt.solvers.via_pysmt import parse

    text = path.read_text()
    formula, declared, _env = parse(text)
    want = dict(re.findall(r"\(declare-fun (\S+) \(\) \(_ BitVec (\d+)\)\)", text))
    assert want and {n: str(v.bv_width()) for n, v in declared.items()} == want
    assert formula.get_free_variables() <= set(declared.values())
    assert formula.is_and() or formula.is_bool_op() or formula.is_equals()


def test_queries_folder_is_not_empty():
    assert len(QUERY_FILES) >= 4


@needs_bridge
@pytest.mark.parametrize("solver", BRIDGED)
def test_diff_with_a_bridged_solver_gives_a_rechecked_witness(solver):
    """`tcsmt diff volta 'volta[carry_bits=2]' --solver S` (with all but b3 fixed, to
    keep the test fast; the full query is a slow test): the answer names S, and the
    witness reproduces on the concrete model."""
    fixes = [x for k, v in FIXED.items() for x in ("--fix", f"{k}={v}")]
    r = CliRunner().invoke(
        main,
        ["diff", "volta", "volta[carry_bits=2]", "--solver", solver, "--json", *fixes],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["solver"]["solver"] == solver
    assert data["solver"]["answer"] == "sat"
    assert data["witness"]["reproduces"] is True


@needs_bridge
@pytest.mark.parametrize("solver", BRIDGED)
def test_a_bridged_solver_confirms_an_unsat(solver):
    """An unsat answer of bitwuzla is confirmed by a bridged solver outside the
    portfolio, and the confirmation names it."""
    first, _, confirmations = confirmed_portfolio(job(small_query(4)), ["bitwuzla"], [solver])
    assert first.answer == Answer.UNSAT and first.solver == "bitwuzla"
    assert confirmations and confirmations[0].solver == solver
    assert confirmations[0].answer == Answer.UNSAT, confirmations[0].reason


@needs_bridge
def test_the_default_portfolio_includes_the_bridged_solvers_last():
    from tensorcore_smt.smt.solve import PORTFOLIO, solvers_for

    names = solvers_for(PORTFOLIO)
    assert names[-2:] == BRIDGED and names[0] == "bitwuzla"


@needs_bridge
def test_portfolio_of_bridged_solvers_says_which_answered():
    winner, runs = portfolio(job(small_query(2)), BRIDGED, jobs=2)
    assert winner.answer == Answer.SAT
    assert winner.solver in BRIDGED and winner.version
    assert {r.solver for r in runs} <= set(BRIDGED)


def _fp_job() -> SolveJob:
    """x + y in fp16 (bit-vector IEEE addition) against SMT-LIB's fp.add: an FP-theory
    query (unsat: they agree)."""
    from tensorcore_smt.bv.core import BV
    from tensorcore_smt.bv.smtlib import to_smtlib
    from tensorcore_smt.bv.symbolic import SymbolicBackend
    from tensorcore_smt.formats import Format, Rounding
    from tensorcore_smt.model import fpref, ieee

    sb = SymbolicBackend()
    x, y = sb.var("x", 16), sb.var("y", 16)
    fixed = [x.eq(BV.const(sb, 0x3C01, 16)).v, y.eq(BV.const(sb, 0x8C01, 16)).v]
    total = ieee.add(x, Format.FP16, y, Format.FP16, Format.FP16, Rounding.RNE)
    ref = fpref.reference(sb, "add", [x, y], [Format.FP16] * 2, Rounding.RNE, Format.FP16)
    text = to_smtlib(fixed + [fpref.differs(sb, total, Format.FP16, ref).v], logic="QF_BVFP")
    return SolveJob(text.replace("(check-sat)\n", ""), ("x", "y"), 60.0)


@pytest.mark.parametrize("solver", BRIDGED)
def test_an_fp_theory_query_is_refused_for_a_bridged_solver(solver):
    with pytest.raises(UserError, match=f"--solver {solver}: .*floating-point.*z3"):
        solve(_fp_job(), solver)


def test_a_portfolio_leaves_the_bridged_solvers_out_of_an_fp_query():
    names = [n for n in available() if n in ("z3", *BRIDGED)]
    winner, runs = portfolio(_fp_job(), names, jobs=2)
    assert winner.answer == Answer.UNSAT, winner.reason
    assert {r.solver for r in runs} <= {"z3"}


def test_docs_state_the_licence_of_every_solver():
    text = (ROOT / "docs" / "solvers.md").read_text()
    for name, b in BACKENDS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| {name} ")), "")
        assert b.licence and b.licence in row, (name, b.licence)
    assert "pySMT" in text and "Apache-2.0" in text


# --- the acceptance commands on the full queries (slow) --------------------------------


@pytest.mark.slow
@needs_bridge
@pytest.mark.parametrize("solver", BRIDGED)
def test_full_diff_with_a_bridged_solver(solver):
    r = CliRunner().invoke(
        main, ["diff", "volta", "volta[carry_bits=2]", "--solver", solver, "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["solver"]["solver"] == solver
    assert data["witness"]["reproduces"] is True


@pytest.mark.slow
@needs_bridge
def test_full_prove_with_yices():
    r = CliRunner().invoke(
        main, ["prove", "volta", "volta[carry_bits=4]", "--solver", "yices", "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["solver"]["solver"] == "yices"
    assert data["solver"]["answer"] == "unsat"


def test_an_uninstalled_bridged_solver_names_the_extra(monkeypatch):
    from tensorcore_smt.solvers import runner

    monkeypatch.setattr(runner, "available", lambda: {"bitwuzla": "0"})
    with pytest.raises(ValueError, match=r"'yices' is not installed .*tensorcore-smt\[pysmt\]"):
        runner.check_solver_names(["yices"])
    with pytest.raises(ValueError, match=r"'z3' is not installed \(pip install z3-solver\)"):
        runner.check_solver_names(["z3"])


def test_the_bench_times_every_solver_alone_and_bounds_each_run(monkeypatch):
    """bench/bench_slow_queries.py's library part on one small query: a row per query
    with every solver's answer (sat, re-checked), and a run past its bound shown as
    "> T s", never as a time."""
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    sys.modules.pop("bench_slow_queries", None)
    import bench_slow_queries as b

    monkeypatch.setattr(
        b, "library_queries", lambda arch: [("carry-bits", "small", small_query(2))]
    )
    solvers = ["bitwuzla", *[s for s in BRIDGED if s in available()]]
    lib = b.run_library("volta", solvers, 60.0)
    runs = lib["rows"][0]["runs"]
    assert set(runs) == set(solvers)
    assert all(r["answer"] == "sat" and r["reproduces"] for r in runs.values())
    text = "\n".join(b.render_library(lib))
    assert f"| carry-bits | small | {len(job(small_query(2)).text):,} |" in text
    assert text.split("answered, and their total time")[1].count("1 of 1, ") == len(solvers)
    timed_out = {"answer": "unknown", "reason": "timeout after 10 s", "solver_s": None}
    assert b._run_cell({**timed_out, "seconds": 10.4, "reproduces": None}, 10) == "> 10 s"


@needs_bridge
def test_boolector_answers_the_fp16_accumulation_query_without_crashing():
    """The Table 4 fp16-accumulation query (Valpey et al. 2025, Property 1): Boolector's
    process crashed (SIGSEGV) when the garbage collector freed pySMT's Boolector nodes
    after their instance; its witness now comes back and reproduces."""
    from tensorcore_smt.smt.query import Constraint, ConstraintKind

    x, y = "volta", "volta[algorithm=sequential,acc_fmt=fp16,acc_rounding=rne]"
    q0 = make_query(x, y, "m8n8k4.f16.f16.f16.f16")
    cons = (
        Constraint(ConstraintKind.TERMS, "ab", lo=2),
        Constraint(ConstraintKind.FINITE),
        parse_fix("c=0x0", q0.operands),
    )
    q = make_query(x, y, "m8n8k4.f16.f16.f16.f16", constraints=cons)
    r = solve(job(q), "boolector")
    assert r.answer == Answer.SAT, r.reason
    assert recheck(q, r.model).reproduces
