"""Parameter validation (issue: every override checked before any arithmetic): variant
overrides against the ranges of model/params.py, numeric options against those of
cli/options.py. Bad input exits 2 with one line naming the parameter and its range."""

from __future__ import annotations

import random
import string

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.cli.options import OPTION_RANGES
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import (
    PARAM_ENUMS,
    PARAM_FORMATS,
    PARAM_RANGES,
    ModelParams,
    check_params,
    describe_range,
    param_names,
    parse_value,
)
from tensorcore_smt.spec.presets import ALIASES, PRESETS, parse_variant
from tensorcore_smt.spec.published import own_instructions

ZERO4 = ("--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0")
BASES = ["volta", "ampere", "hopper", "cdna3", "matlab-h100-fp8", "valpey-volta"]


def _field_type(name: str) -> str:
    return {f: str(t) for f, t in ModelParams.__annotations__.items()}[name]


def _bad_int_texts(rng: random.Random, name: str) -> list[str]:
    r = PARAM_RANGES[name]
    out = [str(r.lo - 1), str(r.hi + 1), str(r.lo - rng.randint(2, 10**6))]
    out += [str(r.hi + rng.randint(2, 10**30)), hex(r.hi + rng.randint(1, 1 << 70))]
    out += rng.sample(["1.5", "abc", "", "0x", "--1", "1e3", "true", "0b2", "½", "1 2"], 3)
    if "None" not in _field_type(name):
        out.append("none")
    return out


def _junk(rng: random.Random, n: int = 6) -> str:
    alphabet = string.ascii_letters + string.digits + "-_.:+ "
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, n)))


def _bad_choice_texts(rng: random.Random, name: str) -> list[str]:
    """Values outside an enum, bool or format parameter's range."""
    ann = _field_type(name)
    if name in PARAM_FORMATS:
        outside = [f.spec.name for f in Format if f not in PARAM_FORMATS[name]]
        return outside + [_junk(rng) + "x" for _ in range(3)]
    if ann == "bool":
        return ["maybe", "2", "-1", "tru", _junk(rng) + "q"]
    enum = PARAM_ENUMS[ann.replace(" | None", "")]
    ok = {m.value for m in enum} | {m.name.lower() for m in enum}
    cands = [_junk(rng) + "z" for _ in range(4)] + ["", "0", "none"]
    return [c for c in cands if c.strip().lower() not in ok]


