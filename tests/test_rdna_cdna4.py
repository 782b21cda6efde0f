"""RDNA3/RDNA4 (rdna-dot: the gfx1151 report's adder, rocm-systems #12056) and CDNA4
(gfx950): the report's rules as exact bits, the engines against exact rationals where
the rules make the unit exact, the block-scaled f8f6f4 forms, a solver witness, and
one-line errors."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, Rounding, round_fraction, value_of
from tensorcore_smt.model.params import Opposing
from tensorcore_smt.solvers.runner import available
from tensorcore_smt.spec.presets import PRESETS

DOT_F16 = "v_dot2_f32_f16"
DOT_BF16 = "v_dot2_f32_bf16"


def one(variant: str, instr: str, a, b, c, **kw) -> int:
    return api.simulate_one(variant, instr, a, b, c, **kw)


def test_presets_and_names():
    r3, r4 = PRESETS["rdna3"].instructions, PRESETS["rdna4"].instructions
    assert set(r3) < set(r4)
    assert {"v_wmma_f32_16x16x16_bf8_fp8", "v_wmma_bf16_16x16x16_bf16"} <= set(r4)
    p = r4["v_wmma_f32_16x16x16_fp8_bf8"].params
    assert (p.a_fmt, p.b_fmt, p.K, p.L) == (Format.E4M3, Format.E5M2, 16, 4)  # OCP, dot4
    p = r3[DOT_BF16].params
    assert p.opposing == Opposing.ONES and p.flush_inputs and not p.flush_c
    assert r3["v_wmma_bf16_16x16x16_bf16"].params.flush_c  # a bf16 c is a bf16 input
    c4 = PRESETS["cdna4"].instructions
    assert "v_mfma_f32_16x16x8_xf32" not in c4  # gfx950 has no xf32 MFMA
    p = c4["v_mfma_scale_f32_16x16x128_f8f6f4_fp6_bf6"].params
    assert (p.a_fmt, p.b_fmt, p.K, p.scale_fmt, p.n_scales) == (
        Format.E2M3,
        Format.E3M2,
        128,
        Format.UE8M0,
        4,
    )
    assert c4["v_mfma_f32_16x16x32_fp8_fp8"].params.a_fmt == Format.E4M3  # OCP on gfx950


def test_dropped_end_around_carry_turns_a_tie_down():
    """c = 1 + 2^-22, a0 b0 = -2^-24: the exact sum 1 + 3 2^-24 is a tie that RNE takes
    up to 1 + 2^-22. Opposing c's sign, the product enters as the bit flip of its
    magnitude, 2^-(F) short (F = 48), so the sum lies below the tie: 1 + 2^-23."""
    a, b = [0x0C00, 0], [0x8C00, 0]  # 2^-12 * -2^-12
    assert one("rdna3", DOT_F16, a, b, 0x3F800002) == 0x3F800001
    assert one("rdna3-exact-negation", DOT_F16, a, b, 0x3F800002) == 0x3F800002
    # the same sign as c: nothing is flipped, the tie goes to even as IEEE's
    assert one("rdna3", DOT_F16, [0x0C00, 0], [0x0C00, 0], 0x3F800002) == 0x3F800002
    # at F = 24 the missing unit reaches fp32's last place: 1 - 0.5 is 0.5 - 2^-24
    assert one("rdna3-f24", DOT_F16, [0x3C00, 0], [0xB800, 0], 0x3F800000) == 0x3EFFFFFE
    assert one("rdna3", DOT_F16, [0x3C00, 0], [0xB800, 0], 0x3F800000) == 0x3F000000


def test_the_reports_input_rules():
    """bf16 subnormal inputs flushed, an fp32 c kept; fp16 subnormals and products below
    fp32's normal range kept (products are not flushed); non-finite values as IEEE."""
    big = 0x7F00  # bf16 2^127
    assert one("rdna3", DOT_BF16, [0x0001, 0], [big, 0], 0) == 0  # 2^-133 * 2^127 flushed
    assert one("rdna3[flush_inputs=false]", DOT_BF16, [0x0001, 0], [big, 0], 0) == 0x3C800000
    assert one("rdna3", DOT_BF16, [0, 0], [0, 0], 0x00000001) == 0x00000001  # subnormal c
    assert one("rdna3", DOT_F16, [0x0001, 0], [0x0001, 0], 0) == 0x27800000  # 2^-48
    assert one("rdna3", DOT_BF16, [0x0080, 0], [0x3F00, 0], 0) == 0x00400000  # 2^-127
    inf, ninf = 0x7C00, 0xFC00
    assert one("rdna3", DOT_F16, [inf, ninf], [0x3C00, 0x3C00], 0) == 0x7FC00000
    assert one("rdna3", DOT_F16, [inf, 0], [0, 0], 0) == 0x7FC00000  # Inf * 0
    assert one("rdna3", DOT_F16, [inf, 0x3C00], [0x3C00, 0x3C00], 0x3F800000) == 0x7F800000


