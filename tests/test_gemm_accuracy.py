"""gemm.accuracy: the exact product (int64 slices joined in wide integers) equals the
rational sum of the decoded values (formats.value_of), and the ulp / relative errors of
an output are measured at the exact value: ulps rounded once from the exact error,
relative errors within 2 units in the last place of fp64."""

from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.formats import Format, default_nan_bits, round_fraction, value_of
from tensorcore_smt.gemm.accuracy import exact_matmul, measure


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
                assert _close(st.rel[i, j], err / abs(x[i][j]))
    # one output a NaN, one moved by one ulp away from zero
    bad = rn.copy()
    bad[0, 0] = default_nan_bits(Format.FP32)
    bad[1, 1] = rn[1, 1] + 1
    st2 = measure(bad, Format.FP32, ex)
    assert st2.nonfinite == 1 and st2.ulps[0, 0] == np.inf
    assert 0.5 <= st2.ulps[1, 1] <= 1.5 or x[1][1] == 0


def _close(got: float, want: Fraction) -> bool:
    """got is within 2 fp64 units in the last place of the rational want."""
    w = float(want)
    return abs(Fraction(got) - want) <= 2 * Fraction(float(np.spacing(w)))


def _check_against_fractions(d_bits, d_fmt: Format, ex, x) -> None:
    """measure() against the rational oracle, element by element."""
    st = measure(d_bits, d_fmt, ex)
    s = d_fmt.spec
    sq_err = sq_x = Fraction(0)
    for idx in np.ndindex(d_bits.shape):
        d = value_of(int(d_bits[idx]), d_fmt)
        if isinstance(d, float):  # NaN or Inf output
            assert st.ulps[idx] == np.inf and st.rel[idx] == np.inf
            continue
        err, mag = abs(d - x[idx]), abs(x[idx])
        e = floor_log2(mag) if mag else s.emin
        ulp = Fraction(2) ** (max(e, s.emin) - s.mbits)
        assert st.ulps[idx] == float(err / ulp), (idx, d, x[idx])
        assert (
            (st.rel[idx] == (0.0 if err == 0 else np.inf))
            if mag == 0
            else _close(st.rel[idx], err / mag)
        )
        sq_err, sq_x = sq_err + err * err, sq_x + mag * mag
    if sq_x:
        want = float(sq_err / sq_x) ** 0.5
        assert abs(st.normwise - want) <= 1e-14 * want
    assert st.nonfinite == sum(isinstance(value_of(int(v), d_fmt), float) for v in d_bits.flat)


@pytest.mark.parametrize("fmt,out", [(Format.FP16, Format.FP32), (Format.BF16, Format.BF16)])
def test_measure_equals_fractions_on_random_outputs(fmt, out):
    """Random inputs of every binade (subnormals, zeros) and outputs anywhere near or far
    from the exact value, NaN and Inf among them."""
    rng = np.random.default_rng(11)
    a, b = finite_patterns(rng, fmt, (5, 7)), finite_patterns(rng, fmt, (7, 6))
    ex = exact_matmul(a, fmt, b, fmt)
    x = np.array([[exact_value(ex, i, j) for j in range(6)] for i in range(5)], dtype=object)
    d = np.array([[round_fraction(v, out) for v in row] for row in x], dtype=np.uint64)
    d[::2] = rng.integers(0, 1 << out.spec.storage, size=d[::2].shape, dtype=np.uint64)
    d[1, 1] = default_nan_bits(out)
    _check_against_fractions(d, out, ex, x)


