"""Subnormal numbers: inputs, products, intermediate sums and outputs kept or flushed.

- each flush parameter on the concrete model, on inputs taken from the papers (Fasi et
  al. §III-B for Volta, MMA-Sim §III-F's four detection tests, FTTN T_si_no / T_ni_so /
  T_sa) with the expected bits derived by hand;
- the presets' values: NVIDIA keeps subnormals (Fasi §III-B, FTTN Table IV), CDNA2's GPS
  flushes inputs, products, sums and d (MMA-Sim §IV-B), CDNA3 keeps them (MMA-Sim §VI-B);
- the concrete, vector and symbolic interpreters agree on the flush parameters;
- `tcsmt find --property subnormals` gives verified witnesses for every query that is a
  question on the unit, and says why the others are not asked.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from strategies import random_rows
from test_interpreters import _assert_rows_agree, _check_symbolic

from tensorcore_smt.api import simulate_one, simulate_params
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import Algorithm
from tensorcore_smt.smt.library import get
from tensorcore_smt.spec.presets import PRESETS, parse_variant

FLUSHES = ("flush_inputs", "flush_products", "flush_sums", "flush_outputs")

# fp16 bit patterns
H_2M24 = 0x0001  # 2^-24, the smallest subnormal
H_2M15 = 0x0200  # 2^-15, subnormal
H_2M14 = 0x0400  # 2^-14, the smallest normal
H_1P5_2M14 = 0x0600  # 1.5 * 2^-14
H_NEG_2M14 = 0x8400
H_NEG_2M15 = 0x8200
H_2M10 = 0x1400
H_HALF = 0x3800
H_ONE = 0x3C00
H_FOUR = 0x4400
# bf16: eps = 2^-126, the smallest normal (MMA-Sim §III-F's epsilon)
B_EPS, B_HALF_EPS, B_1P5_EPS, B_NEG_EPS = 0x0080, 0x0040, 0x00C0, 0x8080
B_ONE, B_HALF, B_2M70 = 0x3F80, 0x3F00, 0x1C80
# fp32
S_EPS, S_HALF_EPS, S_1P5_EPS = 0x00800000, 0x00400000, 0x00C00000
S_2M149, S_2M140 = 0x00000001, 0x00000200
S_2M15, S_2M22, S_2M24 = 0x38000000, 0x34800000, 0x33800000

VOLTA_F32 = "m8n8k4.f32.f16.f16.f32"
VOLTA_F16 = "m8n8k4.f16.f16.f16.f16"
CDNA2_BF16 = "v_mfma_f32_32x32x4bf16"  # K=4, GPS with G=2: two pairwise groups
CDNA3_BF16 = "v_mfma_f32_32x32x4_2b_bf16"


def d(variant: str, instr: str, a: list[int], b: list[int], c: int) -> int:
    """The concrete model's d bits; a and b are padded with +0 up to K."""
    p = parse_variant(variant).params(instr)
    pad = [0] * (p.K - len(a))
    return simulate_one(p, a + pad, b + pad, c)


# --- presets: the papers' answers -------------------------------------------------------


def test_nvidia_presets_keep_subnormals_fasi_fttn():
    # Fasi §III-B: "full support for subnormal inputs"; FTTN Table IV: V100, A100 and H100
    # handle subnormal inputs and outputs in fp16, bf16 and tf32.
    for arch in ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "rtx-blackwell"):
        for inst in PRESETS[arch].instructions.values():
            assert not any(getattr(inst.params, f) for f in FLUSHES), (arch, inst.name)


def test_cdna2_gps_flushes_everywhere_mmasim_iv_b():
    # MMA-Sim §IV-B, Algorithm 3: inputs to +0 (step 1), products (step 2), pairwise sums
    # (step 3) and the running sum with c (step 4), which ends in d.
    gps = [i for i in PRESETS["cdna2"].instructions.values() if i.params.algorithm == Algorithm.GPS]
    assert gps
    for inst in gps:
        assert all(getattr(inst.params, f) for f in FLUSHES), inst.name
    # FTTN Table IV: MI250X fp64 keeps subnormals; the SFMA instructions flush nothing
    for inst in PRESETS["cdna2"].instructions.values():
        if inst.params.algorithm == Algorithm.SFMA:
            assert not any(getattr(inst.params, f) for f in FLUSHES), inst.name


