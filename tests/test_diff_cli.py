"""`tcsmt diff`, `tcsmt prove`, `tcsmt export` end to end: the issue's acceptance
queries with real solvers, the exit codes, the reports, and one-line errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.solvers.backends import PLUGIN_ENV

TESTS = Path(__file__).parent


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def simulate_both(witness: dict, reproduce: str) -> list[str]:
    """Run the report's reproduce command through the CLI; return the d lines."""
    import shlex

    argv = shlex.split(reproduce)
    assert argv[:2] == ["tcsmt", "simulate"]
    r = run(*argv[1:])
    assert r.exit_code == 0, r.output
    return [line for line in r.output.splitlines() if line.startswith("d = ")]


def test_diff_volta_carry_bits_2_finds_a_witness_simulate_confirms():
    r = run("diff", "volta", "volta[carry_bits=2]", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["verdict"] == "witness"
    w = rep["witness"]
    assert w["rechecked_on_concrete_model"] and w["reproduces"]
    outs = list(w["outputs"].values())
    assert outs[0]["hex"] != outs[1]["hex"]
    d_lines = simulate_both(w, w["reproduce"])
    assert [line.split()[2] for line in d_lines] == [o["hex"] for o in outs]


def test_prove_volta_needs_no_fourth_carry_bit_confirmed_by_two_solvers():
    r = run("prove", "volta", "volta[carry_bits=4]", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["verdict"] == "unsat" and not rep["by_construction"]
    assert len(rep["agreeing_solvers"]) >= 2


def test_diff_ampere_nine_terms_three_carry_bits_finds_a_witness():
    r = run(
        "diff",
        "ampere",
        "ampere[carry_bits=3]",
        "--instr",
        "m16n8k8.f32.f16.f16.f32",
        "--solver",
        "bitwuzla",
        "--json",
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["witness"]["reproduces"]
    assert len([k for k in rep["witness"]["inputs"] if k.startswith("a")]) == 8


def test_diff_volta_turing_proves_them_equal():
    r = run("diff", "volta", "turing")
    assert r.exit_code == 1, r.output
    assert "proved: the variants agree on every input" in r.output


def test_prove_refuted_shows_the_witness_and_exits_1():
    r = run("prove", "volta", "volta[carry_bits=2]", "--solver", "bitwuzla")
    assert r.exit_code == 1, r.output
    assert "witness:" in r.output and "re-checked on the concrete model" in r.output
    assert "reproduce:   tcsmt simulate --arch volta --arch 'volta[carry_bits=2]'" in r.output


def test_constraints_hold_in_the_witness():
    r = run(
        "diff",
        "volta",
        "volta[carry_bits=2]",
        "--positive",
        "--fix",
        "a0=0x7bff",
        "--solver",
        "bitwuzla",
        "--json",
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    ins = rep["witness"]["inputs"]
    assert ins["a0"]["hex"] == "0x7bff"
    assert all(not v["value"].startswith("-") for v in ins.values())
    assert rep["constraints"] == ["--positive", "--fix a0=0x7bff"]


def test_proof_under_constraints_says_so():
    # One product (|p| < 4 units of 2^e_max) plus c (< 2 units) stays below the 8 units
    # a register with a single carry bit holds: with a1..a3 = 0 the variants agree.
    r = run(
        "diff",
        "volta",
        "volta[carry_bits=1]",
        "--fix",
        "a1=0",
        "--fix",
        "a2=0",
        "--fix",
        "a3=0",
        "--solver",
        "bitwuzla",
        "--no-confirm",
    )
    assert r.exit_code == 1, r.output
    assert "constraints: --fix a1=0x0 --fix a2=0x0 --fix a3=0x0" in r.output
    assert "satisfying the constraints" in r.output
    assert "not confirmed" in r.output


def test_window_constraint_is_respected_by_the_witness():
    r = run(
        "diff",
        "volta",
        "volta[carry_bits=2]",
        "--exponent-window",
        "-20:-3",
        "--solver",
        "bitwuzla",
        "--json",
    )
    assert r.exit_code == 0, r.output
    for v in json.loads(r.output)["witness"]["inputs"].values():
        x = abs(float(v["value"].split()[0]))
        assert x == 0 or 2.0**-20 <= x < 2.0**-2


def test_compare_errors_witness_is_checked_with_rationals():
    r = run(
        "diff",
        "--compare-errors",
        "volta[rounding=rne]",
        "volta",
        "--solver",
        "bitwuzla",
        "--json",
    )
    assert r.exit_code == 0, r.output
    w = json.loads(r.output)["witness"]
    ins = {k: int(v["hex"], 16) for k, v in w["inputs"].items()}
    exact = value_of(ins["c"], Format.FP32) + sum(
        value_of(ins[f"a{i}"], Format.FP16) * value_of(ins[f"b{i}"], Format.FP16) for i in range(4)
    )
    x, y = (value_of(int(o["hex"], 16), Format.FP32) for o in w["outputs"].values())
    assert abs(x - exact) < abs(y - exact)


def test_timeout_one_second_on_a_hard_query_is_unknown_quickly():
    t0 = time.monotonic()
    r = run("diff", "volta", "volta[carry_bits=2]", "--solver", "cvc5", "--timeout", "1")
    assert r.exit_code == 3, r.output
    assert time.monotonic() - t0 < 10
    assert "unknown" in r.output and "timeout after 1 s" in r.output


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.setenv(PLUGIN_ENV, "fake_solvers")
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.syspath_prepend(str(TESTS))


def test_crashing_solver_gives_unknown_and_the_cli_stays_alive(plugins):
    r = run("diff", "volta", "volta[carry_bits=2]", "--solver", "crash")
    assert r.exit_code == 3, r.output
    assert "crashed (SIGABRT)" in r.output
    assert "Traceback" not in r.output


def test_hanging_solver_with_timeout_gives_unknown(plugins):
    t0 = time.monotonic()
    r = run("prove", "volta", "volta[carry_bits=2]", "--solver", "hang", "--timeout", "1")
    assert r.exit_code == 3, r.output
    assert time.monotonic() - t0 < 10


def test_witness_that_does_not_reproduce_exits_4_and_is_not_shown_as_a_result(plugins):
    r = CliRunner().invoke(main, ["diff", "volta", "volta[carry_bits=2]", "--solver", "liar"])
    assert r.exit_code == 4, r.output
    assert "does not reproduce" in r.stderr
    assert "NOT reproduced on the concrete model" in r.output
    assert "the variants differ on this input" not in r.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["diff", "volta[carry_bits=", "volta"], "malformed variant"),
        (["diff", "volta", "volta[carry_bits]"], "is not name=value"),
        (["diff", "voltaa", "volta"], "unknown architecture"),
        (
            ["diff", "volta", "volta[carry_bits=2]", "--solver", "mathsat"],
            "unknown solver 'mathsat'",
        ),
        (["prove", "volta", "volta", "--solver", "mathsat"], "unknown solver"),
        (["diff", "volta", "cdna3"], "has no instruction"),
        (["diff", "volta", "volta", "--instr", "m16n8k16.f32.f16.f16.f32"], "unknown instruction"),
        (["diff", "volta", "volta", "--fix", "a9=0x3c00"], "no such input"),
        (["diff", "volta", "volta", "--fix", "a0=0xzz"], "a0"),
        (["diff", "volta", "volta", "--fix", "a0"], "NAME=HEX"),
        (["diff", "volta", "volta", "--exponent-window", "3"], "LO:HI"),
        (["diff", "volta", "volta", "--exponent-window", "5:3"], "above HI"),
        (["export", "volta", "volta", "--goal", "nope"], "nope"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, (r.output, r.stderr)
    assert needle in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error:"), r.stderr
    assert "Usage" not in r.stderr
    assert "Traceback" not in r.stderr


def test_export_writes_queries_dir_with_header(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("export", "volta", "volta[carry_bits=2]", "--positive")
    assert r.exit_code == 0, r.output
    path = Path(r.output.strip())
    assert path.parent.name == "queries"
    text = path.read_text()
    assert text.startswith("; tensorcore-smt")
    assert "constraints: --positive" in text and "(check-sat)" in text


def test_diff_export_option_lists_the_file(tmp_path):
    dst = tmp_path / "q.smt2"
    r = run("diff", "volta", "turing", "--export", str(dst))
    assert r.exit_code == 1
    assert f"wrote:       {dst}" in r.output
    assert dst.exists()


def test_diff_out_writes_a_vector_file_that_probe_reads(tmp_path):
    from tensorcore_smt.validation import vectors

    dst = tmp_path / "w.json"
    r = run("diff", "volta", "volta[carry_bits=2]", "--solver", "bitwuzla", "--out", str(dst))
    assert r.exit_code == 0, r.output
    vf = vectors.load(dst)
    assert vf.variants == ["volta", "volta[carry_bits=2]"]
    (v,) = vf.vectors
    assert v.predicted["volta"] != v.predicted["volta[carry_bits=2]"]
    r = run("probe", str(dst), "--out", str(tmp_path / "w.cu"))
    assert r.exit_code == 0, r.output
    assert "mma.sync.aligned.m8n8k4" in (tmp_path / "w.cu").read_text()
