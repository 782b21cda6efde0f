"""The GEMM level: schedules as data, plans, and the element arithmetic against the
instruction model it chains (tc.simulate_one calls, model.ieee operations, rational
rounding), with the whole-matrix emulator agreeing with the element run per output."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt import UserError
from tensorcore_smt.api import simulate_one
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV
from tensorcore_smt.formats import Format, Rounding, round_fraction, value_of
from tensorcore_smt.gemm.element import element
from tensorcore_smt.gemm.emulate import matmul
from tensorcore_smt.gemm.hypothesis import default_instruction, parse_gemm
from tensorcore_smt.gemm.plan import (
    contiguous_splits,
    equivalent_plan,
    make_plan,
    pairwise_tree,
    serial_tree,
    tree_leaves,
)
from tensorcore_smt.gemm.schedule import (
    SCHEDULE_RANGES,
    CJoin,
    KOrder,
    Reduce,
    Schedule,
    SplitMode,
    named_schedules,
    parse_schedule,
)
from tensorcore_smt.model import ieee

RNG = np.random.default_rng(23)


def _bits(x: np.ndarray) -> list[int]:
    w = x.dtype.itemsize * 8
    return [int(v) for v in x.view({8: np.uint8, 16: np.uint16, 32: np.uint32}[w])]


def _cbv(vals: list[int], w: int) -> list[BV]:
    return [BV(CONCRETE, v, w) for v in vals]


def _chain_by_hand(p, a: list[int], b: list[int], blocks, acc: int) -> int:
    """The loop of simulate_one calls a chain stands for, acc fed back as c."""
    K = p.K
    for j in blocks:
        acc = simulate_one(p, a[j * K : (j + 1) * K], b[j * K : (j + 1) * K], acc)
    return acc


def _fp32_add(x: int, fx: Format, y: int, fy: Format) -> int:
    w = (fx.spec.storage, fy.spec.storage)
    return int(
        ieee.add(BV(CONCRETE, x, w[0]), fx, BV(CONCRETE, y, w[1]), fy, Format.FP32, Rounding.RNE).v
    )


def _element(p, plan, sched, a, b, c=None, c_fmt=None):
    wa, wb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
    cbv = None if c is None else BV(CONCRETE, c, (c_fmt or p.c_fmt).spec.storage)
    return int(element(_cbv(a, wa), _cbv(b, wb), cbv, p, plan, sched, c_fmt).v)


def _hopper(dtype: str):
    hyp = parse_gemm("hopper")
    f = Format.parse(dtype)
    return hyp.params(f, f)


# --- chains, promotion, splits ---------------------------------------------------------


@pytest.mark.parametrize("dtype,np_dt", [("fp16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_chain_is_the_loop_of_simulate_calls(dtype, np_dt):
    p = _hopper(dtype)
    K = 5 * p.K
    plan = make_plan(Schedule(), K, p.K)
    for _ in range(20):
        a = _bits(RNG.standard_normal(K).astype(np_dt))
        b = _bits((RNG.standard_normal(K) * 2.0 ** RNG.integers(-8, 8, K)).astype(np_dt))
        c = _bits(np.float32([RNG.standard_normal()]))[0]
        want = _chain_by_hand(p, a, b, range(5), c)
        assert _element(p, plan, Schedule(), a, b, c) == want
    # descending: the same blocks, last first
    sched = Schedule(order=KOrder.DESCENDING)
    plan = make_plan(sched, K, p.K)
    assert _element(p, plan, sched, a, b, c) == _chain_by_hand(p, a, b, range(4, -1, -1), c)


def test_promotion_adds_chains_with_ieee_fp32_add():
    p = _hopper("e4m3")
    K = 320  # 10 k-blocks of 32: chains of 4, 4, 2 blocks
    sched = parse_schedule("serial[promote=128]")
    plan = make_plan(sched, K, p.K)
    assert [len(c) for c in plan.splits[0].chains] == [4, 4, 2]
    for _ in range(10):
        a = _bits(RNG.standard_normal(K).astype(ml_dtypes.float8_e4m3fn))
        b = _bits(RNG.standard_normal(K).astype(ml_dtypes.float8_e4m3fn))
        acc = 0
        for blocks in (range(0, 4), range(4, 8), range(8, 10)):
            acc = _fp32_add(acc, Format.FP32, _chain_by_hand(p, a, b, blocks, 0), p.d_fmt)
        assert _element(p, plan, sched, a, b) == acc


def test_split_orders_serial_and_pairwise():
    p = _hopper("fp16")
    K = 3 * 128
    a = _bits(RNG.standard_normal(K).astype(np.float16))
    b = _bits(RNG.standard_normal(K).astype(np.float16))
    parts = [_chain_by_hand(p, a, b, range(8 * s, 8 * s + 8), 0) for s in range(3)]
    f = Format.FP32
    serial = _fp32_add(_fp32_add(parts[0], f, parts[1], f), f, parts[2], f)
    pairwise = _fp32_add(_fp32_add(parts[2], f, parts[0], f), f, parts[1], f)
    for reduce, want in ((Reduce.SERIAL, serial), (Reduce.PAIRWISE, pairwise)):
        sched = Schedule(split_k=3, split_tile=128, reduce=reduce)
        assert _element(p, make_plan(sched, K, p.K), sched, a, b) == want


def test_interleaved_tiles_and_promotion_within_a_split():
    p = _hopper("e4m3")
    sched = Schedule(split_k=2, split=SplitMode.INTERLEAVED, split_tile=64, promote=128)
    plan = make_plan(sched, 512, 32)
    # tiles of 2 blocks: split 0 owns tiles 0, 2, 4, 6; chains restart every 128 of its own
    assert plan.splits[0].chains == ((0, 1, 4, 5), (8, 9, 12, 13))
    assert plan.splits[1].chains == ((2, 3, 6, 7), (10, 11, 14, 15))
    contiguous = make_plan(Schedule(split_k=3, split_tile=128), 5 * 128, 32)
    assert [sum(map(len, s.chains)) for s in contiguous.splits] == [8, 8, 4]
    assert p.K == 32


def test_combination_trees():
    assert serial_tree(4) == (((0, 1), 2), 3)
    assert pairwise_tree(1) == 0
    assert pairwise_tree(2) == (1, 0)
    assert pairwise_tree(3) == ((2, 0), 1)
    assert pairwise_tree(4) == ((3, (0, 2)), 1)
    assert pairwise_tree(5) == (((4, (0, 3)), 1), 2)
    for n in range(1, 12):
        assert sorted(tree_leaves(pairwise_tree(n))) == list(range(n))


def test_combine_tree_as_data():
    """combine= gives the splits' tree as data: the plan combines in it, the text reads
    back, the serial, pairwise and halving trees are written as reduce=, and a tree that
    does not add every split once is refused in one line."""
    s = parse_schedule("serial[split_k=4,split=interleaved,split_tile=1,combine=0+3+(1+2)]")
    assert make_plan(s, 8, 1).combine == ((0, 3), (1, 2))
    assert parse_schedule(s.text()) == s
    assert "combine=0+3+(1+2)" in s.text()
    halving = parse_schedule("serial[split_k=4,split=interleaved,split_tile=1,combine=0+2+(1+3)]")
    assert halving.reduce == Reduce.TREE and "reduce=tree" in halving.text()
    assert parse_schedule("serial[split_k=3,split_tile=1,combine=(0+1)+2]").text() == (
        "serial[split_k=3,split_tile=1]"
    )
    assert parse_schedule("serial[split_k=3,split_tile=1,combine=2+0+1]").reduce == Reduce.PAIRWISE
    for bad in ("0+1+1", "0+1", "0+(1", "0+x+2", "0+1+2+3"):
        with pytest.raises(UserError, match="combine"):
            parse_schedule(f"serial[split_k=3,split_tile=1,combine={bad}]")
    with pytest.raises(UserError, match="give one"):
        parse_schedule("serial[split_k=3,split_tile=1,combine=2+0+1,reduce=pairwise]")


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_combine_tree_runs_in_the_engines(engine):
    """Four lanes combined (0+2)+(1+3) are the sum a + b of the lanes' fp32 chains, each
    pair added by one fp32 rounding: checked against numpy's own float32 additions."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal((12, 3)).astype(np.float32)
    hyp = "hopper/serial[split_k=4,split=interleaved,split_tile=1,combine=0+2+(1+3)]"
    got = tc.matmul(hyp, a, b, instr="fma.rn.f32", engine=engine)
    lane = [
        tc.matmul("hopper/serial", a[:, j::4], b[j::4], instr="fma.rn.f32", engine=engine)
        for j in range(4)
    ]
    want = (lane[0] + lane[2]) + (lane[1] + lane[3])
    assert got.dtype == np.float32 and (got.view(np.uint32) == want.view(np.uint32)).all()


