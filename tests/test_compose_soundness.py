"""The composed GEMM bound against rows run through tc.matmul and measured with exact
rationals: a schedule whose output format differs from the instruction's d (the class,
the normalisation and the final conversion's overflow), chain steps whose running
accumulator is subnormal although every input is normal, and a brute-force sweep of a
tiny GEMM into a narrow output format."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.bv.dtypes import bit_view
from tensorcore_smt.certify.bound import default_class
from tensorcore_smt.certify.compose import (
    Argument,
    chain_nodes,
    gemm_bound,
    instruction,
    overflow_threshold,
)
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, round_fraction, value_of
from tensorcore_smt.gemm.element import c_format
from tensorcore_smt.gemm.hypothesis import GemmHypothesis, parse_gemm
from tensorcore_smt.smt.query import Constraint, ConstraintKind

Row = tuple[list[Fraction], list[Fraction], Fraction]


def _bits(x: Fraction, fmt: Format) -> int:
    """The bits of x in `fmt`, which must hold it exactly."""
    b = round_fraction(x, fmt)
    assert value_of(b, fmt) == x, (x, fmt)
    return b


def _errors(h: GemmHypothesis, K: int, rows: list[Row]) -> list[tuple[Fraction, Fraction | float]]:
    """(M, normwise error) of each row (a, b, c as exact values, padded with zeros to K)
    run through tc.matmul as one batch, the output read in the schedule's output format
    and C in the format it joins in."""
    p = h.params()
    out = h.schedule.out or p.d_fmt
    cf = c_format(p, h.schedule)
    A = np.array(
        [[[_bits(x, p.a_fmt) for x in a + [Fraction(0)] * (K - len(a))]] for a, _, _ in rows],
        dtype=np.uint64,
    )
    B = np.array(
        [[[_bits(x, p.b_fmt)] for x in b + [Fraction(0)] * (K - len(b))] for _, b, _ in rows],
        dtype=np.uint64,
    )
    C = np.array([[[_bits(c, cf)]] for _, _, c in rows], dtype=np.uint64)
    d = bit_view(np.asarray(tc.matmul(h, A, B, C, instr=h.instruction().name)))
    res = []
    for i, (a, b, c) in enumerate(rows):
        e = c + sum((x * y for x, y in zip(a, b)), Fraction(0))
        M = abs(c) + sum((abs(x * y) for x, y in zip(a, b)), Fraction(0))
        v = value_of(int(d[i, 0, 0]), out)
        if isinstance(v, float):
            res.append((M, float("inf")))
        else:
            res.append((M, abs(v - e) / M if M else Fraction(0 if v == e else 10**9)))
    return res


def _check(arg: Argument, errs) -> int:
    """Assert U >= every error of a row in the bound's class; the rows checked."""
    n = 0
    for M, err in errs:
        if arg.in_class(M):
            n += 1
            assert err <= arg.upper, (float(M), float(err), float(arg.upper))
    return n


OUT16 = "hopper/serial[out=fp16]"


def _random_rows(rng: random.Random, n: int, K: int, top: int) -> list[Row]:
    """Rows of fp16 a, b (exponents in [-14, top]) and fp32 c of mixed signs."""
    rows = []
    for _ in range(n):

        def val(lo: int, hi: int) -> Fraction:
            if rng.random() < 0.1:
                return Fraction(0)
            m = Fraction(1024 + rng.getrandbits(10), 1024)
            return (-1) ** rng.getrandbits(1) * m * Fraction(2) ** rng.randint(lo, hi)

        a = [val(-14, top) for _ in range(K)]
        b = [val(-14, top) for _ in range(K)]
        rows.append((a, b, val(-30, 2 * top)))
    return rows


