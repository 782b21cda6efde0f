"""x86 VDPBF16PS as a unit: the preset against the Intel SDM's pseudocode in exact
rationals, the LLVM kernel of the `cpu:avx512bf16` oracle, and `identify` on it.

The SDM (VDPBF16PS, "Dot Product of BF16 Pairs Accumulated Into Packed Single
Precision"): per fp32 lane, srcdest += a1 * b1, then srcdest += a0 * b0, each an FMA
rounded to nearest even, denormal inputs read as zeros (DAZ), denormal results flushed
(FTZ); NaN priority (Table 5-1) a0, b0, a1, b1, c; the default NaN 0xFFC00000.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.api import simulate_params
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.identify import cpu
from tensorcore_smt.identify.loop import identify
from tensorcore_smt.identify.oracle import make_oracle
from tensorcore_smt.identify.report import recovered, to_text
from tensorcore_smt.identify.space import resolve_space
from tensorcore_smt.smt.solve import Limits
from tensorcore_smt.spec.presets import PRESETS

ARCH = "x86-avx512bf16"
P = PRESETS[ARCH].instructions["vdpbf16ps"].params
HAS_BF16 = not cpu.missing_features()

# --- the SDM in exact rationals --------------------------------------------------------

NAN, INF = "nan", "inf"


def _value(bits: int, ebits: int, mbits: int):
    """(sign, magnitude) of an IEEE pattern: magnitude a Fraction, INF or NAN; DAZ."""
    sign = bits >> (ebits + mbits) & 1
    e = bits >> mbits & ((1 << ebits) - 1)
    m = bits & ((1 << mbits) - 1)
    if e == (1 << ebits) - 1:
        return sign, NAN if m else INF
    if e == 0:
        return sign, Fraction(0)  # zero, and a denormal read as zero of its sign (DAZ)
    bias = (1 << (ebits - 1)) - 1
    return sign, Fraction((1 << mbits) | m) * Fraction(2) ** (e - bias - mbits)


def _round_fp32(x: Fraction) -> int:
    """|x| > 0 rounded to fp32 to nearest even (the pattern without sign), FTZ: a
    subnormal rounded result is zero; overflow to Inf."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    q = max(e, -126) - 23  # the quantum of x's binade (the subnormal one below 2^-126)
    n = x / Fraction(2) ** q
    r = n.numerator // n.denominator
    rest = n - r
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and r % 2):
        r += 1
    v = Fraction(r) * Fraction(2) ** q
    if v < Fraction(2) ** -126:
        return 0
    if v >= Fraction(2) ** 128:
        return 0x7F800000
    e = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** e > v:
        e -= 1
    mant = v / Fraction(2) ** (e - 23)
    return (e + 127) << 23 | (int(mant) - (1 << 23))


def _fma(sa, a, sb, b, sc, c) -> tuple[int, object]:
    """a * b + c with one rounding, on (sign, magnitude) values without NaNs."""
    sp = sa ^ sb
    if (a == INF and b == 0) or (a == 0 and b == INF):
        return 1, NAN
    if INF in (a, b):
        if c == INF and sc != sp:
            return 1, NAN
        return sp, INF
    if c == INF:
        return sc, INF
    exact = (-1) ** sp * a * b + (-1) ** sc * c
    if exact == 0:
        zero_sign = sp if (a * b == 0 and c == 0 and sp == sc) else 0
        return zero_sign, Fraction(0)
    bits = _round_fp32(abs(exact))
    s = int(exact < 0)
    if bits == 0x7F800000:
        return s, INF
    return s, bits


def sdm(a: list[int], b: list[int], c: int) -> int:
    """The SDM's VDPBF16PS lane on bf16 a = (a0, a1), b = (b0, b1) and fp32 c."""
    for x, w in ((a[0], 16), (b[0], 16), (a[1], 16), (b[1], 16), (c, 32)):
        if _value(x, 8, w - 9)[1] == NAN:
            return (x << (32 - w)) | 0x00400000
    acc = _value(c, 8, 23)
    for k in (1, 0):
        sa, va = _value(a[k], 8, 7)
        sb, vb = _value(b[k], 8, 7)
        s, v = _fma(sa, va, sb, vb, *acc)
        if v == NAN:
            return 0xFFC00000
        if v == INF:
            acc = (s, INF)
        elif isinstance(v, Fraction):
            acc = (s, v)
        else:
            acc = _value(s << 31 | v, 8, 23)
    s, v = acc
    if v == INF:
        return s << 31 | 0x7F800000
    return s << 31 | (_round_fp32(v) if v else 0)


