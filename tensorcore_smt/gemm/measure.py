"""One GEMM run measured: time, MAC/s, and the error of D against the exact product
(gemm/accuracy.py, integer arithmetic) and against an fp64 matmul. Used by `tcsmt gemm`
and the benchmark; also random matrices of a format and a distribution."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np

from ..bv.dtypes import UNSIGNED
from ..engine.choice import Engine
from ..errors import UserError
from ..formats import Format
from ..intake import FORMAT_DTYPE, INTEGER_DTYPE, format_of
from ..intake import operand_bits as bits_of
from ..model.params import BitOp
from .accuracy import (
    ErrorStats,
    Exact,
    Product,
    all_finite,
    grid_exact,
    grid_values,
    measure_blocks,
    rows_per_block,
    tiles,
)
from .digits import MAX_PRODUCTS, DigitProduct
from .element import c_format, epilogue_format
from .emulate import GemmRun, matmul
from .expansion import decoded
from .term_errors import d_in_range, in_range, measure_terms


class Dist(Enum):
    """Distributions of random GEMM inputs."""

    NORMAL = "normal"  # standard normal
    UNIFORM = "uniform"  # uniform on [-1, 1)
    LOGNORMAL = "lognormal"  # exp(N(0, 1)) with a random sign: magnitudes over decades


def largest(fmt: Format) -> float:
    """The largest finite value of a format (random inputs are clipped to it)."""
    return float(ml_dtypes.finfo(FORMAT_DTYPE[fmt]).max)


def random_integers(shape: tuple[int, ...], fmt: Format, rng) -> np.ndarray:
    """A random operand of integer format `fmt`, every value of its range equally likely
    (s8 -128..127, u4 0..15, b1 0..1): s8 as int8 values (the dtype that carries s8),
    every other format as its unsigned bit patterns in a byte (u8 values are their
    patterns; s4 -1 is 0xf), as the GEMM commands and `matmul` read integer operands."""
    lo, hi = fmt.spec.int_range
    values = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    dt = INTEGER_DTYPE.get(fmt)
    if dt is not None and dt.kind == "i":
        return values.astype(dt)
    return (values & ((1 << fmt.spec.storage) - 1)).astype(np.uint8)


def random_matrix(shape: tuple[int, ...], fmt: Format, dist: Dist, rng) -> np.ndarray:
    """A random array of `fmt` (its float dtype), drawn in fp64, clipped to the format's
    range and rounded to nearest into it; an integer format uniformly over its whole
    range whatever `dist` (`random_integers`)."""
    if fmt.spec.is_integer:
        return random_integers(shape, fmt, rng)
    if dist == Dist.NORMAL:
        x = rng.standard_normal(shape)
    elif dist == Dist.UNIFORM:
        x = rng.uniform(-1.0, 1.0, shape)
    else:
        x = np.exp(rng.standard_normal(shape)) * rng.choice([-1.0, 1.0], shape)
    dt = FORMAT_DTYPE[fmt]
    top = largest(fmt)
    return np.clip(x, -top, top).astype(np.float32 if fmt == Format.TF32 else np.float64).astype(dt)


def exact_of_fp64(x: np.ndarray) -> Exact:
    """An fp64 matrix as an exact integer matrix (for errors against an fp64 matmul)."""
    try:
        return exact_matmul_c(x.view(np.uint64), Format.FP64)
    except ValueError:
        raise ValueError("the fp64 matmul has non-finite entries") from None


NOT_MEASURED = "not measured"
"""The reason in Measured.why_exact / why_fp64 of a run measured without errors."""


@dataclass(frozen=True)
class Measured:
    """A GEMM run and its figures; `exact` / `fp64` are None with a reason in `why_*`."""

    D: np.ndarray
    run: GemmRun
    seconds: float
    macs: int
    exact: ErrorStats | None
    fp64: ErrorStats | None
    why_exact: str = ""
    why_fp64: str = ""
    error_seconds: float = 0.0  # time spent measuring the errors

    @property
    def macs_per_s(self) -> float:
        return self.macs / self.seconds if self.seconds > 0 else float("inf")

    @property
    def out_fmt(self) -> Format:
        return self.run.schedule.out or self.run.params.d_fmt


def _bits(x: np.ndarray, fmt: Format) -> np.ndarray:
    return bits_of(x, fmt, "D").astype(UNSIGNED[fmt.spec.storage])


def run_measured(
    hyp: str,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray | None = None,
    instr: str | None = None,
    errors: bool = True,
    engine: str | Engine | None = None,
) -> Measured:
    """Run `hyp` on 2-D A, B (and C); time it; with `errors`, measure D against the exact
    product A*B (+ C) and against A*B (+ C) in fp64. `engine`: as for `matmul` (an Engine
    or its name, or None for engine/choice.py's default)."""
    info: list[GemmRun] = []
    t0 = time.perf_counter()
    D = matmul(hyp, A, B, C, instr=instr, run_info=info, engine=engine)
    dt = time.perf_counter() - t0
    run = info[0]
    M, K = A.shape
    N = B.shape[1]
    if not errors:
        return Measured(D, run, dt, M * N * K, None, None, NOT_MEASURED, NOT_MEASURED)
    t1 = time.perf_counter()
    exact, fp64, why_exact, why_fp64 = measure_errors(run, A, B, C, D)
    spent = time.perf_counter() - t1
    return Measured(D, run, dt, M * N * K, exact, fp64, why_exact, why_fp64, spent)


BLOCK_OUTPUTS = 1 << 15
"""Outputs per tile of D in the error measurements: the wide integers of one tile are
alive at a time (some tens of MiB), whatever the size of D."""
FAST_BLOCK_OUTPUTS = 1 << 16
"""Outputs per tile where the figures come from fp64 terms (gemm/term_errors.py): a few
fp64 arrays of a tile are alive at a time."""
PRODUCT_OUTPUTS = 1 << 18
"""Outputs of the rows whose digit products are formed at once (BLAS on whole rows of
B), measured in tiles of FAST_BLOCK_OUTPUTS."""
SCALE_RANGE = 64
"""alpha and beta powers of two within 2^-64 .. 2^64 keep the fp64 terms in range."""


def measure_errors(
    run: GemmRun,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray | None,
    D: np.ndarray,
    block_outputs: int | None = None,
) -> tuple[ErrorStats | None, ErrorStats | None, str, str]:
    """(exact, fp64, why_exact, why_fp64): the errors of the output D of `run` against
    the exact product A*B (+ C) and against it in fp64, measured tile by tile, tiles of D
    of about `block_outputs` outputs (BLOCK_OUTPUTS by default); the figures do not
    depend on the tile size."""
    parts = tiles(D.shape, block_outputs or BLOCK_OUTPUTS)
    out = run.schedule.out or run.params.d_fmt
    d_bits = _bits(D, out)
    p = run.params
    a_bits, b_bits = bits_of(A, p.a_fmt, "A"), bits_of(B, p.b_fmt, "B")
    c_bits = c_fmt = None
    if C is not None:
        c_fmt = c_format(p, run.schedule, format_of(C, "C"))
        c_bits = bits_of(np.broadcast_to(C, D.shape), c_fmt, "C")
    exact = fp64 = None
    why_exact = why_fp64 = ""
    sched = run.schedule
    alpha = float(np.float32(sched.alpha))  # the epilogue's fp32 scalars
    beta = float(np.float32(sched.c_beta))  # C joins the chain only when alpha = beta = 1
    if epilogue_format(p, out).spec.is_integer:  # int32 scalars, exact
        alpha, beta = float(sched.alpha), float(sched.c_beta)
    if beta == 0.0:  # beta = 0 does not read C
        C = None
    xor = p.bit_op == BitOp.XOR  # popc(a XOR b) is no sum of products: see below
    d_values = decoded(d_bits, out) if d_in_range(out) else None  # D once, for both
    try:
        if C is not None and not all_finite(c_bits, c_fmt, rows_per_block(c_bits, 1 << 20)):
            raise ValueError("the exact product needs a finite C")
        if not xor:
            exact = _exact_by_digits(
                p,
                a_bits,
                b_bits,
                c_bits,
                c_fmt,
                C is not None,
                alpha,
                beta,
                d_bits,
                out,
                block_outputs,
                d_values,
            )
        if not xor and exact is None:
            ab = Product(a_bits, p.a_fmt, b_bits, p.b_fmt)

            def exact_tile(rows: slice, cols: slice) -> Exact:  # D = alpha*A*B + beta*C
                xc = None if C is None else exact_matmul_c(c_bits[rows, cols], c_fmt)
                return _axpby(alpha, ab.tile(rows, cols), beta, xc)

            exact = measure_blocks(d_bits, out, ((t, exact_tile(*t)) for t in parts))
    except ValueError as e:
        why_exact = str(e)
    try:
        with np.errstate(invalid="ignore", over="ignore"):  # Inf/NaN inputs: NaN here
            fa, fb = _as_f64(A, p.a_fmt), _as_f64(B, p.b_fmt)
            if xor:  # a XOR b = a + b - 2ab on bits
                x64 = fa.sum(axis=1)[:, None] + fb.sum(axis=0)[None, :] - 2.0 * (fa @ fb)
            else:
                x64 = np.ascontiguousarray(fa @ fb)
            c64 = 0.0 if C is None else _as_f64(np.broadcast_to(C, D.shape), c_fmt)
            x64 *= alpha  # alpha * x64 + beta * c64, in place
            x64 += beta * c64
        if not np.isfinite(x64).all():
            raise ValueError("the fp64 matmul has non-finite entries")
        if d_in_range(out) and in_range(x64):  # one exact fp64 term per output
            fast = tiles(D.shape, block_outputs or FAST_BLOCK_OUTPUTS)
            fp64 = measure_terms(d_bits, out, ((t, [x64[t]]) for t in fast), d_values)
        else:
            fp64 = measure_blocks(d_bits, out, ((t, exact_of_fp64(x64[t])) for t in parts))
        if xor:  # integers below 2^53 (checked): the fp64 sum is the exact one
            if float(np.abs(x64).max(initial=0.0)) >= 2.0**53:
                why_exact = "the exact xor.popc sum exceeds 2^53"
            else:
                exact = fp64
    except ValueError as e:
        why_fp64 = str(e)
        if xor:
            why_exact = why_fp64
    return exact, fp64, why_exact, why_fp64


def _exact_by_digits(
    p,
    a_bits,
    b_bits,
    c_bits,
    c_fmt,
    with_c: bool,
    alpha: float,
    beta: float,
    d_bits: np.ndarray,
    out: Format,
    block_outputs: int | None,
    d_values: tuple[np.ndarray, np.ndarray] | None = None,
) -> ErrorStats | None:
    """The errors against alpha * A*B + beta * C from digit products (gemm/digits.py)
    and fp64 terms, or None where that way does not apply (grids or scalars outside
    its range, rows spanning too many binades: the exponent slices then do it)."""
    scalars = [alpha] + ([beta] if with_c else [])
    if not (
        DigitProduct.usable(p.a_fmt, p.b_fmt)
        and d_in_range(out)
        and (not with_c or d_in_range(c_fmt))
        and all(_power_of_two(x, SCALE_RANGE) for x in scalars)
    ):
        return None
    dp = DigitProduct(a_bits, p.a_fmt, b_bits, p.b_fmt)
    if not dp.finite:
        raise ValueError("the exact product needs finite A and B")
    if dp.products > MAX_PRODUCTS:
        return None
    M, N = np.shape(d_bits)
    block = block_outputs or FAST_BLOCK_OUTPUTS
    step = max(1, max(block, PRODUCT_OUTPUTS) // max(N, 1))

    def blocks():
        for r0 in range(0, M, step):  # whole rows: BLAS is fastest on contiguous B
            rows = slice(r0, min(r0 + step, M))
            terms = [t * alpha for t in dp.tile(rows, slice(None))]  # powers of two: exact
            if with_c:
                terms.append(decoded(c_bits[rows], c_fmt)[0] * beta)
            for r, c in tiles((rows.stop - r0, N), block):
                yield (slice(r0 + r.start, r0 + r.stop), c), [t[r, c] for t in terms]

    return measure_terms(d_bits, out, blocks(), d_values)


def _power_of_two(x: float, bits: int) -> bool:
    """Whether x is +-2^k for |k| <= bits."""
    m, e = math.frexp(x)
    return abs(m) == 0.5 and -bits < e <= bits + 1


def exact_matmul_c(c_bits: np.ndarray, c_fmt: Format) -> Exact:
    """C's values as an exact integer matrix."""
    g = grid_values(c_bits, c_fmt)
    if not g.finite.all():
        raise ValueError("the exact product needs a finite C")
    return grid_exact(g)


def _scaled(x: Exact, factor: float) -> Exact:
    """factor * x exactly (factor a finite float: an odd integer times a power of 2)."""
    num, den = factor.as_integer_ratio()  # den is a power of 2
    return Exact(x.w.times(num), x.lsb - (den.bit_length() - 1))


def _axpby(alpha: float, x: Exact, beta: float, c: Exact | None) -> Exact:
    """alpha * x + beta * c, exactly."""
    ax = x if alpha == 1.0 else _scaled(x, alpha)
    if c is None:
        return ax
    return ax.plus(c if beta == 1.0 else _scaled(c, beta))


def _as_f64(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Values of an operand array as fp64 (a TF32 operand: its top 19 bits, as the
    instruction reads it; an integer operand: its integer values, bit patterns of signed
    formats read in two's complement)."""
    if fmt.spec.is_integer:
        if x.dtype.kind == "i":
            return x.astype(np.float64)
        w = fmt.spec.storage
        v = x.astype(np.int64) & ((1 << w) - 1)
        if fmt.spec.signed:
            v = np.where(v >> (w - 1) != 0, v - (1 << w), v)
        return v.astype(np.float64)
    if x.dtype.kind == "u":
        x = x.astype(UNSIGNED[fmt.spec.storage]).view(FORMAT_DTYPE[fmt])
    if fmt == Format.TF32:
        x = (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return x.astype(np.float64)


def differ(x: np.ndarray, y: np.ndarray) -> int:
    """How many outputs differ: bit patterns when the dtypes agree, else values (NaN
    equal to NaN)."""
    if x.dtype == y.dtype:
        w = x.dtype.itemsize * 8
        return int((x.view(UNSIGNED[w]) != y.view(UNSIGNED[w])).sum())
    a, b = x.astype(np.float64), y.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return int((~same).sum())


def parse_shape(text: str) -> tuple[int, int, int]:
    """--random M,N,K -> three positive ints."""
    parts = [t.strip() for t in text.split(",")]
    try:
        m, n, k = (int(t) for t in parts)
    except ValueError:
        raise UserError(f"--random: {text!r} is not M,N,K (three positive integers)") from None
    if min(m, n, k) < 1 or m * n * k > 1 << 40:
        raise UserError(f"--random: {text!r}: M, N, K must be >= 1 and M*N*K <= 2^40")
    return m, n, k
