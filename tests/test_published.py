"""The published models (archs/published.toml) and the numbers their sources print.

- TC-EFT's A100 Ozaki witness: seven products 2047 * 2047 give 29331462 on the tensor
  core and 29331464 on CDNA3 (exactly 29331463), through tc.mma and tc.simulate, against
  the exact sum rounded by hand (Fractions).
- Each published hypothesis resolves, on every instruction it speaks of, to the stated
  values read through the source's notions (F = significand bits - 1, L = terms - 1, ...),
  and a significand width is observable: Hawkeye's 26 bits on Hopper keep the term 2^-25
  that 25 bits drop, as the exact-fraction reference says.
- make_published's pieces: a witness separating a published model from the preset is
  re-run on both models and written as a vector file with its probe program; the H100
  recordings are reproduced by the preset and not by the MATLAB FP8 belief.
- No user-facing text names a source by an internal file number ("paper 000").
"""

from __future__ import annotations

import importlib.util
import re
import sys
from enum import Enum
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.spec import published
from tensorcore_smt.validation import vectors as vec

ROOT = Path(__file__).resolve().parent.parent


def _make_published():
    spec = importlib.util.spec_from_file_location(
        "make_published", ROOT / "bench" / "make_published.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_published"] = mod
    spec.loader.exec_module(mod)
    return mod


# --- TC-EFT's A100 Ozaki witness -----------------------------------------------------------


