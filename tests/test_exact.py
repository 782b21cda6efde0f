"""Exact accumulation of integer slices: the chain argument's arithmetic, the blocks that
lead a chain to a lemma witness, the property's queries, and (with solvers) the search
on a small unit."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.certify.exact import Exactness, _fill_blocks, chain_length, exactness
from tensorcore_smt.cli import main
from tensorcore_smt.smt.library import get
from tensorcore_smt.smt.query import ConstraintKind
from tensorcore_smt.smt.solve import Limits, Verdict


@pytest.mark.parametrize(
    "target, L, m, B",
    [
        (0, 4, 127, 100),
        (12345, 8, 127, 2**23 - 1),
        (-70000, 16, 127, 2**23 - 1),
        (1000, 2, 3, 1000),
    ],
)
def test_blocks_reach_the_target_exactly_within_the_proved_range(target, L, m, B):
    blocks = _fill_blocks(target, L, m, B)
    assert blocks is not None
    acc = 0
    for blk in blocks:
        assert len(blk) == L
        assert abs(acc) <= B  # every block starts inside the range the lemma proved
        for x, y in blk:
            assert abs(x) <= m and abs(y) <= m
            acc += x * y
    assert acc == target


def test_blocks_refuse_a_target_beyond_reach():
    assert _fill_blocks(10**6, 2, 3, 100) is None


@pytest.mark.parametrize("c_bits, L, P", [(23, 16, 7), (23, 8, 7), (13, 32, 3), (5, 4, 1)])
def test_chain_length_is_the_induction_bound(c_bits, L, P):
    """chain_length is J L for the largest J whose incoming accumulators (j L (2^P-1)^2
    for j < J) all stay within B = 2^b - 1, found here by counting instructions."""
    m2 = ((1 << P) - 1) ** 2
    B = (1 << c_bits) - 1
    J = 1
    while J * L * m2 <= B:  # instruction J + 1 enters with at most J L m2
        J += 1
    K = chain_length(c_bits, L, P)
    assert K == J * L
    r = Exactness("x", "i", P, L, c_bits=c_bits, chain_K=K)
    assert r.bound_B == B and f"K = {K}" in r.argument()


def test_property_binds_the_bf16_instruction_with_integer_classes():
    prop = get("exact-accumulation")
    bound = prop.bind("hopper")
    assert {spec.id for spec, _ in bound} == {"exact-accumulator", "inexact-accumulator"}
    for spec, q in bound:
        assert q.instruction == "m16n8k16.f32.bf16.bf16.f32"
        ints = {c.operands: c.lo for c in q.constraints if c.kind == ConstraintKind.INTEGER}
        assert ints["ab"] == 7
        assert ints["c"] == (23 if spec.id == "exact-accumulator" else 25)
        assert q.against_exact and q.threshold == 0


def test_bad_slices_is_one_line():
    r = CliRunner().invoke(main, ["exact", "volta", "--slices", "0"])
    assert r.exit_code == 2


@pytest.mark.slow
def test_volta_one_bit_slices_search():
    """The whole search on Volta with slices of +-1: a proved accumulator range, the
    witness just above it and a chain witness that tc.matmul shows inexact."""
    r = exactness("volta", 1, timeout=1200, limits=Limits(solver="bitwuzla"))
    assert r.c_bits is not None
    assert r.steps[-1].c_bits == r.c_bits and r.steps[-1].verdict == Verdict.UNSAT
    assert r.lemma_witness is not None
    assert r.chain_K == chain_length(r.c_bits, 4, 1)


def test_cli_json_of_a_budget_too_small():
    """Where the composed argument does not apply (a register with too few carry bits
    can wrap) and 3 s of solver time prove nothing: exit 3, the JSON says so (no claim)."""
    r = CliRunner().invoke(
        main,
        [
            "exact",
            "hopper[carry_bits=2]",
            "--slices",
            "5",
            "--timeout",
            "3",
            "--json",
            "--solver",
            "bitwuzla",
        ],
    )
    assert r.exit_code == 3, r.output
    data = json.loads(r.output)
    assert data["accumulator_bits"] is None and data["chain_exact_K"] is None
    assert data["accumulator_method"] is None
    assert "no composed argument" in data["accumulator_argument"][0]


# The composed argument (argued_bound): proved bounds, witnesses just above them.

ARGUED = [
    ("hopper", "m16n8k16.f32.bf16.bf16.f32", 7, (1 << 24) - 16 * 127**2, 1040),
    pytest.param(
        "ampere",
        "m16n8k16.f32.bf16.bf16.f32",
        7,
        (1 << 24) - 16 * 127**2,
        1040,
        marks=pytest.mark.slow,
    ),
    # FP8 wgmma rounds into E8M13: integer sums are exact only up to 2^14
    pytest.param(  # about 12 s
        "hopper",
        "wgmma.m64n8k32.f32.e4m3.e4m3",
        3,
        (1 << 14) - 32 * 49,
        320,
        marks=pytest.mark.slow,
    ),
    # CDNA3's round-down units (FDRDA, GFDRDA): the grid 2^(e-F) <= 1 floors no integer
    ("cdna3", "v_mfma_f32_32x32x8_f16", 7, (1 << 24) - 8 * 127**2, 1040),
    ("cdna3", "v_mfma_f32_32x32x16_fp8_fp8", 3, (1 << 24) - 16 * 49, 342384),
    # CDNA1's exact groups, CDNA2's pairwise sums in fp32, the x86 lane's two FMAs
    ("cdna1", "v_mfma_f32_32x32x4bf16", 7, (1 << 24) - 4 * 127**2, 1040),
    ("cdna2", "v_mfma_f32_32x32x8f16", 7, (1 << 24) - 8 * 127**2, 1040),
    ("x86-avx512bf16", "vdpbf16ps", 7, (1 << 24) - 2 * 127**2, 1040),
]


@pytest.mark.parametrize("arch,instr,P,B,K", ARGUED, ids=lambda x: str(x))
def test_argued_bound_is_tight_and_holds_on_random_integer_rows(arch, instr, P, B, K):
    import random

    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.certify.exact import above_witness, argued_bound, chain_length_B
    from tensorcore_smt.formats import round_fraction, value_of
    from tensorcore_smt.spec.presets import parse_variant

    p = parse_variant(arch).params(instr)
    got, lines = argued_bound(p, P)
    assert got == B and any("2^" in x for x in lines)
    assert chain_length_B(B, p.K, P) == K
    w = above_witness(p, P, B)
    assert w is not None and abs(value_of(w["c"], p.c_fmt)) == B + 1
    d = simulate_params(
        p,
        np.array([[w[f"a{k}"] for k in range(p.K)]], dtype=np.uint64),
        np.array([[w[f"b{k}"] for k in range(p.K)]], dtype=np.uint64),
        np.array([w["c"]], dtype=np.uint64),
    )
    exact = value_of(w["c"], p.c_fmt) + sum(
        value_of(w[f"a{k}"], p.a_fmt) * value_of(w[f"b{k}"], p.b_fmt) for k in range(p.K)
    )
    assert value_of(int(d[0]), p.d_fmt) != exact
    # every row of the class with |c| <= B is exact on the model (extremes included)
    rng = random.Random(1)
    m = (1 << P) - 1
    n = 4000
    a = [[rng.choice([-m, m, rng.randint(-m, m)]) for _ in range(p.K)] for _ in range(n)]
    b = [[rng.choice([-m, m, rng.randint(-m, m)]) for _ in range(p.K)] for _ in range(n)]
    c = [rng.choice([-B, B, rng.randint(-B, B)]) for _ in range(n)]

    def enc(v, f):
        return round_fraction(Fraction(v), f)

    A = np.array([[enc(x, p.a_fmt) for x in r] for r in a], dtype=np.uint64)
    Bm = np.array([[enc(x, p.b_fmt) for x in r] for r in b], dtype=np.uint64)
    C = np.array([enc(x, p.c_fmt) for x in c], dtype=np.uint64)
    D = simulate_params(p, A, Bm, C)
    for i in range(n):
        want = c[i] + sum(x * y for x, y in zip(a[i], b[i]))
        assert value_of(int(D[i]), p.d_fmt) == want


def test_cli_exact_answers_the_ozaki_question_by_the_argument():
    r = CliRunner().invoke(
        main,
        ["exact", "hopper", "--slices", "7", "--instr", "m16n8k16.f32.bf16.bf16.f32", "--json"],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["accumulator_bound"] == (1 << 24) - 16 * 127**2
    assert data["accumulator_method"] == "argument"
    assert data["chain_exact_K"] == 1040
    # a chain one instruction longer, through tc.matmul: off by exactly one
    assert data["chain_witness_K"] == 1056 and data["chain_witness_error"] == "1/1"


def test_property_query_is_answered_by_the_argument_and_refused_beyond_it():
    # `tcsmt find --property exact-accumulation`: the first query (|c| < 2^23) is proved
    # by the integer-sum argument in milliseconds; the same question with |c| < 2^25 is
    # beyond B = 16,519,152, so the argument declines and the solvers are asked
    from tensorcore_smt.smt.arguments import argued_unsat
    from tensorcore_smt.smt.solve import Verdict, answer

    prop = get("exact-accumulation")
    queries = {spec.id: q for spec, q in prop.bind("hopper", None)}
    q = queries["exact-accumulator"]
    o = answer(q, Limits(timeout=5, confirm=False))
    assert o.verdict == Verdict.UNSAT_BY_ARGUMENT and o.argued and o.method == "argument"
    assert "16519152" in o.note and o.argument.rows > 0 and not o.runs
    assert argued_unsat(queries["inexact-accumulator"]) is None
    # CDNA3's round-down unit: the argument of its own steps (floors on a grid <= 1)
    cdna = {spec.id: q for spec, q in prop.bind("cdna3", None)}
    assert "2^(e-F) <= 1" in argued_unsat(cdna["exact-accumulator"])
    # a register that can wrap: no argument, the solvers keep that question
    from tensorcore_smt.certify.exact import _lemma_query

    assert argued_unsat(_lemma_query("hopper[carry_bits=2]", None, 5, 8)) is None
    assert argued_unsat(_lemma_query("hopper", None, 5, 8)) is not None
    from tensorcore_smt.smt.answers import answer_json

    assert answer_json(o, [])["method"] == "argument"
