"""Format decoding against ml_dtypes/numpy, and the rational rounding oracle's basics."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tensorcore_smt.formats import Format, Rounding, classify, round_fraction, to_float

# Every pattern of each small format, compared with the dtype that implements it.
EXHAUSTIVE = [
    (Format.FP16, np.float16, np.uint16),
    (Format.BF16, ml_dtypes.bfloat16, np.uint16),
    (Format.E4M3, ml_dtypes.float8_e4m3fn, np.uint8),
    (Format.E5M2, ml_dtypes.float8_e5m2, np.uint8),
    (Format.E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, np.uint8),
    (Format.E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, np.uint8),
    (Format.E3M2, ml_dtypes.float6_e3m2fn, np.uint8),
    (Format.E2M3, ml_dtypes.float6_e2m3fn, np.uint8),
    (Format.E2M1, ml_dtypes.float4_e2m1fn, np.uint8),
    (Format.UE8M0, ml_dtypes.float8_e8m0fnu, np.uint8),
]


@pytest.mark.parametrize("fmt,dtype,udtype", EXHAUSTIVE, ids=lambda x: getattr(x, "name", ""))
def test_decode_every_pattern_matches_ml_dtypes(fmt, dtype, udtype):
    n = 1 << fmt.spec.storage
    ref = np.arange(n, dtype=udtype).view(dtype).astype(np.float64)
    for bits in range(n):
        got = to_float(bits, fmt)
        want = float(ref[bits])
        if math.isnan(want):
            assert classify(bits, fmt) == "nan", hex(bits)
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), hex(bits)


def test_fp32_and_fp64_patterns_match_numpy():
    rng = np.random.default_rng(7)
    for fmt, ft, ut in ((Format.FP32, np.float32, np.uint32), (Format.FP64, np.float64, np.uint64)):
        bits = rng.integers(0, 1 << fmt.spec.storage, 5000, dtype=np.uint64).astype(ut)
        vals = bits.view(ft).astype(np.float64)
        for b, v in zip(bits, vals):
            if math.isnan(v):
                assert classify(int(b), fmt) == "nan"
            else:
                assert to_float(int(b), fmt) == v


def test_tf32_ignores_low_13_bits():
    """MMA-Sim §IV-C step 0: tensor cores read TF32 with the 13 low bits as zero."""
    assert to_float(0x3F801FFF, Format.TF32) == 1.0
    assert classify(0x7F800001, Format.TF32) == "inf"  # an fp32 NaN reads as +Inf
    assert classify(0x7F802000, Format.TF32) == "nan"


def test_ue4m3_ignores_its_top_bit():
    """MMA-Sim §IV-E: the UE4M3 scale's most significant bit is treated as zero."""
    assert to_float(0x38, Format.UE4M3) == to_float(0xB8, Format.UE4M3) == 1.0


def test_round_fraction_matches_numpy_rne_for_fp16():
    rng = np.random.default_rng(3)
    from fractions import Fraction

    for x in rng.standard_normal(3000) * 2.0 ** rng.integers(-30, 20, 3000):
        want = int(np.float16(x).view(np.uint16))
        assert round_fraction(Fraction(float(x)), Format.FP16, Rounding.RNE) == want