# --- the epilogue ----------------------------------------------------------------------


def _rational(bits: int, fmt: Format) -> Fraction:
    v = value_of(bits, fmt)
    assert isinstance(v, Fraction)
    return v


@pytest.mark.parametrize("out", ["bf16", "fp16", "fp32"])
def test_epilogue_one_fma_then_one_rounding(out):
    """D = RN_out(RN_fp32(alpha * acc + beta * C)), checked with exact rationals."""
    p = _hopper("fp16")
    out_fmt = Format.parse(out)
    sched = parse_schedule(f"serial[promote=32,alpha=0.375,beta=-1.5,out={out}]")
    plan = make_plan(sched, 64, 16)
    for _ in range(20):
        a = _bits(RNG.standard_normal(64).astype(np.float16))
        b = _bits(RNG.standard_normal(64).astype(np.float16))
        c = _bits(np.float32([RNG.standard_normal()]))[0]
        acc = 0
        for blocks in (range(0, 2), range(2, 4)):
            acc = _fp32_add(acc, Format.FP32, _chain_by_hand(p, a, b, blocks, 0), p.d_fmt)
        bc = round_fraction(Fraction(-3, 2) * _rational(c, Format.FP32), Format.FP32)
        exact = Fraction(3, 8) * _rational(acc, Format.FP32) + _rational(bc, Format.FP32)
        fp32 = round_fraction(exact, Format.FP32)
        want = round_fraction(_rational(fp32, Format.FP32), out_fmt)
        got = _element(p, plan, sched, a, b, c, Format.FP32)
        assert got == want


