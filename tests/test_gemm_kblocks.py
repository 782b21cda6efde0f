"""Explicit k-block sizes (schedule field kblocks=): K cut into consecutive blocks of
given sizes, each laid out by the split fields, all partials combined by one tree. Run by
every engine through the plan; named by reveal's synthesis (OpenBLAS sgemm's K blocking)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.gemm.plan import make_plan
from tensorcore_smt.gemm.schedule import parse_schedule
from tensorcore_smt.order.hypothesis import plan_tree, synthesize
from tensorcore_smt.order.tree import canonical, deep


def test_kblocks_plan_and_text():
    s = parse_schedule("serial[kblocks=8+8+4+4,split_k=2,split=interleaved,split_tile=1]")
    assert parse_schedule(s.text()) == s and "kblocks=8+8+4+4" in s.text()
    plan = make_plan(s, 24, 1)
    owned = [sp.chains[0] for sp in plan.splits]
    assert owned[0] == (0, 2, 4, 6) and owned[1] == (1, 3, 5, 7)
    assert owned[2] == (8, 10, 12, 14) and owned[6] == (20, 22) and owned[7] == (21, 23)
    assert plan.combine == (((((((0, 1), 2), 3), 4), 5), 6), 7)


@pytest.mark.parametrize(
    "text,k,kb,msg",
    [
        ("serial[kblocks=8+8]", 24, 1, "sums to 16, not K=24"),
        ("serial[kblocks=12+12]", 24, 8, "not a multiple of the instruction's K=8"),
        ("serial[kblocks=8+x]", 16, 1, "kblocks"),
        ("serial[kblocks=8+8,combine=0+1+2]", 16, 1, "each split index 0..1 once"),
    ],
)
def test_kblocks_bad_values_are_one_clear_error(text, k, kb, msg):
    with pytest.raises(UserError, match=msg):
        make_plan(parse_schedule(text), k, kb)


def test_engines_agree_on_kblocks():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 40)).astype(np.float32)
    b = rng.standard_normal((40, 7)).astype(np.float32)
    a.view(np.uint32)[1, 3] = 0x7F800123
    a[2, 0], a[2, 30] = np.inf, -np.inf
    c = rng.standard_normal((5, 7)).astype(np.float32)
    h = "x86-fma/serial[kblocks=16+16+8,split_k=2,split=interleaved,split_tile=1,beta=0.5]"
    want = np.asarray(tc.matmul(h, a, b, c, engine="numpy")).view(np.uint32)
    got = np.asarray(tc.matmul(h, a, b, c, engine="compiled")).view(np.uint32)
    assert (want == got).all()


@pytest.mark.parametrize(
    "text",
    [
        "serial[kblocks=10+10+6+6]",
        "serial[kblocks=10+10+6+6,split_k=2,split=interleaved,split_tile=1,combine=0+1+(2+3)+(4+5)+(6+7)]",
        "serial[kblocks=20+12,split_k=2,split=interleaved,split_tile=2,reduce=pairwise]",
    ],
)
def test_synthesize_names_kblocks_trees(text):
    """The tree of a kblocks plan is read back into a schedule with the same tree."""
    k = 32
    plan = make_plan(parse_schedule(text), k, 1)
    with deep(k):
        tree = canonical(plan_tree(plan, k, 1))
        got = synthesize(tree, k, 1, 1)
        assert got is not None and got.kblocks is not None
        assert canonical(plan_tree(make_plan(got, k, 1), k, 1)) == tree


@pytest.mark.slow
def test_numpy_matmul_k1024_is_named_and_reproduced():
    """numpy's sgemm at K = 1024 (OpenBLAS blocks K unevenly here): every class gets a
    hypothesis that reproduces the library on random outputs."""
    r = tc.reveal("numpy:matmul", 1024, check_outputs=256)
    assert r.reproduced is True
    assert all(c.hypothesis is not None for c in r.classes)
