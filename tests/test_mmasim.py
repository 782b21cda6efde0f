"""Optional cross-check against MMA-Sim (Xie et al. 2025's bit-accurate reference simulator).

Skipped when `mmasim` or `torch` is not installed (`pip install -e '.[mmasim]'`). For
every instruction of every preset that MMA-Sim also has, a few thousand mixture rows
(random bits, exponent windows, cancellations, special values; tests/strategies.py) go
through our vector interpreter and through MMA-Sim, and the outputs must be identical bit
for bit; NaN outputs of DMMA and MFMA instructions are compared by class only, because
their payload rule is unknown (MMA-Sim §V). MMA-Sim is an independent implementation
(float arithmetic in torch), so agreement is evidence for both.

The large run (>= 10^5 rows per model) is test_interpreters.py::test_vector_matches_mmasim_large.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("mmasim")

import mmasim_bridge as mb  # noqa: E402
from strategies import ROW_KINDS, random_rows, special_patterns  # noqa: E402

from tensorcore_smt.api import simulate_params  # noqa: E402
from tensorcore_smt.formats import Format  # noqa: E402
from tensorcore_smt.spec.presets import PRESETS  # noqa: E402

ROWS = 4000

INSTRUCTIONS = [(arch, name) for arch, pr in PRESETS.items() for name in pr.instructions]


def _dedupe_with_mmasim():
    """One (arch, name) per distinct model among the instructions MMA-Sim has."""
    seen = {}
    for arch, name in INSTRUCTIONS:
        p = PRESETS[arch].instructions[name].params
        if p not in seen and mb.make_op(arch, name) is not None:
            seen[p] = (arch, name)
    return list(seen.values())


COVERED = _dedupe_with_mmasim()


def test_mapping_covers_mmasim_instruction_sets():
    """Every (non block-scaled) MMA-Sim instruction of our architectures is one of our
    instructions, under the naming of mmasim_bridge (n=8 shapes for wgmma / tcgen05)."""
    from mmasim.amd.isa_mfma import arch_mfma_suffix
    from mmasim.nv_ptx.isa_mma import mma_shape_and_type
    from mmasim.nv_ptx.isa_tcgen05mma import tcgen05mma_shape_and_type
    from mmasim.nv_ptx.isa_wgmma import wgmma_shape_and_type

    # presets MMA-Sim has no architecture for (x86-avx512bf16) have nothing to map
    ours = {(mb.ARCH_NAMES[a], n) for a, n in INSTRUCTIONS if a in mb.ARCH_NAMES}
    missing = []
    for arch, names in mma_shape_and_type.items():
        missing += [(arch, n) for n in names if (arch, n) not in ours]
    for arch, names in wgmma_shape_and_type.items():
        missing += [
            (arch, n) for n in names if n.startswith("m64n8k") and (arch, "wgmma." + n) not in ours
        ]
    for arch, names in tcgen05mma_shape_and_type.items():
        missing += [
            (arch, n)
            for n in names
            if n.startswith("m64n8k") and (arch, "tcgen05." + n) not in ours
        ]
    for arch in ("CDNA1", "CDNA2", "CDNA3"):
        missing += [(arch, s) for s in arch_mfma_suffix[arch] if (arch, "v_mfma_" + s) not in ours]
    assert not missing, f"MMA-Sim instructions without a preset: {missing}"


def test_every_mapped_instruction_builds():
    """Our names map onto MMA-Sim operations with the same K and operand types."""
    import torch

    n_ok = 0
    for arch, name in INSTRUCTIONS:
        op = mb.make_op(arch, name)
        if op is None:
            continue
        p = PRESETS[arch].instructions[name].params
        assert op.k == p.K, (arch, name)
        n_ok += 1
        for fmt, dt in ((p.a_fmt, op.a_type), (p.b_fmt, op.b_type), (p.d_fmt, op.d_type)):
            t = mb.to_torch(np.zeros(1, dtype=np.uint64), fmt)
            want = torch.uint8 if fmt in (Format.E3M2, Format.E2M3, Format.E2M1) else dt
            assert t.dtype == want, (arch, name, fmt, dt)
    assert n_ok >= 200  # all but our tf32-full / future variants


def test_operand_coding_round_trips():
    """Bits survive to_torch/from_torch and decode to the values MMA-Sim decodes (FP6 and
    FP4 through its uint8 coding)."""
    import torch
    from mmasim.arithmetic.helper import decode_uint8_to_fp6_fp4

    from tensorcore_smt.formats import to_float

    for fmt in (Format.FP16, Format.BF16, Format.FP32, Format.FP64):
        bits = np.array(special_patterns(fmt), dtype=np.uint64)
        assert (mb.from_torch(mb.to_torch(bits, fmt), fmt) == bits).all(), fmt
    for fmt, name in ((Format.E3M2, "e3m2"), (Format.E2M3, "e2m3"), (Format.E2M1, "e2m1")):
        bits = np.arange(1 << fmt.spec.storage, dtype=np.uint64)
        vals = decode_uint8_to_fp6_fp4(mb.to_torch(bits, fmt), name).to(torch.float64)
        for x, v in zip(bits, vals.tolist()):
            want = to_float(int(x), fmt)
            assert v == want and np.copysign(1, v) == np.copysign(1, want), (fmt, int(x))


@pytest.mark.parametrize(
    "arch,name", COVERED, ids=[f"{a}:{n}".replace("::", "-") for a, n in COVERED]
)
def test_vector_matches_mmasim(arch, name):
    p = PRESETS[arch].instructions[name].params
    op = mb.make_op(arch, name)
    rng = np.random.default_rng(COVERED.index((arch, name)) + 424242)
    a, b, c = random_rows(rng, p, ROWS, ROW_KINDS)
    ours = simulate_params(p, a, b, c)
    theirs = mb.run(op, p, a, b, c)
    skip = mb.not_comparable(p, a, b, c)
    assert (~skip).sum() >= 0.8 * ROWS
    bad = np.nonzero(mb.mismatches(p, ours, theirs, arch) & ~skip)[0]
    detail = [
        f"a={[hex(int(x)) for x in a[i]]} b={[hex(int(x)) for x in b[i]]} c={int(c[i]):#x}"
        f" ours={int(ours[i]):#x} mmasim={int(theirs[i]):#x}"
        for i in bad[:3]
    ]
    assert len(bad) == 0, f"{len(bad)} of {ROWS} rows differ: {detail}"


# Hand-made rows whose answers MMA-Sim and the papers state (the MMA-Sim paper's own
# examples), run through both simulators: every one must agree.
PAPER_ROWS = [
    # MMA-Sim §VI-C: 2048*2048 - 2048*2048 - 0.000001 = -0.25 on CDNA3 (c rounded down).
    (
        "cdna3",
        "v_mfma_f32_32x32x8_f16",
        {0: (0x6800, 0x6800), 1: (0x6800, 0xE800)},
        0xB58637BD,
        0xBE800000,
    ),
    # MMA-Sim §IV-C step 0: a TF32 operand 0x7F800001 (NaN in fp32) is read as Inf.
    ("ampere", "m16n8k8.f32.tf32.tf32.f32", {0: (0x7F800001, 0x3F800000)}, 0, 0x7F800000),
    # MMA-Sim §III-F: -0.0 + sum (+0.0)*(-0.0), whether -0 can be generated.
    ("volta", "m8n8k4.f32.f16.f16.f32", {k: (0x0000, 0x8000) for k in range(4)}, 0x80000000, None),
    ("cdna2", "v_mfma_f32_32x32x8f16", {k: (0x0000, 0x8000) for k in range(8)}, 0x80000000, None),
    ("cdna3", "v_mfma_f32_32x32x8_f16", {k: (0x0000, 0x8000) for k in range(8)}, 0x80000000, None),
    ("cdna3", "v_mfma_f32_32x32x16_fp8_fp8", {k: (0, 0) for k in range(16)}, 0x80000000, None),
]


@pytest.mark.parametrize(
    "arch,name,terms,c,stated", PAPER_ROWS, ids=[f"{r[0]}:{r[1]}" for r in PAPER_ROWS]
)
def test_paper_rows_match_mmasim(arch, name, terms, c, stated):
    p = PRESETS[arch].instructions[name].params
    a = np.zeros((1, p.K), dtype=np.uint64)
    b = np.zeros((1, p.K), dtype=np.uint64)
    for k, (x, y) in terms.items():
        a[0, k], b[0, k] = x, y
    cc = np.array([c], dtype=np.uint64)
    ours = simulate_params(p, a, b, cc)
    theirs = mb.run(mb.make_op(arch, name), p, a, b, cc)
    assert not mb.mismatches(p, ours, theirs).any(), (hex(int(ours[0])), hex(int(theirs[0])))
    if stated is not None:  # the answer the paper states
        assert int(ours[0]) == stated, hex(int(ours[0]))
