"""Probe programs: PTX fragment layouts (bijections, spot checks against the PTX ISA
formulas), CUDA generation (header, targets, unsupported kinds), nvcc compilation of every
mma/wgmma form the presets use, and `tcsmt probe --check`."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from tensorcore_smt import __version__
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.probe import (
    Fragment,
    SharedLayout,
    all_layouts,
    check_output,
    generate,
    layout_for,
    parse_output,
)
from tensorcore_smt.probe.cuda import choose_target, requirement
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.vectors import Vector, VectorFile, predict, save

NVCC = shutil.which("nvcc")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def inst(arch: str, name: str):
    return PRESETS[arch].instructions[name]


def random_file(arch: str, name: str, n: int = 3, seed: int = 0) -> VectorFile:
    """`n` vectors of random bit patterns for `arch`/`name`, with the preset's prediction."""
    rng = random.Random(seed)
    p = inst(arch, name).params
    vecs = [
        Vector(
            [rng.getrandbits(p.a_fmt.spec.storage) for _ in range(p.K)],
            [rng.getrandbits(p.b_fmt.spec.storage) for _ in range(p.K)],
            rng.getrandbits(p.c_fmt.spec.storage),
            {},
        )
        for _ in range(n)
    ]
    return predict(VectorFile(arch, name, [arch], vecs))


# --- fragment layouts ---------------------------------------------------------------------

LAYOUTS = all_layouts()


@pytest.mark.parametrize("key", sorted(LAYOUTS))
def test_fragment_maps_are_bijections(key):
    """(thread, register, element) -> (row, col) covers each product's matrix exactly once."""
    lay = LAYOUTS[key]
    assert len(lay.group) == lay.threads
    for frag in (lay.a, lay.b, lay.c, lay.d):
        if not isinstance(frag, Fragment):
            continue
        assert frag.threads == lay.threads
        assert frag.elems == frag.regs * frag.per_reg
        for g in range(lay.groups):
            cells = [rc for t, e in enumerate(frag.place) if lay.group[t] == g for rc in e]
            want = [(r, c) for r in range(frag.rows) for c in range(frag.cols)]
            assert sorted(cells) == want, (key, frag.operand, g)
    # a sparse A is the compressed matrix of the kept half (2:4, and 1:2 for .tf32)
    k_a = lay.K // 2 if lay.key.startswith("mma.sp.") else lay.K
    assert (lay.a.rows, lay.a.cols) == (lay.M, k_a)
    assert (lay.d.rows, lay.d.cols) == (lay.M, lay.N)


@pytest.mark.parametrize("key", sorted(k for k in LAYOUTS if k.startswith("wgmma")))
def test_shared_b_is_the_canonical_no_swizzle_layout(key):
    smem = LAYOUTS[key].b
    assert isinstance(smem, SharedLayout)
    eb = smem.elem_bytes
    spans = sorted((o, o + eb) for row in smem.offset for o in row)
    assert all(hi <= lo2 for (_, hi), (lo2, _) in zip(spans, spans[1:]))  # no overlap
    assert spans[0][0] == 0 and spans[-1][1] == smem.size
    assert smem.size == smem.rows * smem.cols * eb  # dense
    per_row = 16 // eb
    for k in range(smem.rows):
        for n in range(smem.cols):
            core, within = divmod(smem.offset[k][n], 128)  # 8 x 16-byte core matrices
            assert core == k // per_row  # along K: LBO = 128 bytes apart
            assert within == n * 16 + (k % per_row) * eb  # row n, K contiguous in 16 bytes
    assert smem.lbo == smem.sbo == 128 and smem.swizzle == 0


def _lane_of(g: int, q: int, warp: int = 0) -> int:
    return 32 * warp + 4 * g + q


