"""Certificates: the error measures on the grid against exact rationals, the class grid,
and `tcsmt bound` / `tc.bound` end to end with solvers (every witness re-run, every
closed interval checked against an exhaustive search of its class)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.certify.bound import default_class, dyadic_between, witness_measure
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.model.measure import Measure, exact_value, measure_value, ulp_of
from tensorcore_smt.smt.query import (
    EXACT,
    Constraint,
    ConstraintKind,
    Goal,
    class_grid,
    make_query,
    parse_integer,
    recheck,
)
from tensorcore_smt.smt.solve import Verdict

TCSMT = [sys.executable, "-c", "from tensorcore_smt.cli import main; main()"]


def _random_inputs(q, rng: random.Random, integer_bits: int | None = None) -> dict[str, int]:
    """Random bit patterns (a third zero); with `integer_bits`, random small integers."""
    from tensorcore_smt.formats import round_fraction

    vals = {}
    for o in q.operands:
        if rng.random() < 0.3:
            vals[o.name] = 0
        elif integer_bits is not None and o.name != "c":
            n = rng.randrange(-(2**integer_bits - 1), 2**integer_bits)
            vals[o.name] = round_fraction(Fraction(n), o.fmt)
        else:
            vals[o.name] = rng.getrandbits(o.width)
    return vals


def _expected(q, vals, outputs, T) -> bool:
    """Whether the query's goal should hold, with Python fractions only."""
    p = q.p
    a = [vals[f"a{i}"] for i in range(p.K)]
    b = [vals[f"b{i}"] for i in range(p.K)]
    ins = [(x, p.a_fmt) for x in a] + [(x, p.b_fmt) for x in b] + [(vals["c"], p.c_fmt)]
    if any(isinstance(value_of(x, f), float) for x, f in ins):
        return False
    e, n = exact_value(a, b, vals["c"], (p.a_fmt, p.b_fmt, p.c_fmt))
    ref = e
    if not q.against_exact:
        ref = value_of(outputs[1], p.d_fmt)
        if isinstance(ref, float):
            return False
    m = measure_value(value_of(outputs[0], p.d_fmt), ref, n, q.measure, p.d_fmt)
    return m > T


THRESHOLDS = [Fraction(0), Fraction(1, 2**24), Fraction(3, 7), Fraction(1, 2**60), Fraction(5)]


@pytest.mark.parametrize("arch", ["volta", "hopper", "cdna3", "ampere[carry_bits=2]"])
@pytest.mark.parametrize("measure", list(Measure))
def test_goal_is_the_measure_in_fractions(arch: str, measure: Measure) -> None:
    """On random inputs the grid comparison "measure > T" equals the same comparison in
    exact rationals, for every measure, against the exact result."""
    rng = random.Random(hash((arch, measure.value)) & 0xFFFF)
    seen_true = seen_false = 0
    for T in THRESHOLDS:
        q = make_query(arch, None, None, Goal.ERROR_EXCEEDS, measure=measure, threshold=T)
        for _ in range(25):
            vals = _random_inputs(q, rng)
            r = recheck(q, vals)
            want = _expected(q, vals, r.outputs, T)
            assert r.goal_ok == want, (arch, measure, T, vals)
            seen_true += want
            seen_false += not want
    assert seen_true and seen_false


@pytest.mark.parametrize("measure", list(Measure))
def test_goal_against_a_second_variant(measure: Measure) -> None:
    """The drift between two units: Y's output is the reference."""
    rng = random.Random(7)
    for T in THRESHOLDS:
        q = make_query(
            "volta", "volta[carry_bits=2]", None, Goal.ERROR_EXCEEDS, measure=measure, threshold=T
        )
        assert not q.against_exact
        for _ in range(25):
            vals = _random_inputs(q, rng)
            r = recheck(q, vals)
            assert r.goal_ok == _expected(q, vals, r.outputs, T), (measure, T, vals)


def test_narrow_grid_of_integer_slices() -> None:
    """Integer p-bit inputs with c = 0: the grid shrinks to units of 2^0 (a few dozen bits
    instead of hundreds) and the goal still equals the rational computation."""
    cons = (parse_integer("ab=7"), Constraint(ConstraintKind.FIX, "c", bits=0))
    rng = random.Random(3)
    for instr in ["m16n8k16.f32.bf16.bf16.f32", "m16n8k8.f32.bf16.bf16.f32"]:
        q = make_query(
            "hopper",
            None,
            instr,
            Goal.ERROR_EXCEEDS,
            cons,
            measure=Measure.ABS,
            threshold=Fraction(0),
        )
        lsb, width = class_grid(q.p, q.constraints)
        assert lsb == 0 and width < 30
        for _ in range(40):
            vals = _random_inputs(q, rng, integer_bits=7)
            vals["c"] = 0
            r = recheck(q, vals)
            assert r.constraint_ok
            assert r.goal_ok == _expected(q, vals, r.outputs, Fraction(0))


