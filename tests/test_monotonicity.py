"""Monotonicity of the dot product (Fasi et al. §III-D5): Fasi's Volta experiment on the
concrete model, a solver witness re-run concretely, a proof that an IEEE RNE sequential
sum is monotone (two solvers), and one-line errors for malformed non-monotone queries."""

from __future__ import annotations

import json
import random
import shlex
from fractions import Fraction

import pytest
from click.testing import CliRunner

from tensorcore_smt.api import resolve, simulate_one
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.smt.library import get
from tensorcore_smt.smt.query import (
    Constraint,
    ConstraintKind,
    Goal,
    make_query,
    recheck,
    smtlib,
    value_le,
    value_lt,
)
from tensorcore_smt.smt.solve import Limits, Verdict, answer
from tensorcore_smt.solvers.result import Answer
from tensorcore_smt.validation import vectors

ONE_FP16 = 0x3C00  # 1
TWO_M24_FP16 = 0x0001  # 2^-24, the smallest fp16 subnormal
ONE_MINUS_2M24 = 0x3F7FFFFF  # 1 - 2^-24 in fp32
ONE_FP32 = 0x3F800000
ONE_PLUS_2M23 = 0x3F800001


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def fp32(bits: int) -> Fraction:
    return value_of(bits, Format.FP32)


# --- Fasi et al. §III-D5 ------------------------------------------------------------


def test_fasi_experiment_volta_is_not_monotone_on_the_concrete_model():
    """Fasi §III-D5, setup (3): first row of A = 1, first column of B = 2^-24; c = 1 - 2^-24
    gives d = 1 + 2^-23, c = 1 gives d = 1 on the V100 (raising c lowers d)."""
    a, b = [ONE_FP16] * 4, [TWO_M24_FP16] * 4
    d_low = simulate_one(resolve("volta"), a, b, ONE_MINUS_2M24)
    d_high = simulate_one(resolve("volta"), a, b, ONE_FP32)
    assert (d_low, d_high) == (ONE_PLUS_2M23, ONE_FP32)
    assert fp32(ONE_MINUS_2M24) < fp32(ONE_FP32) and fp32(d_high) < fp32(d_low)
    # the same pair is a witness of the library's query, checked as the solver's would be
    [(spec, q)] = get("monotonicity").bind("volta")
    assert spec.id == "c-grows" and q.grows == "c"
    model = {f"a{i}": ONE_FP16 for i in range(4)} | {f"b{i}": TWO_M24_FP16 for i in range(4)}
    model |= {"c": ONE_MINUS_2M24, "c_2": ONE_FP32}
    w = recheck(q, model)
    assert w.reproduces and w.outputs == (ONE_PLUS_2M23, ONE_FP32)


def test_fasi_experiment_is_monotone_for_an_ieee_sum():
    """With normalization after every addition (IEEE RZ, c first) the same inputs give 1
    both times: the decrease comes from the fused unit's alignment window."""
    ieee = "volta[algorithm=sequential,acc_rounding=rz,order=c-first]"
    a, b = [ONE_FP16] * 4, [TWO_M24_FP16] * 4
    assert simulate_one(resolve(ieee), a, b, ONE_MINUS_2M24) == ONE_FP32
    assert simulate_one(resolve(ieee), a, b, ONE_FP32) == ONE_FP32


# --- the order on encodings ---------------------------------------------------------


def _le_lt(x: int, y: int, fmt: Format) -> tuple[bool, bool]:
    w = fmt.spec.storage
    bx, by = BV.const(CONCRETE, x, w), BV.const(CONCRETE, y, w)
    return bool(value_le(bx, by, fmt).v), bool(value_lt(bx, by, fmt).v)