def test_cdna3_keeps_subnormals_mmasim_vi_b():
    for inst in PRESETS["cdna3"].instructions.values():
        assert not any(getattr(inst.params, f) for f in FLUSHES), inst.name


# --- NVIDIA FDA, Fasi §III-B ---------------------------------------------------------------


def test_fasi_subnormal_a_input_volta():
    # a = 2^-24, b = 2^2: "tensor cores return the subnormal result 2^-22 in both binary16
    # and binary32 mode"; a unit that flushed inputs would return +0.
    assert d("volta", VOLTA_F32, [H_2M24], [H_FOUR], 0) == S_2M22
    assert d("volta", VOLTA_F16, [H_2M24], [H_FOUR], 0) == 0x0004  # 2^-22 in fp16
    assert d("volta[flush_inputs=true]", VOLTA_F32, [H_2M24], [H_FOUR], 0) == 0
    assert d("volta[flush_inputs=true]", VOLTA_F16, [H_2M24], [H_FOUR], 0) == 0


def test_fasi_subnormal_c_passes_through_volta():
    # c = 2^-149, A = B = 0 gives d = 2^-149 (Fasi §III-B point 2; FTTN T_sa): a subnormal
    # fp32 d, which flush_outputs (or flush_inputs) turns into +0.
    assert d("volta", VOLTA_F32, [], [], S_2M149) == S_2M149
    assert d("volta[flush_outputs=true]", VOLTA_F32, [], [], S_2M149) == 0
    assert d("volta[flush_inputs=true]", VOLTA_F32, [], [], S_2M149) == 0
    neg = S_2M149 | 0x80000000  # the flushed -2^-149 is +0: NVIDIA's zero is positive
    assert d("volta[flush_outputs=true]", VOLTA_F32, [], [], neg) == 0


def test_fasi_subnormal_output_from_normal_inputs_volta():
    # a = 2^-14, b = 2^-1 returns the binary16 subnormal 2^-15 (FTTN T_ni_so); so does
    # a = 2^-14, b = 1, c = -2^-15. In fp32, 2^-15 is normal: flush_outputs changes nothing.
    assert d("volta", VOLTA_F16, [H_2M14], [H_HALF], 0) == H_2M15
    assert d("volta", VOLTA_F16, [H_2M14], [H_ONE], H_NEG_2M15) == H_2M15
    assert d("volta", VOLTA_F32, [H_2M14], [H_HALF], 0) == S_2M15
    assert d("volta[flush_outputs=true]", VOLTA_F16, [H_2M14], [H_HALF], 0) == 0
    assert d("volta[flush_outputs=true]", VOLTA_F16, [H_2M14], [H_ONE], H_NEG_2M15) == 0
    assert d("volta[flush_outputs=true]", VOLTA_F32, [H_2M14], [H_HALF], 0) == S_2M15


def test_exact_fp16_product_2m14_times_2m10():
    # 2^-14 * 2^-10 = 2^-24: exact in the fused unit, the smallest fp16 subnormal as an
    # fp16 d, a normal fp32 d. No product is rounded, so flush_products has nothing to act
    # on (the property does not ask it on FDA); flush_outputs flushes the fp16 d.
    for v in ("volta", "volta[flush_sums=true]"):
        assert d(v, VOLTA_F16, [H_2M14], [H_2M10], 0) == H_2M24
        assert d(v, VOLTA_F32, [H_2M14], [H_2M10], 0) == S_2M24
    # a switch FDA never reads is refused rather than computing volta under another name
    with pytest.raises(UserError, match="does not read flush_products"):
        parse_variant("volta[flush_products=true]").params(VOLTA_F16)
    assert d("volta[flush_outputs=true]", VOLTA_F16, [H_2M14], [H_2M10], 0) == 0


