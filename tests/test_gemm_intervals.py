"""GEMM intervals [L, U] of results/bounds.md: the composed U of truncating chains (steps
added, no absolute part where no sum can underflow: compose.nongrowing, chain_step,
fda_normal_sums) and the constructed worst-case columns of L (gemm.anchored_columns).

Every L is re-run here through tc.matmul and measured with Python fractions from the
input bits, independently of the certificate's own measure; the anchored columns are
also checked against their closed form (every product after the anchor lost)."""

from __future__ import annotations

import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.bv.dtypes import bit_view
from tensorcore_smt.certify.bound import default_class
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import (
    Argument,
    Refusal,
    chain_nodes,
    fda_normal_sums,
    gemm_bound,
    nongrowing,
)
from tensorcore_smt.certify.gemm import anchored_columns, gemm_certificate
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.gemm.hypothesis import parse_gemm
from tensorcore_smt.spec.presets import parse_variant

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
NORMAL = default_class() + (parse_where("normal-only"),)
GEMM_CLASS = NORMAL + (parse_where("exponent-window:c=-126:125"),)
ROWS = [  # the GEMM rows of results/bounds.md (bench/make_bounds.py GEMMS)
    ("hopper/serial", None, None),
    ("ampere/serial", None, None),
    ("hopper/cublas-fp8", None, FP8),
    ("hopper/fast-accum", None, FP8),
    ("ampere/serial", "hopper/serial", None),
    ("hopper/fast-accum", "hopper/cublas-fp8", FP8),
]


def _value(bits: int, fmt: Format) -> Fraction:
    v = value_of(int(bits), fmt)
    assert isinstance(v, Fraction), (bits, fmt)
    return v


def _rerun(hyp: str, instr, witness: dict) -> tuple[Fraction, Fraction, Fraction]:
    """(d, exact, M) of one column through tc.matmul, from its bits, with fractions."""
    h = parse_gemm(hyp, instr)
    p = h.params()
    from tensorcore_smt.gemm.element import c_format

    cf, of = c_format(p, h.schedule), h.schedule.out or p.d_fmt
    a = [int(x, 16) for x in witness["a"]]
    b = [int(x, 16) for x in witness["b"]]
    c = int(witness["c"], 16)
    A = np.array([a], dtype=np.uint64)
    B = np.array([b], dtype=np.uint64).T
    C = np.array([[c]], dtype=np.uint64)
    d = _value(
        bit_view(np.asarray(tc.matmul(h, A, B, C, instr=h.instr or h.instruction().name)))[0, 0], of
    )
    prods = [_value(x, p.a_fmt) * _value(y, p.b_fmt) for x, y in zip(a, b)]
    cv = _value(c, cf)
    return d, cv + sum(prods, Fraction(0)), abs(cv) + sum(map(abs, prods), Fraction(0))


def _check_lower(hyp, against, instr, cert) -> None:
    """The certificate's L is attained by its witness column, re-run and re-measured."""
    d, exact, M = _rerun(hyp, instr, cert.witness)
    ref = exact if against is None else _rerun(against, instr, cert.witness)[0]
    assert M > 0 and abs(d - ref) / M == cert.lower


# -- the premises of the argument, checked on the model -----------------------------------


@pytest.mark.parametrize(
    "arch,instr",
    [("hopper", FP8), ("hopper", "wgmma.m64n8k16.f32.f16.f16"), ("ampere", None)],
)
def test_truncating_steps_never_grow_a_running_sum(arch, instr):
    # compose.nongrowing's premise: |d| <= |c| + sum |a_k b_k| on every input, here on
    # random ones of mixed signs and magnitudes, subnormal operands included
    p = parse_variant(arch).params(instr)
    assert nongrowing(p)
    rng = random.Random(3)

    def draw(fmt: Format) -> int:
        s = fmt.spec
        while True:
            x = rng.getrandbits(s.storage)
            if isinstance(value_of(x, fmt), Fraction):
                return x

    n = 400
    A = np.array([[draw(p.a_fmt) for _ in range(p.K)] for _ in range(n)], dtype=np.uint64)
    B = np.array([[draw(p.b_fmt) for _ in range(p.K)] for _ in range(n)], dtype=np.uint64)
    C = np.array([draw(p.c_fmt) for _ in range(n)], dtype=np.uint64)
    D = bit_view(np.asarray(tc.simulate(p, None, A, B, C)))
    for i in range(n):
        v = value_of(int(D[i]), p.d_fmt)
        M = abs(_value(C[i], p.c_fmt)) + sum(
            (abs(_value(x, p.a_fmt) * _value(y, p.b_fmt)) for x, y in zip(A[i], B[i])),
            Fraction(0),
        )
        assert isinstance(v, Fraction) and abs(v) <= M


