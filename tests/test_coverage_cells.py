"""Every preset x instruction kind x command gets a correct answer or a one-line refusal.

The cells come from the instruction catalogue (tests/coverage_cells.py): an instruction
added to archs/*.toml is asked the same questions the day it lands. `make test-slow`
runs every cell; `make test` runs the cells of the cheap commands (every preset and
kind) and one cell of each expensive command, in this process through click's runner,
plus a few real processes; each prints how many cells answered and how many refused,
per command.
"""

from __future__ import annotations

import json

import coverage_cells as cc
import numpy as np
import pytest

from tensorcore_smt.certify import exact_gemm
from tensorcore_smt.gemm import emulate
from tensorcore_smt.spec.catalogue import PRESETS

CHEAP = (cc.Command.SIMULATE, cc.Command.GEMM, cc.Command.MATMUL, cc.Command.PROBE)
"""Commands whose cells take well under a second: the fast suite runs all of theirs."""

PENDING: dict[str, str] = {}
"""Cheap cells left out of the fast sample while a defect they show is being fixed
(cell id -> the defect); `make test-slow` still runs and reports them. Empty today."""

EXPENSIVE = (
    "blackwell/block-scaled/validate",
    "hopper/sparse/diff",
    "ampere/integer/prove",
    "hopper/sparse/prove",
    "cdna4/integer/find",
    "volta/float/bound",
    "ampere/integer/bound",
    "turing/integer/exact",
    "hopper/sparse/exact",
    "rtx-blackwell/block-scaled/exact",
    "hopper/float/emulate",
    "ampere/integer/emulate",
    "volta/float/reveal",
    "rdna3/float/reveal",
    "ampere/integer/reveal",
)
"""A few cells of each command that starts solvers, a cluster or torch, answered and
refused (about 40 s on one core)."""


def fast_sample() -> list[cc.Cell]:
    """The fast suite's cells: every cheap cell not pending, and the EXPENSIVE ones."""
    return [
        c for c in cc.cells() if (c.command in CHEAP and c.id not in PENDING) or c.id in EXPENSIVE
    ]


def _run(cells: list[cc.Cell], capsys, call=cc.invoke) -> list[tuple[cc.Cell, cc.Outcome]]:
    """Run the cells; print how many answered, refused and failed, per command."""
    results = [(c, cc.run_cell(c, call)) for c in cells]
    with capsys.disabled():
        print(f"\n{len(results)} coverage cells:\n{cc.summary(results)}")
        print(f"(not expressible, left out: {len(cc.not_expressible())} cells of all)")
    return results


def _failures(results) -> list[str]:
    return [f"{c.id} ({c.instr}): {o.detail}" for c, o in results if o.status == cc.Status.FAILED]


# --- the generator --------------------------------------------------------------------


def test_every_kind_of_every_preset_has_its_cells():
    """Each kind present among a preset's instructions has a representative of that kind
    and a cell for every command that can name it; kinds are read off the parameters."""
    all_cells = cc.cells()
    ids = {c.id for c in all_cells}
    for name, preset in PRESETS.items():
        kinds = {cc.kind_of(i.params) for i in preset.instructions.values()}
        reps = cc.representatives(preset)
        assert set(reps) == kinds, name
        for kind, inst in reps.items():
            assert cc.kind_of(inst.params) == kind
            for command in cc.Command:
                cell_id = f"{name}/{kind.value}/{command.value}"
                assert (cell_id in ids) == ((command, kind) not in cc.NOT_EXPRESSIBLE)
    # every kind occurs somewhere in today's catalogue
    assert {c.kind for c in all_cells} == set(cc.InstrKind)
    assert len(ids) == len(all_cells)


def test_cells_are_deterministic():
    assert cc.cells() == cc.cells()
    assert [c.id for c in fast_sample()] == [c.id for c in fast_sample()]
    ids = {c.id for c in cc.cells()}
    assert set(EXPENSIVE) <= ids and set(PENDING) <= ids  # no sample cell lost to a rename