def _exact_rows(rng, p, n: int):
    """Positive operands in a 2^4 window with c = +0: no term opposes c's frame, and
    every bit of every product stays inside F = 48 fraction bits."""
    a = np.zeros((n, p.K), dtype=np.uint64)
    b = np.zeros((n, p.K), dtype=np.uint64)
    want = []
    for r in range(n):
        vals_a = [Fraction(int(m), 64) for m in rng.integers(64, 1024, size=p.K)]
        vals_b = [Fraction(int(m), 64) for m in rng.integers(64, 1024, size=p.K)]
        a[r] = [round_fraction(v, p.a_fmt) for v in vals_a]
        b[r] = [round_fraction(v, p.b_fmt) for v in vals_b]
        va = [value_of(int(x), p.a_fmt) for x in a[r]]
        vb = [value_of(int(x), p.b_fmt) for x in b[r]]
        want.append(sum(x * y for x, y in zip(va, vb)))
    return a, b, want


@pytest.mark.parametrize("instr", [DOT_F16, DOT_BF16, "v_wmma_f32_16x16x16_fp8_bf8"])
def test_one_step_is_a_correctly_rounded_sum_when_nothing_opposes(instr):
    """One dot step (K <= L, or WMMA's first dot4 step alone) with every term of c's
    sign: the unit is exact up to the final RNE, as the report's adder is."""
    p = api.resolve("rdna4", instr)
    if p.K > p.L:
        p = p.with_(K=p.L)
    rng = np.random.default_rng(7)
    a, b, want = _exact_rows(rng, p, 300)
    c = np.zeros(len(want), dtype=np.uint64)
    for engine in ("numpy", "compiled"):
        d = api.simulate_params(p, a, b, c, engine=engine)
        got = [int(x) for x in d]
        assert got == [round_fraction(w, p.d_fmt, Rounding.RNE) for w in want], engine


@pytest.mark.skipif("bitwuzla" not in available(), reason="needs bitwuzla")
def test_diff_finds_where_the_dropped_carry_shows():
    r = CliRunner().invoke(
        main,
        [
            "diff",
            "rdna3",
            "rdna3-exact-negation",
            "--instr",
            DOT_F16,
            "--json",
            "--solver",
            "bitwuzla",
        ],
    )
    assert r.exit_code == 0, r.output
    w = json.loads(r.output)["witness"]
    assert w["rechecked_on_concrete_model"] and w["reproduces"]
    hexes = [o["hex"] for o in w["outputs"].values()]
    assert hexes[0] != hexes[1]


# --- CDNA4 ----------------------------------------------------------------------------------

SCALED = "v_mfma_scale_f32_16x16x128_f8f6f4_fp4_fp8"


