"""Probes and batch runners of the structured-sparse (mma.sp) forms and of the integer
forms' d: fragment layouts, metadata words, the generated CUDA, and the campaign's
sparse step end to end with a stand-in runner (the GPU's own answers are replayed in
test_hardware_h100_sparse.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.errors import UserError
from tensorcore_smt.hardware import sparse as hw_sparse
from tensorcore_smt.hardware.gpu import Gpu
from tensorcore_smt.hardware.validation import runnable
from tensorcore_smt.probe.cuda import ptx_mnemonic
from tensorcore_smt.probe.layouts import layout_for
from tensorcore_smt.probe.runner import generate_runner, runner_target
from tensorcore_smt.probe.sparse_meta import meta_indices, meta_word, patterns
from tensorcore_smt.spec.presets import PRESETS, parse_variant

HOPPER = PRESETS["hopper"]

# PTX ISA, "Matrix fragments for sparse mma": .b32 registers of A and B per thread
REGS = {
    "mma.sp.m16n8k32.f32.f16.f16.f32": (4, 4),
    "mma.sp.m16n8k16.f16.f16.f16.f16": (2, 2),
    "mma.sp.m16n8k16.f32.tf32.tf32.f32": (4, 4),
    "mma.sp.m16n8k8.f32.tf32.tf32.f32": (2, 2),
    "mma.sp.m16n8k64.s32.s8.s8.s32": (4, 4),
    "mma.sp.m16n8k32.satfinite.s32.u8.s8.s32": (2, 2),
}


@pytest.mark.parametrize("name", sorted(REGS))
def test_sparse_layout_places_every_element_once(name):
    inst = HOPPER.instructions[name]
    lay = layout_for(inst)
    p = inst.params
    assert (lay.a.rows, lay.a.cols) == (16, p.n_a)  # the compressed A
    assert (lay.b.rows, lay.b.cols) == (p.K, 8)
    for frag in (lay.a, lay.b, lay.c, lay.d):
        cells = [x for t in frag.place for x in t]
        assert len(cells) == len(set(cells)) == frag.rows * frag.cols
    assert (lay.a.regs, lay.b.regs) == REGS[name]


def test_sparse_b_continues_the_dense_pattern():
    # B of the sparse k32 f16 form holds, for k < 16, what the dense k16 B holds
    sp = layout_for(HOPPER.instructions["mma.sp.m16n8k32.f32.f16.f16.f32"]).b
    dense = layout_for(HOPPER.instructions["m16n8k16.f32.f16.f16.f32"]).b
    for t in range(32):
        assert sp.place[t][:4] == dense.place[t]


def test_sparse_mnemonics_as_the_ptx_isa_spells_them():
    m = ptx_mnemonic(HOPPER.instructions["mma.sp::ordered_metadata.m16n8k32.f32.bf16.bf16.f32"])
    assert m == "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"
    m = ptx_mnemonic(HOPPER.instructions["mma.sp.m16n8k64.satfinite.s32.s8.u8.s32"])
    assert m == "mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.u8.s32"


def test_metadata_words_repeat_one_group_nibble():
    p = HOPPER.instructions["mma.sp.m16n8k32.f32.f16.f16.f32"].params
    assert patterns(p) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert meta_word((0, 1), p) == 0x44444444  # indices 0 (bits 0-1) and 1 (bits 2-3)
    assert meta_word((1, 3), p) == 0xDDDDDDDD
    assert meta_indices((1, 3), p) == [1, 3] * 8
    t = HOPPER.instructions["mma.sp.m16n8k16.f32.tf32.tf32.f32"].params
    assert [meta_word(x, t) for x in patterns(t)] == [0x44444444, 0xEEEEEEEE]
    assert meta_indices((1,), t) == [1] * 8


def test_sparse_runner_source_passes_the_metadata():
    inst = HOPPER.instructions["mma.sp::ordered_metadata.m16n8k32.f32.f16.f16.f32"]
    src = generate_runner(inst, runner_target(inst, 90))
    assert "static const int NA = 16;" in src and "static const bool SPARSE = true;" in src
    assert "{%12, %13, %14, %15}, %16, 0x0;" in src and '"r"(vm)' in src
    assert "vmeta[blockIdx.x]" in src


def test_integer_d_is_stored_as_an_integer():
    # The first H100 run read every .s32 d through __float_as_uint: 2^31 as 0x4f000000.
    for name in ("m16n8k32.satfinite.s32.s8.s8.s32", "mma.sp.m16n8k32.s32.s8.s8.s32"):
        inst = HOPPER.instructions[name]
        src = generate_runner(inst, runner_target(inst, 90))
        (store,) = [ln for ln in src.splitlines() if "vd[blockIdx.x] =" in ln]
        assert "float" not in store
    inst = HOPPER.instructions["m16n8k16.f32.f16.f16.f32"]
    src = generate_runner(inst, runner_target(inst, 90))
    assert any("__float_as_uint" in ln for ln in src.splitlines() if "vd[blockIdx.x] =" in ln)


def test_runnable_leaves_out_forms_without_a_probe():
    names = runnable("hopper", 90)
    assert "wgmma.m64n8k256.s32.b1.b1.and.popc" not in names  # 1-bit wgmma: no layout yet
    assert "mma.sp.m16n8k32.f32.f16.f16.f32" in names


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compile only)")
def test_sparse_runner_compiles(tmp_path):
    inst = HOPPER.instructions["mma.sp.m16n8k16.f32.tf32.tf32.f32"]
    target = runner_target(inst, 90)
    cu = tmp_path / "r.cu"
    cu.write_text(generate_runner(inst, target))
    r = subprocess.run(
        ["nvcc", f"-arch={target}", "-O2", "-o", str(tmp_path / "r"), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-500:]


FAKE = """
import sys, numpy as np
from tensorcore_smt.spec.presets import PRESETS, parse_variant
from tensorcore_smt.api import simulate_params
from tensorcore_smt.probe.sparse_meta import patterns, meta_word, meta_indices
name, variant, fin, fout = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[5]
p = parse_variant(variant).params(name)
raw = np.fromfile(fin, dtype=np.uint64); n = int(raw[0]); o = 1
a = raw[o:o + n * p.n_a].reshape(n, p.n_a); o += n * p.n_a
b = raw[o:o + n * p.K].reshape(n, p.K); o += n * p.K
c = raw[o:o + n]; o += n
words = raw[o:o + n]; assert o + n == len(raw)
table = {meta_word(x, p): meta_indices(x, p) for x in patterns(p)}
meta = np.array([table[int(w)] for w in words])
simulate_params(p, a, b, c, meta=meta).astype(np.uint64).tofile(fout)
"""


@pytest.mark.parametrize("unit", ["hopper", "hopper[sparse=expanded]"])
def test_sparse_step_decides_between_the_hypotheses(tmp_path, monkeypatch, unit):
    """The step's rows, metadata words and binary protocol, with a stand-in runner that
    decodes the words and computes `unit`: the hypothesis it runs gets 0 mismatches."""
    import tensorcore_smt.probe.runner as runner

    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    name = "mma.sp::ordered_metadata.m16n8k32.f32.f16.f16.f32"
    monkeypatch.setattr(
        runner, "build_runner", lambda arch, n, work: [sys.executable, str(script), n, unit]
    )
    monkeypatch.setattr(hw_sparse, "run_cmd", lambda cmd: types.SimpleNamespace(stdout=""))
    monkeypatch.setattr(hw_sparse, "sparse_names", lambda arch, sm: [name])
    (entry,) = hw_sparse.run_sparse("hopper", Gpu("stand-in", 90, "-"), tmp_path, 3000, 7, 1)
    counts = {h: v["mismatches"] for h, v in entry["hypotheses"].items()}
    other = "hopper[sparse=expanded]" if unit == "hopper" else "hopper"
    assert counts[unit] == 0 and counts[other] > 0
    kept = np.load(tmp_path / "sparse" / f"{name.replace(':', '_')}.d.npy")
    p = parse_variant(unit).params(name)
    a, b, c, meta, _, _ = hw_sparse.sparse_rows(p, 3000, 7)
    assert np.array_equal(kept, simulate_params(p, a, b, c, meta=meta).astype(kept.dtype))


def test_sparse_rows_keep_one_pattern_a_row():
    p = HOPPER.instructions["mma.sp.m16n8k16.f16.f16.f16.f16"].params
    a, b, c, meta, words, which = hw_sparse.sparse_rows(p, 500, 3)
    assert a.shape == (500, p.n_a) and b.shape == (500, p.K) and meta.shape == (500, p.n_a)
    pats = patterns(p)
    for i in range(0, 500, 37):
        assert list(meta[i]) == meta_indices(pats[which[i]], p)
        assert int(words[i]) == meta_word(pats[which[i]], p)
    assert len(set(which.tolist())) == len(pats)


def _sparse_file(meta: list[int]):
    from tensorcore_smt.validation.vectors import Vector, VectorFile, predict

    name = "mma.sp::ordered_metadata.m16n8k16.f32.bf16.bf16.f32"
    p = HOPPER.instructions[name].params
    rng = np.random.default_rng(5)
    a = [int(x) for x in rng.integers(0x3C00, 0x4000, p.n_a)]
    b = [int(x) for x in rng.integers(0x3C00, 0x4000, p.K)]
    vec = Vector(a, b, 0x3F800000, {}, "hand-made", metadata=meta)
    vf = VectorFile("hopper", name, ["hopper", "hopper[sparse=expanded]"], [vec])
    return predict(vf)


def test_vector_files_carry_sparsity_metadata():
    from tensorcore_smt.validation.vectors import dumps, loads, stale_predictions, to_csv

    vf = _sparse_file([1, 2] * 4)
    back = loads(dumps(vf, "v.json"))
    assert back.vectors[0].metadata == [1, 2] * 4 and not stale_predictions(back)
    p = back.params
    v = back.vectors[0]
    want = simulate_params(p, np.array([v.a]), np.array([v.b]), np.array([v.c]), meta=v.metadata)
    assert v.predicted["hopper"] == int(want[0])
    with pytest.raises(UserError, match="CSV has no columns for sparsity metadata"):
        to_csv(back)


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (None, "vectors\\[0\\].metadata: a sparse instruction's vector needs its metadata"),
        ([1, 1] * 4, "vectors\\[0\\].metadata: group 0 selects \\[1, 1\\]"),
        ([0, 1] * 3, "expected 8 indices"),
    ],
)
def test_bad_metadata_in_a_vector_file_is_one_line(meta, message):
    from tensorcore_smt.validation.vectors import Vector, VectorFile

    vf = _sparse_file([0, 1] * 4)
    v = vf.vectors[0]
    bad = VectorFile(
        vf.arch, vf.instruction, vf.variants, [Vector(v.a, v.b, v.c, {}, metadata=meta)]
    )
    with pytest.raises(UserError, match=message):
        bad.validate()


def test_dense_vectors_take_no_metadata():
    from tensorcore_smt.validation.vectors import Vector, VectorFile

    name = "m16n8k16.f32.f16.f16.f32"
    vec = Vector([0] * 16, [0] * 16, 0, {}, metadata=[0, 1] * 8)
    with pytest.raises(UserError, match="a dense instruction takes no metadata"):
        VectorFile("hopper", name, ["hopper"], [vec]).validate()


def test_sparse_probe_passes_each_vectors_metadata_word(tmp_path):
    from tensorcore_smt.probe.cuda import generate

    vf = _sparse_file([0, 3] * 4)
    src = generate(vf, sm="90")
    assert "#define NA 8" in src and "VM[NV] = {0xccccccccull}" in src
    assert "probe_kernel<<<NV, THREADS>>>(da, db, dc, dd, dm);" in src
    if shutil.which("nvcc"):
        cu = tmp_path / "p.cu"
        cu.write_text(src)
        r = subprocess.run(
            ["nvcc", "-arch=sm_90", "-o", str(tmp_path / "p"), str(cu)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-400:]


def test_sparse_probe_needs_one_pattern_a_vector():
    from tensorcore_smt.probe.cuda import generate

    with pytest.raises(UserError, match="every group must keep the same positions"):
        generate(_sparse_file([0, 1, 0, 2, 0, 1, 0, 1]), sm="90")
