"""The fp16/bf16 decision tables (schedules/library/20-half*.toml) against GPU records:
recorded H200 and H100 calls, fit and held out, one or more per rule family (the LLM
shapes' split-K bands from the cuBLASLt sweep, the fine split of skinny deep-K shapes, one
chain elsewhere), each reproduced bit for bit by the recipe the tables decide and missed
by a wrong alternative (one chain where the rule splits K, a split where it does not,
the other GPU's recipe where the two GPUs differ)."""

from __future__ import annotations

import pytest

from tensorcore_smt.gemm.library_rules import decide, tables
from tensorcore_smt.hardware import half_aligned, half_tree, sweep_bands
from tensorcore_smt.hardware.library_fit import fit_calls, heldout_calls, mismatches

TABLES = [t for t in tables() if t.name == "20-half" or t.name.startswith("20-half-")]
SERIAL = "hopper/serial"
SPLIT2 = "hopper/serial[split_k=2,split_tile=64]"
SPLIT_AT_WIDTH = {s: f"hopper/serial[split_k={s},split_tile=64]" for s in range(2, 13)}


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
    # matmul-bt with N or K not a multiple of 8: F.linear's ragged rules (held out)
    ("h200 holdout 2000334 matmul-bt.fp16.rr1 23x1115x1994 normal ragged-linear-fp16-rr1", SERIAL),
    ("h100 random 9001523 matmul-bt.fp16.rr1 11x1476x319 wide ragged-linear-fp16-rr1", SERIAL),
    # skinny or few-tile shapes with deep K, aligned: the finest split (held out)
    # aligned deep K with few output tiles: round(k-tiles / 22) parts (half_aligned.py)
    ("h200 ops 2000327 matmul.bf16.rr1 64x64x16384 wide aligned", SERIAL),
    ("h100 ops 2000327 matmul.bf16.rr1 64x64x16384 wide aligned", SERIAL),
    ("h200 random 9003080 matmul.bf16.rr0 119x496x15464 normal aligned", SERIAL),
    ("h200 random 9001423 matmul.bf16.rr1 37x16x6664 cancel aligned", SPLIT_AT_WIDTH[4]),
    ("h200 random 9001423 matmul.bf16.rr1 37x16x6664 cancel aligned", SPLIT_AT_WIDTH[6]),
    (
        "h100 random 9001423 matmul.bf16.rr1 37x16x6664 cancel aligned",
        "hopper/serial[split_k=417,split_tile=16]",
    ),
    (
        "h200 ops 2000327 matmul-at.fp16.rr1 64x64x16384 wide aligned-at",
        "hopper/serial[split_k=512,split_tile=32]",
    ),
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
    assert half_tree.main(["--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--bogus" in err
    assert sweep_bands.main(["a", "b"]) == 2


# Misaligned shapes (N or K not a multiple of 8): the split count and reduction scheme of
# cuBLASLt's heuristic, learnt from its sweep (20-half-ragged-*, hardware/half_tree.py)
RAGGED_CASES = [
    ("h200 random 9002033 matmul.fp16.rr1 2x325x15316 normal", SERIAL),
    ("h200 random 9003852 matmul.fp16.rr0 490x503x8058 normal", SERIAL),
    ("h100 random 9002033 matmul.fp16.rr1 2x325x15316 normal", SERIAL),
    ("h100 random 9003852 matmul.fp16.rr0 490x503x8058 normal", SERIAL),
    ("h200 random 9001168 linear.bf16.rr1 3x2x1311 wide", SERIAL),
    ("h200 holdout 680 linear.fp16.rr0 791x10x1755 normal", SERIAL),
    # scheme 4 (the output type): the same split with partials not rounded is wrong
    (
        "h200 grid 2000118 matmul.fp16.rr1 13x2451x2594 cancel",
        "hopper/serial[split_k=5,split_range=8,residue_tile=64]",
    ),
    (
        "h100 grid 2000118 matmul.fp16.rr1 13x2451x2594 cancel",
        "hopper/serial[split_k=5,split_range=8,residue_tile=64]",
    ),
    (
        "h200 random 9000965 matmul.bf16.rr1 9x5x3370 wide",
        "hopper/serial[split_k=211,split_tile=16]",
    ),
]


@pytest.mark.parametrize("case,wrong", RAGGED_CASES)
def test_ragged_rule_reproduces_the_held_out_call(case, wrong):
    """A held-out call whose split (and scheme) the learnt rule names is reproduced bit
    for bit; one chain, or the same split without its scheme's rounding, is not."""
    gpu, part, seed, cls, dims, kind = case.split()
    shape = tuple(int(x) for x in dims.split("x"))
    call = _call(gpu, part, int(seed), cls, shape, kind)
    assert any(c is call for c in heldout_calls(gpu))
    recipe, name = _decided(gpu, cls, shape)
    assert name == half_tree.table_name(cls)
    assert mismatches(call, recipe) == 0
    assert recipe != wrong
    assert mismatches(call, wrong) > 0


def test_ragged_tables_claim_only_misaligned_shapes():
    """Aligned shapes (N and K multiples of 8), M = 1 and N = 1 fall through the ragged
    tables; every misaligned shape with M, N >= 2 is decided by its class's table."""
    ragged = [t for t in TABLES if t.name.startswith("20-half-ragged-")]
    assert len(ragged) == len(half_tree.TABLE_CLASSES)
    beside = {f"{v}.{d}.{f}": f"{k}.{d}.{f}" for k, v in half_tree.BESIDE.items()
              for d in half_tree.DTYPES for f in half_tree.FLAGS}  # fmt: skip
    for cls in (*half_tree.TABLE_CLASSES, *beside):
        for gpu in ("h200", "h100"):
            for shape in ((64, 4096, 4096), (3, 24, 1000), (1, 7, 3001), (9, 1, 20001)):
                got = decide(cls, *shape, gpu, ragged)
                assert got is None, (cls, shape)
            for shape in ((2, 7, 3), (300, 4097, 1024), (5, 64, 16385), (4096, 4096, 11007)):
                got = decide(cls, *shape, gpu, ragged)
                assert got is not None
                assert got[2].name == half_tree.table_name(beside.get(cls, cls))
    for t in ragged:  # bmm: one chain, in matmul's order
        if t.name.startswith("20-half-ragged-bmm-"):
            assert all("split_k" not in r.recipe for r in t.rules)
            assert any("residue_tile" in r.recipe for r in t.rules)


def test_ragged_rules_plan_at_their_corners():
    """Each ragged rule's recipe at its box's smallest K, the next K values to 40 and its
    largest K to 2^15 is a schedule with a valid plan (no more than 512 parts, none
    empty; no scheme rounding where one k-tile leaves one part)."""
    from tensorcore_smt.gemm.hypothesis import split_gemm_text
    from tensorcore_smt.gemm.plan import plan_for
    from tensorcore_smt.gemm.schedule import parse_schedule

    seen = 0
    for t in TABLES:
        if not t.name.startswith("20-half-ragged-"):
            continue
        for r in t.rules[::31]:
            w = r.when
            m, n = w.get("m_min", 2), w.get("n_min", 2)
            lo, hi = w.get("k_min", 1), min(w.get("k_max", 1 << 15), 1 << 15)
            for k in {lo, min(hi, lo + 1), min(hi, max(lo, 17)), min(hi, max(lo, 40)), hi}:
                got = t.decide(m, n, k, (r.gpu or ("h200",))[0])  # the first rule decides
                if got is None:  # N and K both multiples of 8
                    continue
                _, sched = split_gemm_text(got[0])
                s = parse_schedule(sched or "serial")
                assert s.split_k <= half_tree.MAX_PARTIALS
                plan_for(s, k, 1)
                seen += 1
    assert seen > 300


def test_ragged_recipe_is_cutlass_split_ranges():
    """Label.recipe against a brute-force count: CUTLASS 2.x's gemm_k_size, cdiv(K, S)
    rounded up to 8 elements, one range per split, splits without an element dropped
    (S at most 512); the plan's parts own exactly those ranges' elements."""
    from tensorcore_smt.gemm.library_rules import Rule
    from tensorcore_smt.gemm.plan import k_positions, plan_for
    from tensorcore_smt.gemm.schedule import parse_schedule

    def cdiv(a: int, b: int) -> int:
        return -(-a // b)

    for s in (2, 3, 7, 16, 33, 132, 396, 792):
        for k in range(9, 20000, 97):
            q = 8 * cdiv(cdiv(k, min(s, 512)), 8)
            parts = sum(1 for i in range(s) if i * q < k)
            text = Rule(half_tree.Label(s, 2).recipe()).text(5, 7, k)
            assert text == f"hopper/serial[split_k={parts},split_range=8]", (s, k)
            if k < 2000 and s in (3, 33):
                plan = plan_for(parse_schedule(text.split("/")[1]), k, 16)
                pos = k_positions(k, plan.gap, plan.gaps) // 16
                for i, sp in enumerate(plan.splits):
                    want = {int(b) for b in pos[i * q : min(k, (i + 1) * q)]}
                    assert want <= set(sp.chains[0]), (s, k, i)
    assert half_tree.Label(1, 4).recipe() == "hopper/serial"
    assert half_tree.Label(5, 4).recipe().endswith(",round_partials=all]")


PARAM_LABELS = [
    half_tree.Label(264, 4, half_tree.SplitRule.FILL, (64, 64)),
    half_tree.Label(132, 2, half_tree.SplitRule.FILL, (256, 128)),
    half_tree.Label(64, 2, half_tree.SplitRule.DEPTH),
    half_tree.Label(48, 1, half_tree.SplitRule.DEPTH),
]


def _one_chain(text: str) -> str:
    """A recipe text with one part written as one chain (what split_range's single range
    computes; the tables give K <= 8 its own one-chain rule)."""
    return "hopper/serial" if text == "hopper/serial" or "split_k=1," in text else text


def test_parametric_split_counts_are_the_recipe_expressions():
    """FILL and DEPTH labels: the split ranges `ranges(counts())` (the arrays the tree is
    learnt over) are the ones the recipe's own expression gives through the rule engine,
    over a grid of M, N, K; S stays within 2..512."""
    import numpy as np

    from tensorcore_smt.gemm.library_rules import Rule

    grid = [(m, n, k) for m in (2, 63, 65, 700, 9000) for n in (3, 129, 4000)
            for k in (9, 50, 777, 4097, 16383)]  # fmt: skip
    m, n, k = (np.array(c) for c in zip(*grid))
    for lab in PARAM_LABELS:
        s = lab.counts(m, n, k)
        assert s.min() >= 2 and s.max() <= half_tree.MAX_PARTIALS
        q = half_tree.ranges(s, k)
        for (mi, ni, ki), qi in zip(grid, q):
            text = Rule(lab.recipe()).text(mi, ni, ki)
            assert f"split_k={-(-ki // qi)}," in text, (lab, mi, ni, ki, text)


def test_accepts_means_the_same_recipe():
    """accepts() against the recipes themselves: label l is accepted at a point exactly
    when the rule engine writes the same recipe text for it as for the point's own label
    (one part read as one chain), over fixed and parametric labels."""
    from tensorcore_smt.gemm.library_rules import Rule

    rng = __import__("random").Random(5)
    pts = []
    for _ in range(300):
        shape = (rng.randint(2, 9000), rng.randint(2, 9000), rng.choice((3, 8, 9, 17, 500, 4099)))
        pts.append(
            (shape, half_tree.Label(rng.choice((1, 2, 3, 16, 33, 264, 600)), rng.choice((1, 2, 4))))
        )
    labels = half_tree.candidates(lab for _, lab in pts) + PARAM_LABELS
    A = half_tree.accepts(pts, labels)
    for i, ((m, n, k), own) in enumerate(pts):
        want = _one_chain(Rule(own.recipe()).text(m, n, k))
        for j, lab in enumerate(labels):
            got = _one_chain(Rule(lab.recipe()).text(m, n, k))
            assert A[i, j] == (got == want), (m, n, k, own, lab)


def test_accepting_tree_takes_the_label_every_point_accepts():
    """grow_accepting against hand-worked cases: where one label is accepted everywhere
    it is one leaf (a tree over the labels themselves would split); where two halves
    accept disjoint labels it cuts between them, each leaf answering all of its points."""
    import numpy as np

    from tensorcore_smt.hardware.library_tree import grow_accepting

    X = np.arange(1, 21).reshape(-1, 1)
    A = np.zeros((20, 3), dtype=bool)
    A[:10, 0] = A[:, 1] = A[10:, 2] = True
    assert [(lab, n, hit) for _, lab, n, hit in grow_accepting(X, A)] == [(1, 20, 20)]
    A[:, 1] = False
    leaves = grow_accepting(X, A)
    assert sorted((box[0][0], box[0][1] if box[0][1] < 100 else None, lab, hit)
                  for box, lab, _, hit in leaves) == [(1, 10, 0, 10), (11, None, 2, 10)]  # fmt: skip


# algo 11 (the CUDA-core kernel of small shapes) on fp16/bf16: fp32's FFMA families
# (20-half-ffma-*, hardware/half_tree.py); the wrong alternative is one tensor-core chain
FFMA_CASES = [
    "h200 random 9000122 matmul.fp16.rr1 2x2322x91 cancel",
    "h200 random 9000263 matmul.bf16.rr0 3x19x484 cancel",
    "h200 holdout 1000703 linear.bf16.rr0 7x63x241 cancel",
    "h100 holdout 374 linear.bf16.rr1 14x9x15 cancel",
]


@pytest.mark.parametrize("case", FFMA_CASES)
def test_ffma_rule_reproduces_the_held_out_call(case):
    """A held-out call in an algo-11 box of its class's FFMA table is reproduced bit for
    bit by the FFMA family (halves or quarters of K for matmul, 16 lanes for F.linear, on
    the operands' exact fp32 values), and missed by one tensor-core chain."""
    gpu, part, seed, cls, dims, kind = case.split()
    shape = tuple(int(x) for x in dims.split("x"))
    call = _call(gpu, part, int(seed), cls, shape, kind)
    assert any(c is call for c in heldout_calls(gpu))
    got = decide(cls, *shape, gpu, TABLES)
    assert got is not None and got[2].name == half_tree.ffma_table_name(cls)
    assert got[1] == "full-fp32" and "split_tile=1" in got[0]
    assert mismatches(call, got[0], got[1]) == 0
    assert mismatches(call, SERIAL) > 0


def test_ffma_tables_claim_small_misaligned_shapes_only():
    """The FFMA tables decide only their own class, never a shape with N and K multiples
    of 8 or with M = 1 or N = 1 (other tables' work), and every rule is the family of
    its op."""
    ffma = [t for t in TABLES if t.name.startswith("20-half-ffma-")]
    assert sorted(t.name for t in ffma) == sorted(
        half_tree.ffma_table_name(c) for c in half_tree.CLASSES
    )
    for t in ffma:
        (cls,) = t.classes
        assert t.rules and t.instr == "full-fp32"
        family = half_tree.SMALL_M_FAMILY[cls.split(".")[0]]
        assert {r.recipe for r in t.rules} == {half_tree.SMALL_M[family].recipe()}
        for shape in ((2, 8, 16), (5, 64, 4096), (1, 7, 301), (9, 1, 201), (1, 1, 15)):
            assert t.decide(*shape, "h200") is None, (t.name, shape)


def test_misaligned_bound():
    """`misaligned` matches when a named dimension is not a multiple of 8."""
    from tensorcore_smt.gemm.library_rules import Rule

    r = Rule("hopper", {"misaligned": ["n", "k"]})
    for m, n, k in ((8, 8, 8), (3, 16, 24), (1, 4096, 4096)):
        assert not r.matches(m, n, k, None)
    for m, n, k in ((8, 9, 8), (8, 8, 4095), (16, 1, 16)):
        assert r.matches(m, n, k, None)


def test_misaligned_bound_bad_value(tmp_path):
    """A malformed `misaligned` value is one UserError naming the bound."""
    from tensorcore_smt.errors import UserError
    from tensorcore_smt.gemm.library_rules import read_table

    for bad in ('"n"', '["q"]', "[]"):
        p = tmp_path / "t.toml"
        p.write_text(
            f'classes = ["x"]\n[[rule]]\nwhen = {{ misaligned = {bad} }}\nrecipe = "hopper"\n'
        )
        with pytest.raises(UserError, match="misaligned"):
            read_table(p)


@pytest.mark.slow
def test_every_ragged_table_is_what_half_tree_writes():
    """The ragged tables are what half_tree writes from the stored sweep and fit calls
    (nobody edited them by hand)."""
    from tensorcore_smt.spec.datadirs import data_dir

    folder = data_dir("schedules") / "library"
    for cls in half_tree.TABLE_CLASSES:
        text = (folder / f"{half_tree.table_name(cls)}.toml").read_text()
        assert text == half_tree.table_text(cls), cls
    for cls in half_tree.CLASSES:
        text = (folder / f"{half_tree.ffma_table_name(cls)}.toml").read_text()
        assert text == half_tree.ffma_table_text(cls), cls


def test_half_tree_bad_folder_is_one_line_exit_2(tmp_path, capsys):
    assert half_tree.main(["--out", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a folder" in err
    assert half_tree.main(["--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--bogus" in err


def test_aligned_tables_are_what_half_aligned_writes():
    """20-half-aligned*.toml are what half_aligned writes (nobody edited them by hand)."""
    from tensorcore_smt.spec.datadirs import data_dir

    folder = data_dir("schedules") / "library"
    for name in half_aligned.TABLES:
        assert (folder / f"{name}.toml").read_text() == half_aligned.table_text(name)


def test_aligned_tables_split_where_the_rule_does():
    """Brute force over shapes: the aligned tables decide a shape exactly where its
    alignment holds, the output has at most 16 tiles of 128 x 128 and K >= K_MIN, and
    there name the effective split of round(cdiv(K, 64) / 22) parts."""
    from tensorcore_smt.gemm.plan import make_plan
    from tensorcore_smt.gemm.schedule import parse_schedule

    by_name = {t.name: t for t in TABLES}
    for name, (ops, dims) in half_aligned.TABLES.items():
        t = by_name[name]
        assert all(
            t.covers(f"{op}.{d}.rr{f}") for op in ops for d in ("fp16", "bf16") for f in "01"
        )
        assert not t.covers("bmm.fp16.rr1")
        for m in (2, 8, 64, 128, 136, 256, 264, 1024, 2048, 2056):
            for n in (8, 16, 128, 512, 1024, 1032, 2048, 2056):
                for k in (2048, 2992, 3000, 3008, 4096, 16384, 16392):
                    got = t.decide(m, n, k, "h200")
                    aligned = all({"m": m, "n": n, "k": k}[d] % 8 == 0 for d in dims)
                    tiles = -(-m // 128) * -(-n // 128)
                    if not (aligned and tiles <= 16 and k >= half_aligned.K_MIN):
                        assert got is None, (name, m, n, k)
                        continue
                    assert got is not None, (name, m, n, k)
                    tiles_k = -(-k // 64)
                    s = (2 * tiles_k + 22) // 44  # round half up
                    s = sweep_bands.effective_split(k, s)
                    assert s >= 2
                    assert got[0] == f"hopper/serial[split_k={s},split_tile=64]"
                    make_plan(parse_schedule(got[0].split("/", 1)[1]), k, 1)
                    assert half_aligned.split_count(m, n, k) == s


def test_aligned_rule_names_the_sweep_split_more_often_than_one_chain():
    """Over the aligned sweep and fit shapes outside the LLM pairs (21,557 per GPU with the
    dense sweeps), the rule names the heuristic's split count at 85 % or more of shapes on
    each GPU, one chain at under 80 %."""
    for gpu in ("h200", "h100"):
        n, rule, one = half_aligned.agreement(gpu)
        assert n > 20000
        assert rule >= 0.85 * n and one < 0.8 * n and rule > one + 60


def test_half_aligned_bad_folder_is_one_line_exit_2(tmp_path, capsys):
    assert half_aligned.main(["--out", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a folder" in err
    assert half_aligned.main(["--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--bogus" in err
