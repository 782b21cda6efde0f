"""gemm.accuracy: the exact product (int64 slices joined with Python ints) equals the
rational sum of the decoded values (formats.value_of), and the ulp / relative errors of
an output are measured at the exact value."""

from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.gemm.accuracy import exact_matmul, measure
from tensorcore_smt.spec.formats import Format, default_nan_bits, round_fraction, value_of


def finite_patterns(rng, fmt: Format, shape) -> np.ndarray:
    """Uniformly random bit patterns (every binade, subnormals, zeros), non-finite ones
    replaced by 0."""
    b = rng.integers(0, 1 << fmt.spec.storage, size=shape, dtype=np.uint64)
    finite = np.vectorize(lambda x: not isinstance(value_of(int(x), fmt), float))(b)
    return np.where(finite, b, np.uint64(0))


def rational(bits: np.ndarray, fmt: Format) -> list:
    return [[value_of(int(x), fmt) for x in row] for row in bits]


def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def exact_value(ex, i, j) -> Fraction:
    return Fraction(int(ex.ints[i, j])) * Fraction(2) ** ex.lsb


@pytest.mark.parametrize(
    "fmt, K",
    [
        (Format.FP16, 9),
        (Format.BF16, 9),  # exponents over 2^-133 .. 2^127: many slices
        (Format.TF32, 9),
        (Format.E4M3, 33),
        (Format.E5M2FNUZ, 17),
        (Format.FP32, 4100),  # 24-bit significands: K is cut into int64-safe chunks
    ],
)
def test_exact_matmul_equals_rational_sum(fmt, K):
    rng = np.random.default_rng(K)
    M, N = (3, 4) if K < 100 else (1, 2)
    a, b = finite_patterns(rng, fmt, (M, K)), finite_patterns(rng, fmt, (K, N))
    c = finite_patterns(rng, Format.FP32, (M, N))
    ex = exact_matmul(a, fmt, b, fmt, c, Format.FP32)
    av, bv, cv = rational(a, fmt), rational(b, fmt), rational(c, Format.FP32)
    for i in range(M):
        for j in range(N):
            ref = sum(av[i][k] * bv[k][j] for k in range(K)) + cv[i][j]
            assert exact_value(ex, i, j) == ref


def test_measure_ulps_and_relative_error():
    rng = np.random.default_rng(7)
    a = finite_patterns(rng, Format.FP16, (4, 6))
    b = finite_patterns(rng, Format.FP16, (6, 5))
    ex = exact_matmul(a, Format.FP16, b, Format.FP16)
    x = [[exact_value(ex, i, j) for j in range(5)] for i in range(4)]
    rn = np.array([[round_fraction(v, Format.FP32) for v in row] for row in x], dtype=np.uint64)
    st = measure(rn, Format.FP32, ex)
    assert st.max_ulps <= 0.5 and st.nonfinite == 0
    # each error against the rational oracle: |d - x| / ulp(x), |d - x| / |x|
    for i in range(4):
        for j in range(5):
            d = value_of(int(rn[i, j]), Format.FP32)
            err = abs(d - x[i][j])
            if x[i][j]:
                ulp = Fraction(2) ** (max(floor_log2(abs(x[i][j])), -126) - 23)
                assert st.ulps[i, j] == float(err / ulp)
                assert st.rel[i, j] == float(err / abs(x[i][j]))
    # one output a NaN, one moved by one ulp away from zero
    bad = rn.copy()
    bad[0, 0] = default_nan_bits(Format.FP32)
    bad[1, 1] = rn[1, 1] + 1
    st2 = measure(bad, Format.FP32, ex)
    assert st2.nonfinite == 1 and st2.ulps[0, 0] == np.inf
    assert 0.5 <= st2.ulps[1, 1] <= 1.5 or x[1][1] == 0


def test_non_finite_input_refused():
    a = np.array([[0x7C00]], dtype=np.uint64)  # fp16 +Inf
    with pytest.raises(ValueError):
        exact_matmul(a, Format.FP16, a, Format.FP16)
