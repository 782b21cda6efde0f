"""Structured-sparse (mma.sp) instructions in the commands that cannot take their
metadata: `gemm`, `tc.matmul` and `validate` refuse them up front in one line (exit 2,
tc.UserError) naming the option and where the metadata goes; `exact` answers the
questions that hold for every metadata (the integer overflow bound, the exactness of the
compressed hypothesis) on the preset's dense instruction that is the sparse one's dense
unit, and refuses the rest in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.model import sparse
from tensorcore_smt.spec.presets import parse_variant

F16 = "mma.sp.m16n8k32.f32.f16.f16.f32"
S8 = "mma.sp.m16n8k64.s32.s8.s8.s32"
RNG = np.random.default_rng(43)


def _one_line_refusal(r, option: str) -> str:
    """The refusal's line, checked: exit 2, one line, naming `option` and the commands
    that take the metadata."""
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error: "), r.output
    assert option in lines[0] and "structured-sparse" in lines[0]
    assert "`tcsmt simulate --meta`" in lines[0] and "`tcsmt diff --meta`" in lines[0]
    return lines[0]


def test_gemm_refuses_a_sparse_instruction_up_front(tmp_path):
    out = tmp_path / "g.json"
    r = CliRunner().invoke(
        main, ["gemm", "--arch", "ampere", "--instr", F16, "--random", "4,4,64", "--out", out]
    )
    _one_line_refusal(r, "--instr")
    assert not out.exists()


def test_matmul_raises_user_error_naming_the_instruction():
    A = np.ones((4, 64), np.float16)
    B = np.ones((64, 4), np.float16)
    with pytest.raises(tc.UserError, match=r"mma\.sp\.m16n8k32.* is structured-sparse"):
        tc.matmul("ampere", A, B, instr=F16)


def test_validate_refuses_a_sparse_instruction_with_exit_2(tmp_path):
    args = ["validate", "--arch", "ampere", "--instr", F16, "--oracle", "variant:ampere"]
    r = CliRunner().invoke(main, [*args, "--rows", "100", "--workers", "1"])
    line = _one_line_refusal(r, "--instr")
    assert "validate's rows carry no metadata" in line


@pytest.mark.parametrize("arch,instr", [("ampere", S8), ("hopper", F16), ("hopper", S8)])
def test_dense_twin_is_the_sparse_unit_under_every_metadata(arch, instr):
    """Independent of the twin lookup: random rows with random metadata per row give
    the sparse instruction's bits and the twin's on the kept entries alike."""
    v = parse_variant(arch)
    p = v.params(instr)
    twin = v.dense_twin(instr)
    assert twin is not None and "sp" not in twin.split(".")[0]
    q = v.params(twin)
    n = 300
    pats = sparse.patterns(p)
    meta = np.array(
        [
            [x for _ in range(p.n_a // p.sparse_keep) for x in pats[RNG.integers(len(pats))]]
            for _ in range(n)
        ]
    )
    wa, wb, wc = (f.spec.storage for f in (p.a_fmt, p.b_fmt, p.c_fmt))
    a = RNG.integers(0, 1 << wa, (n, p.n_a), dtype=np.uint64)
    b = RNG.integers(0, 1 << wb, (n, p.K), dtype=np.uint64)
    c = RNG.integers(0, 1 << wc, n, dtype=np.uint64)
    d = api.simulate_params(p, a, b, c, meta=meta)
    groups = np.arange(p.n_a) // p.sparse_keep * p.sparse_group
    b_kept = np.take_along_axis(b, groups + meta, axis=1)
    assert d.tolist() == api.simulate_params(q, a, b_kept, c).tolist()


def test_exact_answers_the_integer_overflow_bound_of_a_sparse_form():
    r = CliRunner().invoke(main, ["exact", "hopper", "--instr", S8, "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["instr"] == S8
    # s8 x s8 terms lie in [-128*127, (-128)^2]: (2^31 - 1) // 2^14 kept products
    assert rep["term_range"] == [-128 * 127, 128 * 128]
    assert rep["overflow_free_K"] == (2**31 - 1) // (128 * 128) == 131071
    assert any("whatever the metadata" in x for x in rep["argument"])
    at, above = rep["at_K"], rep["witness"]
    assert at["wrap"] == at["satfinite"] == at["exact"] == 131071 * 128 * 128
    assert above["exact"] == 2**31 and above["wrap"] == -(2**31)
    assert above["satfinite"] == 2**31 - 1 and rep["not_run"] is None


@pytest.mark.slow  # two exactness searches (arguments, extreme rows): about a minute loaded
def test_exact_answers_a_compressed_float_form_on_its_dense_unit():
    args = ["exact", "ampere", "--slices", "7", "--instr", "mma.sp.m16n8k16.f32.bf16.bf16.f32"]
    r = CliRunner().invoke(main, [*args, "--timeout", "60", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    dense = CliRunner().invoke(
        main, [*args[:4], "--instr", rep["dense_unit"], "--timeout", "60", "--json"]
    )
    assert dense.exit_code == 0, dense.output
    want = json.loads(dense.output)
    assert rep["dense_unit"] == "m16n8k8.f32.bf16.bf16.f32"
    assert rep["accumulator_bound"] == want["accumulator_bound"] is not None
    assert rep["chain_exact_K"] == want["chain_exact_K"]


@pytest.mark.parametrize(
    "hyp,why",
    [
        ("ampere[sparse=expanded]", "the dense unit depends on it"),
        ("ampere/serial", "a GEMM schedule chains dense instructions"),
    ],
)
def test_exact_refuses_what_depends_on_the_metadata(hyp, why):
    args = ["exact", hyp, "--slices", "7", "--instr", "mma.sp.m16n8k32.f32.bf16.bf16.f32"]
    r = CliRunner().invoke(main, args)
    assert why in _one_line_refusal(r, "mma.sp.m16n8k32")