# hand-picked rows (a0, a1), (b0, b1), c and what the SDM's order and flushes decide
ROWS = [
    # 1 * 1 + 1 * 1 + 1 = 3
    ([0x3F80, 0x3F80], [0x3F80, 0x3F80], 0x3F800000),
    # c = 1, a1 b1 = 2^-24 (a tie to even: lost), a0 b0 = 2^-24: 1 + 2^-24 + 2^-24 gives 1
    # step by step, 1 + 2^-23 rounded once
    ([0x3380, 0x3380], [0x3F80, 0x3F80], 0x3F800000),
    # odd product first: c = 2^24, a1 b1 = 1 (tie, lost), a0 b0 = -2^24: 0 (even first:
    # 2^24 - 2^24 = 0, then + 1 = 1)
    ([0xCB80, 0x3F80], [0x3F80, 0x3F80], 0x4B800000),
    # DAZ: a denormal bf16 input is a zero of its sign: -0 * 1 + -0 * 1 + -0 = -0
    ([0x8001, 0x8001], [0x3F80, 0x3F80], 0x80000000),
    # FTZ: 2^-100 * 2^-30 = 2^-130 is a denormal result: 0
    ([0x0000, 0x0D80], [0x0000, 0x3080], 0x00000000),
    # a denormal fp32 c is read as zero
    ([0x0000, 0x0000], [0x0000, 0x0000], 0x00000001),
    # the product fused into the FMA: 2^-100 * 2^-30 + 2^-126 = 2^-126 (1 + 2^-4), exact
    ([0x0000, 0x0D80], [0x0000, 0x3080], 0x00800000),
    # overflow of the first FMA: max fp32 + max bf16^2 -> Inf, Inf + 1 = Inf
    ([0x3F80, 0x7F7F], [0x3F80, 0x7F7F], 0x7F7FFFFF),
    # Inf * 0 is invalid: the default NaN
    ([0x7F80, 0x0000], [0x0000, 0x0000], 0x00000000),
    # NaN priority: a0's NaN before c's
    ([0x7FC1, 0x3F80], [0x3F80, 0x3F80], 0x7FC00002),
    # a signalling NaN in b1 made quiet and widened: 0x7F81 -> 0x7FC10000
    ([0x3F80, 0x3F80], [0x3F80, 0x7F81], 0x3F800000),
]


