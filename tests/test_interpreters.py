"""The three interpreters of the one model agree (README, "The design in brief").

For every distinct instruction model of every preset:
- concrete (Python ints) and vector (numpy) give the same bits, on hypothesis-drawn rows
  and on numpy mixture rows (random bits, narrow exponent windows, cancellations,
  special values);
- the symbolic DAG, translated to z3 and evaluated by the solver under fixed inputs
  (z3.substitute + z3.simplify), gives the concrete bits; so does the DAG's own evaluator;
- the SMT-LIB2 printer's scripts are accepted and answered alike by z3, cvc5 and bitwuzla.

Slow runs (`-m slow`): >= 10^5 rows per model, vector against MMA-Sim where MMA-Sim has
the instruction, and >= 10^4 rows per model, vector against concrete.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    ROW_KINDS,
    distinct_models,
    fast_run_params,
    model_id,
    random_rows,
    rows_strategy,
)

from tensorcore_smt.api import simulate_one, simulate_params
from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate
from tensorcore_smt.bv.to_z3 import to_z3
from tensorcore_smt.model import dot_add
from tensorcore_smt.spec.presets import PRESETS

MODELS = distinct_models()
MODEL_IDS = [model_id(m) for m in MODELS]
FAST = fast_run_params(MODELS)


def _hex(xs) -> str:
    return "[" + ", ".join(hex(int(x)) for x in xs) + "]"


def _concrete_rows(p, a, b, c) -> list[int]:
    return [
        simulate_one(p, [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]))
        for i in range(len(c))
    ]


def _assert_rows_agree(p, names, a, b, c) -> None:
    vec = simulate_params(p, a, b, c)
    conc = _concrete_rows(p, a, b, c)
    for i, want in enumerate(conc):
        assert int(vec[i]) == want, (
            f"{names[0]}: vector {int(vec[i]):#x} != concrete {want:#x} for "
            f"a={_hex(a[i])} b={_hex(b[i])} c={int(c[i]):#x}"
        )


# --- concrete vs vector ---------------------------------------------------------------


@pytest.mark.parametrize("entry", FAST)
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_concrete_matches_vector_hypothesis(entry, data):
    p, names = entry
    a, b, c = data.draw(rows_strategy(p, max_rows=4), label="rows")
    _assert_rows_agree(p, names, a, b, c)


@pytest.mark.parametrize("entry", FAST)
def test_concrete_matches_vector_mixture(entry):
    p, names = entry
    rng = np.random.default_rng(MODEL_IDS.index(model_id(entry)) + 1)
    # Ten rows of each kind, so every kind is exercised for every model.
    parts = [random_rows(rng, p, 10, [kind]) for kind in ROW_KINDS]
    a = np.concatenate([x[0] for x in parts])
    b = np.concatenate([x[1] for x in parts])
    c = np.concatenate([x[2] for x in parts])
    _assert_rows_agree(p, names, a, b, c)


# --- symbolic vs concrete ---------------------------------------------------------------


def _symbolic(p):
    """The model's DAG with a variable per input, its z3 form and the z3 variables."""
    sb = SymbolicBackend()
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    av = [sb.var(f"a{k}", wa) for k in range(p.K)]
    bv = [sb.var(f"b{k}", wb) for k in range(p.K)]
    cv = sb.var("c", wc)
    d = dot_add(av, bv, cv, p)
    assert d.w == p.d_fmt.spec.storage
    (expr,), zvars = to_z3([d.v])
    return d, expr, zvars


def _z3_value(p, expr, zvars, a_row, b_row, c_val) -> int:
    """The solver evaluates the term under fixed inputs."""
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    subs = []
    for k in range(p.K):
        if f"a{k}" in zvars:  # an input the output does not depend on has no variable
            subs.append((zvars[f"a{k}"], z3.BitVecVal(int(a_row[k]), wa)))
        if f"b{k}" in zvars:
            subs.append((zvars[f"b{k}"], z3.BitVecVal(int(b_row[k]), wb)))
    if "c" in zvars:
        subs.append((zvars["c"], z3.BitVecVal(int(c_val), wc)))
    val = z3.simplify(z3.substitute(expr, *subs) if subs else expr)
    assert z3.is_bv_value(val), f"not a constant after substitution: {val}"
    return val.as_long()


