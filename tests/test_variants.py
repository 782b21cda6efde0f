"""Model parameters change results exactly where the papers say they should."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc


def h(x: float) -> int:
    return int(np.float16(x).view(np.uint16))


def f(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def val32(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


def test_two_carry_bits_overflow_on_a_five_term_sum():
    """Valpey et al. 2025 §4.3: the 5-term unit needs 3 carry bits. Four products of (2-2^-10)^2 and
    c = 1.5 sum to about 17.48, beyond the 16 units two carry bits hold."""
    a = [h(2 - 2**-10)] * 4
    exact = tc.simulate_one(tc.resolve("volta"), a, a, f(1.5))
    assert val32(exact) == np.float32(4 * (2 - 2**-10) ** 2 + 1.5)
    wrapped = tc.simulate_one(tc.resolve("volta[carry_bits=2]"), a, a, f(1.5))
    assert val32(wrapped) == val32(exact) - 32  # the carry out (32 units) is lost
    assert tc.simulate_one(tc.resolve("volta[carry_bits=4]"), a, a, f(1.5)) == exact


def test_renormalizing_accumulator_loses_a_low_bit_only_before_a_later_term():
    """With c last, the overflowed partial sum has been shifted when c arrives."""
    a = [h(2 - 2**-10)] * 4
    p = tc.resolve("volta[carry_bits=2,carry_overflow=renormalize]")
    assert tc.simulate_one(p, a, a, f(-(2**-23))) == tc.simulate_one(
        tc.resolve("volta"), a, a, f(-(2**-23))
    )  # c first: nothing to lose yet


def test_alignment_bits_volta_vs_ampere():
    """Valpey et al. 2025 §4.3/§5: Volta discards every shifted bit, Ampere keeps one."""
    one, c = h(1.0), f(-1 + 2**-24)
    assert val32(tc.simulate_one(tc.resolve("volta"), [one, 0, 0, 0], [one, 0, 0, 0], c)) == 2**-23
    p = tc.resolve("ampere", "m16n8k8.f32.f16.f16.f32")
    assert val32(tc.simulate_one(p, [one] + [0] * 7, [one] + [0] * 7, c)) == 2**-24
    assert (
        val32(tc.simulate_one(tc.resolve("volta[F=24]"), [one, 0, 0, 0], [one, 0, 0, 0], c))
        == 2**-24
    )


def test_product_exponent_normalisation_changes_alignment():
    """A product with significand >= 2 aligns one bit differently when normalised:
    -1.5*1.5 = -2.25 has e_max 0 unnormalised (MMA-Sim) but 1 normalised (Valpey et al. 2025), so
    c's lowest bit 2^-23 survives only in the first; cancellation makes it visible."""
    a, b = [h(1.5), 0, 0, 0], [h(-1.5), 0, 0, 0]
    c = f(1.75 + 2**-23)
    un = tc.simulate_one(tc.resolve("volta"), a, b, c)
    no = tc.simulate_one(tc.resolve("valpey-volta"), a, b, c)
    assert val32(un) == -0.5 + 2**-23
    assert val32(no) == -0.5


def test_chained_groups_round_between_groups():
    """MMA-Sim §IV-D: Ampere m16n8k16 is two FDAs of 8; the first result is rounded (RZ)
    to fp32 before the second group sees it, unlike one 16-wide group on Hopper."""
    a = [h(1.0)] + [0] * 7 + [h(2.0**-24)] + [0] * 7
    b = [h(1.0)] + [0] * 7 + [h(1.0)] + [0] * 7
    c = f(2.0**-24)
    amp = tc.simulate_one(tc.resolve("ampere"), a, b, c)
    hop = tc.simulate_one(tc.resolve("hopper"), a, b, c)
    assert val32(amp) == 1.0  # 1 + 2^-24 truncates to 1, then + 2^-24 truncates again
    assert val32(hop) == 1 + 2**-23  # one group keeps both 2^-24 terms


