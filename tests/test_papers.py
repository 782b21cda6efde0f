"""Acceptance tests: the papers' hand-made experiments, run through `tcsmt simulate`.

Each test feeds one dot product d = c + sum_k a_k * b_k to the CLI and asserts the exact
answer the paper reports from hardware (or, for the named hypotheses, the value the paper
says that hypothesis gives). Inputs and expected outputs are written as real numbers taken
from the paper and turned into bit patterns here; nothing is computed by the model.

Helpers:
- `h16(x)` / `h32(x)`: the fp16 / fp32 hex encoding of the real number `x`, via numpy's
  float16 / float32 `.view`. They refuse a value the format cannot hold exactly, so a typo
  in an exponent fails loudly instead of being rounded away (`h32(x, exact=False)` rounds
  to nearest, for the one input a paper gives in decimal).
- `pad(xs, k, fill)`: the list `xs` (numbers) padded with `fill` up to `k` entries, e.g. a
  row of A with zeros after the paper's nonzero entries.
- `simulate(arch, a, b, c, instr=None)`: runs `tcsmt simulate --json` in-process with
  click's CliRunner and returns d as an int (the bit pattern), so hex case does not matter.
- `bits(h)`: int of a hex string, for comparing against `simulate`.

Papers (plain text in ../shared/seeds/):
- 001 = Fasi, Higham, Mikaitis, Pranesh, "Numerical Behavior of NVIDIA Tensor Cores", §III
  (Volta V100). Their eq. (3): with the first row of A set to 1, d = b1 + b2 + b3 + b4 + c.
- 000 = Valpey et al., "An SMT Formalization of Mixed-Precision Matrix Multiplication",
  Table 3 and §4. (Its Table 1 is not self-consistent and is deliberately not used.)
- 002 = Xie et al., "MMA-Sim", §VI-C (CDNA3 round-down example) and §IV-C (TF32 NaN -> Inf).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main

# Instructions used below.
VOLTA_F32 = "m8n8k4.f32.f16.f16.f32"  # volta's default: K=4, fp32 c and d
VOLTA_F16 = "m8n8k4.f16.f16.f16.f16"  # binary16 mode: fp16 c and d
AMPERE_F16_K8 = "m16n8k8.f32.f16.f16.f32"  # K=8, one fused group of 8
AMPERE_TF32 = "m16n8k8.f32.tf32.tf32.f32"  # K=8
HOPPER_F16 = "m16n8k16.f32.f16.f16.f32"  # K=16, one fused group of 16
CDNA3_F16 = "v_mfma_f32_32x32x8_f16"  # K=8


def _hex(x: float, dtype, utype, digits: int, exact: bool) -> str:
    v = dtype(x)
    if exact and float(v) != x:
        raise ValueError(f"{x!r} is not exactly representable as {np.dtype(dtype).name}")
    return f"0x{int(v.view(utype)):0{digits}x}"


def h16(x: float) -> str:
    """fp16 hex of x (must be exact)."""
    return _hex(x, np.float16, np.uint16, 4, exact=True)


def h32(x: float, exact: bool = True) -> str:
    """fp32 hex of x (exact unless exact=False, then round to nearest)."""
    return _hex(x, np.float32, np.uint32, 8, exact=exact)


def pad(xs: list[float], k: int, fill: float = 0.0) -> list[float]:
    return list(xs) + [fill] * (k - len(xs))


def bits(h: str) -> int:
    return int(h, 16)


def simulate(arch: str, a: list[str], b: list[str], c: str, instr: str | None = None) -> int:
    """d bits of `tcsmt simulate --arch ARCH [--instr I] --a .. --b .. --c .. --json`."""
    args = ["simulate", "--arch", arch, "--a", ",".join(a), "--b", ",".join(b), "--c", c]
    if instr:
        args += ["--instr", instr]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return bits(json.loads(result.output)["d"])


def volta32(a: list[float], b: list[float], c: float, arch: str = "volta") -> int:
    """Volta fp32 mode (K=4): a and b padded with zeros, c and d fp32."""
    return simulate(arch, [h16(x) for x in pad(a, 4)], [h16(x) for x in pad(b, 4)], h32(c))


def volta16(a: list[float], b: list[float], c: float) -> int:
    """Volta binary16 mode (K=4): a and b padded with zeros, c and d fp16."""
    a_hex, b_hex = [h16(x) for x in pad(a, 4)], [h16(x) for x in pad(b, 4)]
    return simulate("volta", a_hex, b_hex, h16(c), instr=VOLTA_F16)


ONES = [1.0] * 4  # first row of A = 1: Fasi eq. (3), d = b1 + b2 + b3 + b4 + c


# --- Fasi et al. (001) §III-A: support for subnormal numbers ---------------------------


def test_fasi_3a_subnormal_fp16_input_fp32_mode():
    """Fasi §III-A (question 1): a11 = 2^-24, b11 = 4 -> 2^-22 in binary32 mode."""
    assert volta32([2.0**-24], [4.0], 0.0) == bits(h32(2.0**-22))


def test_fasi_3a_subnormal_fp16_input_fp16_mode():
    """Fasi §III-A (question 1): a11 = 2^-24, b11 = 4 -> 2^-22 in binary16 mode."""
    assert volta16([2.0**-24], [4.0], 0.0) == bits(h16(2.0**-22))


def test_fasi_3a_subnormal_fp32_c_passes_through():
    """Fasi §III-A (question 2): c11 = 2^-149 (smallest fp32 subnormal), A = B = 0 -> 2^-149."""
    assert volta32([], [], 2.0**-149) == bits(h32(2.0**-149))


def test_fasi_3a_subnormal_output_from_normals_fp32_mode():
    """Fasi §III-A (question 3): a11 = 2^-14, b11 = 2^-1 -> 2^-15, binary32 mode."""
    assert volta32([2.0**-14], [2.0**-1], 0.0) == bits(h32(2.0**-15))


def test_fasi_3a_subnormal_output_from_normals_fp16_mode():
    """Fasi §III-A (question 3): a11 = 2^-14, b11 = 2^-1 -> binary16 subnormal 2^-15."""
    assert volta16([2.0**-14], [2.0**-1], 0.0) == bits(h16(2.0**-15))


def test_fasi_3a_subnormal_output_with_c_fp16_mode():
    """Fasi §III-A (question 3): a11 = 2^-14, b11 = 1, c11 = -2^-15 -> the binary16
    subnormal 2^-15."""
    assert volta16([2.0**-14], [1.0], -(2.0**-15)) == bits(h16(2.0**-15))


def test_fasi_3a_subnormal_output_with_c_fp32_mode():
    """Fasi §III-A (question 3), same inputs in binary32 mode: the exact result 2^-15."""
    assert volta32([2.0**-14], [1.0], -(2.0**-15)) == bits(h32(2.0**-15))


def test_fasi_3a_subnormals_handled_in_hardware():
    """Fasi §III-A (last paragraph): a11 = a12 = 1, b11 = 2^-23 + 2^-24 (fp16 subnormal),
    b21 = 2 -> 2 (the subnormal is dropped, not rounded up)."""
    assert volta32([1.0, 1.0], [2.0**-23 + 2.0**-24, 2.0], 0.0) == bits(h32(2.0))


# --- Fasi §III-B: accuracy of the dot products ----------------------------------------


def test_fasi_3b_products_exact():
    """Fasi §III-B: first row of A and first column of B = 1 - 2^-11, c = 0
    -> exactly 4 (1 - 2^-10 + 2^-22)."""
    x = 1.0 - 2.0**-11
    assert volta32([x] * 4, [x] * 4, 0.0) == bits(h32(4 * (1.0 - 2.0**-10 + 2.0**-22)))


def test_fasi_3b_products_exact_in_fp16_mode():
    """Fasi §III-B: a11 = b11 = a12 = 1 - 2^-11, b21 = 2^-11, binary16 mode -> the exact
    sum 1 - 2^-10 + 2^-11 (representable in binary16)."""
    x = 1.0 - 2.0**-11
    assert volta16([x, x], [x, 2.0**-11], 0.0) == bits(h16(1.0 - 2.0**-10 + 2.0**-11))


@pytest.mark.parametrize("one_at", range(5), ids=["b1", "b2", "b3", "b4", "c"])
def test_fasi_3b_four_roundings_largest_first(one_at):
    """Fasi §III-B: eq. (3) with one addend 1 and the other four 2^-24, in each of the five
    places -> 1 in every case (4 round-offs; accumulation starts from the largest)."""
    addends = [2.0**-24] * 5
    addends[one_at] = 1.0
    assert volta32(ONES, addends[:4], addends[4]) == bits(h32(1.0))


# --- Fasi §III-C: rounding modes --------------------------------------------------------


def test_fasi_3c_rounding_positive():
    """Fasi §III-C (Fig. 1a): b11 = 2, b21 = 3/4 * 2^-22, rest 0 -> 2 (RZ or RD, not RN/RU)."""
    assert volta32(ONES, [2.0, 0.75 * 2.0**-22], 0.0) == bits(h32(2.0))


def test_fasi_3c_rounding_negative():
    """Fasi §III-C (Fig. 1b): the same on the negative semiaxis -> -2 (RZ, not RD)."""
    assert volta32(ONES, [-2.0, -0.75 * 2.0**-22], 0.0) == bits(h32(-2.0))


def test_fasi_3c_fp16_output_rounds_to_nearest():
    """Fasi §III-C: binary16 mode, a11 = a12 = 2^-24, b11 = 2^-1, b21 = 2^-2, c = 0:
    exact 2^-25 + 2^-26 = 3/4 * 2^-24 -> 2^-24 (RN; RZ/RD would give 0)."""
    assert volta16([2.0**-24, 2.0**-24], [2.0**-1, 2.0**-2], 0.0) == bits(h16(2.0**-24))


# --- Fasi §III-D: features of the accumulator -------------------------------------------


def test_fasi_3d1_no_guard_digit():
    """Fasi §III-D1: b11 = 1, c11 = -1 + 2^-24 -> 2^-23 (no guard digit)."""
    assert volta32(ONES, [1.0], -1.0 + 2.0**-24) == bits(h32(2.0**-23))


def test_fasi_3d2_no_normalization_in_addition():
    """Fasi §III-D2: c11 = 1 - 2^-24, first column of B = 2^-24 -> 1 + 2^-23
    (partial sums not normalized)."""
    assert volta32(ONES, [2.0**-24] * 4, 1.0 - 2.0**-24) == bits(h32(1.0 + 2.0**-23))


def test_fasi_3d3_no_normalization_in_subtraction():
    """Fasi §III-D3: c11 = -1 + 2^-24, two elements of B's first column 1 and -2^-24
    -> 2^-23 (0 if partial sums were normalized)."""
    assert volta32(ONES, [1.0, -(2.0**-24)], -1.0 + 2.0**-24) == bits(h32(2.0**-23))


@pytest.mark.parametrize("pos", range(4), ids=lambda p: f"small_at_b{p + 1}")
def test_fasi_3d4_carry_bits(pos):
    """Fasi §III-D4: c11 = 1 + 2^-22 + 2^-23, B's first column a permutation of
    1, 1, 1, 2^-23; all four orders -> 4 + 2^-21 (at least two carry bits)."""
    b = [1.0] * 4
    b[pos] = 2.0**-23
    assert volta32(ONES, b, 1.0 + 2.0**-22 + 2.0**-23) == bits(h32(4.0 + 2.0**-21))


def test_fasi_3d5_non_monotonic():
    """Fasi §III-D5: B's first column = 2^-24; c11 = 1 - 2^-24 -> 1 + 2^-23, while the
    larger c11 = 1 -> 1 (non-monotonic)."""
    b = [2.0**-24] * 4
    assert volta32(ONES, b, 1.0 - 2.0**-24) == bits(h32(1.0 + 2.0**-23))
    assert volta32(ONES, b, 1.0) == bits(h32(1.0))


# --- Valpey et al. 2025: Table 3 and §4 -----------------------------------------------------------


@pytest.mark.parametrize("arch", ["volta", "turing"])
def test_valpey_table3_truncation_not_rtz(arch):
    """Valpey et al. 2025 Table 3 / §4.2: a = 2, b = 1, c = -2^-40 -> 2 on Volta and Turing
    (truncation during alignment; a properly rounded RTZ sum would be 2 - 2^-23).
    Turing's m8n8k4 behaves as Volta's (§4.3, §5)."""
    d = simulate(
        arch,
        [h16(x) for x in pad([2.0], 4)],
        [h16(x) for x in pad([1.0], 4)],
        h32(-(2.0**-40)),
        instr=VOLTA_F32,
    )
    assert d == bits(h32(2.0))


def test_valpey_table3_fasi_volta_hypothesis_is_rtz():
    """Valpey et al. 2025 Table 3: the hypothesis `fasi-volta` (additions correctly rounded toward
    zero, Fasi §III-C) gives the "properly-rounded RTZ result" 2 - 2^-23 on Table 3's
    input, which tells it apart from the `volta` preset (2)."""
    d = volta32([2.0], [1.0], -(2.0**-40), arch="fasi-volta")
    assert d == bits(h32(2.0 - 2.0**-23))
    assert d != volta32([2.0], [1.0], -(2.0**-40))


def test_valpey_one_shifted_bit_volta():
    """Valpey et al. 2025 §4.3 (Algorithm 1): Volta discards all shifted bits: b = 1,
    c = -1 + 2^-24 -> 2^-23 (same as Fasi §III-D1)."""
    assert volta32(ONES, [1.0], -1.0 + 2.0**-24) == bits(h32(2.0**-23))


def test_valpey_one_shifted_bit_ampere():
    """Valpey et al. 2025 §4.3 (Algorithm 1, step 2c): Ampere keeps one shifted bit, so the same
    input (b = 1, c = -1 + 2^-24) is exact: 2^-24. Instruction m16n8k8 (K = 8)."""
    a = [h16(x) for x in pad(ONES, 8)]
    b = [h16(x) for x in pad([1.0], 8)]
    d = simulate("ampere", a, b, h32(-1.0 + 2.0**-24), instr=AMPERE_F16_K8)
    assert d == bits(h32(2.0**-24))


# --- MMA-Sim (002) -------------------------------------------------------------------------

# §VI-C: a0 = a1 = b0 = 2048, b1 = -2048, c = -0.000001 (fp32 nearest), rest zero.
_SIX_C_A = [2048.0, 2048.0]
_SIX_C_B = [2048.0, -2048.0]
_SIX_C_C = h32(-0.000001, exact=False)


def test_mmasim_6c_cdna3_round_down_of_c():
    """MMA-Sim §VI-C: CDNA3 v_mfma_f32_32x32x8_f16 rounds c down to -2^-2 in FDRDA
    step 6, so 2048*2048 - 2048*2048 - 0.000001 -> -0.25 (0xbe800000)."""
    a = [h16(x) for x in pad(_SIX_C_A, 8)]
    b = [h16(x) for x in pad(_SIX_C_B, 8)]
    d = simulate("cdna3", a, b, _SIX_C_C, instr=CDNA3_F16)
    assert d == bits(h32(-0.25)) == 0xBE800000


def test_mmasim_6c_nvidia_rz_gives_zero():
    """MMA-Sim §VI-C: "other instructions with RZ ... result in 0.0": Hopper m16n8k16
    (NVIDIA truncation/RZ) on the same products, zero-padded to K = 16 -> 0.0."""
    a = [h16(x) for x in pad(_SIX_C_A, 16)]
    b = [h16(x) for x in pad(_SIX_C_B, 16)]
    d = simulate("hopper", a, b, _SIX_C_C, instr=HOPPER_F16)
    assert d == bits(h32(0.0))


def _tf32_nan_case(arch: str) -> int:
    a = ["0x7f800001"] + [h32(0.0)] * 7  # a NaN whose set fraction bits are all dropped
    b = [h32(1.0)] + [h32(0.0)] * 7
    return simulate(arch, a, b, h32(0.0), instr=AMPERE_TF32)


def test_mmasim_tf32_nan_becomes_inf():
    """MMA-Sim §IV-C (TF32 truncation): the 13 low bits of a TF32 input are treated as
    zero, so a0 = 0x7F800001 (NaN) becomes +Inf: with b0 = 1 the result is 0x7F800000."""
    assert _tf32_nan_case("ampere") == 0x7F800000


def test_mmasim_tf32_full_keeps_nan():
    """Control for the TF32 note (MMA-Sim §IV-C): with the low bits kept
    (`ampere[tf32=full]`) the input stays NaN and the output is NVIDIA's canonical NaN
    0x7FFFFFFF (§IV-C step 1)."""
    assert _tf32_nan_case("ampere[tf32=full]") == 0x7FFFFFFF


# Sanity of the helpers themselves (not of the model).


def test_helpers_encode_exactly():
    assert h16(1.0) == "0x3c00" and h16(2.0**-24) == "0x0001"
    assert h32(2.0**-149) == "0x00000001" and h32(-0.25) == "0xbe800000"
    with pytest.raises(ValueError):
        h16(1.0 + 2.0**-11)
    with pytest.raises(ValueError):
        h32(2.0**-150)
    assert pad([1.0], 3) == [1.0, 0.0, 0.0]
