"""The flush_outputs argument (identify/gemm_arguments.py): two GEMM hypotheses that differ
only in flushing the instruction's subnormal outputs are equal when every chain starts
from +0 and the least product bit 2^q is a normal number. Checked against the model:
exhaustively on one instruction over every single product and c on the grid of 2^q, and
on the extreme rows at depth K; where C joins the chain the argument does not apply and a
row with a subnormal C separates the hypotheses."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.formats import Format, round_fraction, value_of
from tensorcore_smt.gemm.model import resolve_model, run_rows
from tensorcore_smt.identify import loop
from tensorcore_smt.identify.gemm import load_gemm_space, make_gemm_oracle
from tensorcore_smt.identify.gemm_arguments import (
    flush_outputs_argument,
    flush_rows,
    least_product_bit,
)
from tensorcore_smt.smt.solve import Limits, Verdict

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"


def _pair(schedule: str, K: int):
    a = resolve_model(f"hopper/{schedule}", K, FP8)
    b = resolve_model(f"hopper[flush_outputs=true]/{schedule}", K, FP8)
    return a, b


def test_least_product_bit_is_the_operands_least_bits_added():
    ma, _ = _pair("serial[promote=128,split_k=2]", 512)
    least = Fraction(1, 2**9)  # e4m3's least subnormal
    assert value_of(0x01, Format.E4M3) == least
    assert Fraction(2) ** least_product_bit(ma) == least * least


def test_one_instruction_never_flushes_on_the_grid_every_single_product():
    """Every (a_0, b_0) pair, the other products zero, with c = +0 and c on the grid of
    2^q (both signs, the least multiples and cancelling ones): flushing outputs changes
    no d of the instruction, and no d is subnormal."""
    ma, mb = _pair("serial", 32)
    q = least_product_bit(ma)
    grid = [0, 1, 2, 3, 255, 2**13 + 1, 2**20 + 7]
    cs = [0] + [
        round_fraction(s * g * Fraction(2) ** q, Format.FP32) for g in grid[1:] for s in (1, -1)
    ]
    for c in cs:  # every c is exactly a multiple of 2^q
        assert (value_of(c, Format.FP32) / Fraction(2) ** q).denominator == 1
    pa, pb = np.meshgrid(np.arange(256, dtype=np.uint64), np.arange(256, dtype=np.uint64))
    n = pa.size
    a = np.zeros((n * len(cs), 32), dtype=np.uint64)
    b = np.zeros_like(a)
    a[:, 0] = np.tile(pa.ravel(), len(cs))
    b[:, 0] = np.tile(pb.ravel(), len(cs))
    c = np.repeat(np.asarray(cs, dtype=np.uint64), n)
    # serial at K = 32 is one instruction with c in its chain: the unit's own c
    assert ma.plan.c_in_chain and ma.plan.n_blocks == 1
    da, db = run_rows(ma, a, b, c), run_rows(mb, a, b, c)
    assert np.array_equal(da, db)
    exp = (da >> np.uint64(23)) & np.uint64(0xFF)
    frac = da & np.uint64((1 << 23) - 1)
    assert not np.any((exp == 0) & (frac != 0))  # no subnormal d


def test_extreme_rows_agree_and_the_argument_applies_at_depth():
    ma, mb = _pair("serial[promote=128,split_k=2]", 512)
    arg = flush_outputs_argument(ma, mb)
    assert arg is not None and "2^-18" in " ".join(arg.steps)
    assert arg.check() is None and arg.rows > 0
    rows = flush_rows(ma, 64)
    # the rows do reach down to the grid: some chain sums are a few units of 2^q
    d = run_rows(ma, rows.a, rows.b, rows.c)
    assert np.array_equal(d, run_rows(mb, rows.a, rows.b, rows.c))
    assert "no solver asked" in arg.note and "stated argument" in arg.note


def test_c_in_the_chain_breaks_the_argument_and_a_subnormal_c_separates_them():
    """hopper/serial at K = 64: C is acc_0 of the one chain; a subnormal C with zero
    products is flushed by one hypothesis only (the largest: a zero product's exponent
    e_zero = -133 sets the grid 2^(-126 - 13), which the least subnormals fall below)."""
    ma, mb = _pair("serial", 64)
    assert ma.plan.c_in_chain
    assert flush_outputs_argument(ma, mb) is None
    a = np.zeros((1, 64), dtype=np.uint64)
    c = np.asarray([0x007FFFFF], dtype=np.uint64)  # the largest fp32 subnormal
    da, db = run_rows(ma, a, a, c)[0], run_rows(mb, a, a, c)[0]
    assert db == 0 and value_of(int(da), Format.FP32) != 0  # a subnormal d, flushed in b


@pytest.mark.parametrize(
    "other",
    [
        "hopper[flush_sums=true]/serial[promote=128,split_k=2]",  # not flush_outputs
        "hopper[flush_outputs=true]/serial[promote=64,split_k=2]",  # another schedule
    ],
)
def test_the_argument_needs_a_pair_that_differs_only_in_flush_outputs(other):
    ma = resolve_model("hopper/serial[promote=128,split_k=2]", 512, FP8)
    assert flush_outputs_argument(ma, resolve_model(other, 512, FP8)) is None


def test_the_loop_counts_an_argued_member_apart_from_proved_ones():
    """`_diff` answers the flush pair by the argument (no solver), and the member's
    standing says so: equal by a stated argument, not proved."""
    space = load_gemm_space("hopper/serial[promote=128,split_k=2]", 512, FP8)
    oracle = make_gemm_oracle("variant:hopper/serial[promote=128,split_k=2]", space)
    ident = loop.Identifier(space, oracle, 200, Limits(timeout=1.0))
    a = space.make(space.families[0].name, {})
    b = space.make(space.families[0].name, {"flush_outputs": True})
    proof, row = ident._diff(a, b)
    assert row is None and proof.verdict == Verdict.UNSAT_BY_ARGUMENT
    assert proof.solvers == [loop.ARGUMENT] and "stated argument" in proof.note
    ident.res.classes = [[a, b]]
    ident.res.proofs = [proof]
    assert loop.member_status(ident.res) == {b: loop.ARGUED}
    st = loop.standing(ident.res)
    assert (st["proved_equal"], st["argued_equal"], st["established"]) == (0, 1, True)
    assert "by a stated argument" in loop.standing_text(ident.res)


def test_instruction_only_pairs_take_the_instruction_questions_argument():
    """e_zero = -132 against the preset's -133 differs only inside the instruction: the
    zero-exponent floor argument of the instruction's question (smt/arguments.py)
    decides the GEMM pair, its rows run on the two instructions; carry bits have no
    stated argument here (a solver is asked)."""
    from tensorcore_smt.smt.arguments import stated_argument

    space = load_gemm_space("hopper/serial[promote=128,split_k=2]", 512, FP8)
    fam = space.families[0].name
    a = space.make(fam, {})
    b = space.make(fam, {"e_zero": -132})
    got = space.stated_argument(a, b)
    inst = stated_argument(space.reduced_query(a, b))
    assert got is not None and inst is not None and got.name == inst.kind.title
    assert got.check() is None and got.rows > 0
    assert "smt/arguments.py" in got.note and "both instructions" in got.note
    assert space.stated_argument(a, space.make(fam, {"carry_bits": 6})) is None
