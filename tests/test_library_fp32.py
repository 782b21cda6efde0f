"""Full-fp32 torch GEMMs (precision "highest") on Hopper: the FFMA kernel families of
schedules/library/30-fp32*.toml and 31-fp32-bmm.toml (tensorcore_smt/hardware/
library_tree.py) against recorded H200 calls, and the recipe text of each family against
an independent FFMA reference (exact fp64 products, fma rounded once through
round-to-odd, numpy fp32 additions).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.gemm.library_rules import decide, evaluate
from tensorcore_smt.hardware.library_fit import mismatches, recording
from tensorcore_smt.hardware.library_tree import Family, Label, grow, label_of

GPU = "h200"


def _fma32(p: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """fp32 fma(a, b, acc) for exact products p (fp64): the sum's error by TwoSum, the
    fp64 sum rounded to odd, then to fp32 (one rounding: 53 >= 24 + 2 bits)."""
    a = acc.astype(np.float64)
    s = p + a
    bp = s - a
    e = (p - bp) + (a - (s - bp))
    bits = s.view(np.int64)
    bump = (e != 0) & ((bits & 1) == 0)
    bits = np.where(bump, np.where((e > 0) == (s > 0), bits + 1, bits - 1), bits)
    return bits.view(np.float64).astype(np.float32)


def _reference(a: np.ndarray, b: np.ndarray, parts: list[list[int]]) -> np.ndarray:
    """Each part of k an FFMA chain from +0, the partials added in order in fp32."""
    P = a.astype(np.float64)[:, None, :] * b.T.astype(np.float64)[None, :, :]
    total = None
    for ks in parts:
        acc = np.zeros(P.shape[:2], np.float32)
        for k in ks:
            acc = _fma32(P[:, :, k], acc)
        total = acc if total is None else (total + acc).astype(np.float32)
    return total


def _recipe(family: str, S: int, k: int) -> str:
    text = Label(Family(family), S).recipe()
    return re.sub(r"\{([^{}]+)\}", lambda mo: str(evaluate(mo.group(1), {"k": k})), text)


@pytest.mark.parametrize(
    ("family", "S", "K", "parts"),
    [
        ("contiguous", 5, 37, lambda K: [list(range(s, min(s + 8, K))) for s in range(0, K, 8)]),
        ("contiguous", 3, 37, lambda K: [list(range(s, min(s + 16, K))) for s in range(0, K, 16)]),
        (
            "interleaved",
            3,
            50,
            lambda K: [[k for k in range(K) if k // 8 % 3 == s] for s in range(3)],
        ),
        ("halves", 2, 37, lambda K: [list(range(19)), list(range(19, K))]),
        ("halves", 2, 200, lambda K: [list(range(s, min(s + 50, K))) for s in range(0, K, 50)]),
        ("serial", 1, 37, lambda K: [list(range(K))]),
        ("lanes", 16, 40, lambda K: [[k for k in range(K) if k % 16 == j] for j in range(16)]),
    ],
)
def test_family_recipes_are_their_ffma_orders(family, S, K, parts):
    rng = np.random.default_rng(46)
    a = (rng.standard_normal((3, K)) * 2.0 ** rng.integers(-20, 20, (3, K))).astype(np.float32)
    b = (rng.standard_normal((K, 4)) * 2.0 ** rng.integers(-20, 20, (K, 4))).astype(np.float32)
    got = tc.matmul(_recipe(family, S, K), a, b, instr="fma.rn.f32", out_dtype="fp32")
    want = _reference(a, b, parts(K))
    assert np.array_equal(np.asarray(got).view(np.uint32), want.view(np.uint32))


def _calls(cls: str, m: int, n: int, k: int):
    out = [
        c
        for s in (0, 1)
        for c in recording(GPU, s).calls
        if c.cls.name == cls and (c.m, c.n, c.k) == (m, n, k) and not c.holdout
    ]
    assert out, f"no fit call {cls} {m}x{n}x{k}"
    return out


# (class, shape, family and split count of cuBLASLt's heuristic, a wrong alternative)
CASES = [
    ("matmul.fp32", [(277, 19, 10)], ("contiguous", 26), "hopper"),
    ("matmul.fp32", [(632, 233, 17)], ("interleaved", 6), "hopper"),
    ("matmul.fp32", [(14, 273, 10)], ("halves", 2), "hopper"),
    (
        "linear.fp32",
        [(2, 16, 35), (7, 27, 48)],
        ("lanes", 16),
        "hopper/serial[split_k=2,split_tile=1]",
    ),
    ("matmul.fp32", [(1024, 1024, 128)], ("serial", 1), "hopper/serial[split_k=2,split_tile=64]"),
    ("bmm.fp32", [(64, 64, 64)], ("serial", 1), "hopper/serial[split_k=2,split_tile=32]"),
]


@pytest.mark.parametrize(("cls", "shapes", "family", "wrong"), CASES)
def test_tables_reproduce_recorded_calls(cls, shapes, family, wrong):
    """Each family's recorded calls (at least two kinds of input, so that each order's
    roundings show) are reproduced by the recipe the tables decide and by the family's
    template at the heuristic's split count, and not by a wrong alternative."""
    kinds, wrong_bad = set(), 0
    for shape in shapes:
        got = decide(cls, *shape, GPU)
        assert got is not None
        recipe, instr, _, _ = got
        assert instr == "full-fp32"
        calls = _calls(cls, *shape)
        kinds |= {c.kind for c in calls}
        if cls != "bmm.fp32":
            small_m = Family.LANES if cls in ("linear.fp32", "matmul-bt.fp32") else Family.HALVES
            assert label_of(calls[0].cublaslt or _fields(calls), small_m) == Label(
                Family(family[0]), family[1]
            )
        template = _recipe(*family, shape[2])
        for c in calls:
            assert mismatches(c, recipe) == 0, (c.kind, recipe)
            assert mismatches(c, template) == 0, (c.kind, template)
        wrong_bad += sum(mismatches(c, wrong) for c in calls)
    assert len(kinds) >= 2
    assert wrong_bad > 0


