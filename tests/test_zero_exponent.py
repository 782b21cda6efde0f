"""The zero-exponent floor argument (model/zero_exponent.py, smt/arguments.py) and its
constructed witnesses (smt/constructed.py).

The argument is checked against brute force: every input of a tiny fused unit (e2m1
products, an e5m2 c and d) is run on a grid of variants that differ in e_zero, and
for every pair the argument's verdict must agree with the outputs: units it calls
equal agree on every input, units that differ are separated by a constructed row, and
the only pairs left to the solvers are ones' complement adders that happen to agree.
Then the questions of the presets (Ampere's -131 against -133, Hawkeye's FP8 floor of
-139 against Hopper's -133; Badash et al. 2026) are answered by the argument, and an
fp16-output pair whose floor shows is answered by a constructed witness."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from tensorcore_smt.api import resolve, simulate_params
from tensorcore_smt.formats import Format, Rounding
from tensorcore_smt.model.params import Algorithm, CarryOverflow, ModelParams, Opposing
from tensorcore_smt.model.terms import AlignMode, ProductExponent
from tensorcore_smt.model.zero_exponent import equal_by_floor, kinds, separating_rows
from tensorcore_smt.smt.argument_rows import separating_row
from tensorcore_smt.smt.arguments import ArgumentKind, zero_floor_argument
from tensorcore_smt.smt.query import Goal, make_query
from tensorcore_smt.smt.solve import Limits, Verdict, answer

E_ZEROS = [None, -20, -16, -14, -13, -2, 0, 3]
"""Thresholds around the tiny unit's terms: c (e5m2) from 2^-16 to 2^15 with e_min =
-14, products (e2m1 x e2m1) from 2^-2 with exponents from 0 (or -2 normalised)."""


def _inputs(K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every input of K e2m1 products and an e5m2 c."""
    shape = (16,) * (2 * K) + (256,)
    idx = np.indices(shape).reshape(len(shape), -1).T.astype(np.uint64)
    return idx[:, :K], idx[:, K : 2 * K], idx[:, 2 * K]


def _tiny(K: int, **kw) -> ModelParams:
    return ModelParams(
        Algorithm.FDA, Format.E2M1, Format.E2M1, Format.E5M2, Format.E5M2, K=K, L=K, **kw
    )


def _check_grid(bases: list[ModelParams], engine: str) -> dict[str, int]:
    """For every base and every pair of E_ZEROS: the argument's verdict against the
    outputs on every input (module docstring). Returns the counts of each verdict."""
    n = {"argued equal": 0, "separated": 0, "left open": 0}
    for base in bases:
        A, B, C = _inputs(base.K)
        outs = {
            e: simulate_params(replace(base, e_zero=e), A, B, C, engine=engine) for e in E_ZEROS
        }
        for e1, e2 in itertools.combinations(E_ZEROS, 2):
            p1, p2 = replace(base, e_zero=e1), replace(base, e_zero=e2)
            differ = bool(np.any(outs[e1] != outs[e2]))
            if equal_by_floor(p1, p2) is not None:
                assert not differ, (base, e1, e2)
                n["argued equal"] += 1
                continue
            got = separating_row(p1, p2, separating_rows(p1, p2))
            assert (got is not None) == differ, (base, e1, e2)
            if got is not None:
                (a, b, c), d1, d2 = got
                assert d1 != d2
                row = [np.array([x], dtype=np.uint64) for x in (a, b)]
                assert simulate_params(p1, *row, np.array([c], dtype=np.uint64))[0] == d1
                n["separated"] += 1
            else:
                # left to the solvers: only where terms enter by their ones' complement
                assert base.opposing == Opposing.ONES, (base, e1, e2)
                n["left open"] += 1
    return n


K1_BASES = [
    _tiny(1, F=3, carry_bits=1),  # truncation, rz: the single-term rule
    _tiny(1, F=1, rounding=Rounding.RNE),  # rne: no single-term rule
    _tiny(1, F=6, align=AlignMode.ROUND_DOWN, product_exponent=ProductExponent.NORMALIZED),
    _tiny(1, F=0, carry_bits=0, align=AlignMode.EXACT, opposing=Opposing.ONES),
]


def test_floor_argument_agrees_with_every_input_of_a_tiny_unit():
    n = _check_grid(K1_BASES, "numpy")
    # every branch is met: proofs, witnesses (the floor shows)
    assert n["argued equal"] > 0 and n["separated"] > 0


@pytest.mark.slow  # about four minutes: 16.7 million inputs a variant on the compiled engine
def test_floor_argument_agrees_with_every_input_of_two_products():
    rng = np.random.default_rng(3)
    bases = [_tiny(2, F=20, carry_bits=1, carry_overflow=CarryOverflow.RENORMALIZE)]
    while len(bases) < 5:
        kw = dict(
            F=int(rng.choice([0, 1, 3, 6, 14])),
            carry_bits=[None, 0, 1][int(rng.integers(3))],
            product_exponent=list(ProductExponent)[int(rng.integers(2))],
            rounding=[Rounding.RZ, Rounding.RNE][int(rng.integers(2))],
            align=list(AlignMode)[int(rng.integers(3))],
            opposing=list(Opposing)[int(rng.integers(2))],
        )
        try:
            bases.append(_tiny(2, **kw))
        except ValueError:
            continue
    n = _check_grid(bases, "compiled")
    assert n["argued equal"] > 0