def test_block_scales_multiply_their_32_products():
    """E8M0 scale s is 2^(s - 127): the products of block i times sa_i sb_i, exactly."""
    p = api.resolve("cdna4", SCALED)
    one_fp4 = round_fraction(Fraction(1), Format.E2M1)
    half_fp8 = round_fraction(Fraction(1, 2), Format.E4M3)
    a = [one_fp4] * 128
    b = [half_fp8] * 128
    sa = [127, 128, 126, 127]  # 1, 2, 1/2, 1
    sb = [127, 127, 127, 130]  # 1, 1, 1, 8
    d = api.simulate_one(p, a, b, 0, sa, sb)
    want = 32 * Fraction(1, 2) * (1 + 2 + Fraction(1, 2) + 8)
    assert value_of(d, Format.FP32) == want
    assert api.simulate_one(p, a, b, 0) == round_fraction(64 * 1, Format.FP32)  # scales 1
    nan = api.simulate_one(p, a, b, 0, [0xFF, 127, 127, 127], [127] * 4)
    assert value_of(nan, Format.FP32) != value_of(nan, Format.FP32)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("compiled", marks=pytest.mark.slow)])
def test_scaled_engines_agree_on_random_rows(engine):
    """The vector interpreter (and, slow: the compiled K = 128 kernel) against the
    concrete one on random bits with scales around 1."""
    p = api.resolve("cdna4", SCALED)
    rng = np.random.default_rng(1)
    n = 300
    a = rng.integers(0, 16, size=(n, 128)).astype(np.uint64)
    b = rng.integers(0, 256, size=(n, 128)).astype(np.uint64)
    c = rng.integers(0, 1 << 32, size=n).astype(np.uint64)
    sa = rng.integers(100, 150, size=(n, 4)).astype(np.uint64)
    sb = rng.integers(100, 150, size=(n, 4)).astype(np.uint64)
    want = api.simulate_params(p, a, b, c, sa_bits=sa, sb_bits=sb, engine=engine)
    for r in range(0, n, 30):
        row = (a[r].tolist(), b[r].tolist(), int(c[r]), sa[r].tolist(), sb[r].tolist())
        assert api.simulate_one(p, *row) == int(want[r])


def test_scale_on_an_unscaled_form_is_one_line():
    zeros = ",".join(["0x0"] * 32)
    args = ["simulate", "--arch", "cdna4", "--instr", "v_mfma_f32_16x16x32_f16"]
    r = CliRunner().invoke(main, [*args, "--a", zeros, "--b", zeros, "--c", "0x0", "--sa", "0x7f"])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "no scale factors" in lines[0]


def test_two_opposing_terms_leave_a_unit_the_exact_adder_does_not():
    """c = 2, a0 b0 = a1 b1 = -1: each opposing product enters one unit 2^(1 - F) short and
    the negative sum is read back by a bit flip, which returns one unit: 2 - 1 - 1 gives
    -2^-47 at F = 48 under the report's rule, +0 with the end-around carry kept. A probe
    on gfx1151 decides it at once."""
    a, b = [0x3C00, 0x3C00], [0xBC00, 0xBC00]
    assert one("rdna3", DOT_F16, a, b, 0x40000000) == 0xA8000000  # -2^-47
    assert one("rdna3-exact-negation", DOT_F16, a, b, 0x40000000) == 0
    assert one("rdna3", DOT_F16, [0x3C00, 0], [0xBC00, 0], 0x3F800000) == 0  # one term: +0


def test_no_exactness_or_composed_bound_argument_for_the_ones_adder():
    """The integer-slice and composed error arguments assume exact negation; on
    opposing=ones they refuse (a solver or a witness has to answer instead)."""
    from tensorcore_smt.certify.analytic import instruction_analytic
    from tensorcore_smt.model.integer_sums import argued_bound

    p = api.resolve("rdna3", DOT_F16)
    assert isinstance(argued_bound(p, 7), str) and "opposing=ones" in argued_bound(p, 7)
    assert not isinstance(argued_bound(p.with_(opposing=Opposing.EXACT), 7), str)
    assert not instruction_analytic(p).applies
