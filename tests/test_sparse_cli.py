"""`tcsmt diff` and `tcsmt prove` on structured-sparse (mma.sp) instructions: the
metadata (--meta, or every group's first pattern), a witness re-run through the public
API, and bad input as one line with exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.solvers.runner import available

K32 = "mma.sp.m16n8k32.f32.f16.f16.f32"
K16 = "mma.sp.m16n8k16.f32.f16.f16.f32"
SOLVER = next((s for s in ("bitwuzla", "z3", "cvc5") if s in available()), None)


@pytest.mark.skipif(SOLVER is None, reason="needs an SMT solver")
def test_diff_finds_a_witness_that_reruns_through_the_api():
    args = ["diff", "hopper", "hopper[sparse=expanded]", "--instr", K32, "--finite"]
    r = CliRunner().invoke(main, [*args, "--meta", "1,3", "--solver", SOLVER, "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["verdict"] == "witness" and rep["meta"] == [1, 3] * 8
    w = rep["witness"]
    a = [int(w[f"a{j}"], 16) for j in range(16)]
    b = [int(w[f"b{k}"], 16) for k in range(32)]
    got = [
        api.simulate_one(api.resolve(v, K32), a, b, int(w["c"], 16), meta=rep["meta"])
        for v in rep["variants"]
    ]
    assert [f"{g:#010x}" for g in got] == list(rep["outputs"].values())
    assert got[0] != got[1]


@pytest.mark.skipif(len(available()) < 2, reason="needs two SMT solvers")
def test_prove_k16_equal_on_finite_inputs_and_default_metadata():
    r = CliRunner().invoke(
        main, ["prove", "hopper", "hopper[sparse=expanded]", "--instr", K16, "--finite"]
    )
    assert r.exit_code == 0, r.output
    assert "metadata:    0,1,0,1,0,1,0,1 (default: every group keeps 0,1)" in r.output
    assert "equal on every input with this metadata" in r.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--meta", "3,1"], "--meta: group 0 selects [3, 1]"),
        (["--meta", "x"], "is not a comma-separated list of integers"),
        (["--export", "q.smt2"], "--export: the sparse question is asked for one metadata"),
        (["--positive"], "--positive: not asked of a sparse"),
        (["--compare-errors"], "--compare-errors is not asked of a sparse"),
    ],
)
def test_bad_sparse_questions_are_one_line(extra, message, tmp_path):
    r = CliRunner().invoke(
        main, ["diff", "hopper", "hopper[sparse=expanded]", "--instr", K16, *extra]
    )
    assert r.exit_code == 2 and message in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_meta_on_a_dense_instruction_is_one_line():
    r = CliRunner().invoke(main, ["diff", "hopper", "hopper[F=24]", "--meta", "0,1"])
    assert r.exit_code == 2 and "metadata given to a dense instruction" in r.output


@pytest.mark.skipif(SOLVER is None, reason="needs an SMT solver")
def test_witness_file_probe_and_check(tmp_path):
    """diff --out writes the witness with its metadata; `tcsmt probe` writes its CUDA
    program; --check reads an output that says what the compressed unit computes."""
    out = tmp_path / "w.json"
    instr = "mma.sp::ordered_metadata.m16n8k32.f32.bf16.bf16.f32"
    args = ["diff", "hopper", "hopper[sparse=expanded]", "--instr", instr, "--finite"]
    r = CliRunner().invoke(main, [*args, "--meta", "2,3", "--solver", SOLVER, "--out", str(out)])
    assert r.exit_code == 0, r.output
    vec = json.loads(out.read_text())["vectors"][0]
    assert vec["metadata"] == [2, 3] * 8
    r = CliRunner().invoke(main, ["probe", str(out), "--out", str(tmp_path / "p.cu")])
    assert r.exit_code == 0, r.output
    assert "0xeeeeeeee" in (tmp_path / "p.cu").read_text()  # nibble 0b1110: kept 2 and 3
    (tmp_path / "o.txt").write_text(f"vector 0 d={vec['predicted']['hopper']}\n")
    r = CliRunner().invoke(main, ["probe", "--check", str(out), str(tmp_path / "o.txt")])
    assert r.exit_code == 0 and "follows hopper on every vector" in r.output