def test_term_kinds_of_the_presets():
    p = resolve("ampere", "m16n8k8.f32.f16.f16.f32")
    got = {k.name: (k.min_exp, k.low_bit, k.count) for k in kinds(p, 0)}
    # fp16 products 2^-14 * 2^-14 (unnormalised exponent), least bit 2^-24 * 2^-24;
    # an fp32 c's exponent never falls below e_min = -126, its least bit is 2^-149
    assert got == {"products": (-28, -48, 8), "c": (-126, -149, 1)}
    pn = replace(p, product_exponent=ProductExponent.NORMALIZED)
    assert kinds(pn, 0)[0].min_exp == -48


@pytest.mark.parametrize(
    "x,y,instr",
    [
        (
            "ampere[F=23,carry_bits=3,product_exponent=normalized,e_zero=-131]",
            "ampere[F=23,carry_bits=3,product_exponent=normalized,e_zero=-133]",
            "m16n8k8.f32.f16.f16.f32",
        ),
        ("ampere", "ampere[e_zero=none]", "m16n8k16.f32.f16.f16.f32"),
        # Hawkeye's FP8 floor (Badash et al. 2026) against the preset's
        ("hopper", "hopper[e_zero=-139]", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ],
)
def test_preset_floors_are_equal_by_the_argument(x, y, instr):
    q = make_query(x, y, instr, Goal.DIFFER)
    arg = zero_floor_argument(q)
    assert arg is not None and arg.kind == ArgumentKind.ZERO_FLOOR
    assert arg.check() is None and arg.rows > 0
    # no solver asked: the argument and its rows answer (the solvers time out on these)
    o = answer(q, Limits(timeout=5, confirm=False))
    assert o.verdict == Verdict.UNSAT_BY_ARGUMENT and o.method == "argument"


@pytest.mark.parametrize(
    "x,y,instr",
    [
        # fp16 outputs: products (exponents from 2^-28) lie below e_zero = -19, and the
        # grid 2^(-19 - 24) is coarser than their least bit 2^-48; adjacent floors too
        ("ampere[e_zero=-19]", "ampere[e_zero=-23]", "m16n8k8.f16.f16.f16.f16"),
        ("ampere[e_zero=-19,F=23]", "ampere[e_zero=-20,F=23]", "m16n8k8.f16.f16.f16.f16"),
        # bf16 products reach exponents of -252, far below fp32's floors
        ("ampere[e_zero=-131]", "ampere[e_zero=-133]", "m16n8k8.f32.bf16.bf16.f32"),
    ],
)
def test_a_floor_that_shows_is_separated_by_a_constructed_witness(x, y, instr):
    q = make_query(x, y, instr, Goal.DIFFER)
    assert zero_floor_argument(q) is None
    o = answer(q, Limits(timeout=5, confirm=False))
    assert o.verdict == Verdict.WITNESS and o.method == "constructed" and o.witness.reproduces
    w = o.witness.inputs
    K = q.p.K
    a = np.array([[w[f"a{i}"] for i in range(K)]], dtype=np.uint64)
    b = np.array([[w[f"b{i}"] for i in range(K)]], dtype=np.uint64)
    c = np.array([w["c"]], dtype=np.uint64)
    d = [int(simulate_params(p, a, b, c)[0]) for p in q.params]
    assert d[0] != d[1] and tuple(d) == o.witness.outputs


def test_pairs_that_differ_in_more_than_e_zero_are_not_argued():
    q = make_query("ampere", "ampere[e_zero=-131,F=23]", "m16n8k8.f32.f16.f16.f32", Goal.DIFFER)
    assert zero_floor_argument(q) is None


HIDDEN = [
    ("ampere", "m16n8k8.f32.f16.f16.f32", "ampere[F=23,carry_bits=3,product_exponent=normalized]"),
    (
        "ampere",
        "m16n8k8.f32.f16.f16.f32",
        "ampere[F=23,carry_bits=3,product_exponent=normalized,e_zero=-131]",
    ),
    # fp16 outputs: the floor shows, a constructed witness splits the e_zero values
    ("ampere", "m16n8k8.f16.f16.f16.f16", "ampere[F=23,carry_bits=3,e_zero=-19]"),
]


@pytest.mark.slow  # 10 to 60 s each on two shared cores
@pytest.mark.parametrize("arch,instr,hidden", HIDDEN, ids=[h for _, _, h in HIDDEN])
def test_identify_establishes_hidden_variants_that_differ_in_e_zero(arch, instr, hidden):
    import json

    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    args = ["identify", "--arch", arch, "--instr", instr, "--oracle", f"variant:{hidden}"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    doc = json.loads(r.output)
    assert doc["standing"]["established"] and doc["oracle_vectors"] <= 200
    assert doc["seconds"] < 600
    # one class, every member but its first proved equal to it, or equal by a stated
    # argument no solver confirmed (counted apart), none undecided
    st = doc["standing"]
    assert st["classes"] == 1 and st["proved_equal"] + st["argued_equal"] == st["members"] - 1
    assert st["undecided"] == 0


def test_gemm_queries_pass_the_floor_argument_and_witness_by() -> None:
    """A GEMM query (two schedules, no meta) is not the floor argument's question: both
    the argument and the constructed witness decline it instead of raising."""
    from tensorcore_smt.smt.constructed import floor_witness
    from tensorcore_smt.smt.gemm_query import make_gemm_query

    q = make_gemm_query("hopper/serial", "hopper/serial[split_k=2]", 256)
    assert zero_floor_argument(q) is None
    assert floor_witness(q) is None
