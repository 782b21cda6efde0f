"""FP8 mma.sync (the sm_89 forms m16n8k32 / m16n8k16 with e4m3/e5m2 operands) on every
architecture that has it, and which unit runs it.

Sources: the PTX ISA (mma with .e4m3/.e5m2 needs sm_89 or higher); the SASS nvcc 13.0
emits (sm_90 and sm_100a: F2FP.UNPACK_B to f16 and two chained HMMAs from C = RZ, then
FADD/HADD2 of c; sm_120a: QMMA with c inside); MMA-Sim (Xie et al. 2025) Table III and its
isa_mma (RTX Blackwell fp8 mma: F = 25, one group of 32; no Blackwell fp8 mma); the MATLAB
tensor-core models models/B200TC.m and B200TCRN.m (the variants matlab-b200-fp8 and
matlab-b200-fp8-x16).

MMA-Sim has no model of Blackwell's FP8 mma.sync, so the preset is checked against MMA-Sim's
Blackwell f16 HMMA composed exactly as the SASS runs it (MMA-Sim's own f16 mma on the
unpacked halves, then the IEEE addition of c), and the MATLAB variant against MMA-Sim's
tcgen05 kind::f8f6f4, the unit with the parameters MATLAB gives.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import CAddend, GroupMap
from tensorcore_smt.spec.presets import PRESETS, parse_variant

F8 = ("e5m2", "e4m3")
FP8_MMA = [
    f"m16n8k{k}.{d}.{a}.{b}.{d}" for k in (32, 16) for d in ("f32", "f16") for a in F8 for b in F8
]


@pytest.mark.parametrize("arch", ["ada", "hopper", "blackwell", "rtx-blackwell"])
def test_fp8_mma_sync_listed_on_every_arch_from_sm89(arch):
    insts = PRESETS[arch].instructions
    missing = [n for n in FP8_MMA if n not in insts]
    assert not missing, missing


@pytest.mark.parametrize("name", FP8_MMA)
def test_blackwell_fp8_mma_runs_on_the_hopper_hmma_path(name):
    """sm_100a gets the SASS of sm_90 (quirk hmma-fp8, archs/nvidia.toml), on an HMMA with Hopper's F,
    L and e_zero: the model is Hopper's, bit for bit, and the unit is HMMA."""
    bw = PRESETS["blackwell"].instructions[name]
    hop = PRESETS["hopper"].instructions[name]
    assert bw.params == hop.params
    assert bw.unit == "HMMA" == PRESETS["blackwell"].instructions["m16n8k16.f32.f16.f16.f32"].unit
    p = bw.params
    assert (p.group_map, p.c_add, p.F, p.L) == (GroupMap.BYTE_PAIRS, CAddend.AFTER, 25, p.K // 2)
    tcgen05 = PRESETS["blackwell"].instructions["tcgen05.m64n8k32.kind::f8f6f4.f32.e4m3.e4m3"]
    assert tcgen05.unit != bw.unit


def test_rtx_blackwell_fp8_mma_is_the_native_qmma():
    """sm_120a runs FP8 mma.sync on QMMA with c inside, as kind::f8f6f4: MMA-Sim's RTX
    Blackwell parameters (F = 25, one group of 32 bytes, RZ), which MATLAB's RTXPRO6000TC.m
    (= B200TC.m) shares."""
    insts = PRESETS["rtx-blackwell"].instructions
    p = insts["m16n8k32.f32.e4m3.e4m3.f32"].params
    assert (p.F, p.L, p.c_add, p.group_map) == (25, 32, CAddend.FUSED, GroupMap.CONTIGUOUS)
    assert insts["m16n8k32.f32.e4m3.e4m3.f32"].unit == "QMMA"
    assert insts["m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32"].unit == "QMMA"
    assert p == insts["m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32"].params


def test_matlab_variants_differ_from_the_preset_on_a_known_row():
    """c = 128 and one product -2^-18 ((-2^-9) (2^-9), e4m3 subnormals): 128 - 2^-18 lies
    halfway between 128 - 2^-17 and 128. A fused group holding c (MATLAB's B200 beliefs)
    keeps the product (F = 25 bits below 2^7) and rounds the sum toward zero: 128 - 2^-17.
    The HMMA path sums the products from 0 (exactly -2^-18) and adds c by one RNE
    addition, whose tie goes to the even 128."""
    name = "m16n8k32.f32.e4m3.e4m3.f32"
    a = np.zeros((1, 32), dtype=np.uint64)
    b = np.zeros((1, 32), dtype=np.uint64)
    a[0, 0], b[0, 0] = 0x81, 0x01
    c = np.array([0x43000000], dtype=np.uint64)
    got = {
        v: int(simulate_params(parse_variant(v).params(name), a, b, c)[0])
        for v in ("blackwell", "matlab-b200-fp8", "matlab-b200-fp8-x16")
    }
    assert got == {
        "blackwell": 0x43000000,
        "matlab-b200-fp8": 0x42FFFFFF,
        "matlab-b200-fp8-x16": 0x42FFFFFF,
    }


def _to_f16(bits: np.ndarray, fmt: Format):
    """FP8 patterns as torch float16 (exact: F2FP.UNPACK_B)."""
    import mmasim_bridge as mb

    return mb.to_torch(bits, fmt).to(__import__("torch").float16)


def hmma_path(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """d of Blackwell's FP8 mma.sync as the sm_100a SASS computes it, with MMA-Sim doing
    the HMMAs: bytes 0-1 of each register (k mod 4 in {0, 1}) through MMA-Sim's Blackwell
    f16 mma from c = +0, bytes 2-3 from that result, then c added by one IEEE addition in
    d's format, round to nearest even, NaN results canonical (FADD / HADD2)."""
    import mmasim_bridge as mb
    import torch

    p = PRESETS["blackwell"].instructions[name].params
    K = p.K
    f32 = p.d_fmt == Format.FP32
    hmma = f"m16n8k{K // 2}." + ("f32.f16.f16.f32" if f32 else "f16.f16.f16.f16")
    op = mb.make_op("blackwell", hmma)
    lo = [k for k in range(K) if k % 4 < 2]
    hi = [k for k in range(K) if k % 4 >= 2]
    dt = torch.float32 if f32 else torch.float16
    with torch.no_grad():
        acc = torch.zeros(len(c), dtype=dt)
        for ks in (lo, hi):
            acc = op.dpa(_to_f16(a[:, ks], p.a_fmt), _to_f16(b[:, ks], p.b_fmt), acc)
        cc = mb.to_torch(c, p.c_fmt)
        if f32:
            d = acc + cc  # one fp32 RNE addition
        else:  # the exact fp64 sum of two fp16 values, rounded once to fp16
            d = (acc.to(torch.float64) + cc.to(torch.float64)).to(torch.float16)
    out = mb.from_torch(d, p.d_fmt)
    nan = np.isnan(d.to(torch.float64).numpy())
    out[nan] = 0x7FFFFFFF if f32 else 0x7FFF
    return out


def _compare_hmma_path(name: str, n: int, seed: int) -> None:
    from strategies import random_rows

    p = PRESETS["blackwell"].instructions[name].params
    a, b, c = random_rows(np.random.default_rng(seed), p, n)
    ours = simulate_params(p, a, b, c)
    theirs = hmma_path(name, a, b, c)
    bad = np.nonzero(ours != theirs)[0]
    detail = [
        f"a={[hex(int(x)) for x in a[i]]} b={[hex(int(x)) for x in b[i]]} c={int(c[i]):#x}"
        f" ours={int(ours[i]):#x} mmasim-hmma={int(theirs[i]):#x}"
        for i in bad[:3]
    ]
    assert len(bad) == 0, f"{len(bad)} of {n} rows differ: {detail}"


def _compare_matlab_with_tcgen05(name: str, n: int, seed: int) -> None:
    """matlab-b200-fp8 on an mma.sync form against MMA-Sim's tcgen05 kind::f8f6f4 form of
    the same types (c and d of the same format in both)."""
    import mmasim_bridge as mb
    from strategies import random_rows

    p = parse_variant("matlab-b200-fp8").params(name)
    _, d, a_t, b_t, _ = name.split(".")
    tc = f"tcgen05.m64n8k32.kind::f8f6f4.{d}.{a_t}.{b_t}"
    assert p == PRESETS["blackwell"].instructions[tc].params
    a, b, c = random_rows(np.random.default_rng(seed), p, n)
    ours = simulate_params(p, a, b, c)
    theirs = mb.run(mb.make_op("blackwell", tc), p, a, b, c)
    assert (ours == theirs).all(), f"{int((ours != theirs).sum())} of {n} rows differ"


K32 = [n for n in FP8_MMA if n.startswith("m16n8k32")]


@pytest.mark.parametrize("name", FP8_MMA)
def test_blackwell_fp8_mma_matches_mmasim_hmma_composition(name):
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    _compare_hmma_path(name, 3000, FP8_MMA.index(name) + 8900)


@pytest.mark.parametrize("name", K32)
def test_matlab_b200_variant_is_mmasim_tcgen05_unit(name):
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    _compare_matlab_with_tcgen05(name, 3000, K32.index(name) + 8800)


@pytest.mark.slow
@pytest.mark.parametrize("name", FP8_MMA)
def test_blackwell_fp8_mma_matches_mmasim_hmma_composition_large(name):
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    for i in range(5):
        _compare_hmma_path(name, 20_000, 1000 * FP8_MMA.index(name) + i + 890_000)


@pytest.mark.slow
@pytest.mark.parametrize("name", K32)
def test_matlab_b200_variant_is_mmasim_tcgen05_unit_large(name):
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    for i in range(5):
        _compare_matlab_with_tcgen05(name, 20_000, 1000 * K32.index(name) + i + 880_000)


def test_solver_separates_the_hmma_path_from_the_matlab_b200_belief():
    """bitwuzla finds an input on which Blackwell's FP8 mma.sync (HMMA path) and MATLAB's
    B200 model differ; the witness is re-run on the concrete model before it is shown."""
    import json

    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    r = CliRunner().invoke(
        main,
        [
            "diff",
            "blackwell",
            "matlab-b200-fp8",
            "--instr",
            "m16n8k16.f32.e4m3.e4m3.f32",
            "--solver",
            "bitwuzla",
            "--timeout",
            "120",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    w = json.loads(r.output)["witness"]
    assert w["rechecked_on_concrete_model"] and w["reproduces"]
    a = np.array([[int(w["inputs"][f"a{k}"]["hex"], 16) for k in range(16)]], dtype=np.uint64)
    b = np.array([[int(w["inputs"][f"b{k}"]["hex"], 16) for k in range(16)]], dtype=np.uint64)
    c = np.array([int(w["inputs"]["c"]["hex"], 16)], dtype=np.uint64)
    name = "m16n8k16.f32.e4m3.e4m3.f32"
    x = simulate_params(PRESETS["blackwell"].instructions[name].params, a, b, c)
    y = simulate_params(parse_variant("matlab-b200-fp8").params(name), a, b, c)
    assert x[0] != y[0]