def _fp32_rz(x: Fraction) -> Fraction:
    """x > 0 (normal in fp32) rounded toward zero to 24 significant bits."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    ulp = Fraction(2) ** (e - 23)
    return (x // ulp) * ulp


def _fp32_rne(x: Fraction) -> Fraction:
    """x > 0 (normal in fp32) rounded to nearest even at 24 significant bits."""
    down = _fp32_rz(x)
    e = down.numerator.bit_length() - down.denominator.bit_length()
    while Fraction(2) ** (e + 1) <= down:
        e += 1
    while Fraction(2) ** e > down:
        e -= 1
    ulp = Fraction(2) ** (e - 23)
    rest = x - down
    if rest > ulp / 2 or (rest == ulp / 2 and (down / ulp) % 2 == 1):
        return down + ulp
    return down


EXACT = 7 * Fraction(2047) ** 2


def test_ozaki_exact_sum_needs_25_bits():
    assert EXACT == 29331463  # the printed exact value
    assert _fp32_rz(EXACT) == 29331462 and _fp32_rne(EXACT) == 29331464


@pytest.mark.parametrize(
    "arch, instr, rounded",
    [
        ("ampere", "m16n8k16.f32.f16.f16.f32", _fp32_rz),  # the tensor core: 29331462
        ("cdna3", "v_mfma_f32_16x16x16_f16", _fp32_rne),  # CDNA3: 29331464
    ],
)
def test_tc_eft_ozaki_witness(arch, instr, rounded):
    """Seven products 2047 * 2047 and c = 0 in every row of D = A B + C."""
    p = tc.resolve(arch, instr)
    K = p.K
    M, N = (16, 8) if arch == "ampere" else (16, 16)
    A = np.zeros((M, K), dtype=np.float16)
    A[:, :7] = 2047
    B = np.zeros((K, N), dtype=np.float16)
    B[:7, :] = 2047
    D = tc.mma(arch, instr, A, B, np.zeros((M, N), dtype=np.float32))
    want = rounded(EXACT)
    assert want == {"ampere": 29331462, "cdna3": 29331464}[arch]
    assert np.all(D == np.float32(want))
    # the same through simulate, with the seven products spread over the row
    a = [2047.0 if k % 2 == 0 and k < 14 else 0.0 for k in range(K)]
    d = tc.simulate(arch, instr, [a], [a], [0.0])
    assert int(d[0]) == int(np.float32(want).view(np.uint32))


# --- the published hypotheses --------------------------------------------------------------


def test_stated_values_reach_the_model_on_every_instruction():
    """What a source states, read through its notions, is what the model runs."""
    hyps = published.hypotheses()
    assert {
        "valpey-volta",
        "hawkeye-hopper-fp8",
        "mmasim2-blackwell-fp4",
        "matlab-h100-fp8",
    } <= set(hyps)
    for name, h in hyps.items():
        v = tc.parse_variant(name)
        for instr in h.instructions:
            p = v.params(instr)
            for notion, value in h.stated:
                param, convert = published.NOTIONS.get(notion, (notion, None))
                want = convert(value) if convert else value
                got = getattr(p, param)
                if hasattr(got, "spec"):  # a Format
                    got = got.spec.name
                elif isinstance(got, Enum):
                    got = got.value
                assert got == want, (name, instr, notion, got, want)


def test_hawkeye_values_as_quoted():
    """The values Hawkeye states (as quoted), and the parameters they become."""
    h = published.hypotheses()
    ampere = dict(h["hawkeye-ampere"].parameters)
    hopper = dict(h["hawkeye-hopper"].parameters)
    fp8 = dict(h["hawkeye-hopper-fp8"].parameters)
    assert (ampere["e_zero"], ampere["F"], ampere["L"]) == (-132, 24, 8)
    assert (hopper["e_zero"], hopper["F"], hopper["L"]) == (-133, 25, 16)
    assert (fp8["e_zero"], fp8["F"], fp8["L"]) == (-139, 13, 32)
    assert fp8["product_exponent"] == "unnormalized" and fp8["rounding"] == "rz"
    assert h["hawkeye-hopper"].source.read == published.Read.SUMMARY
    assert "not read here" in h["hawkeye-hopper"].summary


def _truncated_sum_rz(terms: list[Fraction], F: int) -> Fraction:
    """Terms aligned to the largest one's exponent keeping F fraction bits (the rest
    truncated), summed exactly, rounded toward zero to fp32 (the exact-fraction reference
    of a fused dot-add)."""
    e_max = max(t.numerator.bit_length() - t.denominator.bit_length() for t in terms if t)
    big = max(abs(t) for t in terms)
    while Fraction(2) ** e_max > big:
        e_max -= 1
    while Fraction(2) ** (e_max + 1) <= big:
        e_max += 1
    step = Fraction(2) ** (e_max - F)
    total = sum(((abs(t) // step) * step) * (1 if t > 0 else -1) for t in terms)
    return _fp32_rz(total) if total > 0 else -_fp32_rz(-total)


def test_hawkeye_significand_width_is_observable():
    """1 - 2^-25 on Hopper's fp16 unit: 26 significand bits keep the 2^-25 term (fp32 RZ
    gives 1 - 2^-24), 25 bits drop it (1)."""
    instr = "m16n8k16.f32.f16.f16.f32"
    a = [1.0, 2.0**-12] + [0.0] * 14
    b = [1.0, -(2.0**-13)] + [0.0] * 14
    terms = [Fraction(1), -Fraction(1, 2**25)]
    for model, F in (("hawkeye-hopper", 25), ("hawkeye-hopper[F=24]", 24)):
        d = tc.simulate(model, instr, [a], [b], [0.0])
        got = Fraction(float(np.uint32(d[0]).view(np.float32)))
        assert got == _truncated_sum_rz(terms, F), model
    assert _truncated_sum_rz(terms, 25) == 1 - Fraction(1, 2**24)
    assert _truncated_sum_rz(terms, 24) == 1


# --- make_published ------------------------------------------------------------------------


def test_witness_rerun_and_written_with_its_probe(tmp_path):
    """MMA-Sim v1's Turing HMMA.884 (F = 24) against the preset (F = 23, Valpey et al.
    2025): a witness, re-run on both models, written as a vector file and a CUDA probe."""
    mp = _make_published()
    pair = mp.Pair("turing", "m8n8k4.f32.f16.f16.f32", "turing", "mmasim1-turing")
    o = mp.ask(pair, 20.0)
    assert pair.verdict == "separated", pair.how
    fields = mp.rerun(pair, o)
    mp.write_witness(pair, o, fields, tmp_path)
    vfile, probe = (tmp_path / Path(f).name for f in pair.files)
    vf = vec.load(vfile)
    (v,) = vf.vectors
    assert v.predicted["turing"] != v.predicted["mmasim1-turing"]
    assert vec.stale_predictions(vf) == []  # both predictions are what the model computes
    assert "mma.sync.aligned.m8n8k4" in probe.read_text()


def test_equal_parameters_are_equal_by_construction():
    mp = _make_published()
    pair = mp.Pair("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", "hopper", "mmasim2-hopper-fp8")
    assert mp.ask(pair, 5.0) is None
    assert pair.verdict == "equal" and "same parameters" in pair.how


def test_h100_recordings_tell_the_preset_from_the_matlab_belief():
    """The H100's FP8 mma.sync outputs (probe vectors and held-out rows): the preset
    reproduces every one, the MATLAB H100 model (one group of 32 at F = 13) not all."""
    mp = _make_published()
    recs = mp.recordings("m16n8k32.f32.e4m3.e4m3.f32")
    assert {r.what for r in recs} == {"H100 property-probe vectors", "H100 held-out random rows"}
    for rec in recs:
        n = len(rec.rows)
        assert n > 0
        assert mp.reproduces("hopper", "m16n8k32.f32.e4m3.e4m3.f32", rec) == n
        assert mp.reproduces("matlab-h100-fp8", "m16n8k32.f32.e4m3.e4m3.f32", rec) < n


# --- names users know ----------------------------------------------------------------------

_INTERNAL = re.compile(r"\bpapers? ?_?0\d\d\b|\bpaper0\d\d|seeds/0\d\d_", re.IGNORECASE)
_USER_FACING = [
    "README.md",
    "docs",
    "properties",
    "archs",
    "results",
    "tensorcore_smt",
    "bench",
    "spaces",
    "schedules",
]
_SUFFIXES = {".md", ".toml", ".json", ".py", ".txt", ".csv"}


def test_no_internal_paper_numbers_in_what_users_read():
    """Sources are cited by authors and year (Valpey et al. 2025), never as 'paper 000'."""
    bad = []
    for top in _USER_FACING:
        path = ROOT / top
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.suffix in _SUFFIXES]
        for f in files:
            if "__pycache__" in f.parts or f.stat().st_size > 5_000_000:
                continue
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if _INTERNAL.search(line):
                    bad.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()[:80]}")
    assert not bad, "\n".join(bad[:20])


def test_the_pattern_finds_internal_numbers():
    for text in ("paper 000 §4.3", "Paper 000's Table 4", "paper000-volta", "papers 001"):
        assert _INTERNAL.search(text), text
    for text in ("Valpey et al. 2025 §4.3", "2000 rows", "paper 2025"):
        assert not _INTERNAL.search(text), text


# --- the table's own checks ----------------------------------------------------------------

_SOURCE = (
    '[source.s]\ncite = "A et al. 2020"\nauthors = "A"\ntitle = "T"\nwhere = "W"\nread = "text"\n'
)


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            'source = "nope"\nbase = "volta"\ninstructions = []\nwhere = ""\n',
            "unknown source 'nope'",
        ),
        (
            'source = "s"\nbase = "volta"\ninstructions = []\nwhere = ""\nstated = { F = 23 }\n'
            "implied = { F = 24 }\n",
            "published.h: F is both stated and implied",
        ),
        (
            'source = "s"\nbase = "volta"\ninstructions = []\nwhere = ""\nstated = { flux = 3 }\n',
            "published.h: .*flux",
        ),
        (
            'source = "s"\nbase = "volta"\ninstructions = []\nwhere = ""\n'
            'stated = { output_rounding = "sideways" }\n',
            "published.h: .*sideways",
        ),
    ],
)
def test_a_malformed_entry_is_named(tmp_path, entry, message):
    path = tmp_path / "published.toml"
    path.write_text(_SOURCE + "[published.h]\n" + entry)
    with pytest.raises(ValueError, match=message):
        published.load(path)


def test_notions_map_through_one_table(tmp_path):
    """A source's notions become parameters by NOTIONS alone (no second rule)."""
    path = tmp_path / "published.toml"
    path.write_text(
        _SOURCE + '[published.h]\nsource = "s"\nbase = "hopper"\ninstructions = []\nwhere = ""\n'
        "stated = { significand_bits = 26, group_terms = 17, zero_exponent = -133, "
        'subnormals_normalised = true, output_rounding = "rne" }\n'
    )
    (h,) = published.load(path)[1].values()
    assert h.variant == "hopper[F=25,L=16,e_zero=-133,product_exponent=normalized,rounding=rne]"


def test_committed_witnesses_still_separate_and_have_probes():
    """Every witness file of results/published/ predicts what today's models compute, the
    two models still differ on it, and its probe program is beside it."""
    files = sorted((ROOT / "results" / "published").glob("*.json"))
    assert files, "make published writes the witnesses that separate a model from the preset"
    for path in files:
        vf = vec.load(path)
        assert vec.stale_predictions(vf) == [], path.name
        (v,) = vf.vectors
        x, y = vf.variants
        assert v.predicted[x] != v.predicted[y], path.name
        assert path.with_suffix(".cu").exists() or path.with_suffix(".hip").exists(), path.name