def test_kinds_follow_the_parameters():
    p = PRESETS["ampere"].instructions
    assert cc.kind_of(p["m16n8k16.f32.f16.f16.f32"].params) == cc.InstrKind.FLOAT
    assert cc.kind_of(p["m16n8k32.s32.s8.s8.s32"].params) == cc.InstrKind.INTEGER
    assert cc.kind_of(p["mma.sp.m16n8k64.s32.s8.s8.s32"].params) == cc.InstrKind.SPARSE
    assert cc.kind_of(p["mma.sp.m16n8k32.f32.f16.f16.f32"].params) == cc.InstrKind.SPARSE
    scaled = [i for i in PRESETS["blackwell"].instructions.values() if i.params.scale_fmt]
    assert scaled and all(cc.kind_of(i.params) == cc.InstrKind.BLOCK_SCALED for i in scaled)


def test_exact_rows_are_exact():
    """The simulate reference: the row's d is the exact sum (rationals) in d's format,
    for every kind's representative."""
    from fractions import Fraction

    from tensorcore_smt.formats import value_of

    for preset in PRESETS.values():
        for inst in cc.representatives(preset).values():
            p = inst.params
            row = cc.exact_row(p)
            full = cc.expand(row.a, p, row.meta)
            exact = cc._value(row.c, p.c_fmt) + sum(
                cc._product(x, y, p) for x, y in zip(full, row.b)
            )
            got = cc._value(row.d, p.d_fmt) if p.d_fmt.spec.is_integer else value_of(row.d, p.d_fmt)
            assert Fraction(got) == exact != 0, inst.name


# --- the judge of one command line ----------------------------------------------------


def _inv(code, out="", err="", exc=None):
    return cc.Invocation([], code, out, err, exc)


def test_a_refusal_is_one_clean_line():
    with pytest.raises(cc.Refused):
        cc.check_refusal(_inv(2, err="tcsmt: error: --instr: no such instruction\n"))
    for bad in (
        _inv(2, err="tcsmt: error: one\nsecond line\n"),
        _inv(1, err="Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"),
        _inv(2, err="tcsmt: internal error: boom\n"),
        _inv(0, exc=KeyError("x")),
        _inv(2, out="question: ...\n", err="tcsmt: error: late\n"),  # after work began
    ):
        with pytest.raises(cc.CellFailure):
            cc.check_refusal(bad)
    with pytest.raises(cc.CellFailure):  # a usage problem with exit 1 or 3
        cc.expect(_inv(1, err="tcsmt: error: bad\n"), cc.Command.SIMULATE)
    with pytest.raises(cc.CellFailure):  # exit 3 without a word on why
        cc.undecided(_inv(3, out="verdict: 42\n"))
    assert cc.undecided(_inv(3, out="answer: unknown (timeout)\n")).startswith("exit 3")


def test_a_late_refusal_fails_its_cell(monkeypatch):
    """A one-line exit 2 after work began (here: any time at all) is no refusal."""

    def refuses(cell, tmp, call):
        raise cc.Refused("tcsmt: error: no")

    cell = cc.cells()[0]
    monkeypatch.setitem(cc.RUNNERS, cell.command, refuses)
    assert cc.run_cell(cell).status == cc.Status.REFUSED
    monkeypatch.setattr(cc, "REFUSE_WITHIN_S", -1.0)
    assert cc.run_cell(cell).status == cc.Status.FAILED


# --- fixes the cells found ----------------------------------------------------------------


def test_exact_gemm_claim_rows_round_each_value_once(monkeypatch):
    """`tcsmt exact volta --slices 7` ran 2 * 10^6 rational roundings (the claim's
    ~10^3 extreme rows, each entry encoded anew) and took minutes past its --timeout
    (cdna2: 7 * 10^4 more for the rows above the bound); each distinct slice value is
    now encoded once."""
    calls = []
    real = exact_gemm.round_fraction

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    def exact_product(hyp, A, B, **kwargs):  # fp16 slices: the exact sum, in fp32
        return (A.view(np.float16).astype(float) @ B.view(np.float16).astype(float)).astype(
            np.float32
        )

    exact_gemm.slice_pattern.cache_clear()
    monkeypatch.setattr(exact_gemm, "round_fraction", counting)
    monkeypatch.setattr(emulate, "matmul", exact_product)  # the rows, not the engine
    res = exact_gemm.gemm_exactness("volta/serial", 7, witness=False)
    assert res.K == 1040 and res.sound_rows > 500
    assert len(calls) < 50
    # the rows just above the instruction's bound (4096 rows of K + 1 values each)
    from tensorcore_smt.certify.exact import above_witness

    calls.clear()
    p = PRESETS["cdna2"].instructions["v_mfma_f32_32x32x8f16"].params
    assert above_witness(p, 7, 16648184) is not None
    assert len(calls) < 2 * 255 + 10


