"""CDNA1 (MI100) and the instruction-by-instruction comparison with MMA-Sim 2.1.1.

Sources of the cdna1 preset: MMA-Sim 2.1.1 (isa_mfma "CDNA1", E_FDPA with L_max 4 for
fp16 and 2 for bf16, SFMA for fp32), MATLAB models/MI100MC.m (fma 4 / 2, exact
accumulation, rne), FTTN Table IV (MI100: subnormals in and out, block FMA width 4 for
fp16, 2 for bf16, 1 for fp32, RTN-TE). The three agree; the tests check the model bit for
bit against MMA-Sim (NaN payloads by class: MMA-Sim §V leaves them unspecified).
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import Algorithm, ZeroSign
from tensorcore_smt.model.terms import AlignMode
from tensorcore_smt.spec.presets import PRESETS

# MMA-Sim models no integer MFMA: the v_mfma_i32_*i8 forms are checked in test_integer.py
CDNA1 = {
    n: i for n, i in PRESETS["cdna1"].instructions.items() if not i.params.d_fmt.spec.is_integer
}

# What MMA-Sim 2.1.1 simulates and the presets leave out, and why (README, "Left out").
LEFT_OUT = {
    "block-scaled mma.sync (RTX Blackwell kind::mxf8f6f4 / mxf4 / mxf4nvf4)": (
        "scale factors are not yet model inputs (GDFS, MMA-Sim §IV)"
    ),
    "block-scaled tcgen05.mma (Blackwell kind::mxf8f6f4 / mxf4 / mxf4nvf4)": (
        "scale factors are not yet model inputs (GDFS, MMA-Sim §IV)"
    ),
}


def test_cdna1_parameters_follow_the_sources():
    f16 = CDNA1["v_mfma_f32_32x32x8f16"].params
    bf16 = CDNA1["v_mfma_f32_32x32x4bf16"].params
    assert (f16.algorithm, f16.L, f16.align) == (Algorithm.FDA, 4, AlignMode.EXACT)
    assert (bf16.L, len(bf16.groups())) == (2, 2)
    assert not (f16.flush_inputs or f16.flush_outputs)  # FTTN: subnormals in and out
    assert f16.zero_sign == ZeroSign.IEEE
    assert CDNA1["v_mfma_f32_16x16x4f32"].params.algorithm == Algorithm.SFMA
    assert not any(p.params.a_fmt == Format.FP64 for p in CDNA1.values())  # FTTN: no FP64


def test_block_fma_width_as_fttn_measures_it():
    """FTTN T_blk_fma_width: 1 and three halves of an ulp of 1 (products 2^-24 each) sum
    exactly in one group of 4 to 1 + 1.5 ulp, a tie that RNE takes to the even 1 + 2 ulp;
    with every product in a group of its own each 1 + 0.5 ulp rounds to even, 1."""
    p = CDNA1["v_mfma_f32_4x4x4f16"].params
    a = np.array([[0x3C00, 0x0001, 0x0001, 0x0001]], dtype=np.uint64)  # 1, 2^-24 x 3
    b = np.array([[0x0000, 0x3C00, 0x3C00, 0x3C00]], dtype=np.uint64)
    c = np.array([0x3F800000], dtype=np.uint64)
    assert int(simulate_params(p, a, b, c)[0]) == 0x3F800002
    one_by_one = p.with_(L=1)
    assert int(simulate_params(one_by_one, a, b, c)[0]) == 0x3F800000


def _mmasim_ops():
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    from mmasim.amd import MFMA

    return MFMA


def _nan(bits: np.ndarray) -> np.ndarray:
    return ((bits >> np.uint64(23)) & np.uint64(0xFF) == 0xFF) & (bits & np.uint64(0x7FFFFF) != 0)


def _compare(name: str, n: int, seed: int) -> None:
    MFMA = _mmasim_ops()  # skips without torch and MMA-Sim, before the bridge needs them
    import mmasim_bridge as mb
    from strategies import random_rows

    p = CDNA1[name].params
    op = MFMA("CDNA1", name.removeprefix("v_mfma_"))
    a, b, c = random_rows(np.random.default_rng(seed), p, n)
    ours = simulate_params(p, a, b, c)
    theirs = mb.run(op, p, a, b, c)
    bad = (ours != theirs) & ~(_nan(ours) & _nan(theirs))
    idx = np.nonzero(bad)[0][:3]
    detail = [
        f"a={[hex(int(x)) for x in a[i]]} b={[hex(int(x)) for x in b[i]]} c={int(c[i]):#x} "
        f"ours={int(ours[i]):#x} mmasim={int(theirs[i]):#x}"
        for i in idx
    ]
    assert not bad.any(), f"{int(bad.sum())} of {n} rows differ: {detail}"


@pytest.mark.parametrize("name", list(CDNA1))
def test_cdna1_matches_mmasim(name):
    _compare(name, 2000, list(CDNA1).index(name) + 5100)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CDNA1))
def test_cdna1_matches_mmasim_large(name):
    for i in range(5):
        _compare(name, 20_000, 1000 * list(CDNA1).index(name) + i + 510_000)


def test_every_mmasim_instruction_is_modelled_or_listed_as_left_out():
    """MMA-Sim 2.1.1's instruction sets, architecture by architecture, against the presets
    (wgmma / tcgen05 at n = 8: the model does not depend on N)."""
    _mmasim_ops()
    from mmasim.amd.isa_mfma import arch_mfma_suffix
    from mmasim.nv_ptx.isa_mma import mma_block_scale_shape_and_type, mma_shape_and_type
    from mmasim.nv_ptx.isa_tcgen05mma import (
        tcgen05mma_block_scale_shape_and_type,
        tcgen05mma_shape_and_type,
    )
    from mmasim.nv_ptx.isa_wgmma import wgmma_shape_and_type

    ours = {
        "Volta": "volta",
        "Turing": "turing",
        "Ampere": "ampere",
        "Ada Lovelace": "ada",
        "Hopper": "hopper",
        "Blackwell": "blackwell",
        "RTX Blackwell": "rtx-blackwell",
        "CDNA1": "cdna1",
        "CDNA2": "cdna2",
        "CDNA3": "cdna3",
    }
    missing = []
    for arch, names in mma_shape_and_type.items():
        missing += [(arch, n) for n in names if n not in PRESETS[ours[arch]].instructions]
    for arch, names in wgmma_shape_and_type.items():
        insts = PRESETS[ours[arch]].instructions
        missing += [
            (arch, n) for n in names if n.startswith("m64n8k") and "wgmma." + n not in insts
        ]
    for arch, names in tcgen05mma_shape_and_type.items():
        insts = PRESETS[ours[arch]].instructions
        missing += [
            (arch, n) for n in names if n.startswith("m64n8k") and "tcgen05." + n not in insts
        ]
    for arch, names in arch_mfma_suffix.items():
        insts = PRESETS[ours[arch]].instructions
        missing += [(arch, s) for s in names if "v_mfma_" + s not in insts]
    assert not missing, missing
    # what is left out: the block-scaled forms, named in LEFT_OUT
    assert set(mma_block_scale_shape_and_type) == {"RTX Blackwell"}
    assert set(tcgen05mma_block_scale_shape_and_type) == {"Blackwell"}
    assert len(LEFT_OUT) == 2