def test_no_underflow_lemma_premises():
    fp8 = parse_gemm("hopper/cublas-fp8", FP8).params()
    f16 = parse_gemm("hopper/serial", None).params()
    assert fda_normal_sums(fp8, GEMM_CLASS, c_in_chain=False) is not None
    assert fda_normal_sums(f16, GEMM_CLASS) is not None
    # subnormal operands, or a c the class leaves free in the chain: no lemma
    assert fda_normal_sums(f16, default_class()) is None
    assert fda_normal_sums(f16, default_class() + (parse_where("normal-only:ab"),)) is None
    # fp16 accumulators: a sum of normal fp16 products can be subnormal in fp16
    h = parse_variant("hopper").params("m16n8k16.f16.f16.f16.f16")
    assert fda_normal_sums(h, GEMM_CLASS) is None
    # bf16 products reach 2^-252: their cut sums can be subnormal in fp32
    bf = parse_variant("hopper").params("wgmma.m64n8k16.f32.bf16.bf16")
    assert fda_normal_sums(bf, GEMM_CLASS) is None


def test_no_underflow_lemma_on_cancelling_chains():
    # the lemma's claim, on the model: every running accumulator of a chain of FP8 wgmma
    # steps over normal inputs is 0 or normal, even where the products cancel c to the
    # last bit; and the step nodes it licenses (no absolute part) hold on each step
    p = parse_variant("hopper").params(FP8)
    first, later, _ = chain_nodes(p, GEMM_CLASS, normal_sums=True)
    assert first.b == 0 and later.b == 0
    rng = random.Random(5)
    fa = p.a_fmt
    rows_a, rows_b, cs = [], [], []
    for _ in range(300):
        e = rng.randint(-6, 2)
        a = [(rng.getrandbits(1) << 7) | ((e + 7 + rng.randint(0, 3)) << 3) | rng.getrandbits(3)]
        a += [(rng.getrandbits(1) << 7) | (rng.randint(1, 4) << 3) | rng.getrandbits(3)]
        a += [0] * (p.K - 2)
        b = [((rng.randint(1, 3)) << 3) | rng.getrandbits(3) for _ in range(p.K)]
        exact = sum(
            (_value(x, fa) * _value(y, p.b_fmt) for x, y in zip(a, b)),
            Fraction(0),
        )
        c = -exact + Fraction(rng.choice([0, 1, -1]), 2 ** rng.randint(20, 30))
        cs.append(tc.formats.round_fraction(c, p.c_fmt) if c else 0)
        rows_a.append(a)
        rows_b.append(b)
    D = bit_view(
        np.asarray(
            tc.simulate(
                p,
                None,
                np.array(rows_a, dtype=np.uint64),
                np.array(rows_b, dtype=np.uint64),
                np.array(cs, dtype=np.uint64),
            )
        )
    )
    for i in range(len(cs)):
        d = _value(D[i], p.d_fmt)
        assert d == 0 or abs(d) >= Fraction(2) ** -126
        cv = _value(cs[i], p.c_fmt)
        prods = [_value(x, fa) * _value(y, p.b_fmt) for x, y in zip(rows_a[i], rows_b[i])]
        mag = abs(cv) + sum(map(abs, prods), Fraction(0))
        err = abs(d - cv - sum(prods, Fraction(0)))
        assert err <= later.delta * mag  # b = 0: the step errs relatively


def test_composition_keeps_the_soundness_refusals():
    # a schedule step the argument does not model is refused, not composed
    r = gemm_bound(parse_gemm("hopper/serial[split_k=2,round_partials=all]", None), 512, NORMAL)
    assert isinstance(r, Refusal) and "round_partials" in r.reason
    # steps after the first on an fp16 accumulator keep their absolute parts
    h = parse_gemm("hopper/serial", "m16n8k16.f16.f16.f16.f16")
    first, later, _ = chain_nodes(h.params(), GEMM_CLASS)
    assert later.b > 0


