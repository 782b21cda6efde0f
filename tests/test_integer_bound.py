"""tcsmt bound and tc.bound on integer units (issue 43, defect 3): answered at once by
the integer argument (certify/int_bound.py), checked against brute force on a small
class; .b1 XOR units and integer --gemm bounds refused in one line."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.model.params import IntClamp
from tensorcore_smt.spec.presets import parse_variant


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_bound_answers_integer_units_at_once():
    """`tcsmt bound` on s8 (failed after 15 s: "empty range for randrange()") and b1 AND
    units: [0, 0], closed, by the integer argument, in a few seconds; the report says
    why and where the unit does err (`tcsmt exact`)."""
    for arch, instr in (
        ("hopper", "m16n8k32.s32.s8.s8.s32"),
        ("ampere", "m16n8k256.s32.b1.b1.s32.and.popc"),
        ("rdna3", "v_wmma_i32_16x16x16_iu4_u4_i4_clamp"),
    ):
        r = run("bound", arch, "--instr", instr, "--json")
        assert r.exit_code == 0, r.output
        data = json.loads(r.output)
        assert Fraction(data["lower"]) == 0 == Fraction(data["upper"]), data
        assert data["status"] == "closed", data
        text = run("bound", arch, "--instr", instr).output
        assert "no wrap-around and no clamp acts" in text and f"tcsmt exact {arch}" in text


def test_bound_refuses_xor_popc_and_integer_gemms_in_one_line():
    """b1 XOR terms are not bounded by the class (the sampler made a 3 for a b1 input
    before); --gemm on an integer unit: one line, exit 2, pointing at tcsmt exact."""
    for args in (
        ("bound", "hopper", "--instr", "m8n8k128.s32.b1.b1.s32.xor.popc"),
        ("bound", "hopper", "--gemm", "--instr", "m16n8k32.s32.s8.s8.s32"),
    ):
        r = run(*args)
        assert r.exit_code == 2, r.output
        assert len(r.output.strip().splitlines()) == 1 and "tcsmt exact hopper" in r.output


def test_integer_bound_agrees_with_brute_force_on_a_small_class():
    """An s4 unit of K = 2 that clamps after every product (the most clamping reading):
    every input of s4 x s4 (65,536 rows) with c at the class's edge, |c| + sum |a_k b_k|
    = 2^31 - 1, gives the exact sum on the model, as tc.bound's [0, 0] says; one step
    past the edge, c + a_0 b_0 clamps and d differs from the exact sum on some rows, so
    the class is exactly where the answer holds."""
    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.formats import int_bits, int_value

    hyp, instr = "ampere[K=2,L=1,int_clamp=satfinite]", "m8n8k32.s32.s4.s4.s32"
    cert = tc.bound(hyp, instr=instr, timeout=60)
    assert cert.closed and cert.lower == 0 and cert.upper == 0
    p = parse_variant(hyp).params(instr)
    assert (p.K, p.L, p.int_clamp) == (2, 1, IntClamp.SATFINITE)
    v = np.arange(-8, 8)
    a0, a1, b0, b1 = (x.reshape(-1) for x in np.meshgrid(v, v, v, v, indexing="ij"))
    m = np.abs(a0 * b0) + np.abs(a1 * b1)
    t0 = a0 * b0
    top = (1 << 31) - 1
    for past in (0, 1):
        sign = np.where(t0 >= 0, 1, -1)  # c of the first term's sign: the partial peaks
        c = sign * np.minimum(top - m + past, top)
        bits = lambda xs, f: np.array([int_bits(int(x), f) for x in xs], dtype=np.uint64)  # noqa: E731
        A = np.stack([bits(a0, p.a_fmt), bits(a1, p.a_fmt)], axis=1)
        B = np.stack([bits(b0, p.b_fmt), bits(b1, p.b_fmt)], axis=1)
        D = simulate_params(p, A, B, bits(c, p.c_fmt))
        got = np.array([int_value(int(d), p.d_fmt) for d in D], dtype=np.int64)
        exact = c + a0 * b0 + a1 * b1
        wrong = int((got != exact).sum())
        if past == 0:
            assert wrong == 0
        else:
            assert wrong > 0  # past the edge the clamp acts