def test_chained_fda_group_result_is_an_intermediate_sum():
    # Ampere m16n8k16 chains two groups of 8: the first group's fp32 result (here the
    # subnormal c) is an intermediate sum; flush_sums flushes it, flush_outputs flushes d.
    chained, single = "m16n8k16.f32.bf16.bf16.f32", "m16n8k8.f32.bf16.bf16.f32"
    assert d("ampere", chained, [], [], S_2M149) == S_2M149
    assert d("ampere[flush_sums=true]", chained, [], [], S_2M149) == 0
    assert d("ampere[flush_outputs=true]", chained, [], [], S_2M149) == 0
    # the second group adds eps * 1 to the first group's 2^-149: eps + 2^-149 is normal
    a, b = [0] * 8 + [B_EPS], [0] * 8 + [B_ONE]
    assert d("ampere", chained, a, b, S_2M149) == S_EPS + 1
    assert d("ampere[flush_outputs=true]", chained, a, b, S_2M149) == S_EPS + 1
    assert d("ampere[flush_sums=true]", chained, a, b, S_2M149) == S_EPS
    # one group: nothing is an intermediate sum
    assert d("ampere[flush_sums=true]", single, [], [], S_2M149) == S_2M149


# --- CDNA2 GPS, MMA-Sim §III-F / §IV-B --------------------------------------------------------

ALL_KEPT = "cdna2[flush_inputs=false,flush_products=false,flush_sums=false,flush_outputs=false]"


def test_cdna2_subnormal_inputs_flushed():
    # MMA-Sim §III-F: c = 0.5 eps and the rest zero; a_k = 0.5 eps with b_k = 1.
    assert d("cdna2", CDNA2_BF16, [], [], S_HALF_EPS) == 0
    assert d("cdna2", CDNA2_BF16, [B_HALF_EPS], [B_ONE], 0) == 0
    assert d(ALL_KEPT, CDNA2_BF16, [], [], S_HALF_EPS) == S_HALF_EPS
    assert d(ALL_KEPT, CDNA2_BF16, [B_HALF_EPS], [B_ONE], 0) == S_HALF_EPS
    # a kept subnormal input whose product is normal shows the input flush on its own
    a, b = [B_HALF_EPS], [0x4000]  # 0.5 eps * 2 = eps
    assert d("cdna2[flush_inputs=false]", CDNA2_BF16, a, b, 0) == S_EPS
    assert d("cdna2", CDNA2_BF16, a, b, 0) == 0


def test_cdna2_subnormal_products_flushed():
    # MMA-Sim §III-F: a_k = 0.5, b_k = eps gives the fp32 product 0.5 eps (subnormal).
    a, b = [B_HALF, B_EPS], [B_EPS, B_ONE]  # 0.5 eps + eps: a normal pairwise sum
    assert d("cdna2", CDNA2_BF16, a, b, 0) == S_EPS
    assert d("cdna2[flush_products=false]", CDNA2_BF16, a, b, 0) == S_1P5_EPS
    assert d(ALL_KEPT, CDNA2_BF16, [B_HALF], [B_EPS], 0) == S_HALF_EPS


def test_cdna2_subnormal_sums_flushed():
    # MMA-Sim §III-F: p_i = 1.5 eps, p_j = -eps; their pairwise sum 0.5 eps is flushed.
    # With c = eps the running sum c + 0.5 eps is normal, so only the sum flush acts.
    a, b = [B_1P5_EPS, B_NEG_EPS], [B_ONE, B_ONE]
    assert d("cdna2", CDNA2_BF16, a, b, S_EPS) == S_EPS
    assert d("cdna2[flush_sums=false]", CDNA2_BF16, a, b, S_EPS) == S_1P5_EPS
    # in the second (last) group the same pair is an intermediate sum too; the addition
    # to the running sum is the one that produces d
    a2, b2 = [0, 0] + a, [0, 0] + b
    assert d("cdna2", CDNA2_BF16, a2, b2, S_EPS) == S_EPS
    assert d("cdna2[flush_sums=false]", CDNA2_BF16, a2, b2, S_EPS) == S_1P5_EPS