def _symbolic_rows(p, seed: int, n_per_kind: int):
    rng = np.random.default_rng(seed)
    parts = [random_rows(rng, p, n_per_kind, [kind]) for kind in ROW_KINDS]
    return (
        np.concatenate([x[0] for x in parts]),
        np.concatenate([x[1] for x in parts]),
        np.concatenate([x[2] for x in parts]),
    )


def _check_symbolic(p, names, a, b, c) -> None:
    d, expr, zvars = _symbolic(p)
    conc = _concrete_rows(p, a, b, c)
    for i, want in enumerate(conc):
        got = _z3_value(p, expr, zvars, a[i], b[i], c[i])
        where = f"{names[0]}: a={_hex(a[i])} b={_hex(b[i])} c={int(c[i]):#x}"
        assert got == want, f"z3 {got:#x} != concrete {want:#x} for {where}"
        env = {f"a{k}": int(a[i][k]) for k in range(p.K)}
        env |= {f"b{k}": int(b[i][k]) for k in range(p.K)}
        env["c"] = int(c[i])
        got = evaluate(d.v, env)  # a local: pytest would print the DAG's repr
        assert got == want, f"DAG evaluator disagrees for {where}"


@pytest.mark.parametrize("entry", FAST)
def test_symbolic_matches_concrete(entry):
    p, names = entry
    # One row of each kind: random bits, exponent window, cancellation, specials.
    a, b, c = _symbolic_rows(p, 1000 + MODEL_IDS.index(model_id(entry)), 1)
    _check_symbolic(p, names, a, b, c)


@pytest.mark.slow
@pytest.mark.parametrize("entry", MODELS, ids=MODEL_IDS)
def test_symbolic_matches_concrete_many(entry):
    p, names = entry
    a, b, c = _symbolic_rows(p, 5000 + MODEL_IDS.index(model_id(entry)), 10)
    _check_symbolic(p, names, a, b, c)


# --- the SMT-LIB2 printer, read by three solvers ----------------------------------------


def _z3_check(text: str) -> str:
    s = z3.Solver()
    s.add(z3.parse_smt2_string(text))
    return str(s.check())


def _cvc5_check(text: str) -> str:
    cvc5 = pytest.importorskip("cvc5")
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("fp-exp", "true")  # cvc5 rejects Float16 without it
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    sm = parser.getSymbolManager()
    answers = []
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        out = cmd.invoke(solver, sm).strip()
        if out:
            answers.append(out)
    assert len(answers) == 1, answers
    return answers[0]


def _bitwuzla_check(text: str) -> str:
    bitwuzla = pytest.importorskip("bitwuzla")
    tm = bitwuzla.TermManager()
    parser = bitwuzla.Parser(tm, bitwuzla.Options())
    parser.parse(text, True, False)  # parse only: the script's check-sat is not run
    res = parser.bitwuzla().check_sat()
    return {bitwuzla.Result.SAT: "sat", bitwuzla.Result.UNSAT: "unsat"}.get(res, str(res))


SOLVERS = {"z3": _z3_check, "cvc5": _cvc5_check, "bitwuzla": _bitwuzla_check}

VOLTA = PRESETS["volta"].instructions["m8n8k4.f32.f16.f16.f32"].params
# 1*1 + 2^-10*(-1.5) + ... : a row with carries, an alignment loss and a negative c.
VOLTA_ROW = ([0x3C00, 0x1234, 0x8765, 0x4000], [0x3C01, 0xB234, 0x0765, 0x4000], 0xBF800001)


