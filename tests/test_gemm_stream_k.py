"""Stream-K kernels as schedule data (gemm/schedule.py stream_k, tile_m, tile_n, raster,
sk_hybrid; gemm/plan.py stream_k_groups): the plan of an output element depends on its
output tile's place in the kernel's iteration space.

The references here divide the iteration space themselves, in plain Python (tiles times
k-iterations, cut into G contiguous ranges as equal as integers allow, the first ones one
longer), and sum each tile's parts independently of the emulator's plans: exact rationals
rounded once per fp32 FMA (`fma.rn.f32`), the instruction model run step by step with
tc.simulate for an MMA, the fix-up in numpy fp32 in worker order, or the tile's cut
written as another schedule (`kblocks=`) run element by element.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format, Rounding, round_fraction
from tensorcore_smt.gemm.schedule import parse_schedule

FFMA = "fma.rn.f32"
F16 = "wgmma.m64n8k16.f32.f16.f16"
RNG = np.random.default_rng(4601)


def _u32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def _f32(q: Fraction) -> np.float32:
    return np.array([round_fraction(q, Format.FP32, Rounding.RNE)], np.uint32).view(np.float32)[0]


def ref_tiles(B: int, M: int, N: int, tm: int, tn: int, iters: int, G: int, raster="along-n",
              hybrid="none"):  # fmt: skip
    """{(bi, tile row, tile col): [(lo, hi) k-iteration parts]} by walking the iteration
    space iteration by iteration and asking which worker owns each."""
    TM, TN = -(-M // tm), -(-N // tn)
    order = []
    for bi in range(B):
        if raster == "along-n":
            order += [(bi, r, c) for r in range(TM) for c in range(TN)]
        else:
            order += [(bi, r, c) for c in range(TN) for r in range(TM)]
    T = len(order)
    if hybrid == "dp-sk":
        sk = range((T // G) * G, T)
    elif hybrid == "sk-dp":
        sk = range(0, T % G + G if T >= G else T)
    else:
        sk = range(T)
    total = len(sk) * iters
    owner = []  # worker of each global iteration: G near-equal contiguous ranges
    for w in range(G):
        owner += [w] * (total // G + (1 if w < total % G else 0))
    out = {}
    for i, key in enumerate(order):
        if i not in sk:
            out[key] = [(0, iters)]
            continue
        j = sk.index(i)
        ws = [owner[j * iters + k] for k in range(iters)]
        parts, lo = [], 0
        for k in range(1, iters + 1):
            if k == iters or ws[k] != ws[lo]:
                parts.append((lo, k))
                lo = k
        out[key] = parts
    return out


def _ffma_reference(A, Bm, sched_tiles, tm, tn, grain):
    """fp32 FMA chains (exact product plus addend, rounded once), one per part from +0,
    the parts added in fp32 in worker order."""
    M, K = A.shape
    N = Bm.shape[1]
    D = np.zeros((M, N), np.float32)
    for (_, r, c), parts in sched_tiles.items():
        for m in range(r * tm, min((r + 1) * tm, M)):
            for n in range(c * tn, min((c + 1) * tn, N)):
                acc = None
                for lo, hi in parts:
                    d = np.float32(0.0)
                    for k in range(lo * grain, min(hi * grain, K)):
                        d = _f32(
                            Fraction(float(A[m, k])) * Fraction(float(Bm[k, n]))
                            + Fraction(float(d))
                        )
                    acc = d if acc is None else np.float32(acc + d)
                D[m, n] = acc
    return D


@pytest.mark.parametrize(
    ("G", "tm", "tn", "grain", "raster", "hybrid"),
    [
        (4, 2, 2, 16, "along-n", "none"),
        (5, 2, 3, 8, "along-m", "none"),
        (4, 2, 2, 8, "along-n", "dp-sk"),
        (3, 1, 2, 8, "along-n", "sk-dp"),
    ],
)
def test_ffma_matches_exact_reference(G, tm, tn, grain, raster, hybrid):
    M, N, K = 5, 4, 40
    A = RNG.standard_normal((M, K)).astype(np.float32)
    Bm = RNG.standard_normal((K, N)).astype(np.float32)
    iters = -(-K // grain)
    tiles = ref_tiles(1, M, N, tm, tn, iters, G, raster, hybrid)
    want = _ffma_reference(A, Bm, tiles, tm, tn, grain)
    s = (
        f"hopper/serial[stream_k={G},tile_m={tm},tile_n={tn},split_tile={grain},"
        f"raster={raster},sk_hybrid={hybrid}]"
    )
    for eng in ("numpy", "compiled"):
        got = tc.matmul(s, A, Bm, instr=FFMA, engine=eng)
        assert np.array_equal(_u32(got), _u32(want)), eng
    assert any(len(p) > 1 for p in tiles.values())  # some tile really is cut


def test_mma_chains_by_simulate_match():
    """fp16 wgmma (K = 16 a step): each part a chain of tc.simulate steps from +0, the
    parts added in numpy fp32 in worker order."""
    M, N, K, G, grain = 4, 4, 96, 3, 32
    A = RNG.standard_normal((M, K)).astype(np.float16)
    Bm = RNG.standard_normal((K, N)).astype(np.float16)
    tiles = ref_tiles(1, M, N, 2, 2, K // grain, G)
    assert sorted(len(p) for p in tiles.values()) == [1, 1, 2, 2]
    want = np.zeros((M, N), np.uint32)
    for (_, r, c), parts in tiles.items():
        for m in range(2 * r, 2 * r + 2):
            for n in range(2 * c, 2 * c + 2):
                acc = None
                for lo, hi in parts:
                    d = np.zeros(1, np.uint32)
                    for k0 in range(lo * grain, hi * grain, 16):
                        a = A[m, k0 : k0 + 16].view(np.uint16)[None]
                        b = Bm[k0 : k0 + 16, n].view(np.uint16)[None]
                        d = tc.simulate("hopper", F16, a, b, d).astype(np.uint32)
                    x = d.view(np.float32)[0]
                    acc = x if acc is None else np.float32(acc + x)
                want[m, n] = _u32(acc)[0]
    s = f"hopper/serial[stream_k={G},tile_m=2,tile_n=2,split_tile={grain}]"
    for eng in ("numpy", "compiled"):
        assert np.array_equal(_u32(tc.matmul(s, A, Bm, engine=eng)), want), eng


def test_tiles_with_identical_inputs_give_different_bits():
    """All four 2x2 tiles read the same rows and columns; the tiles the worker boundaries
    cut sum in another order than the whole ones, and their bits differ."""
    K = 64
    for _ in range(20):
        a = RNG.standard_normal((2, K)).astype(np.float32)
        b = RNG.standard_normal((K, 2)).astype(np.float32)
        A, Bm = np.vstack([a, a]), np.hstack([b, b])
        D = tc.matmul(
            "hopper/serial[stream_k=3,tile_m=2,tile_n=2,split_tile=16]", A, Bm, instr=FFMA
        )
        blocks = [_u32(D[r : r + 2, c : c + 2]) for r in (0, 2) for c in (0, 2)]
        if not np.array_equal(blocks[0], blocks[1]):
            serial = tc.matmul("hopper/serial", A, Bm, instr=FFMA)
            assert np.array_equal(blocks[0], _u32(serial[:2, :2]))  # tile 0 is whole
            return
    pytest.fail("no witness in 20 draws")


@pytest.mark.parametrize(
    "extra",
    [
        "",
        ",order=descending,reduce=pairwise",
        ",raster=along-m,sk_hybrid=sk-dp",
        ",sk_hybrid=dp-sk,beta=0.5",
    ],
)
def test_fp8_promoted_batched_matches_per_tile_schedules(extra):
    """A batched FP8 GEMM with promotion, C, edge tiles: each output equals a 1xK product
    under the non-stream-K schedule its tile's cut reads as (`kblocks=` the parts, each a
    split promoted alike, added by the same reduce), and the engines agree."""
    Bt, M, N, K, G, grain = 2, 5, 3, 160, 7, 32
    A = RNG.standard_normal((Bt, M, K)).astype(ml_dtypes.float8_e4m3fn)
    Bm = RNG.standard_normal((Bt, K, N)).astype(ml_dtypes.float8_e4m3fn)
    C = RNG.standard_normal((Bt, M, N)).astype(np.float32)
    base = f"promote=64,tile_m=2,tile_n=2,split_tile={grain}" + extra
    s = f"hopper/serial[stream_k={G},{base}]"
    got = {
        e: _u32(tc.matmul(s, A, Bm, C, engine=e, out_dtype=np.float32))
        for e in ("numpy", "compiled")
    }
    assert np.array_equal(got["numpy"], got["compiled"])
    opts = dict(x.split("=") for x in base.split(","))
    tiles = ref_tiles(Bt, M, N, 2, 2, K // grain, G, opts.get("raster", "along-n"),
                      opts.get("sk_hybrid", "none"))  # fmt: skip
    keep = ",".join(
        f"{k}={v}" for k, v in opts.items() if k in ("promote", "order", "reduce", "beta")
    )
    cut = 0
    for (bi, r, c), parts in tiles.items():
        sizes = "+".join(str((hi - lo) * grain) for lo, hi in parts)
        one = f"hopper/serial[c_join=epilogue,{keep}" + (
            f",kblocks={sizes}]" if len(parts) > 1 else "]"
        )
        cut += len(parts) > 1
        for m in range(2 * r, min(2 * r + 2, M)):
            for n in range(2 * c, min(2 * c + 2, N)):
                d = tc.matmul(one, A[bi, m : m + 1], Bm[bi, :, n : n + 1], C[bi, m : m + 1, n : n + 1],
                              out_dtype=np.float32)  # fmt: skip
                assert _u32(d)[0, 0] == got["numpy"][bi, m, n], (bi, m, n, parts)
    assert cut


def test_schedule_text_round_trips_and_whole_tiles_are_serial():
    s = parse_schedule("serial[stream_k=132,tile_m=64,tile_n=256,raster=along-m,sk_hybrid=dp-sk]")
    assert parse_schedule(s.text()) == s
    # one worker covers every tile whole: the serial chain (C in the epilogue)
    A = RNG.standard_normal((3, 24)).astype(np.float32)
    Bm = RNG.standard_normal((24, 5)).astype(np.float32)
    one = tc.matmul("hopper/serial[stream_k=1,tile_m=2,tile_n=2,split_tile=4]", A, Bm, instr=FFMA)
    assert np.array_equal(_u32(one), _u32(tc.matmul("hopper/serial", A, Bm, instr=FFMA)))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("serial[stream_k=0]", "stream_k=0 is out of range; allowed: 1..4096 or none"),
        ("serial[tile_m=64]", "tile_m=64 describes a stream-K kernel"),
        ("serial[sk_hybrid=dp-sk]", "sk_hybrid=dp-sk describes a stream-K kernel"),
        ("serial[stream_k=4,tile_n=0]", "tile_n=0 is out of range; allowed: 1..4096"),
        ("serial[stream_k=4,raster=diagonal]", "raster: 'diagonal' is not one of along-n, along-m"),
        ("serial[stream_k=4,split_k=2]", "split_k=2 cannot be combined with it"),
        ("serial[stream_k=4,reduce_fmt=out]", "reduce_fmt=out cannot be combined with it"),
        ("serial[stream_k=4,c_join=chain]", "c_join=chain cannot be combined with it"),
    ],
)
def test_bad_values_one_line(text, says):
    with pytest.raises(UserError) as e:
        parse_schedule(text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_split_tile_not_a_multiple_of_the_instruction_k_is_refused():
    A = np.ones((2, 64), np.float16)
    with pytest.raises(UserError, match="split_tile=8 is not a multiple of the instruction's K=16"):
        tc.matmul("hopper/serial[stream_k=2,split_tile=8]", A, A.T)


def test_solvers_refuse_stream_k_in_one_line():
    from tensorcore_smt.smt.gemm_query import make_gemm_query

    with pytest.raises(UserError) as e:
        make_gemm_query("hopper/serial[stream_k=2,split_tile=16]", "hopper/serial", 64)
    msg = str(e.value)
    assert "each output tile has its own plan" in msg and "\n" not in msg


def test_torch_engine_agrees():
    pytest.importorskip("torch")
    A = RNG.standard_normal((5, 64)).astype(np.float16)
    Bm = RNG.standard_normal((64, 3)).astype(np.float16)
    C = RNG.standard_normal((5, 3)).astype(np.float32)
    s = "hopper/serial[stream_k=4,tile_m=2,tile_n=2,split_tile=16,beta=0.5]"
    got = [_u32(np.asarray(tc.matmul(s, A, Bm, C, engine=e))) for e in ("numpy", "torch")]
    assert np.array_equal(got[0], got[1])