def test_cdna2_subnormal_output_flushed():
    # c = 1.5 eps, second group's product -eps: d = 0.5 eps is made by the last addition
    a, b = [0, 0, B_NEG_EPS], [0, 0, B_ONE]
    assert d("cdna2", CDNA2_BF16, a, b, S_1P5_EPS) == 0
    assert d("cdna2[flush_outputs=false]", CDNA2_BF16, a, b, S_1P5_EPS) == S_HALF_EPS
    assert d("cdna2[flush_sums=false]", CDNA2_BF16, a, b, S_1P5_EPS) == 0
    # the sign is kept (MMA-Sim Algorithm 3: d <- d * 0.0): -1.5 eps + eps -> -0
    neg_c = S_1P5_EPS | 0x80000000
    assert d("cdna2", CDNA2_BF16, [0, 0, B_EPS], [0, 0, B_ONE], neg_c) == 0x80000000


def test_cdna2_fp16_gps_cannot_make_a_subnormal_product():
    # With fp16 inputs the smallest product of normals is 2^-28, normal in fp32: the
    # product flush acts on nothing (why the property asks CDNA2 on bf16).
    p = "v_mfma_f32_32x32x8f16"
    a, b = [H_2M14], [H_2M14]
    assert d("cdna2", p, a, b, 0) == d("cdna2[flush_products=false]", p, a, b, 0) == 0x31800000


# --- IEEE sequential sums, SFMA, CDNA3 ----------------------------------------------------------

SEQ16 = "volta[algorithm=sequential,acc_fmt=fp16]"  # products and sums rounded to fp16


def test_sequential_flushes_products_sums_outputs_separately():
    # product 2^-14 * 2^-1 = 2^-15: subnormal in the fp16 accumulator format
    assert d(SEQ16, VOLTA_F32, [H_2M14], [H_HALF], 0) == S_2M15
    assert d(SEQ16[:-1] + ",flush_products=true]", VOLTA_F32, [H_2M14], [H_HALF], 0) == 0
    # ... a subnormal running sum too, unless the product comes last: the fourth
    # addition makes d, and 2^-15 is normal in the fp32 d
    assert d(SEQ16[:-1] + ",flush_sums=true]", VOLTA_F32, [H_2M14], [H_HALF], 0) == 0
    last = [0, 0, 0, H_2M14], [0, 0, 0, H_HALF]
    assert d(SEQ16[:-1] + ",flush_sums=true]", VOLTA_F32, *last, 0) == S_2M15
    assert d(SEQ16[:-1] + ",flush_outputs=true]", VOLTA_F32, *last, 0) == S_2M15
    # 0 + 1.5 * 2^-14 - 2^-14 = 2^-15 at the second of four additions: an intermediate sum
    a, b = [H_1P5_2M14, H_NEG_2M14], [H_ONE, H_ONE]
    assert d(SEQ16, VOLTA_F32, a, b, 0) == S_2M15
    assert d(SEQ16[:-1] + ",flush_sums=true]", VOLTA_F32, a, b, 0) == 0
    assert d(SEQ16[:-1] + ",flush_products=true]", VOLTA_F32, a, b, 0) == S_2M15
    # 2^-15 is normal in fp32: no output flush; in an fp16 d it is subnormal
    assert d(SEQ16[:-1] + ",flush_outputs=true]", VOLTA_F32, a, b, 0) == S_2M15
    seq = "volta[algorithm=sequential]"
    assert d(seq, VOLTA_F16, [H_2M14], [H_HALF], 0) == H_2M15
    assert (
        d("volta[algorithm=sequential,flush_outputs=true]", VOLTA_F16, [H_2M14], [H_HALF], 0) == 0
    )
    # flush_inputs reads subnormal operands as +0 and nothing else
    assert d(seq, VOLTA_F32, [H_2M24], [H_FOUR], 0) == S_2M22
    assert d("volta[algorithm=sequential,flush_inputs=true]", VOLTA_F32, [H_2M24], [H_FOUR], 0) == 0


def test_sfma_intermediate_fma_vs_final_fma():
    # fp64 DMMA (SFMA): eps = 2^-1022; fma(eps, -0.5, eps) = 0.5 eps is the first of four
    # FMAs (intermediate); the second adds eps: 1.5 eps kept, eps when flushed.
    f64 = "m8n8k4.f64.f64.f64.f64"
    eps, neg_half, one = 0x0010000000000000, 0xBFE0000000000000, 0x3FF0000000000000
    a, b = [eps, eps], [neg_half, one]
    assert d("ampere", f64, a, b, eps) == 0x0018000000000000
    assert d("ampere[flush_sums=true]", f64, a, b, eps) == eps
    assert d("ampere[flush_outputs=true]", f64, a, b, eps) == 0x0018000000000000
    assert d("ampere", f64, [eps], [neg_half], eps) == 0x0008000000000000
    assert d("ampere[flush_outputs=true]", f64, [eps], [neg_half], eps) == 0