def _volta_query(goal_equal: bool) -> str:
    p = VOLTA
    sb = SymbolicBackend()
    av = [sb.var(f"a{k}", 16) for k in range(p.K)]
    bv = [sb.var(f"b{k}", 16) for k in range(p.K)]
    cv = sb.var("c", 32)
    d = dot_add(av, bv, cv, p)
    a_row, b_row, c_val = VOLTA_ROW
    want = simulate_one(p, a_row, b_row, c_val)
    fixed = [x.eq(v).v for x, v in zip(av + bv + [cv], a_row + b_row + [c_val])]
    goal = d.eq(want) if goal_equal else d.ne(want)
    return to_smtlib(fixed + [goal.v], header=["volta m8n8k4.f32.f16.f16.f32, fixed inputs"])


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("goal_equal,answer", [(True, "sat"), (False, "unsat")])
def test_smtlib_fixed_inputs_three_solvers(solver, goal_equal, answer):
    """The printed script (inputs fixed by equalities, the output asserted equal to, or
    different from, the concrete value) is accepted and answered by every solver."""
    text = _volta_query(goal_equal)
    assert "(declare-fun a0 () (_ BitVec 16))" in text
    assert SOLVERS[solver](text) == answer


def test_smtlib_free_inputs_model_reexecuted():
    """With free inputs and the output asserted equal to a target, the solvers find an
    input, and z3's model re-executed on the concrete interpreter gives the target."""
    p = VOLTA
    target = simulate_one(p, *VOLTA_ROW)
    sb = SymbolicBackend()
    av = [sb.var(f"a{k}", 16) for k in range(p.K)]
    bv = [sb.var(f"b{k}", 16) for k in range(p.K)]
    cv = sb.var("c", 32)
    d = dot_add(av, bv, cv, p)
    # a0 fixed to 1.0 keeps the query away from the trivial all-special answers.
    text = to_smtlib([d.eq(target).v, av[0].eq(0x3C00).v])
    for solver in ("z3", "bitwuzla"):
        assert SOLVERS[solver](text) == "sat", solver
    s = z3.Solver()
    s.add(z3.parse_smt2_string(text))
    assert s.check() == z3.sat
    m = s.model()
    decls = {x.name(): x for x in m.decls()}

    def val(name: str) -> int:
        return m[decls[name]].as_long() if name in decls else 0

    a_row = [val(f"a{k}") for k in range(p.K)]
    b_row = [val(f"b{k}") for k in range(p.K)]
    assert a_row[0] == 0x3C00
    assert simulate_one(p, a_row, b_row, val("c")) == target


def test_smtlib_matches_z3_translation_on_fixed_inputs():
    """The printed script and the direct z3 translation describe the same function: for a
    fixed row, both force the output to the concrete value."""
    p = VOLTA
    a_row, b_row, c_val = VOLTA_ROW
    sb = SymbolicBackend()
    av = [sb.var(f"a{k}", 16) for k in range(p.K)]
    bv = [sb.var(f"b{k}", 16) for k in range(p.K)]
    cv = sb.var("c", 32)
    d = dot_add(av, bv, cv, p)
    out = sb.var("out", 32)
    fixed = [x.eq(v).v for x, v in zip(av + bv + [cv], a_row + b_row + [c_val])]
    text = to_smtlib(fixed + [d.eq(out).v])
    s = z3.Solver()
    s.add(z3.parse_smt2_string(text))
    assert s.check() == z3.sat
    m = s.model()
    got = next(m[x].as_long() for x in m.decls() if x.name() == "out")
    assert got == simulate_one(p, a_row, b_row, c_val)
    # Direct translation of the same DAG, evaluated by substitution.
    (expr,), zvars = to_z3([d.v])
    assert _z3_value(p, expr, zvars, a_row, b_row, c_val) == got


