"""Chains given as data (schedule fields chains=, seeds=, wide=): SIMD dot kernels whose
lanes no split layout describes, a lane that goes on from a sum of others, and a scalar
tail summed in a C double. Run by every engine through the plan (element.fold_plan);
read off revealed trees by order/hypothesis.decompose and checked against this machine's
numpy (OpenBLAS sdot) and against the tree arithmetic of order/evaluate.py."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.gemm.plan import make_plan
from tensorcore_smt.gemm.schedule import parse_schedule
from tensorcore_smt.order.arithmetic import discriminating
from tensorcore_smt.order.evaluate import (
    Arithmetic,
    Products,
    TreeArithmetic,
    Width,
    evaluate_model,
)
from tensorcore_smt.order.hypothesis import Lanes, decompose, plan_tree
from tensorcore_smt.order.tree import canonical

SDOT6 = "serial[chains=0|1|2&3|4|5,seeds=2<0+1,combine=2,wide=2]"
"""K = 6: products 0 and 1 in two lanes, added; lane 2 goes on from that sum with 2 and
3; products 4 and 5 a tail in fp64, the lane's sum added to it."""


def test_chains_plan_and_text():
    s = parse_schedule(SDOT6)
    assert parse_schedule(s.text()) == s
    plan = make_plan(s, 6, 1)
    assert [sp.chains[0] for sp in plan.splits] == [(0,), (1,), (2, 3), (4,), (5,)]
    assert plan.seeds == ((2, (0, 1)),) and plan.wide == 2 and plan.combine == 2
    assert plan_tree(plan, 6, 1) == ((((0, 1), 2), 3), (4, 5))
    assert set(plan.library_steps()) == {"seeds", "wide"}  # certify refuses such plans
    long = parse_schedule("serial[chains=0..12/4|1..13/4&2|3..11/4]")
    assert long.chains == ((0, 4, 8, 12), (1, 5, 9, 13, 2), (3, 7, 11))
    assert "chains=0..12/4|1..13/4&2|3..11/4" in long.text()


@pytest.mark.parametrize(
    "text,k,msg",
    [
        ("serial[chains=0|1]", 3, "not the 3 k-blocks of K=3"),
        ("serial[chains=0|0]", 1, "no k-block is taken twice"),
        ("serial[chains=0..3/2]", 4, "not a run"),
        ("serial[chains=0|1,split_k=2]", 2, "split_k=2 cannot be combined"),
        ("serial[chains=0|1|2,seeds=2<0+1]", 3, "seeds= needs combine="),
        ("serial[chains=0|1|2,seeds=2<0+2,combine=2]", 3, "once"),
        ("serial[chains=0|1|2,seeds=1<1,combine=0+2]", 3, "holds itself"),
        ("serial[chains=0|1,wide=2]", 2, "wide below 2"),
        ("serial[chains=0|1,wide=1,reduce_fmt=out,out=bf16]", 2, "reduce_fmt=out cannot"),
    ],
)
def test_bad_values_are_one_clear_error(text, k, msg):
    with pytest.raises(UserError, match=msg):
        make_plan(parse_schedule(text), k, 1)


def test_seeds_need_an_accumulator_format_chain():
    a = np.ones((1, 32), np.float16)
    with pytest.raises(UserError, match="allowed: an instruction whose d is fp32"):
        tc.matmul("hopper/serial[chains=0|1,seeds=1<0,combine=1]", a, a.T,
                  instr="m16n8k16.f16.f16.f16.f16")  # fmt: skip


def test_engines_agree_with_specials():
    a, b = discriminating(Format.FP32, 64, 6, 5, 3)
    a, b = a.astype(np.float32), b.astype(np.float32)
    a.view(np.uint32)[1, 4] = 0x7F800123  # a signalling NaN in the fp64 tail
    a[2, 0], a[3, 5] = np.inf, -np.inf
    a[4, :] = -0.0
    h = "x86-fma/" + SDOT6
    want = np.asarray(tc.matmul(h, a, b, engine="numpy")).view(np.uint32)
    got = np.asarray(tc.matmul(h, a, b, engine="compiled")).view(np.uint32)
    assert (want == got).all()
    assert want[1, 0] == 0x7FC00123  # quieted, its payload through the fp64 tail (x86)
    assert want[4, 0] == 0  # +0: the C double starts from 0.0


def _tree_model(lanes: Lanes) -> Arithmetic:
    prod = {Lanes.CHAINS: Products.FUSED, Lanes.PAIRS: Products.LANES}[lanes]
    return Arithmetic(prod, Width.FP32)


@pytest.mark.parametrize("lanes", [Lanes.CHAINS, Lanes.PAIRS])
def test_decomposed_schedule_sums_as_the_tree_arithmetic(lanes):
    """A tree no layout gives, read off as chains, seeds and an fp64 tail, through
    tc.matmul equals the independent tree evaluator (exact sums, round to odd) with the
    matching arithmetic: fused chains or two-product lanes, the tail in fp64."""
    tree = canonical(((((((0, 4), 1), 5), (((2, 6), 3), 7)), 8), (((9, 10), 11), 12)))
    k = 13
    sched = decompose(tree, k, lanes, wide=True)
    assert sched is not None and sched.wide == 4
    assert plan_tree(make_plan(sched, k, 1), k, 1) == tree
    a, b = discriminating(Format.FP32, 400, k, 1, 11)
    got = np.asarray(tc.matmul("x86-fma/" + sched.text(), a.astype(np.float32),
                               b.astype(np.float32), engine="compiled"))[:, 0]  # fmt: skip
    main = _tree_model(lanes)
    tail = Arithmetic(Products.ROUNDED, Width.FP64)
    model = TreeArithmetic((main, tail), Width.FP64)
    want = evaluate_model(tree, model, a, np.repeat(b.T, len(a), 0))
    assert (got.view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("k", [40, 100, pytest.param(300, marks=pytest.mark.slow)])
def test_numpy_dot_is_named_and_reproduced(k):
    """This machine's numpy.dot (OpenBLAS sdot: 64- and 32-wide loops, a scalar tail in a
    C double): reveal names a hypothesis and it gives numpy's bits on 2,000 fresh
    discriminating rows (wide exponents, cancellation, subnormals)."""
    r = tc.reveal("numpy:dot", k, check=False)
    hyps = [h for h in [r.hypothesis, *r.first.others] if h]
    assert hyps, r.note
    a, b = discriminating(Format.FP32, 2000, k, 1, 1234)
    a, b = a.astype(np.float32), b.astype(np.float32)
    want = np.array([np.dot(row, b[:, 0]) for row in a], np.float32)
    hits = [
        h
        for h in hyps
        if (np.asarray(tc.matmul(h, a, b, engine="compiled"))[:, 0].view(np.uint32)
            == want.view(np.uint32)).all()
    ]  # fmt: skip
    assert hits, hyps