# --- the cells ------------------------------------------------------------------------


def test_fast_sample_of_cells(capsys):
    """Every cheap cell and one of each expensive command: answered or refused."""
    results = _run(fast_sample(), capsys)
    assert not _failures(results), "\n".join(_failures(results))
    asked = {c.command for c, _ in results}
    assert asked == set(cc.Command)


def test_cells_as_processes(capsys):
    """A few cells through the real `tcsmt` process: the same judgement as in process
    (one line on stderr, the exit code a user's shell sees)."""
    sample = [
        c
        for c in cc.cells()
        if c.id in ("rdna3/integer/simulate", "cdna3/float/gemm", "volta/float/reveal")
    ]
    results = _run(sample, capsys, cc.invoke_process)
    assert len(results) == 3
    assert not _failures(results), "\n".join(_failures(results))


@pytest.mark.slow
def test_every_cell(capsys):
    """Every (preset, kind, command) cell: a correct answer or a one-line refusal."""
    results = _run(cc.cells(), capsys)
    assert not _failures(results), "\n".join(_failures(results))


def test_sparse_rows_files_carry_their_metadata(tmp_path):
    """JSONL rows of an mma.sp form hold its kept entries and their `metadata` (as its
    vector files do): `simulate --vectors` returns the exact sums and `vectors new`
    predicts them (both refused every sparse row: a needed K entries, then n_a)."""
    reps = [
        (name, inst)
        for name, preset in PRESETS.items()
        for kind, inst in cc.representatives(preset).items()
        if kind == cc.InstrKind.SPARSE
    ]
    assert reps
    for name, inst in reps:
        path, rows = cc._rows_file(inst.params, tmp_path)
        out = cc.invoke(["simulate", "--arch", name, "--instr", inst.name, "--vectors", str(path)])
        assert out.code == 0, out.err
        got = [int(json.loads(line)["d"], 16) for line in out.out.splitlines()]
        assert got == [r.d for r in rows]
        vec = tmp_path / "v.json"
        args = ["vectors", "new", "--arch", name, "--instr", inst.name, "--rows", str(path)]
        assert cc.invoke([*args, "--out", str(vec)]).code == 0
        data = json.loads(vec.read_text())["vectors"]
        assert [int(v["predicted"][name], 16) for v in data] == [r.d for r in rows]
        assert [v["metadata"] for v in data] == [r.meta for r in rows]


BLOCK_SCALED = "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e5m2.e5m2.f32.ue8m0"


def test_constraints_on_inputs_leave_block_scales_alone(tmp_path):
    """A per-input constraint (--positive, --representable, the slices of `exact`) on a
    block-scaled form read its scale factors sa0.. as operand names: `tcsmt: error: not
    an operand name: 'sa0'` after the work began; the query is now built (exported
    here without a solver) and `exact` refuses block-scaled forms before any work."""
    out = tmp_path / "q.smt2"
    x, y = "rtx-blackwell", "rtx-blackwell[rounding=rne]"
    r = cc.invoke(["export", x, y, "--instr", BLOCK_SCALED, "--positive", "--out", str(out)])
    assert r.code == 0 and r.exc is None, r.err
    assert "(declare-fun sa0 () (_ BitVec 8))" in out.read_text()
    r = cc.invoke(["exact", "rtx-blackwell", "--instr", BLOCK_SCALED, "--slices", "3"])
    assert r.code == 2 and r.out == "" and len(r.err.splitlines()) == 1
    assert "is block-scaled" in r.err


def test_claim_rows_run_as_one_batch_as_one_at_a_time():
    """The claim's rows run as one batched tc.matmul: each row's error is the one a call
    of its own gives (exact and inexact rows mixed; the exact sum with Python ints)."""
    hyp, p, name = exact_gemm.checked_gemm("volta/serial", None)
    res = exact_gemm.GemmExactness("volta/serial", name, 7, None)
    rows = list(exact_gemm.claim_rows(1044, 127, p.K))[:6]  # 1044: past the proved K
    rows += [([127] * 1043 + [126], [127] * 1044)]
    batched = exact_gemm._inexact_rows(res, hyp, p, rows)
    single = [exact_gemm._inexact(res, hyp, p, a, b) for a, b in rows]
    assert batched == single
    assert any(e is None for e in single) and any(e is not None for e in single)
