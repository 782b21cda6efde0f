"""The decode memo (`formats.decode_memo`): inputs run through many models are decoded
once, and no output changes: GEMM hypotheses on a few rows give the bits of the plain
row interpreter, and a memoised decoding equals a fresh one."""

from __future__ import annotations

import numpy as np

from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.vector import VECTOR
from tensorcore_smt.formats import Format, decode, decode_memo
from tensorcore_smt.gemm.model import run_rows
from tensorcore_smt.identify.gemm import load_gemm_space
from tensorcore_smt.identify.pool import make_pool


def _fields(u) -> list:
    return [
        np.asarray(getattr(u, f).v).tolist() for f in ("sign", "exp", "sig", "is_zero", "is_nan")
    ]


def test_a_memoised_decoding_is_the_fresh_one_and_is_reused():
    bits = BV(VECTOR, np.arange(256, dtype=np.uint8), 8)
    memo: dict = {}
    with decode_memo(memo):
        first = decode(bits, Format.E4M3)
        assert decode(bits, Format.E4M3) is first  # the same object: decoded once
        other = decode(bits, Format.E5M2)  # another format: its own decoding
    assert _fields(first) == _fields(decode(bits, Format.E4M3))
    assert _fields(other) == _fields(decode(bits, Format.E5M2))
    with decode_memo(memo):  # a kept memo carries over to the next block
        assert decode(bits, Format.E4M3) is first
    assert decode(bits, Format.E4M3) is not first  # no memo outside a block


def test_gemm_space_runs_few_rows_through_the_memo_bit_for_bit():
    sp = load_gemm_space("hopper", 256, "wgmma.m64n8k32.f32.e4m3.e4m3")
    pool = make_pool(sp.base, 64, 2)
    a, b, c = pool.a[:20], pool.b[:20], pool.c[:20]
    hyps = [sp.preset(), *sp.neighbours(sp.preset())[:6]]
    for h in hyps:
        want = run_rows(sp.model(h), a, b, c)
        assert (sp.run(h, a, b, c) == want).all(), sp.expr(h)
    assert len(sp._inputs) == 1  # one row set, read once for every hypothesis