# -- U: the composed bound, against the plain node algebra --------------------------------


@pytest.mark.parametrize("hyp,instr", [(r[0], r[2]) for r in ROWS if r[1] is None])
def test_steps_add_where_the_plain_form_multiplies(hyp, instr):
    h = parse_gemm(hyp, instr)
    p = h.params()
    arg = gemm_bound(h, 4096, GEMM_CLASS)
    assert isinstance(arg, Argument)
    node, later, _ = chain_nodes(p, GEMM_CLASS, normal_sums=True)
    steps = 4096 // p.K
    if h.schedule.promote is None:
        # one chain, no absolute part, C in the chain or +0 before it: sum of deltas
        # (plus the epilogue's addition of C where C joins after the chain)
        want = node.delta + (steps - 1) * later.delta
        assert want <= arg.upper <= want * (1 + Fraction(1, 2**20))
    else:
        # each chain of promote/K steps adds its deltas; the promotions add 2^-24 each
        per = h.schedule.promote // p.K
        want = node.delta + (per - 1) * later.delta
        assert want <= arg.upper <= want + (steps // per + 2) * Fraction(2, 2**24)
    assert any("never grow" in x for x in arg.lines)


# -- L: constructed columns, re-run and measured, and the ratio U/L ----------------------


@pytest.mark.parametrize("hyp,against", [("hopper/fast-accum", None), ("hopper/cublas-fp8", None)])
def test_anchored_columns_lose_every_product_after_the_anchor(hyp, against):
    # closed form: a chain whose running sum sits at 2^E loses each later dust product
    # d < 2^(E - F) whole, so the element's error is (n d) / (sum of its magnitudes)
    K = 512
    h = parse_gemm(hyp, FP8)
    p = h.params()
    cols = anchored_columns([h], K)
    assert cols
    a, b, c = cols[0]
    values = [_value(x, p.a_fmt) * _value(y, p.b_fmt) for x, y in zip(a, b)]
    top = max(values)
    E = top.numerator.bit_length() - 1
    assert top == Fraction(2) ** E and c == 0
    dust = [v for v in values if v != top]
    assert len(set(dust)) == 1 and dust[0] < Fraction(2) ** (E - p.F)
    anchors = values.count(top)  # one per chain of the plan
    assert anchors == (1 if h.schedule.promote is None else K // h.schedule.promote)
    w = {
        "a": [f"0x{x:02x}" for x in a],
        "b": [f"0x{x:02x}" for x in b],
        "c": "0x00000000",
    }
    d, exact, M = _rerun(hyp, FP8, w)
    assert d == anchors * top  # every dust product lost
    assert (exact - d) / M == len(dust) * dust[0] / (anchors * top + len(dust) * dust[0])


FAST = [
    ("hopper/serial", None, None, 256),
    ("hopper/cublas-fp8", None, FP8, 512),
    ("hopper/fast-accum", None, FP8, 1024),
    ("hopper/fast-accum", "hopper/cublas-fp8", FP8, 256),
]


def _interval(hyp, against, instr, K):
    cert = gemm_certificate(hyp, K, GEMM_CLASS, against=against, rows=2, instr=instr)
    assert cert.upper is not None and 0 < cert.lower <= cert.upper
    _check_lower(hyp, against, instr, cert)
    return cert


@pytest.mark.parametrize("hyp,against,instr,K", FAST)
def test_gemm_interval_within_a_factor_four(hyp, against, instr, K):
    cert = _interval(hyp, against, instr, K)
    assert cert.upper <= 4 * cert.lower, (float(cert.lower), float(cert.upper))
    assert cert.lower_from in ("repeated", "anchored")


@pytest.mark.slow
@pytest.mark.parametrize("K", [256, 1024, 4096, 16384])
@pytest.mark.parametrize("hyp,against,instr", ROWS)
def test_every_bounds_row_within_a_factor_four(hyp, against, instr, K):
    cert = _interval(hyp, against, instr, K)
    assert cert.upper <= 4 * cert.lower, (float(cert.lower), float(cert.upper))


def test_rows_are_the_tables():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import make_bounds

    assert make_bounds.GEMMS == ROWS and make_bounds.GEMM_K == (256, 1024, 4096, 16384)
    assert make_bounds.GEMM_CLASS == GEMM_CLASS