def test_fp8_output_saturates_and_rounds_like_ml_dtypes():
    A = np.array([[200.0, 300.0, 1.0, -0.1]], dtype=np.float16)
    B = np.array([[2.0], [2.0], [3.0], [1.0]], dtype=np.float16)
    D = matmul("hopper/serial[out=e4m3]", A, B)
    assert D.dtype == ml_dtypes.float8_e4m3fn and float(D[0, 0]) == 448.0
    D = matmul("hopper/serial[out=e4m3,saturate=false]", A, B)
    assert np.isnan(float(D[0, 0]))
    x = (RNG.standard_normal((64, 16)) * 40).astype(np.float16)
    eye = np.eye(16, dtype=np.float16)
    got = matmul("hopper/serial[out=e4m3]", x, eye)
    want = x.astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert (got.view(np.uint8) == want.view(np.uint8)).all()


# --- schedules as data -----------------------------------------------------------------


def test_named_schedules_load_with_sources():
    named = named_schedules()
    for name in ("serial", "fast-accum", "cublas-fp8", "cutlass-fp8", "deepseek-v3"):
        assert name in named and named[name].source
    assert named["cublas-fp8"].schedule.promote == 128
    assert named["splitk-rtx4060"].schedule.reduce == Reduce.PAIRWISE
    s = parse_schedule("cublas-fp8[split_k=2,reduce=pairwise,out=bf16]")
    assert (s.promote, s.split_k, s.reduce, s.out) == (128, 2, Reduce.PAIRWISE, Format.BF16)
    assert parse_schedule(s.text()) == s


