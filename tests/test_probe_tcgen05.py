"""tcgen05.mma probes (sm_100a): the placement tables of probe/tmem.py (shared memory bit
offsets, tensor memory Layout F, the instruction descriptor) checked against the PTX ISA
rules they encode, and the generated programs compiled by nvcc; block-scaled mma.sync
probes (sm_120a) at unit scale factors, and MMA-Sim's word that they compute the same."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from test_probe import random_file

from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format
from tensorcore_smt.probe import generate
from tensorcore_smt.probe.cuda import choose_target, requirement
from tensorcore_smt.probe.tmem import all_tcgen05_layouts, instruction_descriptor, tcgen05_layout
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.vectors import VectorFile, save

NVCC = shutil.which("nvcc")
TCGEN05 = [  # the block-scaled forms have no probe yet (test_block_scale.py)
    n
    for n, i in PRESETS["blackwell"].instructions.items()
    if i.kind == "tcgen05" and i.params.scale_fmt is None
]
LAYOUTS = all_tcgen05_layouts()


@pytest.mark.parametrize("key", sorted(LAYOUTS))
def test_shared_memory_tables_are_injective_and_inside_their_core_matrices(key):
    """Every element of A (64 x K) and B (8 x K) gets its own bits, within the 16 bytes of
    its core-matrix row, inside the buffer; a row of 16-byte chunks holds 8 f16, 4 tf32 or
    16 f8f6f4 elements (fp6 and fp4 packed: PTX ISA §5.5.1.1.1)."""
    lay = LAYOUTS[key]
    for smem in (lay.a, lay.b):
        spans = sorted((o, o + smem.elem_bits) for row in smem.bit for o in row)
        assert all(hi <= lo2 for (_, hi), (lo2, _) in zip(spans, spans[1:]))
        assert spans[-1][1] <= 8 * smem.size
        assert len(spans) == smem.rows * smem.cols
        per_chunk = {"f16": 8, "tf32": 4, "f8f6f4": 16, "i8": 16}[lay.kind]
        for r, row in enumerate(smem.bit):
            for k, o in enumerate(row):
                core_row_start = 8 * ((r // 8) * smem.sbo + (k // per_chunk) * smem.lbo)
                start = core_row_start + 8 * 16 * (r % 8)
                assert start <= o and o + smem.elem_bits <= start + 128, (key, r, k)
        assert smem.lbo == 128 and smem.sbo == 128 * -(-lay.K // per_chunk)


@pytest.mark.parametrize("key", sorted(LAYOUTS))
def test_tmem_layout_f_is_a_bijection_onto_half_the_lanes(key):
    """Layout F (M = 64, cta_group::1): rows 16w..16w+15 in lanes 32w..32w+15, column n
    in column n; every (row, column) of D in its own cell."""
    d = LAYOUTS[key].d
    cells = [rc for row in d.place for rc in row]
    assert len(set(cells)) == d.rows * d.cols == 64 * 8
    lanes = {lane for lane, _ in cells}
    assert lanes == {32 * w + i for w in range(4) for i in range(16)}
    assert d.place[0][0] == (0, 0) and d.place[17][3] == (33, 3)


def test_instruction_descriptor_fields():
    """PTX ISA Table 42: dtype F32 = 1 in bits 4-5, atype/btype in 7-9 / 10-12 (f16 0,
    bf16 1, tf32 2, e4m3 0, e5m2 1, e2m3 3, e3m2 4, e2m1 5), N >> 3 in 17-22, M >> 4 in 24-28."""
    f = instruction_descriptor("f16", 64, 8, Format.BF16, Format.BF16, Format.FP32)
    assert f == (1 << 4) | (1 << 7) | (1 << 10) | (1 << 17) | (4 << 24)
    g = instruction_descriptor("f8f6f4", 64, 8, Format.E2M1, Format.E3M2, Format.FP16)
    assert g == (5 << 7) | (4 << 10) | (1 << 17) | (4 << 24)
    t = instruction_descriptor("tf32", 64, 8, Format.TF32, Format.TF32, Format.FP32)
    assert (t >> 7) & 7 == 2 and (t >> 10) & 7 == 2 and (t >> 4) & 3 == 1


def test_fp4_and_fp6_operands_are_packed_sixteen_per_chunk():
    lay = tcgen05_layout(
        PRESETS["blackwell"].instructions["tcgen05.m64n8k32.kind::f8f6f4.f32.e2m1.e3m2"]
    )
    assert list(lay.a.bit[0][:3]) == [0, 4, 8] and lay.a.bit[0][16] == 8 * 128
    assert list(lay.b.bit[0][:3]) == [0, 6, 12] and lay.b.bit[0][16] == 8 * 128
    assert lay.b.bit[1][0] == 8 * 16  # the next row of the core matrix


def test_target_is_sm_100a():
    inst = PRESETS["blackwell"].instructions[TCGEN05[0]]
    req = requirement(inst)
    assert (req.min_sm, req.arch_specific) == (100, True)
    target, _ = choose_target(VectorFile("blackwell", inst.name, [], []))
    assert str(target) == "sm_100a"


def test_program_allocates_tensor_memory_and_waits_on_the_commit(tmp_path):
    src = generate(random_file("blackwell", "tcgen05.m64n8k16.kind::f16.f32.bf16.bf16"))
    for needle in (
        "tcgen05.alloc.cta_group::1",
        "tcgen05.st.sync.aligned.32x32b.x8.b32",
        "tcgen05.mma.cta_group::1.kind::f16",
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
        "mbarrier.try_wait.parity",
        "tcgen05.ld.sync.aligned.32x32b.x8.b32",
        "tcgen05.dealloc.cta_group::1",
        "fence.proxy.async.shared::cta",
        "#if defined(__CUDA_ARCH_FEAT_SM100_ALL)",
        "// build:  nvcc -arch=sm_100a",
    ):
        assert needle in src, needle


def test_probe_command_writes_a_tcgen05_program(tmp_path):
    path = tmp_path / "v.json"
    save(random_file("blackwell", "tcgen05.m64n8k32.kind::f8f6f4.f32.e4m3.e4m3", n=2), path)
    out = tmp_path / "p.cu"
    r = CliRunner().invoke(main, ["probe", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in out.read_text()


def _compile(tmp_path, names: list[str]) -> list[str]:
    failures = []
    for n, name in enumerate(names):
        src_path = tmp_path / f"t{n}.cu"
        src = generate(random_file("blackwell", name, n=2, seed=n), source_name=src_path.name)
        src_path.write_text(src)
        flag = re.search(r"// build:  nvcc (-arch=sm_\w+)", src).group(1)
        r = subprocess.run(
            [NVCC, flag, "-c", str(src_path), "-o", str(src_path.with_suffix(".o"))],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or "warning" in r.stderr:
            failures.append(f"{name}: {r.stderr.strip()[-600:]}")
    return failures


def _representatives() -> list[str]:
    """One form per layout (kind, operand element widths, d type)."""
    seen: dict[str, str] = {}
    for name in TCGEN05:
        seen.setdefault(tcgen05_layout(PRESETS["blackwell"].instructions[name]).key, name)
    return sorted(seen.values())


def test_two_tcgen05_probes_compile_for_sm_100a(tmp_path):
    """A 16-bit and an 8-bit operand form (the rest: the slow tests below)."""
    if NVCC is None:
        pytest.skip("nvcc not found on PATH")
    names = _representatives()
    pick = [next(n for n in names if "kind::f16" in n), next(n for n in names if "e5m2" in n)]
    failures = _compile(tmp_path, pick)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_representative_tcgen05_probes_compile_for_sm_100a(tmp_path):
    if NVCC is None:
        pytest.skip("nvcc not found on PATH")
    names = _representatives()
    assert len(names) >= 8
    failures = _compile(tmp_path, names)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_every_tcgen05_probe_compiles(tmp_path):
    if NVCC is None:
        pytest.skip("nvcc not found on PATH")
    assert len(TCGEN05) == 54
    failures = _compile(tmp_path, TCGEN05)
    assert not failures, "\n".join(failures)


# --- block-scaled mma.sync (sm_120a) at unit scale factors ---------------------------------

F8F6F4_F32 = [
    n for n in PRESETS["rtx-blackwell"].instructions if n.startswith("m16n8k32.kind::f8f6f4.f32.")
]


def test_block_scaled_probe_uses_unit_scales_and_compiles_for_sm_120a(tmp_path):
    from tensorcore_smt.probe.cuda import UNIT_SCALE

    vf = random_file("rtx-blackwell", "m16n8k32.kind::f8f6f4.f32.e4m3.e2m1.f32", n=2)
    src = generate(vf, block_scale=True, source_name="b.cu")
    assert (
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
        ".f32.e4m3.e2m1.f32.ue8m0" in src
    )
    assert f'"r"({UNIT_SCALE:#x}u)' in src and UNIT_SCALE == 0x7F7F7F7F
    if NVCC is None:
        pytest.skip("nvcc not found on PATH")
    path = tmp_path / "b.cu"
    path.write_text(src)
    r = subprocess.run(
        [NVCC, "-arch=sm_120a", "-c", str(path), "-o", str(tmp_path / "b.o")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_block_scale_needs_an_f8f6f4_f32_form(tmp_path):
    path = tmp_path / "v.json"
    save(random_file("rtx-blackwell", "m16n8k32.kind::f8f6f4.f16.e4m3.e4m3.f16", n=1), path)
    r = CliRunner().invoke(main, ["probe", str(path), "--block-scale"])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "no block-scaled form" in lines[0]


@pytest.mark.parametrize("name", F8F6F4_F32[:: max(1, len(F8F6F4_F32) // 5)])
def test_unit_scale_block_scaled_mma_is_the_f8f6f4_arithmetic_in_mmasim(name):
    """What the --block-scale probe relies on: MMA-Sim's RTX Blackwell mxf8f6f4 block32
    form with ue8m0 scales of 1 gives, bit for bit, our kind::f8f6f4 model's d."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    import mmasim_bridge as mb
    import numpy as np
    from mmasim.nv_ptx import MMABlockScale
    from strategies import random_rows

    from tensorcore_smt.api import simulate_params

    p = PRESETS["rtx-blackwell"].instructions[name].params
    _, _, d, a_t, b_t, c = name.split(".")
    op = MMABlockScale(
        "RTX Blackwell", f"m16n8k32.kind::mxf8f6f4.block32.{d}.{a_t}.{b_t}.{c}.ue8m0"
    )
    a, b, cc = random_rows(np.random.default_rng(F8F6F4_F32.index(name) + 77), p, 3000)
    one = torch.full((len(cc), 1), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    with torch.no_grad():
        dt = op.dpa(
            mb.to_torch(a, p.a_fmt), mb.to_torch(b, p.b_fmt), mb.to_torch(cc, p.c_fmt), one, one
        )
    theirs = mb.from_torch(dt, p.d_fmt)
    ours = simulate_params(p, a, b, cc)
    assert (ours == theirs).all(), f"{int((ours != theirs).sum())} rows differ"
