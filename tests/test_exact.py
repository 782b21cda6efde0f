"""Exact accumulation of integer slices: the chain argument's arithmetic, the blocks that
lead a chain to a lemma witness, the property's queries, and (with solvers) the search
on a small unit."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt.certify.exact import Exactness, _fill_blocks, chain_length, exactness
from tensorcore_smt.cli import main
from tensorcore_smt.smt.library import get
from tensorcore_smt.smt.query import ConstraintKind
from tensorcore_smt.smt.solve import Limits


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
    assert r.steps[-1].c_bits == r.c_bits and r.steps[-1].verdict.value == "unsat"
    assert r.lemma_witness is not None
    assert r.chain_K == chain_length(r.c_bits, 4, 1)


def test_cli_json_of_a_budget_too_small():
    """Within 3 s nothing is proved: exit 3, the JSON says so (no claim)."""
    r = CliRunner().invoke(
        main,
        ["exact", "volta", "--slices", "1", "--timeout", "3", "--json", "--solver", "bitwuzla"],
    )
    assert r.exit_code == 3, r.output
    data = json.loads(r.output)
    assert data["accumulator_bits"] is None and data["chain_exact_K"] is None