def test_integer_constraint() -> None:
    """integer:P admits exactly the integers of at most P bits."""
    q = make_query(
        "hopper",
        None,
        "m16n8k16.f32.bf16.bf16.f32",
        Goal.ERROR_EXCEEDS,
        (parse_integer("a=3"),),
        measure=Measure.ABS,
        threshold=Fraction(0),
    )
    from tensorcore_smt.formats import round_fraction

    for v, ok in [
        (0, True),
        (1, True),
        (7, True),
        (-7, True),
        (8, False),
        (Fraction(1, 2), False),
        (Fraction(5, 2), False),
        (6, True),
    ]:
        vals = {o.name: 0 for o in q.operands}
        vals["a0"] = round_fraction(Fraction(v), Format.BF16)
        assert recheck(q, vals).constraint_ok == ok, v


def test_ulp_of() -> None:
    assert ulp_of(Fraction(1), Format.FP32) == Fraction(1, 2**23)
    assert ulp_of(Fraction(0), Format.FP32) == Fraction(1, 2**149)
    assert ulp_of(Fraction(3, 2**130), Format.FP32) == Fraction(1, 2**149)
    assert ulp_of(Fraction(2**200), Format.FP32) == Fraction(2**104)


def test_dyadic_between() -> None:
    for lo, hi in [
        (Fraction(0), Fraction(1)),
        (Fraction(1, 3), Fraction(1, 2)),
        (Fraction(1, 2**30), Fraction(1, 2**20)),
        (Fraction(5), Fraction(5, 1) + Fraction(1, 2**40)),
    ]:
        t = dyadic_between(lo, hi)
        assert lo < t < hi
        assert t.denominator & (t.denominator - 1) == 0


SMALL_CLASS = ["terms:1", "fix:a0=0x3c00", "fix:c=0x3f800000"]


@pytest.mark.slow
def test_bound_closes_and_exhaustive_search_agrees() -> None:
    """A class small enough to search exhaustively (c = 1, a0 = 1, b0 free, the other
    products zero): the certified interval closes, its witness reproduces its measure
    through tc.simulate with exact rationals, and the exhaustive maximum lies in [L, U]."""
    cons = default_class() + tuple(parse_where(w) for w in SMALL_CLASS)
    cert = tc.bound("volta", measure="normwise", constraints=cons, timeout=240)
    assert cert.closed, cert.steps
    assert cert.upper is not None and cert.witness is not None
    assert any(s.confirmed_by for s in cert.steps if s.verdict == Verdict.UNSAT)
    q = cert.query
    w = cert.witness
    d = tc.simulate(
        "volta", None, [[w[f"a{i}"] for i in range(4)]], [[w[f"b{i}"] for i in range(4)]], [w["c"]]
    )
    assert int(d[0]) == cert.witness_outputs[0]
    assert witness_measure(q, w, (int(d[0]), int(d[0]))) == cert.lower
    # every finite fp16 b0
    b0 = np.array([x for x in range(1 << 16) if (x >> 10) & 0x1F != 0x1F], dtype=np.uint16)
    n = len(b0)
    A = np.zeros((n, 4), np.uint16)
    A[:, 0] = 0x3C00
    B = np.zeros((n, 4), np.uint16)
    B[:, 0] = b0
    C = np.full(n, 0x3F800000, np.uint32)
    D = tc.simulate("volta", None, A, B, C)
    # e = 1 + b0, |c| + |a0 b0| = 1 + |b0| and d are exact in float64 here (spans of
    # at most 41 bits), so the ratio picks the candidates; the top ones are measured
    # with fractions
    b64 = b0.view(np.float16).astype(np.float64)
    d64 = D.view(np.float32).astype(np.float64)
    ratio = np.abs(d64 - (1.0 + b64)) / (1.0 + np.abs(b64))
    worst = Fraction(0)
    for i in np.argsort(ratio)[-16:]:
        x, dbits = int(b0[i]), int(D[i])
        e, nm = exact_value(
            [0x3C00, 0, 0, 0], [x, 0, 0, 0], 0x3F800000, (Format.FP16, Format.FP16, Format.FP32)
        )
        m = measure_value(value_of(dbits, Format.FP32), e, nm, Measure.NORMWISE, Format.FP32)
        worst = max(worst, m)
    assert cert.lower <= worst <= cert.upper


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*TCSMT, *args], capture_output=True, text=True, timeout=timeout)