@pytest.mark.parametrize("fmt", [Format.FP16, Format.FP32, Format.E4M3, Format.TF32])
def test_value_order_is_the_order_of_the_reals(fmt):
    rng = random.Random(7)
    w = fmt.spec.storage
    special = [0, 1 << (w - 1), 1, (1 << (w - 1)) | 1, (1 << (w - 1)) - 1, (1 << w) - 1]
    pool = special + [rng.getrandbits(w) for _ in range(300)]
    for _ in range(1500):
        x, y = rng.choice(pool), rng.choice(pool)
        vx, vy = value_of(x, fmt), value_of(y, fmt)
        le, lt = _le_lt(x, y, fmt)
        if vx != vx or vy != vy:  # NaN: never ordered
            assert not le and not lt
        else:
            assert (le, lt) == (vx <= vy, vx < vy), (hex(x), hex(y))


# --- solvers ------------------------------------------------------------------------


def test_volta_solver_witness_is_a_decrease_on_the_concrete_model(tmp_path):
    """`tcsmt find` with Fasi's setup (A's row fixed to 1, everything positive; B and c
    free): the solver's u, u_2 re-run through `tcsmt simulate` give d(u_2) < d(u) with
    u <= u_2; the vector file holds both as ordinary vectors. (cvc5 answers this one in
    a few seconds; the library's query without the fixed row takes 10-30 s.)"""
    fixes = ", ".join(
        f'{{ kind = "fix", operands = "a{i}", bits = "0x3c00", reason = "Fasi (3)" }}'
        for i in range(4)
    )
    (tmp_path / "fasi.toml").write_text(
        'name = "fasi-monotone"\nquestion = "Fasi III-D5 setup (3)"\nsource = "Fasi"\n'
        '[when]\nalgorithm = ["fda"]\n'
        '[[query]]\nid = "c-grows"\ngoal = "non-monotone"\nx = "{arch}"\ngrow = "c"\n'
        'expect = "sat"\n'
        f'constraint = [{{ kind = "positive", reason = "Fasi" }}, {fixes}]\n'
    )
    out = tmp_path / "v.json"
    r = run(
        *("find", "--property", "fasi-monotone", "--arch", "volta", "--json", "--solver", "cvc5"),
        *("--properties-dir", str(tmp_path), "--out", str(out)),
    )
    assert r.exit_code == 0, r.output
    q = json.loads(r.output)["queries"][0]
    w = q["witness"]
    assert q["answer"] == "sat" and w["reproduces"] and q["variants"] == ["volta"]
    u, u2 = w["input_sets"]["u"], w["input_sets"]["u_2"]
    assert u["a"] == u2["a"] == ["0x3c00"] * 4 and u["b"] == u2["b"]
    assert fp32(int(u["c"], 16)) <= fp32(int(u2["c"], 16))
    # both evaluations again, through the CLI lines the report prints
    ds = []
    for cmd in w["reproduce"].split(" && "):
        rr = run(*shlex.split(cmd)[1:])
        assert rr.exit_code == 0, rr.output
        ds += [int(line.split()[2], 16) for line in rr.output.splitlines() if "d = " in line]
    assert ds == [int(u["d"], 16), int(u2["d"], 16)]
    assert fp32(ds[1]) < fp32(ds[0])
    # the vector file: two ordinary vectors u, u_2 with the predictions, tied by their notes
    vf = vectors.load(out)
    assert [v.c for v in vf.vectors] == [int(u["c"], 16), int(u2["c"], 16)]
    assert [v.predicted["volta"] for v in vf.vectors] == ds
    assert "u_2" in vf.vectors[0].note and "previous vector u" in vf.vectors[1].note


# An IEEE sum rounded to nearest after every operation, on a tiny instance: every format
# e5m2 (IEEE specials, 2 mantissa bits) and one free product. At fp16/fp32 width even one
# RNE addition does not finish in 100 s by bit-blasting.
E5M2 = ",".join(f"{k}=e5m2" for k in ("a_fmt", "b_fmt", "c_fmt", "d_fmt", "acc_fmt"))
IEEE_RNE_TINY = f"volta[algorithm=sequential,acc_rounding=rne,rounding=rne,{E5M2}]"


