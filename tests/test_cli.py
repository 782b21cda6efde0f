"""The `tcsmt` command line: answers, the vectors file path, and one-line errors (exit 2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_simulate_prints_hex_and_decimal():
    r = run(
        "simulate",
        "--arch",
        "volta",
        "--a",
        "0x3c00,0,0,0",
        "--b",
        "0x3c00,0,0,0",
        "--c",
        "0xbf7fffff",
    )
    assert r.exit_code == 0, r.output
    assert "d = 0x34000000 (1.1920928955078125e-07)" in r.output


def test_list_archs_names_every_preset_and_default_instruction():
    r = run("list", "archs")
    assert r.exit_code == 0
    for name in (
        "volta",
        "turing",
        "ampere",
        "ada",
        "hopper",
        "blackwell",
        "rtx-blackwell",
        "cdna2",
        "cdna3",
    ):
        assert f"{name}:" in r.output
    assert "* m8n8k4.f32.f16.f16.f32" in r.output
    assert "wgmma.m64n8k32.f32.e4m3.e4m3" in r.output
    assert "tcgen05.m64n8k16.kind::f16.f32.f16.f16" in r.output


def test_vectors_file_round_trip(tmp_path):
    src = tmp_path / "in.jsonl"
    rows = [
        {"a": ["0x3c00", "0", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0xbf7fffff"},
        {"a": ["0x4000", "0", "0", "0"], "b": ["0x4000", "0", "0", "0"], "c": "0x0"},
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    r = run("simulate", "--arch", "volta", "--vectors", str(src), "--out", str(out))
    assert r.exit_code == 0, r.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["d"] for g in got] == ["0x34000000", "0x40800000"]


def test_malformed_row_named_by_line_and_earlier_rows_kept(tmp_path):
    src = tmp_path / "in.jsonl"
    good = {"a": ["0x3c00", "0", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0x0"}
    bad = {"a": ["0x3c00", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0x0"}
    src.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    out = tmp_path / "out.jsonl"
    r = run("simulate", "--arch", "volta", "--vectors", str(src), "--out", str(out))
    assert r.exit_code == 2
    assert "in.jsonl:2:" in r.output and "Traceback" not in r.output
    assert json.loads(out.read_text())["d"] == "0x3f800000"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--arch", "volta", "--a", "0xzz,0,0,0", "--b", "0,0,0,0", "--c", "0"], "a[0]"),
        (["--arch", "volta", "--a", "0x3c00,0,0", "--b", "0,0,0,0", "--c", "0"], "expected 4"),
        (["--arch", "volta", "--a", "0x13c00,0,0,0", "--b", "0,0,0,0", "--c", "0"], "does not fit"),
        (
            ["--arch", "voltaa", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"],
            "unknown architecture",
        ),
        (
            [
                "--arch",
                "volta",
                "--instr",
                "m16n8k16.f32.f16.f16.f32",
                "--a",
                "0",
                "--b",
                "0",
                "--c",
                "0",
            ],
            "unknown instruction",
        ),
        (
            ["--arch", "volta[carry_bitz=2]", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"],
            "unknown model parameter",
        ),
        (
            ["--arch", "volta[carry_bits=two]", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"],
            "not an integer",
        ),
        (
            ["--arch", "volta[align=sideways]", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"],
            "not one of",
        ),
        (["--arch", "volta[", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"], "malformed"),
        (["--arch", "volta", "--vectors", "/nonexistent/x.jsonl"], "no such file"),
        (
            [
                "--arch",
                "hopper",
                "--instr",
                "m8n8k4.f32.f16.f16.f32",
                "--a",
                "0,0,0,0",
                "--b",
                "0,0,0,0",
                "--c",
                "0",
            ],
            "unknown instruction",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    r = run("simulate", *args)
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], r.output


def test_format_the_instruction_does_not_take_is_rejected():
    """bf16 bit patterns wider than 16 bits are refused for a bf16 instruction."""
    r = run(
        "simulate",
        "--arch",
        "ampere",
        "--instr",
        "m16n8k8.f32.bf16.bf16.f32",
        "--a",
        ",".join(["0x3f800000"] + ["0"] * 7),
        "--b",
        ",".join(["0"] * 8),
        "--c",
        "0",
    )
    assert r.exit_code == 2 and "does not fit in 16-bit bf16" in r.output
