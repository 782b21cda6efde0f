"""`tcsmt invariance`: the M at which row 0's recipe changes, witnesses checked with
tc.matmul independently of the command, identical recipes invariant, --against, bad input
one line with exit 2, and the live torch:cpu oracle checked against torch itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt import matmul
from tensorcore_smt.cli import main
from tensorcore_smt.hardware.library_calls import CallClass, Op, Precision
from tensorcore_smt.hardware.library_inputs import Kind, Operand, block
from tensorcore_smt.invariance.scan import Step, Verdict, against, scan
from tensorcore_smt.invariance.sources import HypothesisRanges, Recipe, parse_ms

SERIAL = "hopper"
SPLIT = "hopper/serial[split_k=2]"
TILE = "hopper/serial[split_tile=256]"
BF16 = CallClass(Op.MATMUL, Precision.BF16, True)


def run(*args):
    return CliRunner().invoke(main, ["invariance", *args])


def _row0_bits(hyp: str, w: dict, k: int, fmt) -> int:
    """Row 0, column w['column'] of A @ B under `hyp`, from the witness's seed; for a
    pair-probe witness, A's row and B's column built here from its pair and values."""
    if w["kind"] == "pair-probe":
        s, t, v, d = w["values"]
        i, j = w["pair"]
        a = np.full((1, k), t, np.float32)
        a[0, i] = s
        b = np.full((k, 1), v, np.float32)
        b[j, 0] = d
        assert fmt.spec.name == "bf16"
        import ml_dtypes

        a, b = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
        assert np.array_equal(a.astype(np.float32)[0, [i]], [s])  # exact in bf16
        out = np.asarray(matmul(hyp, a, b, out_dtype="bf16"))
        return int(out.view(np.uint16)[0, 0])
    kind = Kind(w["kind"])
    a = block(kind, fmt, w["seed"], Operand.A, np.array([0]), np.arange(k))
    b = block(kind, fmt, w["seed"], Operand.B, np.arange(k), np.array([w["column"]]))
    d = np.asarray(matmul(hyp, a, b, out_dtype="bf16"))
    return int(d.view(np.uint16)[0, 0])


def test_a_split_above_some_m_is_found_with_a_real_witness():
    r = run(
        "--hypothesis", f"{SERIAL}@1..200", "--hypothesis", f"{SPLIT}@201..",
        "--n", "32", "--k", "1024", "--m", "1..64,190..260", "--json",
    )  # fmt: skip
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    assert rep["verdict"] == "varies"
    (change,) = rep["changes"]
    assert (change["m_before"], change["m"]) == (200, 201)
    assert [s["m"] for s in rep["segments"]] == [[1, 200], [201, 260]]
    w = change["witness"]
    from tensorcore_smt.formats import Format

    got = (_row0_bits(SERIAL, w, 1024, Format.BF16), _row0_bits(SPLIT, w, 1024, Format.BF16))
    assert got[0] != got[1]
    assert [f"0x{x:04x}" for x in got] == w["d"]


def test_identical_recipes_are_invariant():
    r = run("--hypothesis", SPLIT, "--n", "16", "--k", "300", "--m", "1..4096")
    assert r.exit_code == 0, r.output
    assert r.output.strip().endswith("verdict     invariant")
    rep = scan(HypothesisRanges([SPLIT]), BF16, 16, 300, parse_ms("1..4096"))
    assert rep.changes == [] and rep.verdict == Verdict.INVARIANT


def test_a_change_that_does_not_change_bits_has_no_witness():
    """Without split-K the split-K tile width is never used: the two recipes are written
    differently but compute alike, so no try finds a witness; the scan says so plainly."""
    src = HypothesisRanges([f"{SERIAL}@1..3", f"{TILE}@4.."])
    rep = scan(src, BF16, 8, 128, [1, 2, 3, 4, 5], tries=3)
    assert [c.step for c in rep.changes] == [Step.NO_WITNESS]
    assert rep.verdict == Verdict.UNKNOWN
    r = run("--hypothesis", f"{SERIAL}@1..3", "--hypothesis", f"{TILE}@4..",
            "--n", "8", "--k", "128", "--m", "1..5", "--tries", "3")  # fmt: skip
    assert r.exit_code == 3 and "no witness found in 3 tries" in r.output


def test_against_a_second_source():
    one = HypothesisRanges([SPLIT])
    two = HypothesisRanges([f"{SERIAL}@1..99", f"{SPLIT}@100.."])
    rep = against(one, two, BF16, 32, 1024, list(range(90, 111)))
    assert [(s.lo, s.hi, s.step) for s in rep.segments] == [
        (90, 99, Step.DIFFERS),
        (100, 110, Step.SAME_RECIPE),
    ]
    assert rep.segments[0].witness is not None and rep.verdict == Verdict.VARIES
    same = against(one, HypothesisRanges([SPLIT]), BF16, 32, 1024, [1, 2])
    assert same.verdict == Verdict.INVARIANT


@pytest.mark.parametrize(
    "args, message",
    [
        (["--m", "5..2"], "LO <= HI"),
        (["--m", "0..3"], "must lie in"),
        (["--m", "1..x"], "is not M or LO..HI"),
        (["--m", "1", "--dtype", "int8"], "unknown call or dtype"),
        (["--m", "1", "--call", "scaled-mm"], "does not take bf16"),
    ],
)
def test_bad_input_is_one_line(args, message):
    r = run("--hypothesis", SERIAL, "--n", "4", "--k", "4", *args)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_uncovered_m_and_missing_source():
    r = run("--hypothesis", f"{SERIAL}@1..3", "--n", "4", "--k", "4", "--m", "1..5")
    assert r.exit_code == 2 and "no --hypothesis covers M = 4" in r.output
    r = run("--n", "4", "--k", "4", "--m", "1")
    assert r.exit_code == 2 and "give one of" in r.output


def test_live_torch_cpu_changes_are_torchs():
    torch = pytest.importorskip("torch")
    r = run("--oracle", "torch:cpu", "--n", "24", "--k", "2048", "--m", "1..6", "--json")
    rep = json.loads(r.output)
    assert r.exit_code == (1 if rep["changes"] else 0)
    # independent: torch's row 0 at each M on the same inputs
    from tensorcore_smt.hardware.library_inputs import device_operand

    A = device_operand(Kind.CANCEL, BF16.operand_format, 0, Operand.A, (6, 2048), 1, "cpu")[0]
    B = device_operand(Kind.CANCEL, BF16.operand_format, 0, Operand.B, (2048, 24), 1, "cpu")[0]
    rows = [(A[:m] @ B)[0].view(torch.int16).numpy() for m in range(1, 7)]
    want = [m + 1 for m in range(1, 6) if not np.array_equal(rows[m - 1], rows[m])]
    assert [c["m"] for c in rep["changes"]] == want


def test_recipe_identity_ignores_how():
    assert Recipe(SPLIT, None, "a").key == Recipe(SPLIT, None, "b").key


def test_the_pair_probe_tells_apart_what_random_rows_do_not():
    """bf16 at K = 11008, serial against a two-way split: the seeded random rows (6 tries)
    give row 0 the same bits under both, the cancellation probe does not, and its
    witness re-runs through tc.matmul on inputs built here."""
    from tensorcore_smt.formats import Format
    from tensorcore_smt.invariance.witness import probe_search, search

    r1 = Recipe(SERIAL)
    r2 = Recipe("hopper/serial[split_k=2,split=contiguous,split_tile=128,reduce=serial]")
    k = 11008
    w = probe_search(r1, r2, BF16, k)
    assert w is not None
    d = w.as_dict()
    got = (
        _row0_bits(r1.hypothesis, d, k, Format.BF16),
        _row0_bits(r2.hypothesis, d, k, Format.BF16),
    )
    assert got[0] != got[1] and [f"0x{x:04x}" for x in got] == d["d"]
    assert search(r1, r2, BF16, 8, k, tries=0) is not None
