"""Exact accumulation at the GEMM level (certify/exact_gemm.py): the schedule argument
(chains by induction, fp32 promotions and split partials while K m^2 <= 2^24) against
the serial-chain induction of certify/exact.py, its monotonicity in K (the bisection's
premise) checked on every K of a range, random and extreme integer rows through
tc.matmul exact up to the proved K, and the witness just above it."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.api import bits_dtype
from tensorcore_smt.certify.exact_gemm import _exact_at, _gemm, gemm_exactness
from tensorcore_smt.cli import main
from tensorcore_smt.formats import round_fraction, value_of
from tensorcore_smt.gemm.emulate import matmul

BF16 = "m16n8k16.f32.bf16.bf16.f32"
FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"


@pytest.mark.parametrize(
    "hyp",
    [
        "hopper/serial",
        "hopper/serial[promote=128]",
        "hopper/serial[split_k=4]",
        "hopper/serial[split_k=3,split=interleaved,split_tile=64]",
        "hopper/serial[split_k=2,promote=64]",
    ],
)
def test_the_predicate_only_fails_from_some_K_on(hyp):
    # the bisection's premise: once a K is not proved, no larger K is
    h, p, _ = _gemm(hyp, BF16)
    m2 = 127**2
    seen_false = False
    for blocks in range(1, 160):
        ok, _ = _exact_at(h, p, blocks * p.K, m2, (1 << 24) - 16 * m2)
        assert not (ok and seen_false), blocks
        seen_false |= not ok


def test_serial_schedule_agrees_with_the_chain_induction():
    r = gemm_exactness("hopper/serial", 7, instr=BF16)
    assert r.K == 1040 and r.witness_K == 1056 and r.witness_error == 1


@pytest.mark.slow  # about 16 s
def test_promotion_extends_exact_fp8_sums_to_the_fp32_limit():
    # FP8 wgmma rounds into E8M13: a chain is exact for 320 products; cuBLAS's promotion
    # every 128 keeps each chain short, so only the fp32 sum limits it: K 49 <= 2^24
    fast = gemm_exactness("hopper/fast-accum", 3, instr=FP8)
    promoted = gemm_exactness("hopper/cublas-fp8", 3, instr=FP8)
    assert fast.K == 320 and fast.witness_K == 352
    assert promoted.K == 342368 and promoted.K * 49 <= 1 << 24 < (promoted.K + 32) * 49
    assert promoted.witness_K == 342400 and promoted.witness_error == 1


def _run(hyp, instr, a_vals, b_vals):
    h, p, _ = _gemm(hyp, instr)
    A = np.array(
        [[round_fraction(Fraction(v), p.a_fmt) for v in row] for row in a_vals],
        dtype=bits_dtype(p.a_fmt),
    )
    B = np.array(
        [[round_fraction(Fraction(v), p.b_fmt) for v in col] for col in b_vals],
        dtype=bits_dtype(p.b_fmt),
    )
    D = np.asarray(matmul(h, A, B, instr=instr, engine="compiled"))
    return [[value_of(int(x), p.d_fmt) for x in row] for row in D.view(np.uint32)]


def test_rows_up_to_the_proved_K_are_exact_through_matmul():
    hyp = "hopper/serial[split_k=4]"
    r = gemm_exactness(hyp, 7, instr=BF16, witness=False)
    K, m = r.K, 127
    rng = random.Random(2)
    a = [[m] * K, [-m] * K] + [
        [rng.choice([-m, m, rng.randint(-m, m)]) for _ in range(K)] for _ in range(6)
    ]
    b = [[m] * 8 for _ in range(K)]
    for k in range(K):
        for j in range(1, 8):
            b[k][j] = rng.choice([m, -m, rng.randint(-m, m)])
    D = _run(hyp, BF16, a, b)
    for i, row in enumerate(a):
        for j in range(8):
            assert D[i][j] == sum(row[k] * b[k][j] for k in range(K))


def test_cli_reports_the_schedule():
    # bf16 slices promoted every 64: chains of four instructions, the fp32 sum stops it
    r = CliRunner().invoke(
        main,
        ["exact", "hopper/serial[promote=64]", "--slices", "7", "--instr", BF16, "--json"],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["schedule"] == "hopper/serial[promote=64]" and data["gemm_exact_K"] == 1040
    assert "2^24" in data["gemm_binding"]
    assert data["chain_exact_K"] == 1040  # the serial chain of the same instruction
    assert data["gemm_witness_K"] == 1056 and data["gemm_witness_error"] == "1/1"


def test_cli_refuses_a_bad_schedule_in_one_line_before_any_search():
    for hyp, words in [
        ("hopper/bogus", "unknown schedule"),
        ("hopper/serial[alpha=2]", "alpha = 1"),
    ]:
        r = CliRunner().invoke(main, ["exact", hyp, "--slices", "7", "--instr", BF16])
        assert r.exit_code == 2, r.output
        assert words in r.output and len(r.output.strip().splitlines()) == 1
