"""The k order of cuBLAS's sm80-style fp16/bf16 kernels (hardware/half_order.py) against
GPU records: held-out H200 and H100 calls, most on `cancel` inputs (one element in eight
at 2^BIG), that the ragged tables' rules reproduce bit for bit in the kernel's order
(the partial k-tile first; m16n8k8 steps for algo 24 without stages; split-K over
CUTLASS 2.x element ranges, each laid out on its own) and that the same chain
zero-padded at the end, the other instruction's steps or 16-wide k-tiles do not."""

from __future__ import annotations

import pytest

from tensorcore_smt.gemm.library_rules import decide, tables
from tensorcore_smt.hardware import half_tree
from tensorcore_smt.hardware.half_order import K8_VARIANT, STAGE_DEPTHS, KernelOrder, majority
from tensorcore_smt.hardware.library_fit import heldout_calls, mismatches

TABLES = [t for t in tables() if t.name == "20-half" or t.name.startswith("20-half-")]


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    """The compiled engine where it loads (the same bits as numpy, tests/test_engine*)."""
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        return
    monkeypatch.setenv("TCSMT_ENGINE", "compiled")


def _heldout(gpu: str, part: str, seed: int, cls: str, shape: tuple[int, int, int]):
    for c in heldout_calls(gpu):
        key = (c.part, c.seed, c.cls.name, (c.m, c.n, c.k), c.kind.value)
        if key == (part, seed, cls, shape, "cancel"):
            return c
    raise AssertionError(f"no held-out {cls} {shape} cancel call (seed {seed}) on {gpu}")


# "gpu part input-seed class MxNxK": the decided recipe, and the order it must be in
CASES = [
    ("h200 holdout 2000381 linear.bf16.rr0 784x2299x79", KernelOrder(8, 32)),
    ("h200 unaligned 2000304 matmul.bf16.rr1 4095x4097x15", KernelOrder(8, 32)),
    ("h200 grid 2000162 matmul.bf16.rr0 530x4x250", KernelOrder(16, 128)),
    ("h200 random 9002795 matmul.fp16.rr0 20x2042x108", KernelOrder(16, 64)),
    ("h100 holdout 2000381 linear.bf16.rr0 784x2299x79", KernelOrder(8, 32)),
    ("h100 random 9002795 matmul.fp16.rr0 20x2042x108", KernelOrder(16, 64)),
]


@pytest.mark.parametrize("case,order", CASES)
def test_kernel_order_reproduces_cancel_calls(case, order):
    """The one-chain rule's recipe (in its box's k order) reproduces the held-out call;
    the chain zero-padded at its end (the tables before the order) and the same
    residue tile in the other instruction's steps miss it."""
    gpu, part, seed, cls, dims = case.split()
    shape = tuple(int(x) for x in dims.split("x"))
    call = _heldout(gpu, part, int(seed), cls, shape)
    got = decide(cls, *shape, gpu, TABLES)
    assert got is not None and got[2].name == half_tree.table_name(cls)
    recipe = got[0]
    assert recipe == order.apply("hopper/serial")
    assert mismatches(call, recipe) == 0
    assert mismatches(call, "hopper/serial") > 0
    other = KernelOrder(24 - order.group, order.tile)
    assert mismatches(call, other.apply("hopper/serial")) > 0


def test_k8_variant_is_the_m16n8k8_instruction():
    """K8_VARIANT is Hopper's unit with m16n8k8's parameters (fp16 and bf16): the
    default wgmma instruction under it has the model of m16n8k8."""
    from tensorcore_smt.spec.presets import parse_variant

    for dt, wg in (("f16", "wgmma.m64n8k16.f32.f16.f16"), ("bf16", "wgmma.m64n8k16.f32.bf16.bf16")):
        want = parse_variant("hopper").params(f"m16n8k8.f32.{dt}.{dt}.f32")
        assert parse_variant(K8_VARIANT).params(wg) == want
        assert parse_variant("hopper").params(wg) != want


def test_order_of_heuristic_fields():
    """KernelOrder.of against cuBLASLt's cublasLtMatmulStages_t (16x1 = 1 .. 128x6 = 24,
    sorted by stage depth, then count) and the kernel families."""
    depths = {1: 16, 6: 16, 7: 32, 12: 32, 13: 64, 18: 64, 19: 128, 24: 128}
    for sid, depth in depths.items():
        assert STAGE_DEPTHS[sid] == depth
        for algo in (23, 24):
            assert KernelOrder.of({"algo_id": algo, "stages_id": sid}) == KernelOrder(16, depth)
    assert KernelOrder.of({"algo_id": 24, "stages_id": 0}) == KernelOrder(8, 32)
    for algo, sid in ((11, 0), (66, 35), (23, 0), (23, 31)):
        assert KernelOrder.of({"algo_id": algo, "stages_id": sid}) is None
    assert majority([KernelOrder(8, 32), None, KernelOrder(8, 32)]) == (KernelOrder(8, 32), 2, 3)
    assert majority([None, None, KernelOrder(16, 64)])[0] is None
    assert majority([]) == (None, 0, 0)


# split-K calls: CUTLASS 2.x ranges (split_range=8), each in the kernel's k order; and
# the alternatives that miss: "tiles" (the same count of 16-wide k-tiles), "end" (the
# ranges zero-padded at their ends), "group" (the other instruction's steps)
SPLIT_CASES = [
    ("h200 grid 2000118 matmul.bf16.rr0 13x2451x2594 cancel", "tiles end group"),
    ("h200 unaligned 2000289 matmul.bf16.rr0 3x4099x1023 cancel", "tiles end group"),
    ("h200 random 9000560 matmul.bf16.rr1 215x13x416 cancel", "group"),
    ("h200 random 9000464 linear.bf16.rr0 303x7x266 cancel", "group"),
]


@pytest.mark.parametrize("case,wrong", SPLIT_CASES)
def test_split_ranges_in_kernel_order_reproduce_held_out_calls(case, wrong):
    """A split rule's recipe (element ranges of 8*cdiv(cdiv(K, 8), S), each range laid
    out on its own in the kernel's order) reproduces the held-out call; the named
    alternatives miss it."""
    import re

    gpu, part, seed, cls, dims, kind = case.split()
    shape = tuple(int(x) for x in dims.split("x"))
    call = next(
        c
        for c in heldout_calls(gpu)
        if (c.part, c.seed, c.cls.name, (c.m, c.n, c.k), c.kind.value)
        == (part, int(seed), cls, shape, kind)
    )
    got = decide(cls, *shape, gpu, TABLES)
    assert got is not None and got[2].name == half_tree.table_name(cls)
    recipe = got[0]
    assert "split_range=8" in recipe and "residue_tile=" in recipe
    assert mismatches(call, recipe) == 0
    parts = int(re.search(r"split_k=(\d+)", recipe).group(1))
    tiles = -(-shape[2] // 16)
    width = 16 * -(-tiles // parts)
    end = re.sub(r",residue_tile=\d+", "", recipe)
    alternatives = {
        "tiles": end.replace("split_range=8", f"split_tile={width}"),
        "end": end,
        "group": recipe.replace(K8_VARIANT, "hopper")
        if K8_VARIANT in recipe
        else recipe.replace("hopper/", f"{K8_VARIANT}/"),
    }
    for name in wrong.split():
        assert mismatches(call, alternatives[name]) > 0, name
