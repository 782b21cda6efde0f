"""The fast exact error report: digit products (gemm/digits.py) sum exactly to the rational
A·B, fp64 terms are rounded correctly (gemm/expansion.py: value and floor(log2) against
Python's Fractions, the wide-integer fallback included), and measure_errors through
them gives the figures of the exponent-slice path bit for bit (inputs of every binade,
subnormals, cancellation; fp16, bf16, tf32, fp32 and e4m3 inputs)."""

from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.gemm.digits import DigitProduct, widths
from tensorcore_smt.gemm.expansion import rounded_sum


def finite_patterns(rng, fmt: Format, shape) -> np.ndarray:
    """Uniformly random bit patterns (every binade, subnormals, zeros), non-finite ones
    replaced by 0."""
    b = rng.integers(0, 1 << fmt.spec.storage, size=shape, dtype=np.uint64)
    finite = np.vectorize(lambda x: not isinstance(value_of(int(x), fmt), float))(b)
    return np.where(finite, b, np.uint64(0))


def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


@pytest.mark.parametrize(
    "fmt, K",
    [(Format.FP16, 9), (Format.BF16, 5), (Format.TF32, 7), (Format.E4M3, 33), (Format.FP32, 6)],
)
def test_digit_products_sum_to_the_rational_product(fmt, K):
    """Every binade in one row (bf16: 2^-133 .. 2^127): many digits, still exact."""
    rng = np.random.default_rng(K)
    a, b = finite_patterns(rng, fmt, (3, K)), finite_patterns(rng, fmt, (K, 4))
    a[0, 0] = 0  # a zero row value and a cancelling pair
    dp = DigitProduct(a, fmt, b, fmt)
    assert dp.finite
    terms = dp.tile(slice(0, 3), slice(1, 4))
    av = [[value_of(int(x), fmt) for x in row] for row in a]
    bv = [[value_of(int(x), fmt) for x in row] for row in b]
    for i in range(3):
        for j in range(1, 4):
            want = sum(av[i][k] * bv[k][j] for k in range(K))
            assert sum(Fraction(float(t[i, j - 1])) for t in terms) == want


def test_digit_widths_keep_products_exact_and_few():
    for K, sa, sb in [(1024, 23, 25), (1, 11, 11), (4096, 41, 41), (1 << 20, 24, 24)]:
        wa, wb = widths(K, sa, sb, 38, 38)
        assert K * 2 ** (wa + wb) <= 2**53 and wa <= 38 and wb <= 38
        n = -(-sa // wa) * -(-sb // wb)
        # brute force over every width pair: none takes fewer products
        budget = 53 - max(0, (K - 1).bit_length())
        best = min(
            -(-sa // x) * -(-sb // y) for x in range(1, 39) for y in range(1, 39) if x + y <= budget
        )
        assert n == best


def _rational(terms, idx) -> Fraction:
    return sum(Fraction(float(t[idx])) for t in terms)


def test_rounded_sum_equals_fractions():
    """Random terms over wide exponent ranges, exact cancellation, ties, subnormal sums,
    and sums that need three doubles (left to the wide integers)."""
    rng = np.random.default_rng(5)
    n = 4000
    cols = []
    for _ in range(4):
        m = rng.standard_normal(n)
        e = rng.integers(-60, 60, n)
        cols.append(np.ldexp(m, e))
    cols[1][:500] = -cols[0][:500]  # cancel
    cols[2][:500] = np.ldexp(1.0, -1074) * rng.integers(-5, 5, 500)  # subnormal sums
    cols[0][500:1000] = 1.0  # 1 + 2^-53 (a tie) + more, and three-double sums
    cols[1][500:1000] = 2.0**-53
    cols[2][500:1000] = np.where(rng.random(500) < 0.5, 2.0**-160, -(2.0**-200))
    cols[3][500:1000] = np.where(rng.random(500) < 0.5, 0.0, 2.0**-300)
    cols[0][1000:1100] = 2.0**40  # 2^40 - tiny: rounds up onto a power of two
    cols[1][1000:1100] = -(2.0**-20)
    cols[2][1000:1100] = 2.0**-20
    cols[3][1000:1100] = -(2.0**-90)
    r = rounded_sum(cols)
    for i in range(n):
        v = abs(_rational(cols, i))
        assert r.value[i] == float(v), i
        if v:
            assert r.log2[i] == floor_log2(v), i


@pytest.mark.parametrize(
    "fmt, dist_bits",
    [
        (Format.FP16, True),
        (Format.BF16, False),
        (Format.TF32, False),
        (Format.FP32, False),
        (Format.E4M3, True),
    ],
)
def test_fast_figures_equal_the_exponent_slices(fmt, dist_bits, monkeypatch):
    """measure_errors through digit products and fp64 terms, against the exponent-slice
    path (wide integers, itself checked against Fractions in test_gemm_accuracy), bit
    for bit: ulps, relative errors, normwise errors, on outputs near and far."""
    from tensorcore_smt.gemm import measure as ms
    from tensorcore_smt.gemm.emulate import matmul
    from tensorcore_smt.gemm.measure import Dist, measure_errors, random_matrix
    from tensorcore_smt.intake import FORMAT_DTYPE

    rng = np.random.default_rng(17)
    dt = FORMAT_DTYPE[fmt]
    if dist_bits:  # every binade, subnormals and zeros
        w = np.uint8 if fmt.spec.storage == 8 else np.uint16
        A = finite_patterns(rng, fmt, (9, 40)).astype(w).view(dt)
        B = finite_patterns(rng, fmt, (40, 7)).astype(w).view(dt)
    else:
        A = random_matrix((9, 40), fmt, Dist.LOGNORMAL, rng)
        B = random_matrix((40, 7), fmt, Dist.NORMAL, rng)
    info: list = []
    D = matmul("hopper", A, B, run_info=info, engine="numpy")
    D[0, 0] = -D[0, 0]  # far from the exact value
    D[1, 1] = np.nextafter(D[1, 1], np.float32(np.inf))
    fast = measure_errors(info[0], A, B, None, D)
    used: list = []
    monkeypatch.setattr(ms, "_exact_by_digits", lambda *a: used.append(1))
    monkeypatch.setattr(ms, "in_range", lambda x: False)
    slow = measure_errors(info[0], A, B, None, D)
    assert used  # the second run went the exponent-slice way
    for f, s in ((fast[0], slow[0]), (fast[1], slow[1])):
        assert f.ulps.tobytes() == s.ulps.tobytes() and f.rel.tobytes() == s.rel.tobytes()
        assert f.normwise == s.normwise and f.nonfinite == s.nonfinite


def test_fast_path_taken_for_fp16():
    """The default report (fp16 of standard normal data) takes at most 2 BLAS products."""
    from tensorcore_smt.gemm.measure import Dist, random_matrix
    from tensorcore_smt.intake import operand_bits

    rng = np.random.default_rng(1)
    A = random_matrix((64, 1024), Format.FP16, Dist.NORMAL, rng)
    B = random_matrix((1024, 64), Format.FP16, Dist.NORMAL, rng)
    dp = DigitProduct(
        operand_bits(A, Format.FP16, "A"),
        Format.FP16,
        operand_bits(B, Format.FP16, "B"),
        Format.FP16,
    )
    assert dp.products <= 2