def test_zero_terms_exponent_affects_fp16_rounding():
    """MMA-Sim's e_zero: a zero c raises e_max to e_zero (-21 on Hopper fp16 output), so
    products far below it are truncated away before the final RNE."""
    inst = "m16n8k16.f16.f16.f16.f16"
    a = [h(2.0**-12), h(2.0**-24)] + [0] * 14  # products 2^-25 (exponent -25) and
    b = [h(2.0**-13), h(2.0**-24)] + [0] * 14  # 2^-48 (subnormal inputs: exponent -28)
    with_zero = tc.simulate_one(tc.resolve("hopper", inst), a, b, 0)
    ignored = tc.simulate_one(tc.resolve("hopper[e_zero=none]", inst), a, b, 0)
    assert with_zero == 0x0000  # e_max=-21, grid 2^-46: 2^-48 lost, the tie rounds to even
    assert ignored == 0x0001  # e_max=-25, grid 2^-50: 2^-48 breaks the tie upward


def test_mma_matrix_form_matches_row_simulation():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = tc.mma("ampere", "m16n8k16.f32.bf16.bf16.f32", A, B, C)
    p = tc.resolve("ampere", "m16n8k16.f32.bf16.bf16.f32")
    for i in (0, 5, 15):
        for j in (0, 7):
            want = tc.simulate_one(
                p,
                [int(x) for x in A[i].view(np.uint16)],
                [int(x) for x in B[:, j].view(np.uint16)],
                int(C[i, j].view(np.uint32)),
            )
            assert int(D[i, j].view(np.uint32)) == want
    assert np.allclose(D, A.astype(np.float64) @ B.astype(np.float64) + C, rtol=1e-5, atol=1e-5)


def test_a_parameter_given_twice_is_refused_but_an_alias_may_be_overridden():
    from tensorcore_smt.errors import UserError
    from tensorcore_smt.spec.presets import parse_variant

    with pytest.raises(UserError, match="F is given twice"):
        parse_variant("volta[F=2,F=3]")
    v = parse_variant("matlab-h100-fp8[F=14]")
    assert v.params("m16n8k32.f32.e4m3.e4m3.f32").F == 14


def test_reports_name_the_instruction_actually_run():
    """A variant that changes what the instruction takes or returns is named with those
    changes; one that changes only the arithmetic keeps the catalogue name."""
    from click.testing import CliRunner

    from tensorcore_smt.cli import main
    from tensorcore_smt.spec.presets import parse_variant

    assert parse_variant("volta[carry_bits=2]").run_name(None) == "m8n8k4.f32.f16.f16.f32"
    assert (
        parse_variant("volta[a_fmt=fp64,F=20]").run_name("m8n8k4.f16.f16.f16.f16")
        == "m8n8k4.f16.f16.f16.f16[a_fmt=fp64]"
    )
    # a split runs the instruction itself on the fp16 pieces of fp32 inputs
    assert parse_variant("volta[split=markidis]").run_name(None) == "m8n8k4.f32.f16.f16.f32"
    assert (
        parse_variant("volta[split=markidis,split_fmt=bf16]").run_name(None)
        == "m8n8k4.f32.f16.f16.f32[a_fmt=bf16,b_fmt=bf16]"
    )
    r = CliRunner().invoke(
        main,
        ["diff", "volta[a_fmt=fp64]", "volta[a_fmt=fp64,carry_bits=2]", "--solver", "bitwuzla"],
    )
    assert r.exit_code == 0, r.output
    assert "instruction: m8n8k4.f32.f16.f16.f32[a_fmt=fp64] (fp64 x fp16 + fp32" in r.output
    zeros = ["--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"]
    r = CliRunner().invoke(main, ["simulate", "--arch", "volta[c_fmt=fp16]", *zeros])
    assert r.output.splitlines()[0] == "volta[c_fmt=fp16] m8n8k4.f32.f16.f16.f32[c_fmt=fp16]"