def test_out_fp16_bound_covers_every_row_of_its_class():
    h = parse_gemm(OUT16)
    arg = gemm_bound(h, 16, default_class())
    assert isinstance(arg, Argument), arg
    t = Fraction(1, 2**20)
    z = [Fraction(0)] * 15
    tiny = ([t] + z, [t] + z, Fraction(0))  # M = 2^-40: fp16 returns 0, error 1
    big = ([Fraction(256)] * 16, [Fraction(256)] * 16, Fraction(0))  # M = 2^20: Inf
    edge = ([Fraction(1, 2**7)] + z, [Fraction(1, 2**7)] + z, Fraction(0))  # M = 2^-14
    errs = _errors(h, 16, [tiny, big, edge])
    assert errs[0][1] == 1 and errs[1][1] == float("inf")
    # the rows the output format cannot hold are outside the class the bound states
    assert not arg.in_class(errs[0][0]) and not arg.in_class(errs[1][0])
    assert arg.in_class(errs[2][0]) and errs[2][1] <= arg.upper
    # the class reaches fp16's largest magnitudes, and every row up there converts finitely
    assert arg.high is not None and arg.high > 32768
    rng = random.Random(5)
    rows = _random_rows(rng, 300, 16, 5)
    # rows at the top of the class: one large product beside many small ones
    for a, b, _ in _random_rows(rng, 60, 16, -3):
        x = Fraction(rng.randint(1024, 2047), 1024) * 2**7
        y = arg.high / (x * Fraction(2) ** rng.randint(0, 2))
        y = value_of(round_fraction(y, Format.FP16), Format.FP16)
        rows.append(([x] + a[1:], [y] + b[1:], Fraction(0)))
    assert _check(arg, _errors(h, 16, rows)) > 250


def test_final_conversion_that_can_overflow_restricts_the_class():
    # a default-class accumulator may err by a few per cent, so an element just below
    # fp16's largest value can round past its overflow threshold: the bound says where
    h = parse_gemm(OUT16)
    arg = gemm_bound(h, 64, default_class())
    assert isinstance(arg, Argument)
    assert any("class restricted" in x for x in arg.lines)
    assert arg.high is not None and 2**-14 < arg.high < 65504
    assert overflow_threshold(Format.FP16) == 65520  # 65504 + half its ulp
    # with normal operands the accumulator errs too little to reach it
    normal = gemm_bound(h, 64, default_class() + (Constraint(ConstraintKind.NORMAL_ONLY),))
    assert isinstance(normal, Argument) and normal.high == 65504
    assert not any("class restricted" in x for x in normal.lines)
    # rows at the top of either class convert to a finite fp16 within the bound
    rng = random.Random(3)
    for bound in (arg, normal):
        rows = []
        for a, b, _ in _random_rows(rng, 30, 64, -4):
            x = Fraction(rng.randint(1024, 2047), 1024) * 2**7
            y = value_of(round_fraction(bound.high / x, Format.FP16), Format.FP16)
            rows.append(([x] + a[1:], [y] + b[1:], Fraction(0)))
        errs = _errors(h, 64, rows)
        assert _check(bound, errs) > 5
        assert all(e != float("inf") for M, e in errs if bound.in_class(M))


@pytest.mark.parametrize("where", [[], ["--where", "normal-only"]])
def test_cli_gemm_out_fp16_ends_in_a_certificate(where):
    r = CliRunner().invoke(main, ["bound", OUT16, "--gemm", "--k", "16", "--rows", "24", *where])
    assert r.exit_code in (0, 3), r.output  # closed or open (docs/cli.md), never 4
    assert "internal error" not in r.output
    assert "upper:" in r.output and "proved by the composed argument" in r.output
    lower = float(r.output.split("lower:")[1].split()[0])
    upper = float(r.output.split("upper:")[1].split()[0])
    assert 0 < lower <= upper


def test_refusal_when_no_element_converts_finitely():
    # so deep a default-class chain of steps that can round up (CDNA3's round-down
    # groups, rounded to nearest) that the accumulator's bound exceeds fp16's whole
    # range: no class is left, and the reason is one line
    arg = gemm_bound(parse_gemm("cdna3/serial[out=fp16]"), 65536, default_class())
    assert not isinstance(arg, Argument)
    assert "fp16" in arg.reason and "\n" not in arg.reason
    # a truncating chain never grows its running sum (|d - e| <= |d| + |e| <= 2 M):
    # its accumulator stays within a factor 3 of M, and a class is left
    arg = gemm_bound(parse_gemm(OUT16), 65536, default_class())
    assert isinstance(arg, Argument) and arg.high > 60000 / 3


# chained steps: the running accumulator is the next step's c, and the class's
# constraints on c do not reach it

F16_CHAIN = "m16n8k8.f16.f16.f16.f16"
NORMAL_WINDOW = default_class() + (
    Constraint(ConstraintKind.NORMAL_ONLY, operands="abc"),
    Constraint(ConstraintKind.EXPONENT_WINDOW, operands="abc", lo=-14, hi=3),
)