def test_cdna3_subnormal_output():
    # 2^-70 * 2^-70 = 2^-140: an fp32 subnormal d (FTTN T_ni_so); CDNA3 keeps it.
    assert d("cdna3", CDNA3_BF16, [B_2M70], [B_2M70], 0) == S_2M140
    assert d("cdna3[flush_outputs=true]", CDNA3_BF16, [B_2M70], [B_2M70], 0) == 0
    assert d("cdna3[flush_inputs=true]", CDNA3_BF16, [B_HALF_EPS], [B_ONE], 0) == 0
    assert d("cdna3", CDNA3_BF16, [B_HALF_EPS], [B_ONE], 0) == S_HALF_EPS


# --- the interpreters agree on the flush parameters -------------------------------------------

AGREE = [
    ("volta[flush_outputs=true]", VOLTA_F16),
    ("volta[flush_outputs=true,flush_inputs=true]", VOLTA_F32),
    ("ampere[flush_sums=true]", "m16n8k16.f32.bf16.bf16.f32"),
    ("cdna2", CDNA2_BF16),
    ("cdna2[flush_inputs=false]", CDNA2_BF16),
    ("cdna2[flush_products=false]", CDNA2_BF16),
    ("cdna2[flush_sums=false]", CDNA2_BF16),
    ("cdna2[flush_outputs=false]", CDNA2_BF16),
    (ALL_KEPT, CDNA2_BF16),
    (SEQ16[:-1] + ",flush_products=true,flush_sums=true,flush_outputs=true]", VOLTA_F16),
    ("volta[algorithm=sequential,order=pairwise,flush_sums=true,acc_fmt=bf16]", VOLTA_F32),
    ("volta[algorithm=sequential,fused_products=true,flush_sums=true,acc_fmt=fp16]", VOLTA_F32),
    ("ampere[flush_sums=true,flush_outputs=true]", "m8n8k4.f64.f64.f64.f64"),
    ("cdna3[flush_outputs=true,flush_sums=true]", "v_mfma_f32_16x16x16_bf16"),
]


def _near_subnormal_pool(fmt: Format) -> np.ndarray:
    """Values around the subnormal boundary of `fmt` and a few ordinary ones, both signs."""
    s = fmt.spec
    m = s.mbits
    sign = 1 << (s.storage - 1)
    mags = [0, 1, (1 << m) - 1, 1 << (m - 1), 1 << m, 3 << (m - 1), (1 << m) + 1]
    mags += [s.bias << m, (s.bias - 1) << m, (s.bias + 1) << m, ((s.bias - 1) << m) | 1]
    mags = [x << s.ignored_low for x in mags]
    return np.array(sorted(set(mags + [x | sign for x in mags])), dtype=np.uint64)


def _rows(p, seed: int, n: int):
    rng = np.random.default_rng(seed)
    a, b, c = random_rows(rng, p, n)
    pa, pb, pc = (_near_subnormal_pool(f) for f in (p.a_fmt, p.b_fmt, p.c_fmt))
    a2 = rng.choice(pa, size=(n, p.K))
    b2 = rng.choice(pb, size=(n, p.K))
    c2 = rng.choice(pc, size=n)
    return np.concatenate([a, a2]), np.concatenate([b, b2]), np.concatenate([c, c2])


@pytest.mark.parametrize("variant, instr", AGREE, ids=[f"{v}:{i}" for v, i in AGREE])
def test_concrete_vector_symbolic_agree(variant, instr):
    p = parse_variant(variant).params(instr)
    names = [(variant, instr)]
    a, b, c = _rows(p, AGREE.index((variant, instr)), 200)
    _assert_rows_agree(p, names, a, b, c)
    _check_symbolic(p, names, a[::40], b[::40], c[::40])