def bad_variants(seed: int = 13) -> list[tuple[str, str]]:
    """(expression, text the error must contain) for bad variant expressions."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < 1100:
        base = rng.choice(BASES)
        for name in PARAM_RANGES:
            for v in _bad_int_texts(rng, name):
                out.append((f"{base}[{name}={v}]", name))
        for name in param_names():
            if name in PARAM_RANGES:
                continue
            for v in _bad_choice_texts(rng, name):
                out.append((f"{base}[{name}={v}]", name))
        # a good override beside a bad one: the bad one is named
        out.append((f"{base}[F=20,carry_bits={-rng.randint(1, 99)}]", "carry_bits"))
        unknown = "p" + _junk(rng).replace(" ", "_")
        if unknown not in param_names():
            out.append((f"{base}[{unknown}=1]", "unknown model parameter"))
        out.append((f"{base}[nan_bits={hex(rng.randint(1 << 32, 1 << 63))}]", "nan_bits"))
        out += [
            (f"{base}[", "malformed"),
            (f"{base}[]", "malformed"),
            (f"{base}[F]", "malformed"),
            (f"{base}[F=3", "malformed"),
            (f"{base}]F=3[", "malformed"),
            (f"[F={rng.randint(0, 40)}]", "malformed"),
            (f"{base}x{rng.randint(0, 99)}", "unknown architecture"),
            # a parameter given twice, even with one value (the last no longer wins)
            (
                f"{base}[F={rng.randint(0, 40)},carry_bits=3,F={rng.randint(0, 40)}]",
                "F is given twice",
            ),
            (f"{base}[ align=exact,align = exact]", "align is given twice"),
        ]
    return out


FLOAT_OPTIONS = {"timeout", "search_seconds", "oracle_timeout"}
_VALIDATE = ["validate", "--arch", "volta", "--oracle", "variant:volta"]
COMMAND_OF = {
    "search_seconds": ["fit", "rows.jsonl", "--arch", "volta"],
    "oracle_timeout": ["identify", "--arch", "volta", "--oracle", "variant:volta"],
    **{k: _VALIDATE for k in ("workers", "rows", "chunk", "keep")},
    "slices": ["exact", "volta"],
}
"""The command each option is tried on (default: diff of two Volta variants)."""


def bad_options(seed: int = 13) -> list[tuple[list[str], str]]:
    """(option arguments, option name) for bad numeric option values."""
    rng = random.Random(seed)
    out: list[tuple[list[str], str]] = []
    for _ in range(12):
        for key, r in OPTION_RANGES.items():
            opt = f"--{key.replace('_', '-')}"
            vals = [
                str(r.lo if r.open_lo else r.lo - 1),
                str(-rng.randint(1, 10**9)),
                str(r.hi + rng.randint(1, 10**9)),
                "nan",
                "-inf",
                "inf",
                _junk(rng) + "x",
                "",
            ]
            if key not in FLOAT_OPTIONS:
                vals.append(f"{rng.randint(1, 9)}.5")
            out += [([opt, v], opt) for v in vals]
    return out


def _one_line(r) -> str:
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error: "), r.output
    return lines[0]


def test_fuzz_bad_variant_expressions_exit_2_one_line():
    cases = bad_variants()
    assert len(cases) >= 1000
    runner = CliRunner()
    for expr, needle in cases:
        r = runner.invoke(main, ["simulate", "--arch", expr, *ZERO4])
        line = _one_line(r)
        assert needle in line, (expr, line)
        if needle in PARAM_RANGES or needle in PARAM_FORMATS:
            assert "allowed" in line or "not one of" in line, (expr, line)


def test_fuzz_bad_option_values_exit_2_one_line():
    cases = bad_options()
    assert len(cases) >= 300
    runner = CliRunner()
    for args, opt in cases:
        key = opt[2:].replace("-", "_")
        cmd = COMMAND_OF.get(key, ["diff", "volta", "volta[carry_bits=2]"])
        r = runner.invoke(main, [*cmd, *args])
        line = _one_line(r)
        assert opt in line and "allowed" in line, (args, line)


def test_good_values_at_the_ends_of_each_range_are_accepted():
    for name, r in PARAM_RANGES.items():
        if name == "nan_bits":
            continue
        for v in (r.lo, r.hi):
            assert parse_value(name, str(v)) == v
    assert parse_value("nan_bits", "0x7fffffff") == 0x7FFFFFFF
    assert parse_value("carry_bits", "none") is None
    p = parse_variant("volta[carry_bits=0,F=64]").params()
    assert (p.carry_bits, p.F) == (0, 64)


def test_every_preset_instruction_and_alias_is_in_range():
    """The ranges admit every model the presets and aliases define."""
    for preset in PRESETS.values():
        for inst in preset.instructions.values():
            check_params(inst.params)
    for alias in ALIASES:
        for instr in own_instructions(alias):
            parse_variant(alias).params(instr)


def test_range_checked_before_any_arithmetic():
    """volta[carry_bits=-1] once failed deep inside with a negative shift count."""
    with pytest.raises(UserError, match=r"carry_bits=-1 is out of range; allowed: 0\.\.32"):
        parse_variant("volta[carry_bits=-1]")
    with pytest.raises(ValueError, match="F=100000 is out of range"):
        parse_variant("volta").params().with_(F=100000)  # the record itself checks, too


def test_ranges_that_depend_on_other_parameters():
    """rounding_fmt must be stored like d (e8m13 sits in fp32's bits, fp16 does not);
    Ootomo-Yokota's 2^-2s must be a normal number of d."""
    assert parse_variant("volta[rounding_fmt=e8m13]").params().rounding_fmt is not None
    with pytest.raises(UserError, match="rounding_fmt=fp16 is not stored like d"):
        parse_variant("volta[rounding_fmt=fp16]").params()
    assert parse_variant("volta[split=ootomo-yokota,split_scale=63]").params().split_scale == 63
    with pytest.raises(UserError, match=r"split_scale=64: .* 0\.\.63"):
        parse_variant("volta[split=ootomo-yokota,split_scale=64]").params()


def test_descriptions_name_every_parameter():
    """Every parameter is described by its range, its formats, true/false or its enum's
    values: none falls through to the bare type annotation."""
    assert param_names()
    for name in param_names():
        ann = _field_type(name)
        optional = "None" in ann
        text = describe_range(name)
        assert text != ann, f"{name}: described only by its type {ann}"
        if name in PARAM_RANGES:
            rng = PARAM_RANGES[name]
            assert text == rng.describe(optional), name
            assert rng.text or text.startswith(f"{rng.lo}..{rng.hi}"), name
        elif name in PARAM_FORMATS:
            assert text.startswith("one of "), name
            for f in PARAM_FORMATS[name]:
                assert f.spec.name in text, (name, f)
            assert text.endswith(", none") == optional, name
        elif ann == "bool":
            assert text == "true or false", name
        else:
            enum = PARAM_ENUMS[ann.replace(" | None", "")]
            assert text == "one of " + ", ".join(m.value for m in enum), name