def test_m16n8k16_f16_matches_the_ptx_formulas():
    """PTX ISA: A is 4 .b32 per thread; row g for a0,a1,a4,a5 and g+8 for a2,a3,a6,a7;
    col 2q + (i&1), +8 for i >= 4. B: row 2q + (i&1) (+8 for i >= 2), col g.
    C: row g (+8 for c2,c3), col 2q + (i&1)."""
    lay = layout_for(inst("ampere", "m16n8k16.f32.f16.f16.f32"))
    assert (lay.a.regs, lay.b.regs, lay.c.regs, lay.a.elem_bits) == (4, 2, 4, 16)
    for g in range(8):
        for q in range(4):
            t = _lane_of(g, q)
            for i in range(8):
                row = g if i in (0, 1, 4, 5) else g + 8
                col = 2 * q + (i & 1) + (8 if i >= 4 else 0)
                assert lay.a.place[t][i] == (row, col)
                assert lay.a.slot(i) == (i // 2, 16 * (i % 2))
            for i in range(4):
                assert lay.b.place[t][i] == (2 * q + (i & 1) + (8 if i >= 2 else 0), g)
                assert lay.c.place[t][i] == (g + (8 if i >= 2 else 0), 2 * q + (i & 1))


def test_other_layouts_spot_checks():
    # m16n8k8 .tf32: a0 (g, q), a1 (g+8, q), a2 (g, q+4), a3 (g+8, q+4); b1 (q+4, g)
    lay = layout_for(inst("ampere", "m16n8k8.f32.tf32.tf32.f32"))
    t = _lane_of(5, 3)
    assert lay.a.place[t] == ((5, 3), (13, 3), (5, 7), (13, 7))
    assert lay.b.place[t] == ((3, 5), (7, 5))
    # m16n8k32 8-bit: a0..a3 row g cols 4q.., a4..a7 row g+8, a8.. cols +16
    lay = layout_for(inst("ada", "m16n8k32.f32.e4m3.e4m3.f32"))
    t = _lane_of(2, 1)
    assert lay.a.place[t][0:4] == ((2, 4), (2, 5), (2, 6), (2, 7))
    assert lay.a.place[t][4] == (10, 4) and lay.a.place[t][8] == (2, 20)
    assert lay.a.place[t][12] == (10, 20) and lay.b.place[t][4] == (20, 2)
    # m8n8k4 .f64: one element each of A and B, two of C
    lay = layout_for(inst("ampere", "m8n8k4.f64.f64.f64.f64"))
    assert lay.a.place[t] == ((2, 1),) and lay.b.place[t] == ((1, 2),)
    assert lay.c.place[t] == ((2, 2), (2, 3)) and lay.a.reg_bits == 64
    # m8n8k4 .f16: four products, one per quadpair; lane 17 holds row 5 of its A
    lay = layout_for(inst("volta", "m8n8k4.f32.f16.f16.f32"))
    assert lay.groups == 4 and lay.group[17] == 0 and lay.group[21] == 1
    assert lay.a.place[17] == ((5, 0), (5, 1), (5, 2), (5, 3))
    assert lay.b.place[17] == ((0, 5), (1, 5), (2, 5), (3, 5))
    assert lay.c.holders(0, 0, lay.group) == [(0, 0)]
    # wgmma: warp w holds rows 16w .. 16w+15
    lay = layout_for(inst("hopper", "wgmma.m64n8k16.f32.f16.f16"))
    assert lay.threads == 128 and lay.a.place[_lane_of(0, 0, warp=3)][0] == (48, 0)
    assert lay.d.place[_lane_of(7, 3, warp=2)][3] == (32 + 15, 7)


def _cute(shape, stride, index: int) -> int:
    """Evaluate a CuTe layout (nested shape/stride tuples) at a flat index (colexicographic)."""
    if isinstance(shape, int):
        return (index % shape) * stride
    off = 0
    for sh, st in zip(shape, stride):
        size = 1
        for x in sh if isinstance(sh, tuple) else (sh,):
            size *= x
        off += _cute(sh, st, index % size)
        index //= size
    return off


# CUTLASS CuTe's thread-value layouts (cute/atom/mma_traits_sm70.hpp, _sm80.hpp,
# _sm90_gmma.hpp): (thread, value) -> flat coordinate of a column-major (M,K) A,
# (N,K) B or (M,N) C. An encoding of the same hardware facts independent of the PTX
# formulas in tensorcore_smt/probe/layouts.py.
_QP = ((4, 2), (1, 16))  # SM70 quadpair: logical thread -> lane
_CUTE = {
    ("volta", "m8n8k4.f32.f16.f16.f32"): (
        _QP,
        (8, 1, 4, 8),  # A: SM70_8x4_Row
        (8, 1, 4, 8),  # B: SM70_8x4_Row (the N x K view)
        (((2, 2, 2), (1, 16, 4)), ((2, 2, 2), (8, 2, 32))),  # C: SM70_8x8_32b
    ),
    ("volta", "m8n8k4.f16.f16.f16.f16"): (_QP, (8, 1, 4, 8), (8, 1, 4, 8), ((8, 1), (8, 8))),
    ("ampere", "m16n8k8.f32.f16.f16.f32"): (
        None,
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
        (((4, 8), (16, 1)), (2, 8)),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("ampere", "m16n8k16.f32.f16.f16.f32"): (
        None,
        (((4, 8), (32, 1)), ((2, 2, 2), (16, 8, 128))),
        (((4, 8), (16, 1)), ((2, 2), (8, 64))),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("ampere", "m16n8k4.f32.tf32.tf32.f32"): (
        None,
        (((4, 8), (16, 1)), (2, 8)),
        (((4, 8), (8, 1)), (1, 0)),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"): (
        None,
        (((4, 8), (16, 1)), ((2, 2), (8, 64))),
        (((4, 8), (8, 1)), (2, 32)),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("ampere", "m8n8k4.f64.f64.f64.f64"): (
        None,
        (((4, 8), (8, 1)), (1, 0)),
        (((4, 8), (8, 1)), (1, 0)),
        (((4, 8), (16, 1)), (2, 8)),
    ),
    ("ada", "m16n8k16.f32.e4m3.e4m3.f32"): (  # as CuTe's s8 SM80_16x8x16
        None,
        (((4, 8), (64, 1)), ((4, 2), (16, 8))),
        (((4, 8), (32, 1)), (4, 8)),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("ada", "m16n8k32.f32.e4m3.e4m3.f32"): (  # as CuTe's s8 SM80_16x8x32
        None,
        (((4, 8), (64, 1)), ((4, 2, 2), (16, 8, 256))),
        (((4, 8), (32, 1)), ((4, 2), (8, 128))),
        (((4, 8), (32, 1)), ((2, 2), (16, 8))),
    ),
    ("hopper", "wgmma.m64n8k16.f32.f16.f16"): (
        None,
        (((4, 8, 4), (128, 1, 16)), ((2, 2, 2), (64, 8, 512))),  # ALayout_64x16
        None,
        (((4, 8, 4), (128, 1, 16)), ((2, 2), (64, 8))),  # CLayout_64x8
    ),
    ("hopper", "wgmma.m64n8k8.f32.tf32.tf32"): (
        None,
        (((4, 8, 4), (64, 1, 16)), ((2, 2), (8, 256))),  # ALayout_64x8
        None,
        (((4, 8, 4), (128, 1, 16)), ((2, 2), (64, 8))),
    ),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"): (
        None,
        (((4, 8, 4), (256, 1, 16)), ((4, 2, 2), (64, 8, 1024))),  # ALayout_64x32
        None,
        (((4, 8, 4), (128, 1, 16)), ((2, 2), (64, 8))),
    ),
}


@pytest.mark.parametrize("arch,name", sorted(_CUTE), ids=lambda x: x)
def test_layouts_agree_with_cute(arch, name):
    thr_map, la, lb, lc = _CUTE[(arch, name)]
    lay = layout_for(inst(arch, name))

    def norm(tv):  # (thr_shape, thr_stride, val_shape, val_stride)
        if len(tv) == 4:  # flat form: thread extent/stride, value extent/stride
            return tv
        (ts, tst), (vs, vst) = tv
        return ts, tst, vs, vst

    for frag, tv, rows_first in ((lay.a, la, "mk"), (lay.b, lb, "nk"), (lay.d, lc, "mn")):
        if tv is None:
            continue
        ts, tst, vs, vst = norm(tv)
        n_thr = len(frag.place) if thr_map is None else 8
        extent = {"mk": frag.rows, "nk": frag.cols, "mn": frag.rows}[rows_first]
        for logical in range(n_thr):
            t = logical if thr_map is None else _cute(thr_map[0], thr_map[1], logical)
            for i in range(frag.elems):
                off = _cute(ts, tst, logical) + _cute(vs, vst, i)
                x, y = off % extent, off // extent
                want = (y, x) if rows_first == "nk" else (x, y)
                assert frag.place[t][i] == want, (frag.operand, t, i)


def test_c_and_d_layouts_follow_their_own_types():
    """m8n8k4.f32.f16.f16.f16: D is .f32 (8 registers), C is .f16 (4 .f16x2 registers)."""
    lay = layout_for(inst("volta", "m8n8k4.f32.f16.f16.f16"))
    assert (lay.c.elem_bits, lay.c.regs, lay.d.elem_bits, lay.d.regs) == (16, 4, 32, 8)


# --- generation ---------------------------------------------------------------------------


def test_generated_program_header_and_body():
    vf = random_file("hopper", "m16n8k16.f32.f16.f16.f32", n=4)
    vf.vectors[1].note = "a note ending in a backslash \\"
    src = generate(vf, source_name="p.cu", vectors_name="v.json")
    assert f"generated by tcsmt {__version__}" in src
    assert "// arch:        hopper" in src
    assert "// instruction: m16n8k16.f32.f16.f16.f32" in src
    assert "// target:      sm_90" in src
    assert "// build:  nvcc -arch=sm_90 -o p p.cu" in src
    assert "// check:  tcsmt probe --check v.json probe_output.txt" in src
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
    assert "static const int NV = 4;" in src
    assert 'printf("vector %d d=0x%08llx\\n", i, out[i]);' in src
    assert src.count("CHECK(") >= 12  # every CUDA call is checked
    assert not re.search(r"\\\n", src.split("#define CHECK")[0])  # no comment continuation


def test_wgmma_program_uses_a_warpgroup_and_shared_memory_descriptor():
    src = generate(random_file("hopper", "wgmma.m64n8k32.f16.e4m3.e5m2"))
    for needle in (
        "static const int THREADS = 128;",
        "wgmma.fence.sync.aligned;",
        "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
        "fence.proxy.async.shared::cta;",
        "__cvta_generic_to_shared(smem_b)",
        "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)",
        "// target:      sm_90a",
        "nvcc -arch=sm_90a",
    ):
        assert needle in src, needle


def test_volta_targets_sm_75_and_says_how_to_build_sm_70():
    vf = random_file("volta", "m8n8k4.f32.f16.f16.f32")
    target, notes = choose_target(vf)
    assert str(target) == "sm_75"
    src = generate(vf)
    assert "// target:      sm_75" in src and "nvcc -arch=sm_70 -o probe probe.cu" in src
    assert any("build with CUDA 12.x or older" in n for n in notes)
    target, notes = choose_target(vf, "70")
    assert str(target) == "sm_70" and any("CUDA 12.x" in n for n in notes)


@pytest.mark.parametrize(
    "arch,name,sm,needle",
    [
        ("hopper", "wgmma.m64n8k16.f32.f16.f16", "90", "needs sm_90a"),
        ("hopper", "wgmma.m64n8k16.f32.f16.f16", "100a", "needs sm_90a"),
        ("volta", "m8n8k4.f32.f16.f16.f32", "80", "CUDA-core (FPU) code"),
        ("ada", "m16n8k32.f32.e4m3.e4m3.f32", "80", "needs sm_89 or later"),
        ("rtx-blackwell", "m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32", "120", "sm_120a"),
        ("ampere", "m16n8k16.f32.f16.f16.f32", "sm80x", "not a GPU target"),
    ],
)
def test_sm_override_is_validated(tmp_path, arch, name, sm, needle):
    path = tmp_path / "v.json"
    save(random_file(arch, name, n=1), path)
    r = run("probe", str(path), "--sm", sm)
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert (
        len(lines) == 1 and lines[0].startswith(f"tcsmt: error: --sm {sm}:") and needle in lines[0]
    )


def test_probe_command_writes_the_program(tmp_path):
    path = tmp_path / "v.json"
    save(random_file("ampere", "m16n8k8.f32.tf32.tf32.f32"), path)
    out = tmp_path / "p.cu"
    r = run("probe", str(path), "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "build: nvcc -arch=sm_80 -o p p.cu" in r.output
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in out.read_text()
    r = run("probe", str(path))  # to stdout
    assert r.exit_code == 0 and "#include <cuda_runtime.h>" in r.stdout
    assert "build: nvcc" in r.stderr and "build: nvcc" not in r.stdout


def test_empty_vector_file_cannot_be_probed(tmp_path):
    path = tmp_path / "v.json"
    save(VectorFile("ampere", "m16n8k16.f32.f16.f16.f32", ["ampere"], []), path)
    r = run("probe", str(path))
    assert r.exit_code == 2 and "vectors: the file has no vectors to probe" in r.output


def test_requirements_cover_every_form():
    for preset in PRESETS.values():
        for ins in preset.instructions.values():
            if ins.kind not in ("mma", "wgmma") or ins.name.startswith("mma.sp"):
                continue  # sparse forms have no probe yet (test_sparse.py)
            req = requirement(ins)
            assert req.min_sm <= (preset.sm if preset.sm >= 75 else 75) or req.max_sm == 75
            target, _ = choose_target(
                VectorFile(preset.name, ins.name, [], [Vector([], [], 0, {})])
            )
            assert req.min_sm <= target.sm and (req.max_sm is None or target.sm <= req.max_sm)


# --- checking a program's output ----------------------------------------------------------


@pytest.fixture
def volta_file(tmp_path) -> tuple[Path, VectorFile]:
    vecs = [
        Vector([0x3C00, 0, 0, 0], [0x3C00, 0, 0, 0], 0xBF7FFFFF, {}, "Fasi §III-D1"),
        Vector([0x3C00] * 4, [0x3C00, 0x3C00, 0x3C00, 0x0002], 0x3F800003, {}),
        Vector([0x4000, 0x3C00, 0, 0], [0xC000, 0x3C00, 0, 0], 0x00000001, {}),
    ]
    vf = predict(
        VectorFile(
            "volta", "m8n8k4.f32.f16.f16.f32", ["volta", "fasi-volta", "ieee-fp32-rne"], vecs
        )
    )
    path = tmp_path / "v.json"
    save(vf, path)
    return path, vf


def _output(values: list[int]) -> str:
    return "".join(f"vector {i} d=0x{d:08x}\n" for i, d in enumerate(values))


def test_check_names_the_variant_the_output_equals(tmp_path, volta_file):
    path, vf = volta_file
    for variant in ("volta", "fasi-volta"):
        out = tmp_path / "out.txt"
        out.write_text(_output([v.predicted[variant] for v in vf.vectors]))
        r = run("probe", "--check", str(path), str(out))
        assert r.exit_code == 0, r.output
        assert f"verdict: the hardware follows {variant} on every vector" in r.output
        r = run("probe", "--check", str(path), str(out), "--json")
        rep = json.loads(r.output)
        assert rep["survivors"] == [variant] and rep["all_matched"] is True
        assert all(variant in v["matched"] for v in rep["vectors"])


def test_check_reports_each_mismatch_and_exits_1(tmp_path, volta_file):
    path, vf = volta_file
    wrong = [v.predicted["volta"] ^ 0x100 for v in vf.vectors]
    out = tmp_path / "out.txt"
    out.write_text("# from a GPU that follows no hypothesis\n" + _output(wrong))
    r = run("probe", "--check", str(path), str(out))
    assert r.exit_code == 1, r.output
    assert r.output.count("MISMATCH: no variant predicts it") == 3
    assert "survivors (match every vector): none" in r.output
    rep = json.loads(run("probe", "--check", str(path), str(out), "--json").output)
    assert rep["unexplained"] == [0, 1, 2] and rep["survivors"] == []


def test_check_partial_match_keeps_only_consistent_variants(tmp_path, volta_file):
    path, vf = volta_file
    mixed = [vf.vectors[0].predicted["fasi-volta"]] + [v.predicted["volta"] for v in vf.vectors[1:]]
    out = tmp_path / "out.txt"
    out.write_text(_output(mixed))
    rep = json.loads(run("probe", "--check", str(path), str(out), "--json").output)
    first = rep["vectors"][0]["matched"]
    assert "fasi-volta" in first and "volta" not in first
    assert "volta" not in rep["survivors"] and set(rep["survivors"]) <= set(first)


def test_check_fills_missing_predictions_from_the_model(volta_file):
    _, vf = volta_file
    bare = VectorFile(
        vf.arch, vf.instruction, ["volta"], [Vector(v.a, v.b, v.c, {}) for v in vf.vectors]
    )
    rep = check_output(bare, _output([v.predicted["volta"] for v in vf.vectors]))
    assert rep.survivors == ["volta"] and rep.ok


@pytest.mark.parametrize(
    "text,needle",
    [
        ("vector 0 d=0x34000000\nvector 1 d=0x40800001\n", "truncated output: 2 of 3 vectors"),
        ("", "truncated output: 0 of 3 vectors"),
        ("vector 0 d=0x34000000\nprobe crashed\n", "line 2: expected 'vector <index> d=0x<hex>'"),
        ("vector 0 d=0x1\nvector 0 d=0x1\n", "line 2: vector 0 appears twice"),
        ("vector 7 d=0x1\n", "line 1: vector 7 does not exist (the file has 3 vectors)"),
        ("vector 0 d=0xffffffffffffffff\n", "line 1: d: '0xffffffffffffffff' does not fit"),
        ("vector 0 d=0xnothex\n", "'0xnothex' is not a hex bit pattern"),
    ],
)
def test_bad_output_exits_2_with_one_line(tmp_path, volta_file, text, needle):
    path, _ = volta_file
    out = tmp_path / "out.txt"
    out.write_text(text)
    r = run("probe", "--check", str(path), str(out))
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"tcsmt: error: {out}: ") and needle in lines[0]


def test_check_usage_errors(tmp_path, volta_file):
    path, _ = volta_file
    r = run("probe", "--check", str(tmp_path / "out.txt"))
    assert r.exit_code == 2 and "--check needs the vector file and the program's output" in r.output
    r = run("probe", "--check", str(path), str(tmp_path / "missing.txt"))
    assert r.exit_code == 2 and "missing.txt: no such file" in r.output
    r = run("probe", "--check", str(path), str(path), "--sm", "80")
    assert r.exit_code == 2 and "--out, --sm and --block-scale are for writing a probe" in r.output
    nov = tmp_path / "nov.json"
    save(VectorFile("volta", "m8n8k4.f32.f16.f16.f32", [], [Vector([0] * 4, [0] * 4, 0, {})]), nov)
    r = run("probe", "--check", str(nov), str(nov))
    assert r.exit_code == 2 and f"{nov}: variants: the vector file lists no variants" in r.output


def test_check_reads_stdin(volta_file):
    path, vf = volta_file
    text = _output([v.predicted["volta"] for v in vf.vectors])
    r = CliRunner().invoke(main, ["probe", "--check", str(path), "-"], input=text)
    assert r.exit_code == 0 and "output <stdin>" in r.output


def test_parse_output_ignores_order_blank_lines_and_comments():
    from tensorcore_smt.formats import Format

    text = "# header\n\nvector 1 d=0x2\n  vector 0 d=0x1  \n"
    assert parse_output(text, 2, Format.FP32) == [1, 2]
    with pytest.raises(UserError):
        parse_output(text, 3, Format.FP32)


# --- compiling the generated programs with nvcc ------------------------------------------


NO_PROBE = {"wgmma.m64n8k256.s32.b1.b1.and.popc"}
"""Forms without a probe yet (single-bit wgmma: B's bits in shared memory)."""


def test_forms_without_a_probe_say_so():
    for preset in PRESETS.values():
        for name, ins in preset.instructions.items():
            if ins.kind not in ("mma", "wgmma"):
                continue
            if name in NO_PROBE:
                with pytest.raises(UserError, match="not supported yet"):
                    layout_for(ins)
            else:
                layout_for(ins)


def _forms(per_target: bool = False) -> list[tuple[str, str]]:
    """Every distinct PTX form (instruction name) of kind mma/wgmma with one arch that has
    it; with `per_target`, once per default GPU target (sm_75 … sm_120a) instead."""
    out: dict[tuple, tuple[str, str]] = {}
    for arch, preset in PRESETS.items():
        for name, ins in preset.instructions.items():
            if (
                ins.kind in ("mma", "wgmma")
                and name not in NO_PROBE
                and not name.startswith("mma.sp")
            ):
                key = (name, str(choose_target(VectorFile(arch, name, [], []))[0]))
                out.setdefault(key if per_target else (name,), (arch, name))
    return sorted(out.values(), key=lambda x: (x[1], x[0]))


def _representatives() -> list[tuple[str, str]]:
    """One form per fragment layout (shape, operand widths, C and D types), per PTX
    spelling family (.kind::f8f6f4, mixed fp8 operands) and per default GPU target."""
    seen: dict[tuple, tuple[str, str]] = {}
    targets: set[str] = set()
    for arch, name in _forms(per_target=True):
        fam = (layout_for(inst(arch, name)).key, "kind::" in name)
        target = str(choose_target(VectorFile(arch, name, [], []))[0])
        if fam not in seen or target not in targets:
            seen.setdefault(fam if fam not in seen else (fam, target), (arch, name))
            targets.add(target)
    seen.setdefault(("mixed",), ("ada", "m16n8k16.f32.e4m3.e5m2.f32"))
    return sorted(seen.values(), key=lambda x: x[1])


def _compile_all(tmp_path: Path, forms: list[tuple[str, str]], mode: str) -> list[str]:
    """Generate and compile each form with the header's -arch flag; `mode` is -c (device
    and host code, every embedded target) or -cubin (the device code for the target)."""

    def one(job: tuple[int, tuple[str, str]]) -> str | None:
        n, (arch, name) = job
        src_path = tmp_path / f"probe{n}.cu"
        src = generate(random_file(arch, name, n=2, seed=n), source_name=src_path.name)
        src_path.write_text(src)
        arch_flag = re.search(r"// build:  nvcc (-arch=sm_\w+)", src).group(1)
        r = subprocess.run(
            [NVCC, arch_flag, mode, str(src_path), "-o", str(src_path.with_suffix(".out"))],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or "warning" in r.stderr:
            return f"{arch} {name} ({arch_flag}): {r.stderr.strip()[-600:]}"
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        return [e for e in pool.map(one, enumerate(forms)) if e]


def _need_nvcc():
    if NVCC is None:
        pytest.skip("nvcc not found on PATH: the generated CUDA programs are not compiled")


def test_representative_probes_compile(tmp_path):
    """Device code of one form per layout family (the full sweep is marked slow)."""
    _need_nvcc()
    forms = _representatives()
    assert len(forms) >= 20
    failures = _compile_all(tmp_path, forms, "-cubin")
    assert not failures, "\n".join(failures)


def test_arch_specific_probes_compile_as_users_build_them(tmp_path):
    """`nvcc -arch=sm_90a` / `sm_120a` also embed portable PTX, where wgmma and
    .kind::f8f6f4 do not exist: the guarded program must still build."""
    _need_nvcc()
    forms = [
        ("hopper", "wgmma.m64n8k16.f32.bf16.bf16"),
        ("rtx-blackwell", "m16n8k32.kind::f8f6f4.f16.e2m1.e3m2.f16"),
    ]
    failures = _compile_all(tmp_path, forms, "-c")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_every_mma_and_wgmma_probe_compiles(tmp_path):
    _need_nvcc()
    forms = _forms(per_target=True)
    assert len(forms) > 140
    failures = _compile_all(tmp_path, forms, "-c")
    assert not failures, "\n".join(failures)


def test_built_program_checks_cuda_errors_or_prints_every_vector(tmp_path):
    """Build a whole program. Without a usable GPU it must fail with a CUDA error on stderr
    and print nothing on stdout; with one, stdout must be one line per vector."""
    _need_nvcc()
    vf = random_file("ampere", "m16n8k16.f32.bf16.bf16.f32", n=5)
    src = tmp_path / "p.cu"
    src.write_text(generate(vf, source_name="p.cu"))
    exe = tmp_path / "p"
    r = subprocess.run(
        [NVCC, "-arch=sm_80", "-o", str(exe), str(src)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        assert len(parse_output(r.stdout, 5, vf.params.d_fmt)) == 5
    else:
        assert r.stdout == ""
        assert r.stderr.startswith("probe: CUDA error"), r.stderr
