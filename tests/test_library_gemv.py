"""cuBLAS's GEMV-shaped calls (M = 1 or N = 1) on Hopper: the CUDA-core kernels' orders
as schedules (a warp of 32 lanes whose last lanes may hold no k, `warp=` over a short
group), checked against exact rationals, and the decision tables schedules/library/
10-gemv-*.toml replayed on recorded H200 and H100 calls (fit and held-out): the decided
recipe reproduces them bit for bit, a plausible wrong recipe does not."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.formats import Format, Rounding, round_fraction
from tensorcore_smt.gemm.library_rules import decide, tables
from tensorcore_smt.gemm.schedule import Reduce, halving_of, parse_schedule, reduce_tree
from tensorcore_smt.hardware.library_fit import fit_calls, heldout_calls, mismatches

FFMA = "fma.rn.f32"
RNG = np.random.default_rng(4601)


def _rn32(q: Fraction) -> Fraction:
    bits = round_fraction(q, Format.FP32, Rounding.RNE)
    return Fraction(float(np.array([bits], dtype=np.uint32).view(np.float32)[0]))


def _warp_sum(lanes: list[Fraction]) -> Fraction:
    """What lane 0 holds after x += shfl_down(x, h), h = 16, 8, 4, 2, 1, over 32 lanes
    (lanes past len(lanes) hold +0), each add rounded to fp32."""
    x = lanes + [Fraction(0)] * (32 - len(lanes))
    h = 16
    while h:
        x = [_rn32(x[i] + x[i + h]) for i in range(h)]
        h //= 2
    return x[0]


def test_a_short_warp_is_the_halving_tree_of_32_lanes_with_empty_lanes_dropped():
    assert halving_of([0, 1, 2], 4) == ((0, 2), 1)
    assert reduce_tree(20, Reduce.SERIAL, 32)[0][0][0][0] == (0, 16)  # 0 + 16 first
    assert reduce_tree(20, Reduce.SERIAL, 32) != reduce_tree(20, Reduce.TREE)
    # 16 of 32 lanes: the upper half adds nothing, the tree is halving over 16
    assert parse_schedule("serial[split_k=16,split_tile=1,warp=32]").text() == (
        "serial[split_k=16,split_tile=1,reduce=tree]"
    )
    with pytest.raises(tc.UserError, match="warp=3"):
        parse_schedule("serial[split_k=4,split_tile=1,warp=3]")


@pytest.mark.parametrize("K", [45, 396, 999])
def test_gemv_lanes_of_contiguous_chunks_against_exact_fmas(K):
    """A warp per output: lane l takes the contiguous chunk [l*q, (l+1)*q), q =
    ceil(K/32), as an fp32 FMA chain from +0, the 32 lanes (some empty) added by the
    shuffle tree: split_k = ceil(K/q) interleaved tiles of q and warp=32."""
    A = (RNG.standard_normal((1, K)) * 2.0 ** RNG.integers(-10, 10, (1, K))).astype(np.float32)
    B = (RNG.standard_normal((K, 3)) * 2.0 ** RNG.integers(-10, 10, (K, 3))).astype(np.float32)
    q = -(-K // 32)
    hyp = f"hopper/serial[split_k={-(-K // q)},split=interleaved,split_tile={q},warp=32]"
    for engine in ("numpy", "compiled"):
        got = np.asarray(tc.matmul(hyp, A, B, instr=FFMA, engine=engine))
        for j in range(3):
            lanes = []
            for lo in range(0, K, q):
                d = Fraction(0)
                for k in range(lo, min(lo + q, K)):
                    d = _rn32(Fraction(float(A[0, k])) * Fraction(float(B[k, j])) + d)
                lanes.append(d)
            assert Fraction(float(got[0, j])) == _warp_sum(lanes), (engine, j)


# --- the decision tables on recorded calls ---------------------------------------------

GEMV_TABLES = [t for t in tables() if t.name.startswith("10-gemv")]
ONE_WARP = "hopper/serial[split_k=32,split=interleaved,split_tile=1,warp=32]"

# (gpu, held out?, class, shape, kind, table that decides, a plausible wrong recipe, its
# instruction): the lanes of the other CUDA-core kernels, one chain, another split count
CASES = [
    # fp16/bf16 with aligned sides: the tensor cores, not an FFMA GEMV
    ("h200", False, "matmul.bf16.rr1", (1, 1024, 1024), "cancel", "10-gemv-0-tensor",
     ONE_WARP, "full-fp32"),
    # the LLM shapes: the heuristic's split count per GPU
    ("h200", False, "linear.bf16.rr1", (1, 4096, 16384), "cancel", "10-gemv-0-llm-linear-bf16",
     "hopper/serial[split_k=2,split_tile=64]", None),
    ("h200", True, "linear.bf16.rr1", (1, 4096, 11008), "cancel", "10-gemv-0-llm-linear-bf16",
     "hopper/serial[split_k=2,split_tile=64]", None),
    ("h100", False, "linear.bf16.rr1", (1, 4096, 11008), "cancel", "10-gemv-0-llm-linear-bf16",
     "hopper/serial[split_k=3,split_tile=64]", None),
    # dot products (N = 1, or F.linear / B column-major): halves, chunks, k mod 32
    ("h200", False, "matmul.fp32", (691, 1, 18), "cancel", "10-gemv-matmul",
     "hopper/serial", "full-fp32"),
    ("h200", False, "matmul.bf16.rr1", (882, 1, 442), "cancel", "10-gemv-matmul",
     ONE_WARP, "full-fp32"),
    ("h200", False, "linear.fp32", (1, 14, 90), "wide", "10-gemv-dot", ONE_WARP, "full-fp32"),
    ("h100", True, "matmul-bt.tf32", (13, 1, 89), "cancel", "10-gemv-dot", ONE_WARP,
     "full-fp32"),
    # the untransposed GEMV (matmul at M = 1, A column-major at N = 1): k-tiles to threads
    ("h200", False, "matmul.fp32", (1, 1024, 1024), "cancel", "10-gemv-matmul",
     ONE_WARP, "full-fp32"),
    ("h200", False, "matmul.fp32", (1, 29, 587), "cancel", "10-gemv-matmul",
     "hopper/serial[split_k=2,split=interleaved,split_tile=64]", "full-fp32"),
    ("h200", False, "matmul.tf32", (1, 4096, 4096), "cancel", "10-gemv-matmul",
     "hopper/serial[operand_round=rne]", None),
    ("h100", True, "bmm.fp32", (1, 4096, 4096), "cancel", "10-gemv-bmm",
     "hopper/serial[split_k=16,split=interleaved,split_tile=64,reduce=tree]", "full-fp32"),
    ("h100", True, "matmul-at.fp32", (334, 1, 6180), "cancel", "10-gemv-at",
     "hopper/serial[split_k=16,split=interleaved,split_tile=64,reduce=tree]", "full-fp32"),
    ("h100", True, "matmul-at.tf32", (1, 2, 422), "wide", "10-gemv-at",
     "hopper/serial[split_k=2,split=interleaved,split_tile=64]", "full-fp32"),
    # dot products with a long output side: 16 lanes x 8 k-blocks (custom option 11)
    ("h200", True, "linear.fp32", (1, 4096, 4096), "cancel", "10-gemv-1-long-m1",
     ONE_WARP, "full-fp32"),
    ("h100", True, "matmul.tf32", (4096, 1, 4096), "cancel", "10-gemv-1-long-n1",
     ONE_WARP, "full-fp32"),
    ("h200", True, "bmm.fp32", (4096, 1, 4096), "wide", "10-gemv-1-long-n1",
     ONE_WARP, "full-fp32"),
]  # fmt: skip


def _recorded(gpu: str, held: bool, cls: str, m: int, n: int, k: int, kind: str):
    """The first recorded call of that class, shape and input kind in the split."""
    for c in heldout_calls(gpu) if held else fit_calls(gpu):
        if (c.cls.name, c.m, c.n, c.k, c.kind.value) == (cls, m, n, k, kind):
            return c
    raise AssertionError(f"no recorded {cls} {m}x{n}x{k} {kind} call on {gpu}")


@pytest.mark.parametrize(
    "gpu,held,cls,shape,kind,table,wrong,wrong_instr",
    CASES,
    ids=[f"{c[0]}-{'held' if c[1] else 'fit'}-{c[2]}-{'x'.join(map(str, c[3]))}" for c in CASES],
)
def test_the_decided_recipe_reproduces_the_recorded_call(
    gpu, held, cls, shape, kind, table, wrong, wrong_instr
):
    call = _recorded(gpu, held, cls, *shape, kind)
    got = decide(cls, *shape, gpu, GEMV_TABLES)
    assert got is not None and got[2].name == table
    recipe, instr = got[0], got[1] or "default"
    assert mismatches(call, recipe, instr) == 0
    assert mismatches(call, wrong, wrong_instr or "default") > 0


def _lanes_by_kblock_tree() -> str:
    """The combine tree of 16 lanes x 8 k-blocks: lane t's partials 16*u + t added in
    k-block order u, then the 16 lane sums in lane order."""
    lane = ["+".join(str(16 * u + t) for u in range(8)) for t in range(16)]
    return lane[0] + "".join(f"+({x})" for x in lane[1:])


def test_long_dot_recipe_against_exact_fmas():
    """The recipe 10-gemv-1-long-* decide (K = 333: k-blocks of 42, the last 39) against
    exact-rational FMA chains: lane t of 16 takes k = t mod 16 of each k-block as a chain
    from +0, each lane's 8 chains are added in k-block order, then the lanes in order."""
    K = 333
    got = decide("linear.fp32", 1, 3196, K, "h200", GEMV_TABLES)
    assert got is not None and got[2].name == "10-gemv-1-long-m1"
    assert f"combine={_lanes_by_kblock_tree()}" in got[0]
    A = (RNG.standard_normal((1, K)) * 2.0 ** RNG.integers(-10, 10, (1, K))).astype(np.float32)
    B = (RNG.standard_normal((K, 2)) * 2.0 ** RNG.integers(-10, 10, (K, 2))).astype(np.float32)
    q = -(-K // 8)
    for engine in ("numpy", "compiled"):
        out = np.asarray(tc.matmul(got[0], A, B, instr=FFMA, engine=engine))
        for j in range(2):
            total = None
            for t in range(16):
                lane = None
                for u in range(8):
                    d = Fraction(0)
                    for k in range(u * q + t, min((u + 1) * q, K), 16):
                        d = _rn32(Fraction(float(A[0, k])) * Fraction(float(B[k, j])) + d)
                    lane = d if lane is None else _rn32(lane + d)
                total = lane if total is None else _rn32(total + lane)
            assert Fraction(float(out[0, j])) == total, (engine, j)


def test_long_dot_lanes_take_k_blocks_not_interleaved_ranges():
    """At 1 x 4096 x 4096 (held out, H100) the 8 k-ranges of a lane are consecutive
    k-blocks of K/8: the same 128 chains over k mod 128 (the ranges interleaved in
    128-wide steps) and the same tree miss."""
    call = _recorded("h100", True, "linear.fp32", 1, 4096, 4096, "normal")
    got = decide("linear.fp32", 1, 4096, 4096, "h100", GEMV_TABLES)
    assert got is not None
    assert mismatches(call, got[0], "full-fp32") == 0
    wrong = (
        "hopper/serial[split_k=128,split=interleaved,split_tile=1,"
        f"combine={_lanes_by_kblock_tree()}]"
    )
    assert mismatches(call, wrong, "full-fp32") > 0


def test_gemv_tables_decide_only_m1_or_n1_shapes():
    """Every rule of the GEMV tables is bounded to M = 1 or N = 1: other shapes fall
    through to the later tables."""
    assert len(GEMV_TABLES) >= 4
    for t in GEMV_TABLES:
        for r in t.rules:
            assert r.when.get("m_max") == 1 or r.when.get("n_max") == 1, (t.name, r)
        assert t.decide(2, 2, 64, "h200") is None


@pytest.mark.slow
def test_a_short_warp_changes_some_output_on_the_solvers():
    """The solvers build the same tree: 5 lanes in a warp of 8 and the halving tree of 5
    partials differ on a witness that the emulator re-checks (about a minute)."""
    from tensorcore_smt.smt.gemm_query import make_gemm_query
    from tensorcore_smt.smt.gemm_solve import answer_gemm
    from tensorcore_smt.smt.query import Goal
    from tensorcore_smt.smt.solve import Limits, Verdict

    x = "hopper/serial[split_k=5,split=interleaved,split_tile=1,warp=8]"
    y = "hopper/serial[split_k=5,split=interleaved,split_tile=1,reduce=tree]"
    o = answer_gemm(
        make_gemm_query(x, y, 5, FFMA, Goal.DIFFER), Limits(solver="bitwuzla", timeout=300.0)
    )
    assert o.verdict == Verdict.WITNESS, o.note
    w = o.witness
    assert w.goal_ok and w.emulated == w.solver_outputs and w.outputs[0] != w.outputs[1]