def test_flush_parameters_change_the_models_they_apply_to():
    # a flush the unit has a place for must change its function somewhere on these rows
    cases = [
        ("cdna2", CDNA2_BF16, FLUSHES),
        ("volta", VOLTA_F16, ("flush_inputs", "flush_outputs")),
        ("ampere", "m16n8k16.f32.bf16.bf16.f32", ("flush_inputs", "flush_sums", "flush_outputs")),
        (SEQ16, VOLTA_F16, FLUSHES),
        ("cdna3", CDNA3_BF16, ("flush_inputs", "flush_outputs")),
    ]
    for variant, instr, flags in cases:
        p = parse_variant(variant).params(instr)
        a, b, c = _rows(p, 7, 400)
        base = simulate_params(p, a, b, c)
        for f in flags:
            q = p.with_(**{f: not getattr(p, f)})
            assert (simulate_params(q, a, b, c) != base).any(), (variant, instr, f)


# --- the property ---------------------------------------------------------------------------


def _find(*args: str):
    r = CliRunner().invoke(main, ["find", "--property", "subnormals", *args, "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    return json.loads(r.output)


def _assert_witnesses(rep: dict, ids: list[str]) -> None:
    qs = {q["id"]: q for q in rep["queries"]}
    assert sorted(qs) == sorted(ids)
    for q in qs.values():
        assert q["answer"] == "sat" and q["as_expected"]
        assert q["witness"]["reproduces"]
        outs = [o["hex"] for o in q["witness"]["outputs"].values()]
        assert outs[0] != outs[1]


def test_find_volta_inputs_and_outputs_with_reasons_for_the_rest():
    rep = _find("--arch", "volta", "--solver", "bitwuzla")
    assert rep["instruction"] == VOLTA_F32
    _assert_witnesses(rep, ["inputs", "outputs"])
    why = rep["not_asked"]
    assert sorted(why) == ["products", "sums"]
    assert "exact" in why["products"] and "no intermediate sum" in why["sums"]


def test_find_text_says_why_a_query_is_not_asked():
    r = CliRunner().invoke(
        main, ["find", "--property", "subnormals", "--arch", "volta", "--solver", "bitwuzla"]
    )
    assert r.exit_code == 0, r.output
    assert "[products] not asked on this instruction: fda keeps products exact" in r.output
    assert "[sums] not asked on this instruction: fda with one fused group" in r.output


def test_find_cdna2_all_four_questions_small_instruction():
    rep = _find("--arch", "cdna2", "--instr", "v_mfma_f32_32x32x2bf16", "--solver", "bitwuzla")
    _assert_witnesses(rep, ["inputs", "products", "sums", "outputs"])
    assert rep["not_asked"] == {}


def test_property_applicability_per_arch():
    prop = get("subnormals")
    for arch in PRESETS:
        asked = [s.id for s, _ in prop.bind(arch)]
        skipped = [i for i, _ in prop.skipped(arch)]
        assert sorted(asked + skipped) == ["inputs", "outputs", "products", "sums"], arch
        assert "inputs" in asked and "outputs" in asked, arch
        # CDNA2 rounds products and sums; x86's VDPBF16PS is two fused multiply-adds,
        # whose first result is a rounded intermediate sum
        want = {"cdna2": [], "x86-avx512bf16": ["products"]}.get(arch, ["products", "sums"])
        assert skipped == want, arch
        # no query compares a model with itself
        for _, q in prop.bind(arch):
            assert q.variants[0] != q.variants[1]
    # a chained fused unit has intermediate sums: the question is asked there
    asked = [s.id for s, _ in prop.bind("ampere", "m16n8k16.f32.f16.f16.f32")]
    assert asked == ["inputs", "sums", "outputs"]


@pytest.mark.slow
def test_find_cdna2_default_instruction():
    rep = _find("--arch", "cdna2")
    assert rep["instruction"] == CDNA2_BF16
    _assert_witnesses(rep, ["inputs", "products", "sums", "outputs"])


@pytest.mark.slow
def test_find_chained_fda_sums():
    rep = _find("--arch", "ampere", "--instr", "m16n8k16.f32.f16.f16.f32", "--solver", "bitwuzla")
    _assert_witnesses(rep, ["inputs", "sums", "outputs"])
    assert sorted(rep["not_asked"]) == ["products"]