@pytest.mark.parametrize("solver", SOLVERS)
def test_smtlib_fp_theory_three_solvers(solver):
    """FP-theory terms (tensorcore_smt/model/fpref.py) print as SMT-LIB that every solver
    reads: with fixed inputs, the BV fp16 addition differs from `fp.add` nowhere (unsat),
    and `fp.add` equals the concrete result's FP value (sat)."""
    from tensorcore_smt.formats import Format, Rounding
    from tensorcore_smt.model import fpref, ieee

    sb = SymbolicBackend()
    x, y = sb.var("x", 16), sb.var("y", 16)
    xv, yv = 0x3C01, 0x8C01  # (1 + 2^-10) - 2^-12 (1 + 2^-10): inexact, partly cancelling
    fixed = [x.eq(xv).v, y.eq(yv).v]
    bv_sum = ieee.add(x, Format.FP16, y, Format.FP16, Format.FP16, Rounding.RTP)
    ref = fpref.reference(sb, "add", [x, y], [Format.FP16] * 2, Rounding.RTP, Format.FP16)
    differ = to_smtlib(fixed + [fpref.differs(sb, bv_sum, Format.FP16, ref).v], logic="QF_BVFP")
    assert SOLVERS[solver](differ) == "unsat"
    from tensorcore_smt.bv.concrete import CONCRETE

    want = ieee.add(
        BV(CONCRETE, xv, 16),
        Format.FP16,
        BV(CONCRETE, yv, 16),
        Format.FP16,
        Format.FP16,
        Rounding.RTP,
    ).v
    same = fpref.same(sb, fpref.from_bits(sb, BV.const(sb, want, 16), Format.FP16), ref)
    assert SOLVERS[solver](to_smtlib(fixed + [same.v], logic="QF_BVFP")) == "sat"


# --- large runs (slow) -------------------------------------------------------------------

SLOW_MMASIM_ROWS = 100_000
SLOW_CONCRETE_ROWS = 10_000


def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@pytest.fixture(scope="module")
def pool():
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=_workers(), mp_context=ctx) as ex:
        yield ex


def _chunks(total: int, n: int) -> list[tuple[int, int]]:
    size = -(-total // n)
    return [(lo, min(total, lo + size)) for lo in range(0, total, size)]


def _mmasim_available() -> bool:
    try:
        import mmasim  # noqa: F401
        import torch  # noqa: F401
    except Exception:
        return False
    return True


def _mmasim_name(names):
    """The first (arch, instruction) of a model that MMA-Sim has, or None."""
    import mmasim_bridge

    for arch, name in names:
        if mmasim_bridge.make_op(arch, name) is not None:
            return arch, name
    return None


@pytest.mark.slow
@pytest.mark.parametrize("entry", MODELS, ids=MODEL_IDS)
def test_vector_matches_mmasim_large(entry, pool):
    if not _mmasim_available():
        pytest.skip("mmasim and torch are not installed")
    import mmasim_bridge

    p, names = entry
    found = _mmasim_name(names)
    if found is None:
        pytest.skip(f"MMA-Sim has no instruction with the model of {names[0]}")
    arch, name = found
    seed = 7_000_000 + MODEL_IDS.index(model_id(entry)) * 1000
    jobs = [
        pool.submit(mmasim_bridge.compare_chunk, arch, name, seed + i, hi - lo)
        for i, (lo, hi) in enumerate(_chunks(SLOW_MMASIM_ROWS, 4 * _workers()))
    ]
    results = [j.result() for j in jobs]
    compared = sum(r["compared"] for r in results)
    bad = sum(r["mismatches"] for r in results)
    examples = [e for r in results for e in r["examples"]][:5]
    assert compared >= 0.8 * SLOW_MMASIM_ROWS, f"only {compared} comparable rows"
    assert bad == 0, f"{arch}:{name}: {bad} of {compared} rows differ from MMA-Sim: {examples}"


@pytest.mark.slow
@pytest.mark.parametrize("entry", MODELS, ids=MODEL_IDS)
def test_vector_matches_concrete_large(entry, pool):
    from strategies import compare_concrete_chunk

    p, names = entry
    arch, name = names[0]
    seed = 9_000_000 + MODEL_IDS.index(model_id(entry)) * 1000
    jobs = [
        pool.submit(compare_concrete_chunk, arch, name, seed + i, hi - lo)
        for i, (lo, hi) in enumerate(_chunks(SLOW_CONCRETE_ROWS, 2 * _workers()))
    ]
    results = [j.result() for j in jobs]
    rows = sum(r["rows"] for r in results)
    examples = [e for r in results for e in r["examples"]]
    assert rows == SLOW_CONCRETE_ROWS
    assert not examples, f"{arch}:{name}: vector and concrete differ: {examples[:5]}"