def test_measure_equals_fractions_on_cancellation_and_subnormals():
    """Exact sums that cancel to 0, to a subnormal of the output, and to a value below
    the output's smallest subnormal; outputs 0, -0 and a neighbour of each."""
    f16 = {v: np.float16(v).view(np.uint16) for v in (1.0, -1.0, 2.0**-24, 0.0, 65504.0)}
    one, mone, tiny, zero, big = (f16[v] for v in (1.0, -1.0, 2.0**-24, 0.0, 65504.0))
    a = np.array([[one, one, tiny], [big, big, tiny], [one, one, zero]], dtype=np.uint64)
    b = np.array([[one, one], [mone, one], [tiny, tiny]], dtype=np.uint64)
    ex = exact_matmul(a, Format.FP16, b, Format.FP16)
    x = np.array([[exact_value(ex, i, j) for j in range(2)] for i in range(3)], dtype=object)
    assert x[0, 0] == x[1, 0] == Fraction(1, 2**48) and x[2, 0] == 0  # cancellations
    for out in (Format.FP32, Format.FP16, Format.E4M3):
        d = np.array([[round_fraction(v, out) for v in row] for row in x], dtype=np.uint64)
        _check_against_fractions(d, out, ex, x)
        _check_against_fractions(d + 1, out, ex, x)
        _check_against_fractions(d ^ (1 << (out.spec.storage - 1)), out, ex, x)


def test_non_finite_input_refused():
    a = np.array([[0x7C00]], dtype=np.uint64)  # fp16 +Inf
    with pytest.raises(ValueError):
        exact_matmul(a, Format.FP16, a, Format.FP16)


@pytest.mark.parametrize(
    "hyp, fmt, with_c",
    [
        ("hopper", Format.FP16, False),
        ("ampere/serial[alpha=0.5]", Format.BF16, True),  # outputs past fp32's range: Inf
    ],
)
def test_errors_measured_in_tiles_equal_the_whole_array(hyp, fmt, with_c):
    """measure_errors cuts D into tiles (down to one output each here); every figure,
    ulps and relative errors of each output and the normwise errors, is the same bit
    for bit as measuring all of D at once with measure(), tiles of very different
    magnitudes (inputs of every binade) included."""
    from tensorcore_smt.gemm.emulate import matmul
    from tensorcore_smt.gemm.measure import exact_of_fp64, measure_errors
    from tensorcore_smt.intake import FORMAT_DTYPE

    rng = np.random.default_rng(3)
    dt = FORMAT_DTYPE[fmt]
    A = finite_patterns(rng, fmt, (13, 40)).astype(np.uint16).view(dt)
    B = finite_patterns(rng, fmt, (40, 11)).astype(np.uint16).view(dt)
    C = rng.standard_normal((13, 11)).astype(np.float32) * 1e3 if with_c else None
    info: list = []
    D = matmul(hyp, A, B, C, run_info=info, engine="numpy")
    whole = measure_errors(info[0], A, B, C, D, block_outputs=1 << 30)
    assert whole[2:] == ("", "")
    if C is None:  # the one-array measurement, as before tiles
        a_bits, b_bits = (x.view(np.uint16).astype(np.uint64) for x in (A, B))
        d_bits = D.view(np.uint32)
        x64 = A.astype(np.float64) @ B.astype(np.float64)
        _same(whole[0], measure(d_bits, Format.FP32, exact_matmul(a_bits, fmt, b_bits, fmt)))
        _same(whole[1], measure(d_bits, Format.FP32, exact_of_fp64(x64)))
    else:
        assert whole[0].nonfinite > 0  # the Inf outputs are measured too
    for n in (1, 5, 37, 100):
        tiled = measure_errors(info[0], A, B, C, D, block_outputs=n)
        _same(tiled[0], whole[0])
        _same(tiled[1], whole[1])


def _same(x, y) -> None:
    assert x.ulps.tobytes() == y.ulps.tobytes() and x.rel.tobytes() == y.rel.tobytes()
    assert x.normwise == y.normwise and x.nonfinite == y.nonfinite


def test_tiles_cover_the_matrix_once():
    from tensorcore_smt.gemm.accuracy import tiles

    for shape, n in [
        ((13, 11), 1),
        ((13, 11), 5),
        ((3, 1000), 64),
        ((1000, 2), 64),
        ((7, 7), 10**6),
    ]:
        seen = np.zeros(shape, int)
        for rows, cols in tiles(shape, n):
            seen[rows, cols] += 1
            assert seen[rows, cols].size <= n
        assert (seen == 1).all()
