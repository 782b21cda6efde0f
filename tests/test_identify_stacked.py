"""GEMM hypotheses whose chains from +0 run stacked as lanes of one chain
(identify/stacked.py, `GemmSpace.run`) give the bits of the numpy interpreter's
`run_rows` on every row, for schedules with promoted chains, split-K partials, C joined
in the chain or in the epilogue, and rows kept across calls or not."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcore_smt.gemm.model import resolve_model, run_rows
from tensorcore_smt.gemm.schedule import parse_field
from tensorcore_smt.identify import gemm as identify_gemm
from tensorcore_smt.identify.gemm import load_gemm_space
from tensorcore_smt.identify.pool import make_pool
from tensorcore_smt.identify.stacked import layouts, zero_chains

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
SCHEDULES = [
    {"promote": "128", "split_k": "2"},
    {"promote": "64", "split_k": "2", "split": "interleaved"},
    {"split_k": "2"},
    {"split_k": "4", "split_tile": "64", "reduce": "tree"},
    {"promote": "128", "split_k": "2", "c_join": "epilogue"},
    {},  # one chain, C in it: nothing stacked
]


@pytest.fixture(scope="module")
def space():
    sp = load_gemm_space("hopper", 256, FP8)
    sp.compiled.enabled = False  # the numpy interpreter only
    return sp


def _hyp(sp, fields: dict[str, str], **inst):
    vals = {f"schedule.{k}": parse_field(k, v) for k, v in fields.items()}
    return sp.make(sp.families[0].name, {**vals, **inst})


@pytest.mark.parametrize(
    "fields", SCHEDULES, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "serial"
)
@pytest.mark.parametrize("n", [29, 300])
def test_stacked_runs_give_run_rows_bits(space, fields, n):
    pool = make_pool(space.base, n, seed=5)
    for inst in ({}, {"F": 9}, {"flush_outputs": True}):
        h = _hyp(space, fields, **inst)
        m = space.model(h)
        want = run_rows(m, pool.a, pool.b, pool.c)
        assert np.array_equal(space.run(h, pool.a, pool.b, pool.c), want)
        assert np.array_equal(space.run(h, pool.a, pool.b, pool.c), want)  # kept rows


def test_large_row_sets_run_stacked_in_passes(space, monkeypatch):
    monkeypatch.setattr(identify_gemm, "ROWS_PER_PASS", 128)
    pool = make_pool(space.base, 600, seed=6)
    h = _hyp(space, {"promote": "128", "split_k": "2"})
    want = run_rows(space.model(h), pool.a, pool.b, pool.c)
    assert np.array_equal(space.run(h, pool.a, pool.b, pool.c), want)


def test_which_chains_stack():
    m = resolve_model("hopper/serial[promote=128,split_k=2]", 512, FP8)
    assert zero_chains(m) == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
    assert layouts(zero_chains(m)) == [tuple(zero_chains(m))]
    # one chain that C joins: nothing to stack
    assert zero_chains(resolve_model("hopper/serial", 512, FP8)) is None
    # chains of two lengths (promote 128 over K = 320): two stacks
    m = resolve_model("hopper/serial[promote=128]", 320, FP8)
    assert sorted(len(x[0]) for x in layouts(zero_chains(m))) == [2, 4]