@pytest.mark.parametrize(
    "text,field",
    [
        ("serial[promote=0]", "promote"),
        ("serial[split_k=1025]", "split_k"),
        ("serial[split_k=0]", "split_k"),
        ("serial[split_tile=0]", "split_tile"),
        ("serial[split_tile=5000]", "split_tile"),
        ("serial[order=sideways]", "order"),
        ("serial[split=diagonal]", "split"),
        ("serial[reduce=spiral]", "reduce"),
        ("serial[warp=1]", "warp"),
        ("serial[split_k=4,split_tile=1,warp=3]", "warp"),
        ("serial[split_k=4,split_tile=1,combine=0+2+1+3,warp=2]", "warp"),
        ("serial[reduce_fmt=fp16]", "reduce_fmt"),
        ("serial[reduce_fmt=out]", "reduce_fmt"),
        ("serial[round_partials=some]", "round_partials"),
        ("serial[round_partials=all]", "round_partials"),
        ("serial[operand_round=rz]", "operand_round"),
        ("serial[split_k=2,split_tile=1,c_join=partial,alpha=2]", "c_join"),
        ("serial[epilogue=add]", "epilogue"),
        ("serial[alpha=inf]", "alpha"),
        ("serial[beta=1e39]", "beta"),
        ("serial[out=e2m1]", "out"),
        ("serial[saturate=maybe]", "saturate"),
        ("serial[c_join=left]", "c_join"),
        ("serial[promote=128,c_join=chain]", "c_join"),
        ("serial[split_k=x]", "split_k"),
        ("serial[bogus=1]", "bogus"),
    ],
)
def test_every_field_is_range_checked(text, field):
    with pytest.raises(UserError) as e:
        parse_schedule(text)
    msg = str(e.value)
    assert field in msg and "\n" not in msg


def test_python_construction_is_range_checked():
    for name, r in SCHEDULE_RANGES.items():
        with pytest.raises(UserError, match=name):
            Schedule(**{name: r.hi + 1})
    with pytest.raises(UserError, match="order"):
        Schedule(order="ascending")  # a string, not the enum
    assert Schedule(c_join=CJoin.EPILOGUE).c_in_chain is False


@pytest.mark.parametrize(
    "text",
    ["", "nowhere/serial", "hopper/", "hopper/nosuch", "hopper/serial[", "hopper/serial[x]"],
)
def test_parse_errors_are_one_line(text):
    with pytest.raises(UserError) as e:
        parse_gemm(text)
    assert "\n" not in str(e.value)


def test_plan_errors_name_the_field():
    with pytest.raises(UserError, match="promote=100 is not a multiple"):
        make_plan(Schedule(promote=100), 256, 32)
    with pytest.raises(UserError, match="split_k=4: K=256 has 2 k-tile"):
        make_plan(Schedule(split_k=4), 256, 32)
    with pytest.raises(UserError, match="split_tile=48"):
        make_plan(Schedule(split_k=2, split_tile=48), 256, 32)


def test_a_contiguous_split_without_a_k_tile_is_refused_in_one_line():
    # K=512 in four 128-wide tiles: three contiguous splits of ceil(4/3) = 2 tiles leave
    # the third empty (it would be split_k=2 with a +0 partial added)
    with pytest.raises(UserError) as e:
        make_plan(Schedule(split_k=3), 512, 32)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == (
        "split_k=3: K=512 has 4 k-tile(s) of 128; contiguous splits of 2 tile(s) leave 1 "
        "split(s) without a k-tile; allowed: split_k in 1, 2, 4 for this K (or "
        "split=interleaved)"
    )
    # five tiles in four splits: q = 2 leaves the fourth empty; in three: 2, 2, 1
    with pytest.raises(UserError, match="split_k=4: K=640 has 5 k-tile"):
        make_plan(Schedule(split_k=4), 640, 32)
    assert [sum(map(len, s.chains)) for s in make_plan(Schedule(split_k=3), 640, 32).splits] == [
        8,
        8,
        4,
    ]
    # interleaved splits never leave one empty while there are as many tiles as splits
    inter = make_plan(Schedule(split_k=3, split=SplitMode.INTERLEAVED), 512, 32)
    assert [len(s.chains[0]) for s in inter.splits] == [8, 4, 4]
    assert contiguous_splits(4) == [1, 2, 4]
    assert contiguous_splits(5) == [1, 2, 3, 5]
    assert contiguous_splits(7) == [1, 2, 3, 4, 7]