def test_cli_json_witness_reproduces_with_simulate() -> None:
    """`tcsmt bound --json`: exact rationals as p/q, a witness whose `tcsmt simulate`
    output is the reported d, and whose measure recomputed exactly is the lower bound."""
    r = _run(
        "bound", "volta", "--where", "terms:2", "--timeout", "4", "--solver", "bitwuzla", "--json"
    )
    assert r.returncode in (0, 3), r.stderr
    data = json.loads(r.stdout)
    assert data["status"] in ("closed", "open")
    assert r.returncode == (0 if data["status"] == "closed" else 3)
    lower = Fraction(data["lower"])
    assert lower > 0 and data["witness"] is not None
    w = data["witness"]
    sim = _run(
        "simulate",
        "--arch",
        "volta",
        "--a",
        ",".join(w["a"]),
        "--b",
        ",".join(w["b"]),
        "--c",
        w["c"],
    )
    assert sim.returncode == 0
    assert f"d = {w['d']}" in sim.stdout
    a = [int(x, 16) for x in w["a"]]
    b = [int(x, 16) for x in w["b"]]
    e, n = exact_value(a, b, int(w["c"], 16), (Format.FP16, Format.FP16, Format.FP32))
    assert Fraction(w["exact"]) == e
    m = measure_value(value_of(int(w["d"], 16), Format.FP32), e, n, Measure.NORMWISE, Format.FP32)
    assert m == lower
    for s in data["steps"]:
        if s["answer"] == "witness":
            assert Fraction(s["measure"]) > Fraction(s["threshold"])


@pytest.mark.parametrize(
    "args, needle",
    [
        (["volta", "--measure", "relative"], "unknown measure"),
        (["volta", "--where", "bogus"], "unknown constraint"),
        (["volta", "--where", "integer:ab=0"], "--integer"),
        (
            ["volta", "--where", "positive:c", "--where", "negative:c", "--where", "nonzero:c"],
            "class is empty",
        ),
        (["nosucharch"], "nosucharch"),
        (["volta", "--resolution", "0"], "resolution"),
        (["volta", "--where", "fix:z=0x1"], "no such input"),
        (["volta", "--against", "hopper"], "no instruction"),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], needle: str) -> None:
    r = _run("bound", *args, "--timeout", "20", timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_exact_reference_name() -> None:
    q = make_query(
        "volta", None, None, Goal.ERROR_EXCEEDS, measure=Measure.ABS, threshold=Fraction(0)
    )
    assert q.variants == ("volta", EXACT) and q.against_exact


def test_default_class_leaves_out_exact_results_below_the_output_range():
    """An exact result of 3.5e-75 is 0 in fp32 for every unit (normwise error 1): the
    default class (no underflow) leaves such inputs out, and keeps ordinary ones."""
    from tensorcore_smt.certify.bound import make_bound_query

    q = make_bound_query(
        "ampere", None, "m16n8k8.f32.tf32.tf32.f32", Measure.NORMWISE, default_class()
    )
    tiny = {o.name: 0 for o in q.operands}
    tiny.update({"a7": 0x00322000, "b7": 0x037FFFFF, "b2": 0x21AD2598})
    assert not recheck(q, tiny).constraint_ok
    ordinary = {o.name: 0 for o in q.operands}
    ordinary.update({"a0": 0x3F800000, "b0": 0x3F800000, "c": 0x40000000})
    assert recheck(q, ordinary).constraint_ok


def test_random_rows_seed_a_real_lower_bound():
    """The sampled lower bound is a row of the class whose measure, recomputed from its
    bits with tc.simulate and fractions, is what the certificate reports."""
    from tensorcore_smt.certify.bound import make_bound_query
    from tensorcore_smt.certify.sample import sample_best

    q = make_bound_query("hopper", None, None, Measure.NORMWISE, default_class())
    best = sample_best(q, 300, seed=5)
    assert best is not None and best.rows > 0 and best.measure > 0
    assert recheck(q, best.inputs).constraint_ok
    w = best.inputs
    d = tc.simulate(
        "hopper",
        None,
        [[w[f"a{i}"] for i in range(16)]],
        [[w[f"b{i}"] for i in range(16)]],
        [w["c"]],
    )
    assert int(d[0]) == best.outputs[0]
    assert witness_measure(q, w, best.outputs) == best.measure
