"""The solver commands on structured-sparse (mma.sp) instructions: `diff`, `prove`,
`find`, `bound` and `export` ask for one metadata (--meta, or every group's first
pattern) with the uncompressed row of A as inputs; a witness re-run through the public
API with the unit's entries of A; bad input as one line with exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
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
    assert "--meta 1,3" in rep["constraints"]
    w = {n: int(x["hex"], 16) for n, x in rep["witness"]["inputs"].items()}
    kept = [k for k in range(32) if k % 4 in (1, 3)]
    assert all(w[f"a{k}"] == 0 for k in range(32) if k not in kept)  # left out: +0
    a = [w[f"a{k}"] for k in kept]
    b = [w[f"b{k}"] for k in range(32)]
    got = [
        api.simulate_one(api.resolve(v, K32), a, b, w["c"], meta=rep["meta"])
        for v in rep["variants"]
    ]
    outs = rep["witness"]["outputs"]
    assert [f"{g:#010x}" for g in got] == [outs[v]["hex"] for v in rep["variants"]]
    assert got[0] != got[1]
    assert "--meta 1,3,1,3" in rep["witness"]["reproduce"]


@pytest.mark.skipif(len(available()) < 2, reason="needs two SMT solvers")
def test_prove_k16_equal_on_finite_inputs_and_default_metadata():
    r = CliRunner().invoke(
        main, ["prove", "hopper", "hopper[sparse=expanded]", "--instr", K16, "--finite"]
    )
    assert r.exit_code == 0, r.output
    assert "constraints: --finite --meta 0,1" in r.output  # the default, said
    assert "proved: the variants agree on every input" in r.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--meta", "3,1"], "--meta: group 0 selects [3, 1]"),
        (["--meta", "x"], "is not a comma-separated list of integers"),
        (["--meta", "0,1,2"], "--meta: expected 8 indices"),
        (["--meta", "0,1", "--fix", "a2=0x3c00"], "--fix a2: the metadata does not select a2"),
        (["--out", "w.csv"], "CSV has no columns for sparsity metadata"),  # before solving
    ],
)
def test_bad_sparse_questions_are_one_line(extra, message, tmp_path):
    r = CliRunner().invoke(
        main, ["diff", "hopper", "hopper[sparse=expanded]", "--instr", K16, *extra]
    )
    assert r.exit_code == 2 and message in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "hopper", "hopper[F=24]", "--meta", "0,1"],
        ["bound", "hopper", "--meta", "0,1"],
        ["export", "hopper", "hopper[F=24]", "--meta", "0,1"],
        ["find", "--arch", "hopper", "--property", "carry-bits", "--meta", "0,1"],
    ],
)
def test_meta_on_a_dense_instruction_is_one_line(args):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and "metadata given to a dense instruction" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_meta_where_no_sparse_instruction_is_asked_is_one_line():
    for args, message in (
        (["find", "--arch", "hopper", "--all", "--meta", "0,1"], "--meta asks one sparse"),
        (["bound", "hopper/serial", "--gemm", "--meta", "0,1"], "not --gemm"),
        (["diff", "hopper/serial", "hopper/fast-accum", "--meta", "0,1"], "not a GEMM"),
    ):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and message in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1


@pytest.mark.skipif(SOLVER is None, reason="needs an SMT solver")
def test_find_monotonicity_on_a_sparse_form_writes_vectors_with_metadata(tmp_path):
    """The concrete search finds Fasi's non-monotone pair on hopper's sparse k32 form for
    metadata 1,3; --out writes u and u_2 with the unit's 16 entries of A and the
    metadata, and the stored predictions are the unit's on them (d(u) > d(u_2))."""
    out = tmp_path / "m.json"
    args = ["find", "--arch", "hopper", "--property", "monotonicity", "--instr", K32]
    r = CliRunner().invoke(main, [*args, "--meta", "1,3", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    (q,) = json.loads(r.output)["queries"]
    assert q["verdict"] == "witness" and "--meta 1,3" in q["constraints"]
    u, u2 = json.loads(out.read_text())["vectors"]
    d = []
    for vec in (u, u2):
        assert vec["metadata"] == [1, 3] * 8 and len(vec["a"]) == 16
        a, b = [int(x, 16) for x in vec["a"]], [int(x, 16) for x in vec["b"]]
        c = int(vec["c"], 16)
        d.append(api.simulate_one(api.resolve("hopper", K32), a, b, c, meta=[1, 3] * 8))
        assert d[-1] == int(vec["predicted"]["hopper"], 16)
    assert value_of(d[0], Format.FP32) > value_of(d[1], Format.FP32)


@pytest.mark.slow  # about 55 s: the k-plus-1 proof is asked of two solvers
@pytest.mark.skipif(SOLVER is None, reason="needs an SMT solver")
def test_find_on_a_sparse_form_answers_as_its_dense_unit(tmp_path):
    """carry-bits on hopper's sparse k32 form: the unit is the dense fused group of its
    16 kept products (the chained-group query is not asked), k - 1 carry bits differ on
    a witness, and --out writes it with the unit's entries of A and the metadata."""
    out = tmp_path / "w.json"
    args = ["find", "--arch", "hopper", "--property", "carry-bits", "--instr", K32]
    r = CliRunner().invoke(main, [*args, "--meta", "2,3", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    answers = {a["id"]: a for a in rep["queries"]}
    assert answers["k-minus-1"]["verdict"] == "witness"
    assert "--meta 2,3" in answers["k-minus-1"]["constraints"]
    assert "k-plus-1-group" in rep["not_asked"]
    vec = json.loads(out.read_text())["vectors"][0]
    assert vec["metadata"] == [2, 3] * 8 and len(vec["a"]) == 16 and len(vec["b"]) == 32
    a, b = [int(x, 16) for x in vec["a"]], [int(x, 16) for x in vec["b"]]
    c = int(vec["c"], 16)
    for v, d in vec["predicted"].items():
        assert api.simulate_one(api.resolve(v, K32), a, b, c, meta=vec["metadata"]) == int(d, 16)


@pytest.mark.skipif(len(available()) < 2, reason="needs two SMT solvers")
def test_bound_on_a_sparse_form_is_its_dense_units():
    """The compressed hypothesis of the sparse k32 form is the dense unit of 16 products:
    its certified interval is that of hopper's dense m16n8k16 form (same composed upper
    bound, closed), and the witness re-runs through `tcsmt simulate --meta`."""
    got = {}
    for instr, extra in ((K32, ["--meta", "1,2"]), ("mma.m16n8k16.f32.f16.f16.f32", [])):
        r = CliRunner().invoke(main, ["bound", "hopper", "--instr", instr, *extra, "--json"])
        assert r.exit_code == 0, r.output
        got[instr] = json.loads(r.output)
    sp = got[K32]
    assert sp["upper"] == got["mma.m16n8k16.f32.f16.f16.f32"]["upper"]
    assert sp["status"] == "closed" and "--meta 1,2" in sp["class"]
    assert sp["witness"]["meta"] == [1, 2] * 8 and "--meta 1,2,1,2" in sp["reproduce"]


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


def test_queries_of_another_k_are_not_asked_of_a_sparse_form():
    """carry-bits' one-group proof runs variants of K = L; on ampere's sparse k32 form
    (dense unit: 16 products in groups of 8) that is no question about the sparse form,
    and find says why instead of asking it."""
    from tensorcore_smt.smt.library import get

    prop = get("carry-bits")
    skipped = dict(prop.skipped("ampere", K32))
    assert skipped["k-plus-1-group"].startswith("a variant of K=8; the sparse form has K=32")
    assert skipped["k-plus-1"] == "K=16 in 2 chained groups of L=8"  # the dense unit's groups
    assert [s.id for s, _ in prop.bind("ampere", K32)] == ["k-minus-1"]
    assert "k-plus-1-group" not in dict(prop.skipped("ampere", "m16n8k16.f32.f16.f16.f32"))


def test_terms_count_the_units_products_on_a_sparse_form():
    """--terms N on a sparse form leaves the first N products the metadata keeps free
    (not the first N positions, most of them pruned): with metadata 1,3 and N = 3 the
    free entries of A are a1, a3, a5, and every a and b from position 6 on is +0."""
    from tensorcore_smt.smt.query import (
        Constraint,
        ConstraintKind,
        Goal,
        fixed_inputs,
        make_query,
    )

    terms = (Constraint(ConstraintKind.TERMS, "ab", lo=3),)
    q = make_query("hopper", "hopper[F=24]", K32, Goal.DIFFER, terms, meta=[1, 3])
    fixed = fixed_inputs(q)
    free_a = [k for k in range(32) if f"a{k}" not in fixed]
    free_b = [k for k in range(32) if f"b{k}" not in fixed]
    assert free_a == [1, 3, 5] and free_b == list(range(6))
    assert "--terms 3" in [c.describe() for c in q.constraints]