def _fields(calls) -> dict:
    """The heuristic fields of a shape (recorded once per class and shape)."""
    got = [
        c.cublaslt
        for c in recording(GPU, 0).calls + recording(GPU, 1).calls
        if c.cublaslt
        and (c.cls.name, c.m, c.n, c.k) == (calls[0].cls.name, calls[0].m, calls[0].n, calls[0].k)
    ]
    assert got
    return got[0]


def test_label_of_heuristic_fields():
    f = {"algo_id": 20, "splitk_num": 16}
    assert label_of(f) == Label(Family.CONTIGUOUS, 16)
    assert label_of(f | {"algo_id": 55}) == Label(Family.INTERLEAVED, 16)
    assert label_of(f | {"splitk_num": 1}) == Label(Family.SERIAL, 1)
    assert label_of(f | {"splitk_num": 4294967295}) == Label(Family.SERIAL, 1)
    assert label_of({"algo_id": 11, "splitk_num": 1}) == Label(Family.HALVES, 2)
    assert label_of({"algo_id": 11, "splitk_num": 1}, Family.LANES) == Label(Family.LANES, 16)


def test_grow_separates_boxes_of_labels():
    """Labels laid out as boxes in (m, n, k, mn) are recovered exactly, and every point
    falls in exactly one leaf."""
    rng = np.random.default_rng(1)
    X = rng.integers(1, 1000, (400, 3))
    X = np.column_stack([X, X[:, 0] * X[:, 1]])
    y = (X[:, 0] > 300).astype(int) + 2 * (X[:, 2] > 600)
    leaves = grow(X, y, 4, max_depth=6, min_leaf=1)
    for x, t in zip(X, y):
        inside = [
            lab for box, lab, *_ in leaves if all(lo <= v <= hi for v, (lo, hi) in zip(x, box))
        ]
        assert inside == [t]
    assert len(leaves) == 4


FP32_TABLES = ("30-fp32-at", "30-fp32-bt", "30-fp32-mm", "30-fp32", "31-fp32-bmm")


def test_every_rule_plans_at_its_corners():
    """Each rule's recipe, at the smallest K of its box and at its largest K up to 2048,
    is a schedule with a valid plan for that K (no split left without k)."""
    from tensorcore_smt.gemm.hypothesis import split_gemm_text
    from tensorcore_smt.gemm.library_rules import tables
    from tensorcore_smt.gemm.plan import make_plan
    from tensorcore_smt.gemm.schedule import parse_schedule

    seen = 0
    for t in tables():
        if t.name not in FP32_TABLES:
            continue
        assert t.instr == "full-fp32"
        for r in t.rules:
            w = r.when
            lo = w.get("k_min", 1)
            for k in {lo, max(lo, min(w.get("k_max", 2048), 2048))}:
                m, n = w.get("m_min", 1), w.get("n_min", 1)
                _, sched = split_gemm_text(r.text(m, n, k))
                make_plan(parse_schedule(sched or "serial"), k, 1)
                seen += 1
    assert seen > 2000


@pytest.mark.slow
def test_tables_are_what_the_generator_writes(tmp_path):
    from pathlib import Path

    from tensorcore_smt.hardware.library_tree import write_tables

    write_tables(tmp_path, ["h200", "h100"])
    folder = Path(__file__).resolve().parent.parent / "schedules" / "library"
    for stem in FP32_TABLES[:4]:
        assert (tmp_path / f"{stem}.toml").read_text() == (folder / f"{stem}.toml").read_text()
