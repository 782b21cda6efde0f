"""The fp16/bf16 decision tables (schedules/library/20-half*.toml) against GPU records:
recorded H200 and H100 calls, fit and held out, one or more per rule family (the LLM
shapes' split-K bands from the cuBLASLt sweep, the fine split of skinny deep-K shapes, one
chain elsewhere), each reproduced bit for bit by the recipe the tables decide and missed
by a wrong alternative (one chain where the rule splits K, a split where it does not,
the other GPU's recipe where the two GPUs differ)."""

from __future__ import annotations

import pytest

from tensorcore_smt.gemm.library_rules import decide, tables
from tensorcore_smt.hardware import sweep_bands
from tensorcore_smt.hardware.library_fit import fit_calls, heldout_calls, mismatches

TABLES = [t for t in tables() if t.name == "20-half" or t.name.startswith("20-half-")]
SERIAL = "hopper/serial"
SPLIT2 = "hopper/serial[split_k=2,split_tile=64]"


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    """The compiled engine where it loads (the same bits as numpy, tests/test_engine*;
    numpy takes minutes for these K)."""
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        return
    monkeypatch.setenv("TCSMT_ENGINE", "compiled")


def _call(gpu: str, part: str, seed: int, cls: str, shape: tuple[int, int, int], kind: str):
    """The recorded call (fit or held out) of that part, input seed, class, shape, kind."""
    for c in (*fit_calls(gpu), *heldout_calls(gpu)):
        if (c.part, c.seed, c.cls.name, (c.m, c.n, c.k), c.kind.value) == (
            part,
            seed,
            cls,
            shape,
            kind,
        ):
            return c
    raise AssertionError(f"no recorded {cls} {shape} {kind} call (seed {seed}) on {gpu}")


def _decided(gpu: str, cls: str, shape: tuple[int, int, int]) -> tuple[str, str]:
    got = decide(cls, *shape, gpu, TABLES)
    assert got is not None, (cls, shape)
    return got[0], got[2].name


# "gpu part input-seed class MxNxK kind table" (table: the 20-half table that decides,
# "-" for 20-half itself), and a wrong alternative
CASES = [
    # LLM shapes: split-K bands of the sweep (held out: seed 2's batch and llm parts)
    ("h200 batch 2000330 matmul.fp16.rr1 58x4096x11008 normal llm-matmul-fp16", SERIAL),
    ("h100 batch 2000330 matmul.fp16.rr0 47x4096x11008 normal llm-matmul-fp16", SERIAL),
    ("h200 batch 2000330 matmul.bf16.rr1 21x4096x11008 normal llm-matmul-bf16", SERIAL),
    ("h100 batch 2000330 matmul.bf16.rr0 50x4096x11008 normal llm-matmul-bf16", SERIAL),
    ("h200 llm 2000181 linear.fp16.rr0 32x4096x11008 normal llm-linear-fp16", SERIAL),
    ("h100 llm 2000205 linear.fp16.rr1 32x11008x11008 normal llm-linear-fp16", SERIAL),
    ("h200 llm 2000205 linear.bf16.rr0 32x11008x11008 normal llm-linear-bf16", SERIAL),
    ("h100 llm 2000205 linear.bf16.rr1 32x11008x11008 normal llm-linear-bf16", SERIAL),
    # the two GPUs differ: bf16 row 0 of A[:256] @ B, K = 11008 (H200 splits, H100 does not)
    ("h200 batch 2000330 matmul.bf16.rr1 256x4096x11008 normal llm-matmul-bf16", SERIAL),
    ("h100 batch 2000330 matmul.bf16.rr1 256x4096x11008 normal llm-matmul-bf16", SPLIT2),
    # skinny or few-tile shapes with deep K: the finest split (held out)
    ("h200 random 9003952 matmul-bt.fp16.rr1 7x95x4192 wide small-fp16", SERIAL),
    ("h100 ops 2000309 linear.fp16.rr1 100x100x3000 wide small-fp16", SERIAL),
    ("h200 random 9003637 matmul.bf16.rr1 32x2524x6343 wide small-bf16", SERIAL),
    ("h100 random 9003814 matmul.bf16.rr1 30x500x9120 wide small-bf16", SERIAL),
    # one chain (held out)
    ("h200 ops 2000315 matmul.bf16.rr0 512x1536x8192 wide -", SPLIT2),
    ("h100 ops 2000315 bmm.fp16.rr1 512x1536x8192 wide -", SPLIT2),
]


@pytest.mark.parametrize("case,wrong", CASES)
def test_rule_reproduces_the_recorded_call(case, wrong):
    gpu, part, seed, cls, dims, kind, table = case.split()
    shape = tuple(int(x) for x in dims.split("x"))
    call = _call(gpu, part, int(seed), cls, shape, kind)
    recipe, name = _decided(gpu, cls, shape)
    assert name == "20-half" + ("" if table == "-" else f"-{table}")
    assert mismatches(call, recipe) == 0
    assert recipe != wrong
    assert mismatches(call, wrong) > 0


def test_no_rule_claims_gemv_shapes():
    """M = 1 and N = 1 fall through every fp16/bf16 table (the GEMV table's calls)."""
    for cls in ("matmul.fp16.rr1", "linear.bf16.rr0", "bmm.fp16.rr0", "matmul-bt.bf16.rr1"):
        for shape in ((1, 4096, 11008), (4096, 1, 4096), (1, 7, 3000), (9, 1, 20000)):
            for gpu in ("h200", "h100"):
                assert decide(cls, *shape, gpu, TABLES) is None


def test_llm_tables_are_the_sweep_bands():
    """The LLM tables are what sweep_bands writes from the stored sweep (nobody edited
    them by hand, and the sweep they came from is the stored one)."""
    from tensorcore_smt.spec.datadirs import data_dir

    folder = data_dir("schedules") / "library"
    for op in ("matmul", "linear"):
        for dtype in ("fp16", "bf16"):
            text = (folder / f"20-half-llm-{op}-{dtype}.toml").read_text()
            assert text == sweep_bands.table_text(op, dtype)


def test_effective_split_drops_empty_parts():
    """cuBLAS's split count S over K cut in 64-wide k-tiles, cdiv(tiles, S) per part: the
    parts that hold a k-tile (brute force over small K and S)."""
    for k in range(1, 2000, 7):
        tiles = -(-k // sweep_bands.SPLIT_TILE)
        for s in range(1, 40):
            per = -(-tiles // s)
            owned = [min(tiles, (i + 1) * per) - min(tiles, i * per) for i in range(s)]
            assert sweep_bands.effective_split(k, s) == sum(1 for x in owned if x > 0)


def test_sweep_bands_bad_folder_is_one_line_exit_2(tmp_path, capsys):
    assert sweep_bands.main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a folder" in err
    assert sweep_bands.main(["a", "b"]) == 2
