"""The TF32 tables (schedules/library/40-tf32*.toml) against recorded cuBLAS calls: torch
on fp32 operands at float32 matmul precision "high", on an H200 and an H100. Each family
the tables use is checked on recorded calls whose shape it decides (every kept element
bit for bit), and a plausible wrong alternative is checked to miss the same calls,
the operand rounding included (nearest even, not truncation or ties away)."""

from __future__ import annotations

import re

import pytest

from tensorcore_smt.gemm.library_rules import decide, tables
from tensorcore_smt.hardware.library_fit import mismatches, recording
from tensorcore_smt.hardware.library_tf32 import CHAIN, CLASSES, FAMILIES

CHAIN_TRUNC = "hopper/serial"
CHAIN_RNA = "hopper/serial[operand_round=rna]"


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    """The compiled engine where it loads (the same bits as numpy, tests/test_engine*;
    numpy takes tens of seconds at these K)."""
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        return
    monkeypatch.setenv("TCSMT_ENGINE", "compiled")


def _tf32_tables():
    return [t for t in tables() if t.name.startswith("40-tf32")]


def _call(gpu: str, seed: int, part: str, cls: str, m: int, n: int, k: int, kind: str = "normal"):
    for c in recording(gpu, seed).part(part):
        if (c.cls.name, c.m, c.n, c.k, c.kind.value) == (cls, m, n, k, kind):
            return c
    raise AssertionError(f"no recorded {part} {cls} {m}x{n}x{k} {kind} on {gpu} seed {seed}")


def _decided(c, gpu: str) -> tuple[str, str]:
    got = decide(c.cls.name, c.m, c.n, c.k, gpu, _tf32_tables())
    assert got is not None, f"no TF32 rule decides {c.cls.name} {c.m}x{c.n}x{c.k}"
    recipe, instr, _, _ = got
    return recipe, instr or "default"


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_one_chain_rounds_operands_to_nearest_even(gpu):
    """A deep-enough call the tables give one TF32 chain: reproduced with operands
    rounded to nearest even, missed when they are truncated or rounded ties-away."""
    for seed, part, shape in ((0, "grid", (1024, 1024, 512)), (0, "unaligned", (255, 257, 129))):
        c = _call(gpu, seed, part, "matmul.tf32", *shape)
        recipe, instr = _decided(c, gpu)
        assert recipe == CHAIN and instr == "default"
        assert mismatches(c, recipe) == 0
        assert mismatches(c, CHAIN_TRUNC) > 0
        assert mismatches(c, CHAIN_RNA) > 0
    held = _call(gpu, 2, "unaligned", "matmul.tf32", 255, 257, 129)
    assert mismatches(held, CHAIN) == 0
    assert mismatches(held, CHAIN_TRUNC) > 0


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_k1_is_an_ffma_product_not_tf32(gpu):
    """At K = 1 cuBLAS runs a CUDA-core kernel: d = fp32(a*b) on the fp32 operands. The
    TF32 chain (operands rounded first) gets every element wrong."""
    for seed in (0, 2):  # fit and held out
        c = _call(gpu, seed, "grid", "matmul.tf32", 1024, 1024, 1)
        recipe, instr = _decided(c, gpu)
        assert instr == "full-fp32"
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) == c.d.size


def test_split_k_at_llm_shape():
    """7 x 11008 x 4096 on the H200: the tables' split-K (6 contiguous k-ranges of
    32*ceil(ceil(K/32)/6) = 704) reproduces the fit and the held-out call; one chain
    and a split into ranges of 8*ceil(ceil(K/8)/6) = 688 do not."""
    for seed in (0, 2):
        c = _call("h200", seed, "llm", "matmul.tf32", 7, 11008, 4096)
        recipe, instr = _decided(c, "h200")
        assert "split_tile=704" in recipe
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) > 0
        assert mismatches(c, recipe.replace("split_tile=704", "split_tile=688")) > 0