def _subnormal_chain() -> tuple[GemmHypothesis, Row]:
    """A two-step chain of fp16 accumulators on a unit keeping F = 12 bits: every input
    normal, step 1 leaves 2^-24 (products 2^-15 + 2^-24 and -2^-15), and step 2's
    products, just below 2^-26, are cut to nothing against that subnormal leader."""
    h = parse_gemm("hopper[F=12]/serial", F16_CHAIN)
    z = [Fraction(0)] * 6
    a = [1 + Fraction(1, 2**9), Fraction(-1)] + z + [(2 - Fraction(1, 2**9)) / 2**14] * 8
    b = [Fraction(1, 2**15)] * 2 + z + [Fraction(1, 2**13)] * 8
    return h, (a, b, Fraction(0))


def test_later_chain_step_assumes_a_subnormal_accumulator():
    h, (a, b, c) = _subnormal_chain()
    p = h.params()
    ((M1, _),) = _errors(h, 8, [(a[:8], b[:8], c)])
    step1 = sum((x * y for x, y in zip(a[:8], b[:8])), Fraction(0))
    assert step1 == Fraction(1, 2**24) and M1 > 2**-14  # normal inputs, subnormal sum
    acc = np.array([_bits(step1, Format.FP16)], dtype=np.uint64)
    A = np.array([[_bits(x, p.a_fmt) for x in a[8:]]], dtype=np.uint64)
    B = np.array([[_bits(x, p.b_fmt) for x in b[8:]]], dtype=np.uint64)
    r = value_of(int(tc.simulate(p, None, A, B, acc)[0]), Format.FP16)
    s = step1 + sum((x * y for x, y in zip(a[8:], b[8:])), Fraction(0))
    mag = step1 + sum((abs(x * y) for x, y in zip(a[8:], b[8:])), Fraction(0))
    err = abs(r - s)
    first, later, _ = chain_nodes(p, NORMAL_WINDOW)
    assert err <= later.delta * mag + later.b  # (N) of the step that meets the sum
    # the node that takes the class's normal c does not hold for this step
    old, _ = instruction(p, NORMAL_WINDOW)
    assert old == first and err > old.delta * mag + old.b
    arg = gemm_bound(h, 16, NORMAL_WINDOW)
    assert isinstance(arg, Argument)
    ((M, gerr),) = _errors(h, 16, [(a, b, c)])
    assert arg.in_class(M) and gerr <= arg.upper


def test_subnormal_chains_sampled_against_the_bound():
    # rows whose step sums cancel to tiny values, over three steps
    h, _ = _subnormal_chain()
    arg = gemm_bound(h, 24, NORMAL_WINDOW)
    assert isinstance(arg, Argument)
    rng = random.Random(11)
    rows = []
    for _ in range(300):
        a, b = [], []
        for _ in range(3):
            m, e = rng.randint(1027, 2044), rng.randint(-18, -16)
            y = Fraction(1, 2 ** rng.randint(7, 8))
            a += [m * Fraction(2) ** e, -(m + rng.randint(-3, 3)) * Fraction(2) ** e]
            b += [y, y]
            a += [Fraction(rng.randint(1024, 2047), 1024) / 2**14 for _ in range(6)]
            b += [Fraction(1, 2 ** rng.randint(12, 14)) for _ in range(6)]
        rows.append((a, b, Fraction(0)))
    assert _check(arg, _errors(h, 24, rows)) > 100


# brute force: every row of a tiny class through a narrow output format


@pytest.mark.parametrize("sched", ["serial[out=e5m2]", "serial[out=e5m2,saturate=false]"])
def test_tiny_gemm_brute_force_within_bound(sched):
    h = parse_gemm(f"volta/{sched}")
    p = h.params()
    K = 2
    arg = gemm_bound(h, K, default_class())
    assert isinstance(arg, Argument), arg
    # a, b from a small set of fp16 values reaching e5m2's edges (2^-14 .. 57344)
    vals = [Fraction(0), Fraction(1, 2**7), Fraction(3, 2**9), Fraction(1),
            Fraction(7, 4), Fraction(-5, 4), Fraction(181), Fraction(-240)]  # fmt: skip
    cs = [Fraction(0), Fraction(1, 2**20), Fraction(-3, 2**15), Fraction(57000), Fraction(-1)]
    rows = [
        ([a0, a1], [b0, b1], c) for a0, a1, b0, b1 in itertools.product(vals, repeat=4) for c in cs
    ]
    errs = _errors(h, K, rows)
    worst = max((e for M, e in errs if arg.in_class(M)), default=Fraction(0))
    assert _check(arg, errs) > 1000
    assert 0 < worst <= arg.upper
    # rows beyond the class are the ones the output cannot hold
    assert any(not arg.in_class(M) for M, _ in errs)
    if h.schedule.saturates(Format.E5M2):
        assert all(e != float("inf") for _, e in errs)
    assert p.d_fmt == Format.FP32
