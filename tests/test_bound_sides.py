"""`tcsmt bound --against` across instructions: an instruction per side
(`--against-instr`, `against_instr=`) or `--dtype` picking each side's library
instruction for that input format, e.g. A100's mma.sync bf16 against H100's wgmma bf16
(what tc.emulate runs on each). The witness and the sampled rows re-run on both models,
each on its own instruction; mismatched choices are one line with exit 2."""

from __future__ import annotations

import json
import shlex
from fractions import Fraction
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.certify.bound import bound
from tensorcore_smt.cli import main
from tensorcore_smt.cli.bound_sides import side_instructions
from tensorcore_smt.formats import value_of
from tensorcore_smt.smt.solve import Limits

TABLE = Path(__file__).resolve().parent.parent / "schedules" / "instructions.toml"
A100, H100 = "m16n8k16.f32.bf16.bf16.f32", "wgmma.m64n8k16.f32.bf16.bf16"


def _library(arch: str, key: str) -> str:
    """The instruction schedules/instructions.toml names, read here independently."""
    return tomllib.loads(TABLE.read_text())["instructions"][arch][key]


def _value(bits: int) -> Fraction:
    """An fp32 pattern's value (d and y of both units)."""
    return value_of(bits, api.resolve("ampere", A100).d_fmt)


def test_dtype_picks_each_sides_library_instruction():
    assert (_library("ampere", "bf16"), _library("hopper", "bf16")) == (A100, H100)
    assert side_instructions("ampere", "hopper", None, None, "bf16") == (A100, H100)
    # one preset on both sides: one instruction, nothing for the reference
    assert side_instructions("hopper", "hopper[F=24]", None, None, "bf16") == (H100, None)
    assert side_instructions("hopper", "exact", None, None, "bf16") == (H100, None)


def test_bound_across_instructions_reruns_the_witness_on_both_models():
    """The abs measure (no composed argument to wait for): each side's model is its own
    instruction's, and the witness's |d - y| re-runs on both, measured here."""
    cert = bound(
        "ampere",
        "hopper",
        instr=A100,
        against_instr=H100,
        measure="abs",
        timeout=1,
        limits=Limits("z3", 1),
        sample_rows=100,
        search_share=0.3,
        check_class=False,
    )
    q = cert.query
    assert (cert.instruction, q.instr_y) == (A100, H100)
    assert q.params[0] == api.resolve("ampere", A100)
    assert q.params[1] == api.resolve("hopper", H100)
    assert q.params[0] != q.params[1]
    assert cert.witness is not None and cert.lower > 0
    w = cert.witness
    a = [w[f"a{k}"] for k in range(16)]
    b = [w[f"b{k}"] for k in range(16)]
    d = api.simulate_one(api.resolve("ampere", A100), a, b, w["c"])
    y = api.simulate_one(api.resolve("hopper", H100), a, b, w["c"])
    assert (d, y) == tuple(cert.witness_outputs)
    assert abs(_value(d) - _value(y)) == cert.lower


@pytest.mark.slow  # a bound with its composed drift through the CLI: a minute or two loaded
def test_cli_dtype_bound_and_its_reproduce_lines():
    args = ["bound", "ampere", "--against", "hopper", "--dtype", "bf16", "--timeout", "5"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code in (0, 3), r.output
    rep = json.loads(r.output)
    assert (rep["instr"], rep["against_instr"]) == (A100, H100)
    # the drift U_X + U_Y is proved by composition; the witness attains lower
    assert rep["upper"] is not None and rep["upper_method"] == "composed"
    assert rep["witness"] is not None
    assert Fraction(rep["lower"]) <= Fraction(rep["upper"])
    outs = []
    for line in rep["reproduce"].split("; "):
        s = CliRunner().invoke(main, shlex.split(line)[1:])
        assert s.exit_code == 0, s.output
        outs.append(s.output.splitlines()[1].split()[2])
    assert outs == [rep["witness"]["d"], rep["witness"]["y"]]


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--against-instr", H100], "--against-instr: the exact result runs no instruction"),
        (["--against", "hopper", "--dtype", "bf16", "--instr", A100], "--dtype picks each"),
        (["--against", "hopper", "--dtype", "f64x"], "--dtype: 'f64x' is not an input format"),
        (
            [
                "--against",
                "hopper",
                "--instr",
                "m16n8k8.f32.bf16.bf16.f32",
                "--against-instr",
                H100,
            ],
            "differ in K on m16n8k8.f32.bf16.bf16.f32 and " + H100,
        ),
        (["--against", "hopper", "--against-instr", H100, "--gemm"], "a --gemm hypothesis"),
    ],
)
def test_bad_side_choices_are_one_line(extra, message):
    r = CliRunner().invoke(main, ["bound", "ampere", *extra, "--timeout", "5"])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.output