def _random_rows(n: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    e = rng.integers(-140, 120, size=(n, 2))
    a = ((rng.integers(0, 2, (n, 2)) << 15) | (np.clip(e + 127, 0, 255) << 7)).astype(np.uint64)
    a |= rng.integers(0, 128, (n, 2)).astype(np.uint64)
    b = rng.integers(0, 1 << 16, size=(n, 2), dtype=np.uint64)
    b[: n // 2] = (b[: n // 2] & 0x80FF) | 0x3F00  # near 1: products keep a's exponent
    c = rng.integers(0, 1 << 32, size=n, dtype=np.uint64)
    c[::3] = 0
    return a, b, c


def test_preset_is_the_sdm_pseudocode_on_hand_picked_and_random_rows():
    a = np.array([r[0] for r in ROWS], dtype=np.uint64)
    b = np.array([r[1] for r in ROWS], dtype=np.uint64)
    c = np.array([r[2] for r in ROWS], dtype=np.uint64)
    got = simulate_params(P, a, b, c)
    want = [sdm(list(map(int, x)), list(map(int, y)), int(z)) for x, y, z in zip(a, b, c)]
    assert [f"{int(x):#010x}" for x in got] == [f"{x:#010x}" for x in want]
    assert want[:5] == [0x40400000, 0x3F800000, 0x00000000, 0x80000000, 0x00000000]
    assert want[8:] == [0xFFC00000, 0x7FC10000, 0x7FC10000]
    a, b, c = _random_rows(3000)
    got = simulate_params(P, a, b, c)
    want = [sdm(list(map(int, x)), list(map(int, y)), int(z)) for x, y, z in zip(a, b, c)]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if int(g) != w]
    assert not bad, (bad[:5], [(a[i], b[i], c[i], hex(int(got[i])), hex(want[i])) for i in bad[:3]])


def test_the_preset_and_its_alternatives_are_named():
    assert P.fused_products and P.order.value == "reverse" and P.nan_bits == 0xFFC00000
    assert (P.flush_inputs, P.flush_sums, P.flush_outputs) == (True, True, True)
    assert resolve_space(ARCH, None, None).name == "x86"
    r = CliRunner().invoke(main, ["list", "archs", "--arch", ARCH])
    assert r.exit_code == 0 and "vdpbf16ps" in r.output and "SEQUENTIAL K=2" in r.output


# --- the oracle's kernel --------------------------------------------------------------


def test_kernel_lowers_to_vdpbf16ps_for_zen4_and_sapphire_rapids():
    assert cpu.bf16_vector_type() in ("<32 x bfloat>", "<32 x i16>")
    for name in ("znver4", "sapphirerapids"):
        asm = cpu.assembly(name)
        assert "vdpbf16ps" in asm and "zmm" in asm, name


@pytest.mark.skipif(HAS_BF16, reason="this CPU has AVX512_BF16")
def test_cpu_oracle_refused_in_one_line_without_avx512bf16():
    with pytest.raises(UserError, match="lacks .*avx512bf16: VDPBF16PS cannot run here"):
        make_oracle("cpu:avx512bf16", P, ARCH, "vdpbf16ps")
    r = CliRunner().invoke(main, ["identify", "--arch", ARCH, "--oracle", "cpu:avx512bf16"])
    assert r.exit_code == 2
    assert "VDPBF16PS cannot run here" in r.output and len(r.output.strip().splitlines()) == 1


def test_cpu_oracle_refuses_other_instructions():
    other = PRESETS["volta"].instructions["m8n8k4.f32.f16.f16.f32"].params
    with pytest.raises(UserError, match="use --arch x86-avx512bf16"):
        make_oracle("cpu:avx512bf16", other, "volta", "m8n8k4.f32.f16.f16.f32")
    with pytest.raises(UserError, match="unknown CPU unit 'amx'"):
        make_oracle("cpu:amx", P, ARCH, "vdpbf16ps")


@pytest.mark.skipif(not HAS_BF16, reason="this CPU lacks AVX512_BF16")
def test_cpu_oracle_on_hand_picked_rows_against_the_sdm():
    oracle = make_oracle("cpu:avx512bf16", P, ARCH, "vdpbf16ps")
    a = np.array([r[0] for r in ROWS] * 3, dtype=np.uint64)  # 33 rows: 3 blocks, padded
    b = np.array([r[1] for r in ROWS] * 3, dtype=np.uint64)
    c = np.array([r[2] for r in ROWS] * 3, dtype=np.uint64)
    got = [f"{int(x):#010x}" for x in oracle.ask(a, b, c)]
    want = [
        f"{sdm(list(map(int, x)), list(map(int, y)), int(z)):#010x}" for x, y, z in zip(a, b, c)
    ]
    assert got == want


# --- identify --------------------------------------------------------------------------


def test_identify_recovers_the_sdm_preset_from_a_hidden_variant():
    space = resolve_space(ARCH, None, None)
    oracle = make_oracle(f"variant:{ARCH}", space.base, space.arch, space.instr)
    res = identify(space, oracle, 200, Limits(timeout=5.0))
    assert len(res.classes) == 1 and recovered(res, oracle.hidden)
    text = to_text(res)
    assert "order=c-first: refuted by v" in text and "fused_products=false: refuted by v" in text


@pytest.mark.parametrize(
    "hidden",
    [
        f"{ARCH}[order=c-first]",
        f"{ARCH}[fused_products=false,flush_products=true]",
        f"{ARCH}[flush_sign=positive]",
    ],
)
def test_identify_recovers_an_alternative(hidden):
    space = resolve_space(ARCH, None, None)
    oracle = make_oracle(f"variant:{hidden}", space.base, space.arch, space.instr)
    res = identify(space, oracle, 200, Limits(timeout=5.0))
    assert len(res.classes) == 1 and recovered(res, oracle.hidden)


@pytest.mark.skipif(not HAS_BF16, reason="this CPU lacks AVX512_BF16")
def test_identify_on_this_cpu_ends_with_one_class():
    r = CliRunner().invoke(
        main, ["identify", "--arch", ARCH, "--oracle", "cpu:avx512bf16", "--timeout", "5"]
    )
    assert r.exit_code == 0, r.output
    assert "one class left" in r.output and "what decided each parameter" in r.output


def test_recorded_silicon_answers_are_the_presets_and_refute_the_others():
    """identify against the VDPBF16PS of an Intel Xeon with AVX512_BF16 (the H100 machine's
    host, results/hardware/h100/cpu): every answer it gave is the preset's, and every
    hypothesis it refuted mispredicts the vector that refuted it."""
    from pathlib import Path

    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.spec.presets import parse_variant

    path = Path(__file__).resolve().parents[1] / "results/hardware/h100/cpu/identify.json"
    rec = json.loads(path.read_text())
    vectors = [v for s in rec["steps"] for v in s["vectors"]]
    assert len(vectors) == rec["oracle_vectors"] == 30

    def run(variant: str, v: dict) -> int:
        a = np.array([[int(x, 16) for x in v["a"]]], dtype=np.uint64)
        b = np.array([[int(x, 16) for x in v["b"]]], dtype=np.uint64)
        c = np.array([int(v["c"], 16)], dtype=np.uint64)
        return int(simulate_params(parse_variant(variant).params("vdpbf16ps"), a, b, c)[0])

    assert all(run(ARCH, v) == int(v["d"], 16) for v in vectors)
    killed = [k for s in rec["steps"] for k in s["killed"]]
    assert len(killed) == 5
    for k in killed:
        assert run(k["hypothesis"], vectors[k["vector"]]) != int(vectors[k["vector"]]["d"], 16)
    assert [s["variant"] for s in rec["survivors"]] == [ARCH]