def test_per_shape_rules_are_the_families_recipes():
    """Every per-shape rule is a family's recipe at its K for some split count, and the
    tables cover exactly the TF32 classes."""
    recipes_at = {}
    for t in _tf32_tables():
        assert set(t.classes) <= set(CLASSES)
        if t.name.startswith("40-tf32-tree-"):
            continue  # the boxes of tf32_tree, not per-shape rules
        for r in t.rules:
            if "k_min" not in r.when or r.when["k_min"] != r.when.get("k_max"):
                continue
            k = r.when["k_min"]
            if k not in recipes_at:
                recipes_at[k] = {f.recipe(k, s) for f in FAMILIES for s in range(1, 133)} - {None}
            assert r.recipe in recipes_at[k], (t.name, r.when, r.recipe)
    assert recipes_at, "no per-shape rules"
    assert all(re.fullmatch(r"40-tf32(-[a-z0-9]+)*", t.name) for t in _tf32_tables())


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_bmm_small_k_is_ffma_at_unrecorded_shapes(gpu):
    """bmm at K <= 16 runs an FFMA kernel: held-out random shapes the fit never saw
    (seed 2) are reproduced by the FFMA chain and missed by the TF32 chain."""
    for shape, kind in (((4, 1667, 14), "wide"), ((5, 7485, 16), "cancel")):
        c = _call(gpu, 2, "random", "bmm.tf32", *shape, kind=kind)
        recipe, instr = _decided(c, gpu)
        assert instr == "full-fp32"
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) > 0


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_partial_k_tile_first_at_recorded_shapes(gpu):
    """cuBLAS's algo 23 kernels without split-K take the partial k-tile first: at
    3216 x 7760 x 23 (16-deep tiles) the k-groups are [0, 7), [7, 15), [15, 23). The
    tables' recipe (residue_tile=16) reproduces the fit calls; one chain (groups from 0)
    and a 32-deep residue tile (the whole K one tile) do not."""
    for seed, shape in ((1, (3216, 7760, 23)), (0, (17, 4383, 52))):
        c = _call(gpu, seed, "grid", "matmul.tf32", *shape)
        recipe, instr = _decided(c, gpu)
        assert "residue_tile=16" in recipe
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) > 0
        assert mismatches(c, recipe.replace("residue_tile=16", "residue_tile=32")) > 0


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_split_ranges_at_ops_shape(gpu):
    """matmul-at 64 x 64 x 16384 (split-K S = 60 by the heuristic): 60 ranges of
    4*ceil(4096/60) = 276 elements (CUTLASS 2.x split-K), each a chain that takes its
    partial k-tile first, reproduce the fit call and the held-out one (seed 2); one
    chain and 8-aligned ranges of 8*ceil(2048/60) = 280 do not."""
    for seed in (0, 2):
        c = _call(gpu, seed, "ops", "matmul-at.tf32", 64, 64, 16384)
        recipe, instr = _decided(c, gpu)
        assert "split_range=4" in recipe and "split_k=60" in recipe
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) > 0
        assert mismatches(c, "hopper/serial[operand_round=rne,split_k=59,split_tile=280]") > 0


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_tree_decides_unrecorded_shapes(gpu):
    """Held-out shapes no fit call has (tf32_tree's boxes, learnt from the heuristic
    sweep): a 5105 x 1617 x 140 matmul-bt gets one chain with its partial k-tile of 32
    first, a 49 x 276 x 360 F.linear five CUTLASS 2.x split ranges, a 253 x 12 x 2882
    matmul 32 ranges with 16-deep residue tiles; each reproduced, and one chain (the
    tables' rule before) misses each."""
    cases = (
        (2, "random", "matmul-bt.tf32", (5105, 1617, 140), "normal", "residue_tile=32"),
        (2, "holdout", "linear.tf32", (49, 276, 360), "wide", "split_k=5,split_range=4"),
        (2, "grid", "matmul.tf32", (253, 12, 2882), "normal", "split_k=32,split_range=4"),
    )
    for seed, part, cls, shape, kind, want in cases:
        c = _call(gpu, seed, part, cls, *shape, kind=kind)
        recipe, instr = _decided(c, gpu)
        assert want in recipe, recipe
        assert mismatches(c, recipe, instr) == 0
        assert mismatches(c, CHAIN) > 0


@pytest.mark.slow
def test_tree_tables_are_what_tf32_tree_writes():
    """The stored 40-tf32-tree tables equal the generator's text (about two minutes)."""
    from tensorcore_smt.hardware import tf32_tree
    from tensorcore_smt.spec.datadirs import data_dir

    folder = data_dir("schedules") / "library"
    for cls, ffma in tf32_tree.tables():
        path = folder / f"{tf32_tree.table_name(cls, ffma)}.toml"
        assert path.read_text() == tf32_tree.table_text(cls, ffma=ffma), path.name
    for cls in tf32_tree.NO_KERNEL_TREE:
        assert not (folder / f"{tf32_tree.table_name(cls)}.toml").exists()


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_bmm_split_k_is_not_split_ranges(gpu):
    """bmm.tf32 4788 x 17 x 3098 (held out): the TF32 kernels' tree of the other classes
    would run it as CUTLASS split ranges, which miss it; the tables without that tree
    (tf32_tree.NO_KERNEL_TREE) decide another recipe."""
    c = _call(gpu, 2, "random", "bmm.tf32", 4788, 17, 3098, kind="normal")
    recipe, _ = _decided(c, gpu)
    assert "split_range" not in recipe
    assert mismatches(c, "hopper/serial[split_k=6,split_range=4,operand_round=rne]") > 0


@pytest.mark.parametrize("gpu", ["h200", "h100"])
@pytest.mark.parametrize("part,shape", [("grid", (1024, 1024, 16384)), ("llm", (128, 4096, 14336))])
def test_algo_43_adds_four_k_ranges_in_pairs(gpu, part, shape):
    """The held-out call (seed 2) at a recorded algo 43 shape: 39-tf32-split-pairs'
    four ranges of K/4 added in adjacent pairs reproduce it; the same ranges added in
    split order, by the halving tree, and one chain do not."""
    c = _call(gpu, 2, part, "matmul.tf32", *shape)
    recipe, instr, t, _ = decide("matmul.tf32", *shape, gpu)
    assert t.name == "39-tf32-split-pairs" and "warp=2" in recipe
    assert mismatches(c, recipe, instr or "default") == 0
    for other in ("reduce=serial", "reduce=tree"):
        assert mismatches(c, recipe.replace("warp=2", other)) > 0
    assert mismatches(c, CHAIN) > 0
