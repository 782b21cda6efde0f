"""Constructed GEMM witnesses (identify/gemm_witness.py): rows whose partial sums associate
differently under two schedules, checked by running both schedules through `tc.matmul`
(the emulator a user calls) and the row interpreter, never by the construction itself."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.gemm.model import emulate_rows, resolve_model, run_rows
from tensorcore_smt.identify.gemm import load_gemm_space
from tensorcore_smt.identify.gemm_witness import (
    association_rows,
    constructed_witness,
    event_blocks,
    pair_rows,
)

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
HIDDEN = "hopper/serial[split_k=2,split=contiguous,promote=128]"


def test_event_blocks_are_the_chain_ends_of_every_plan_and_their_neighbours():
    # K = 512 in k-blocks of 32: 16 blocks; two contiguous splits, each promoted every
    # 128 elements (4 blocks): chains [0..3], [4..7], [8..11], [12..15]
    m = resolve_model(HIDDEN, 512, FP8)
    ends = {b for lo in range(0, 16, 4) for b in (lo, lo + 3)}
    want = {x for b in ends for x in (b - 1, b, b + 1) if 0 <= x < 16}
    assert event_blocks([m.plan]) == sorted(want)
    # one serial chain: only the ends of K
    serial = resolve_model("hopper/serial", 512, FP8)
    assert event_blocks([serial.plan]) == [0, 1, 14, 15]


def test_association_rows_hold_finite_values_and_few_terms():
    m = resolve_model(HIDDEN, 512, FP8)
    rows = association_rows(Format.E4M3, Format.E4M3, Format.FP32, 512, [m.plan], 256, seed=3)
    assert rows.a.shape == rows.b.shape == (256, 512) and rows.c.shape == (256,)
    vals = [value_of(int(x), Format.E4M3) for x in rows.a[:16].reshape(-1)]
    assert all(isinstance(v, Fraction) for v in vals)  # finite: exact values
    live = (rows.a != 0) & (rows.b != 0)
    # three terms, or a run of small terms between two events (at most one per block)
    assert live.sum(axis=1).max() <= 16 + 2
    assert (live.sum(axis=1) >= 2).mean() > 0.8


@pytest.mark.parametrize(
    "other",
    [
        "hopper/serial",
        "hopper/serial[promote=128]",
        "hopper/serial[split_k=2,split=contiguous]",
        "hopper/serial[split_k=2,split=contiguous,promote=64]",
        "hopper/serial[split_k=2,split=interleaved,promote=128]",
    ],
)
def test_constructed_witness_separates_the_schedules_through_tc_matmul(other):
    K = 512  # two splits of two promoted chains each (at K = 256 some of these are equal)
    ma, mb = resolve_model(HIDDEN, K, FP8), resolve_model(other, K, FP8)
    assert ma.plan != mb.plan
    w = constructed_witness(ma, mb)
    assert w is not None, other
    a, b, c = w
    # the emulator a user calls, on a 1 x K by K x 1 product, gives different outputs
    da, db = (d[0] for d in emulate_rows([ma, mb], [a], [b], [c]))
    assert da != db
    # and the row interpreter agrees with it on both
    rows = (a[None, :], b[None, :], np.asarray([c], np.uint64))
    assert int(run_rows(ma, *rows)[0]) == da and int(run_rows(mb, *rows)[0]) == db


def test_no_constructed_witness_between_equal_schedules():
    # K = 256: two splits of one 128-long promoted chain each compute what one split
    # promoted every 128 computes (the plans are equivalent, not equal)
    ma = resolve_model(HIDDEN, 256, FP8)
    mb = resolve_model("hopper/serial[promote=128]", 256, FP8)
    assert ma.plan != mb.plan
    assert constructed_witness(ma, mb, n=256) is None
    # two 128-wide tiles either way: split_tile 64 and 128 cut K = 256 alike
    K = 256
    ma = resolve_model("hopper/serial[split_k=2,split=contiguous]", K, FP8)
    mb = resolve_model("hopper/serial[split_k=2,split=contiguous,split_tile=64]", K, FP8)
    assert ma.plan == mb.plan
    assert constructed_witness(ma, mb, n=256) is None
    rows = pair_rows(ma, mb, 256)
    assert (run_rows(ma, rows.a, rows.b, rows.c) == run_rows(mb, rows.a, rows.b, rows.c)).all()


def test_gemm_space_builds_rows_only_for_differing_plans():
    sp = load_gemm_space("hopper", 512, FP8)
    fam = sp.families[0].name
    a = sp.make(fam, {"schedule.promote": 128})
    b = sp.make(fam, {"schedule.split_k": 2})
    rows = sp.structured_rows([a, b])
    assert rows is not None and len(rows) > 0
    assert sp.structured_rows([a, a]) is None


@pytest.mark.slow
def test_identify_gemm_k512_split_k_2_promote_128_settles_the_schedule():
    """The case of a user's report: K = 512, the default space (instruction parameters
    too). Every survivor splits K in two and promotes every 128, or is proved equal to
    one that does; the schedule's questions are answered by constructed rows. 8 to 13
    minutes here at load 3 to 10 (searches half of it, instruction-level solver
    questions a third; it did not end in 19 minutes before)."""
    r = CliRunner().invoke(
        main,
        [
            "identify", "--gemm", "--arch", "hopper", "--k", "512", "--instr", FP8,
            "--oracle", f"variant:{HIDDEN}", "--json",
        ],
    )  # fmt: skip
    doc = json.loads(r.output)
    assert doc["survivors"], doc["stopped"]
    settled = [
        s
        for s in doc["survivors"]
        if s["params"]["schedule.split_k"] == "2" and s["params"]["schedule.promote"] == "128"
    ]
    assert settled, doc["stopped"]
    for s in doc["survivors"]:
        if s not in settled:
            assert s["standing"] == "proved equal", s


def test_instruction_pairs_are_asked_on_the_instruction_and_their_witness_lifts():
    """Two GEMM hypotheses of one schedule that differ only in an instruction parameter
    (F) are asked on the instruction; an instruction row on which the two instructions
    differ (found here by running both on random rows, as a solver's witness would be)
    placed in a k-block separates the GEMM models through tc.matmul."""
    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.identify.pool import make_pool
    from tensorcore_smt.smt.query import Query

    sp = load_gemm_space("hopper", 256, FP8)
    fam = sp.families[0].name
    a = sp.make(fam, {"schedule.promote": 128})
    b = sp.make(fam, {"schedule.promote": 128, "F": sp.base.p.F - 3})
    pa, pb = sp.params(a).p, sp.params(b).p
    q = sp.reduced_query(a, b)
    assert isinstance(q, Query) and q.instruction == FP8 and q.params == (pa, pb)
    rows = make_pool(pa, 512, 1)  # instruction rows (K = 32)
    da = simulate_params(pa, rows.a, rows.b, rows.c)
    db = simulate_params(pb, rows.a, rows.b, rows.c)
    i = int(np.flatnonzero(da != db)[0])
    w = {f"a{k}": int(rows.a[i, k]) for k in range(32)}
    w |= {f"b{k}": int(rows.b[i, k]) for k in range(32)} | {"c": int(rows.c[i])}
    lifted = sp.lift_witness(a, b, w)
    assert lifted is not None
    ga, gb = sp.model(a), sp.model(b)
    outs = emulate_rows([ga, gb], [lifted[0]], [lifted[1]], [lifted[2]])
    assert outs[0][0] != outs[1][0]
    # a schedule difference, or a parameter the GEMM's own additions read: no reduction
    assert sp.reduced_query(a, sp.make(fam, {"schedule.promote": 64})) is None
    nan = sp.make(fam, {"schedule.promote": 128, "nan_bits": 0x7FC00000})
    assert sp.params(nan).p.nan_bits != pa.nan_bits and sp.reduced_query(a, nan) is None


@pytest.mark.slow  # about 10 s
def test_identify_gemm_climbs_every_family_seed_only_when_due(monkeypatch):
    """A GEMM space re-climbs every family's seed in the first search and after a
    confirmation round refuted a class, not after every oracle call; an instruction
    space keeps climbing them every round."""
    import tensorcore_smt.identify.loop as loop
    from tensorcore_smt.identify.gemm import make_gemm_oracle
    from tensorcore_smt.identify.space import resolve_space
    from tensorcore_smt.smt.solve import Limits

    calls: list[bool] = []
    real = loop.search

    def recorded(*args, **kw):
        calls.append(kw["all_seeds"])
        return real(*args, **kw)

    monkeypatch.setattr(loop, "search", recorded)
    small = Path(__file__).parent / "data" / "gemm-schedules-only.toml"
    sp = load_gemm_space("hopper", 256, FP8, small)
    hidden = "variant:hopper/serial[split_k=2,split=contiguous,promote=64]"
    ident = loop.Identifier(
        sp, make_gemm_oracle(hidden, sp), 200,
        Limits(solver="bitwuzla", timeout=5.0), max_questions=4,
    )  # fmt: skip
    res = ident.run()
    assert res.classes and len(calls) >= 2 and calls[0] is True
    confirms = [i for i, st in enumerate(res.steps) if st.kind == "confirm" and st.killed]
    assert calls.count(True) == 1 + len(confirms)
    assert not sp.reclimb_seeds and resolve_space("volta", None, None).reclimb_seeds


def test_instruction_pairs_reach_the_larger_pool_only_when_undecided():
    """A pair that differs only inside the instruction (carry_bits) is asked on the
    instruction; rows of K products from the larger pool are searched for it only once
    a solver left that question undecided, and never once it is proved equal. A pair of
    schedules (promote) is searched at once."""
    from tensorcore_smt.identify.gemm import make_gemm_oracle
    from tensorcore_smt.identify.loop import Identifier, Proof
    from tensorcore_smt.smt.solve import Limits, Verdict

    sp = load_gemm_space("hopper", 256, FP8, None)
    fam = sp.families[0].name
    rep = sp.make(fam, {"schedule.promote": 128})
    carry = sp.make(fam, {"schedule.promote": 128, "carry_bits": 6})
    sched = sp.make(fam, {"schedule.promote": 128, "schedule.split_k": 2})
    assert sp.instruction_only(rep, carry) and not sp.instruction_only(rep, sched)
    assert sp.reduced_query(rep, sched) is None and sp.reduced_query(rep, carry) is not None
    oracle = make_gemm_oracle(f"variant:{HIDDEN}", sp)
    ident = Identifier(sp, oracle, 200, Limits(timeout=1.0))
    assert ident._deep_due(rep, sched) and not ident._deep_due(rep, carry)
    ident.res.proofs.append(Proof(rep, carry, Verdict.UNKNOWN, [], 1.0))
    assert ident._deep_due(rep, carry)
    ident.res.proofs[-1] = Proof(rep, carry, Verdict.UNSAT, [], 1.0, True)
    assert not ident._deep_due(rep, carry)