def _prove_monotone(constraints: tuple[Constraint, ...]) -> None:
    terms = Constraint(ConstraintKind.TERMS, "ab", lo=1)
    q = make_query(
        IEEE_RNE_TINY, None, "m8n8k4.f16.f16.f16.f16", Goal.NON_MONOTONE, (terms, *constraints)
    )
    assert q.grows == "c" and [o.name for o in q.operands][-1] == "c_2"
    o = answer(q, Limits(solver="bitwuzla", timeout=120))
    assert o.verdict == Verdict.UNSAT, o
    agreeing = [r.solver for r in [o.result, *o.confirmations] if r.answer == Answer.UNSAT]
    assert len(set(agreeing)) >= 2, agreeing


def test_ieee_rne_sequential_sum_is_monotone_on_a_tiny_instance():
    """Nonnegative inputs, the library query's constraint: unsat, confirmed."""
    _prove_monotone((Constraint(ConstraintKind.POSITIVE),))


@pytest.mark.slow
def test_ieee_rne_sequential_sum_is_monotone_for_any_signs_on_a_tiny_instance():
    """Every sign (cancellation included): unsat, confirmed (about 10-40 s)."""
    _prove_monotone(())


# --- data and errors ----------------------------------------------------------------


def test_export_declares_both_input_sets(tmp_path):
    r = run("export", "--property", "monotonicity", "--arch", "volta", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    text = (tmp_path / "monotonicity-c-grows-volta.smt2").read_text()
    assert "(declare-fun c_2 () (_ BitVec 32))" in text and "a0_2" not in text
    assert "relation: u <= u_2: a_k shared, b_k shared, c <= c_2" in text
    assert "(get-value (a0 a1 a2 a3 b0 b1 b2 b3 c c_2 out0 out1))" in text.replace("\n", " ")
    # every input grows: a second copy of every operand
    q = make_query("volta", None, None, Goal.NON_MONOTONE, grows="cab")
    assert q.grows == "abc" and [o.name for o in q.operands][9:] == (
        [f"a{i}_2" for i in range(4)] + [f"b{i}_2" for i in range(4)] + ["c_2"]
    )
    assert "(declare-fun b3_2 () (_ BitVec 16))" in smtlib(q)
    assert "(check-sat)" not in smtlib(q)


def _bad_property(tmp_path, body: str):
    (tmp_path / "bad.toml").write_text(
        'name = "bad"\nquestion = "q"\nsource = "s"\n[[query]]\nid = "q0"\n' + body
    )
    return run("find", "--property", "bad", "--arch", "volta", "--properties-dir", str(tmp_path))


@pytest.mark.parametrize(
    "body, words",
    [
        ('goal = "non-monotone"\ngrow = "c"\n', "needs a variant x"),
        ('goal = "non-monotone"\nx = "{arch}"\ny = "{arch}"\n', "remove y"),
        ('goal = "differ"\nx = "{arch}"\ny = "{arch}[F=22]"\ngrow = "c"\n', "grow applies only"),
        ('goal = "differ"\nx = "{arch}"\n', "y is missing"),
        ('goal = "non-monotone"\nx = "{arch}"\ngrow = "cd"\n', "grow='cd'"),
        ('goal = "non-monotone"\nx = "{arch}"\nexpect = { maybe = {} }\n', "maybe"),
    ],
)
def test_malformed_non_monotone_queries_exit_2_with_one_line(tmp_path, body, words):
    r = _bad_property(tmp_path, body)
    assert r.exit_code == 2, r.output
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.output


def test_export_non_monotone_with_two_different_variants_exits_2():
    r = run("export", "volta", "ampere", "--goal", "non-monotone")
    assert r.exit_code == 2
    assert "one variant" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_expectations_follow_the_unit():
    prop = get("monotonicity")
    for arch in ("volta", "ampere", "hopper"):
        assert [s.expect.value for s, _ in prop.bind(arch)] == ["sat"]
    [(spec, _)] = prop.bind("cdna3")
    assert spec.expect is None  # CDNA3: either answer is informative
    r = run("find", "--property", "monotonicity", "--arch", "cdna2")
    assert r.exit_code == 2 and "does not apply to cdna2" in r.stderr