@pytest.mark.parametrize("tiles", range(1, 13))
def test_every_allowed_plan_gives_each_split_a_k_tile(tiles):
    for S in range(1, tiles + 1):
        for mode in SplitMode:
            sched = Schedule(split_k=S, split=mode)
            try:
                plan = make_plan(sched, tiles * 128, 32)
            except UserError:
                assert mode == SplitMode.CONTIGUOUS and S not in contiguous_splits(tiles)
                continue
            assert len(plan.splits) == S and all(s.chains[0] for s in plan.splits)
            assert sorted(b for s in plan.splits for c in s.chains for b in c) == list(
                range(tiles * 4)
            )


def test_equivalent_plan_merges_splits_of_one_promoted_chain_only():
    one = make_plan(Schedule(promote=128), 256, 32)
    two = make_plan(Schedule(split_k=2, promote=128), 256, 32)
    assert two != one and equivalent_plan(two) == one == equivalent_plan(one)
    # two promoted chains a split: (c0 + c1) + (c2 + c3) is not ((c0 + c1) + c2) + c3
    four = make_plan(Schedule(split_k=2, promote=128), 512, 32)
    assert equivalent_plan(four) == four
    # unpromoted splits: the partial is the chain's d, -0 stays -0
    plain = make_plan(Schedule(split_k=2), 256, 32)
    assert equivalent_plan(plain) == plain
    # three partials added pairwise, (p2 + p0) + p1, is another order
    pair = make_plan(Schedule(split_k=3, promote=128, reduce=Reduce.PAIRWISE), 384, 32)
    assert equivalent_plan(pair) == pair
    ser = make_plan(Schedule(split_k=3, promote=128), 384, 32)
    assert equivalent_plan(ser) == make_plan(Schedule(promote=128), 384, 32)


def test_default_instructions_are_data():
    assert default_instruction("hopper", Format.E4M3, Format.E4M3).startswith("wgmma.m64n8k32")
    assert default_instruction("ampere", Format.BF16, Format.BF16) == "m16n8k16.f32.bf16.bf16.f32"
    with pytest.raises(UserError, match="volta has no GEMM instruction for bf16"):
        default_instruction("volta", Format.BF16, Format.BF16)


def test_special_values_canonical_nan_and_zero_sign():
    """NaN and Inf inputs give the architecture's canonical NaN in every output format
    (NVIDIA: 0x7FFFFFFF, bf16 0x7FFF, e4m3 0x7F); an all-zero product is +0."""
    A = np.array([[np.nan, 1.0], [np.inf, -np.inf], [-0.0, -0.0]], dtype=np.float16)
    B = np.array([[1.0], [1.0]], dtype=np.float16)
    B = np.concatenate([B, np.zeros((14, 1), np.float16)])
    A = np.concatenate([A, np.zeros((3, 14), np.float16)], axis=1)
    d = matmul("hopper", A, B).view(np.uint32)[:, 0]
    assert d.tolist() == [0x7FFFFFFF, 0x7FFFFFFF, 0]
    d = matmul("hopper/serial[out=bf16]", A, B).view(np.uint16)[:, 0]
    assert d.tolist() == [0x7FFF, 0x7FFF, 0]
    d = matmul("hopper/cublas-fp8[out=e4m3]", A, B).view(np.uint8)[:, 0]
    assert d.tolist() == [0x7F, 0x7F, 0]
