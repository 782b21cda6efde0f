"""The split-K count of cuBLAS's kernels for fp16/bf16 GEMMs whose operands are not
16-byte aligned (N or K not a multiple of 8: the sm80-style kernels, cuBLASLt algo 23 and
24, 11 and 13 for tiny shapes), learnt from cuBLASLt's heuristic sweep
(cublaslt_sweep.py, results/hardware/<gpu>/library/cublaslt.jsonl.gz) and the fit calls'
own heuristic fields as a classification tree over M, N, K, M*N, the alignment
gcd(N, K, 8) and the output tiles of 128 x 128 (Breiman et al. 1984), each leaf one
decision-table rule (gemm/library_rules.py).

A leaf's label is a split count S and a scheme, where S is the heuristic's own number
(FIXED), slots // output tiles (FILL: at deep K the heuristic spreads a multiple of
half the 132 SMs over the tiles, so one label serves every tile count) or about K / e
(DEPTH: between the fills S grows with K). Several labels cut a shape's K into the
same ranges (at K = 20 every S >= 3 gives three ranges of 8), so each shape accepts a
set of labels and the tree (library_tree.grow_accepting) gives each box the label most
of its shapes accept, splitting where that count grows. Five-fold cross-validated on
the H200 sweep the tree gives the heuristic's recipe for 83.2 % of matmul.bf16.rr1
shapes (80.9 % with the heuristic's own numbers and a Gini tree over the features
without M*N*K) and 85.0 % of matmul.fp16.rr1 (83.6 %).

What a label computes (results/cublas/half.md): CUTLASS 2.x split-K over element ranges
(split_range): split s owns K elements [s*q, (s+1)*q), q = 8*cdiv(cdiv(K, 8), S) (the
kernel's gemm_k_size rounded to kAlignK = 8 elements of 16 bits; splits left without an
element do not exist), each range a chain from +0 in the kernel's k order (its own
partial k-tile first; half_order.py), the fp32 partials added serially; reduction scheme
4 (the output type, torch's reduced-precision flag on) rounds each partial to fp16/bf16
first, scheme 1 (in place) adds each to the output in the output type. At most
MAX_PARTIALS partials (the engines recurse once per partial).

`python -m tensorcore_smt.hardware.half_tree [--out DIR]` writes one table per class
(20-half-ragged-<op>-<dtype>-<rr>.toml), the same every run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path

import numpy as np

from ..gemm.library_rules import majority
from .cublaslt_sweep import FIELD_ORDER
from .half_order import KernelOrder, box_orders, shape_orders
from .library_fit import fit_calls, recording_dir
from .library_tree import (
    KERNEL_FEATURES,
    SMALL_M,
    Family,
    _features,
    grow_accepting,
    labelled_leaves,
    when_bounds,
)
from .oneline import OneLineParser
from .sweep_store import sweep_records

GPUS = ("h200", "h100")
OPS = ("matmul", "linear")
DTYPES = ("fp16", "bf16")
FLAGS = ("rr1", "rr0")
K_ALIGN = 8
MISALIGNED_NK = 'misaligned = ["n", "k"]'
"""CUTLASS 2.x's kAlignK for 16-bit operands (128 bits): split ranges are multiples of it."""
MAX_PARTIALS = 512
DEPTH = 16
"""Levels of the tree: five-fold cross-validated on the H200 sweep (KERNEL_FEATURES) with
the heuristic's own numbers and a Gini tree, the label of 79.0 % of matmul.bf16.rr1
shapes at 16 levels, 78.5 % at 14, 76.5 % at 12; matmul.fp16.rr1 84.0 %, 83.5 %, 82.6 %.
With the FILL and DEPTH labels, 20 levels give no more than 16 (bf16 rr1: 81.8 %)."""
MIN_LEAF = 2
FEATURES = (*KERNEL_FEATURES, "mnk")
"""What the ragged trees' boxes test: library_tree.KERNEL_FEATURES and the multiply-adds
M*N*K (gemm/library_rules.py's `mnk` bound). Five-fold cross-validated on the H200 sweep
`mnk` adds 1.5 points of recipe agreement for matmul.bf16.rr1 (82.0 -> 83.5 %), 1.4 for
matmul.bf16.rr0 and 1.9 for linear.bf16.rr1; fp16 rr1 is level (84.1 %)."""


SCHEME_FIELDS: dict[int, str] = {
    2: "",
    4: ",round_partials=all",
    1: ",reduce_fmt=out,round_partials=first",
}
"""Schedule fields of each cuBLASLt REDUCTION_SCHEME: 2 (compute type) adds the fp32
partials; 4 (output type) rounds each to fp16/bf16 before the fp32 sum; 1 (in place)
leaves the first rounded in the output and adds each next partial to it, rounding each
sum to the output type (8 of 25 sampled H200 fit calls; the others not explained)."""


class SplitRule(str, Enum):
    """How a label names its split count S."""

    FIXED = "fixed"  # S itself, as the heuristic answered
    FILL = "fill"  # S = slots // output tiles: the CTAs of that many slots spread over the tiles
    DEPTH = "depth"  # S = round(K / elements): about that many elements of K per split


@dataclass(frozen=True, order=True)
class Label:
    """A split count (1: one chain) and the reduction scheme of its partials. `splits` is
    S itself (FIXED), the slots (FILL, over output tiles of `tile`) or the elements per
    split (DEPTH); the last two hold S between 2 and MAX_PARTIALS."""

    splits: int
    scheme: int = 2
    rule: SplitRule = SplitRule.FIXED
    tile: tuple[int, int] = (0, 0)

    def count(self) -> str:
        """S as a recipe expression of m, n, k (gemm/library_rules.py)."""
        if self.rule == SplitRule.FILL:
            tm, tn = self.tile
            tiles = f"cdiv(m, {tm})*cdiv(n, {tn})"
            return f"clamp({self.splits} // ({tiles}), 2, {MAX_PARTIALS})"
        if self.rule == SplitRule.DEPTH:
            return f"clamp((k + {self.splits // 2}) // {self.splits}, 2, {MAX_PARTIALS})"
        return str(min(self.splits, MAX_PARTIALS))

    def counts(self, m: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
        """S at each shape (m, n, k): count() evaluated on arrays."""
        if self.rule == SplitRule.FILL:
            tm, tn = self.tile
            return np.clip(self.splits // (-(-m // tm) * -(-n // tn)), 2, MAX_PARTIALS)
        if self.rule == SplitRule.DEPTH:
            return np.clip((k + self.splits // 2) // self.splits, 2, MAX_PARTIALS)
        return np.full(len(k), min(self.splits, MAX_PARTIALS))

    def recipe(self) -> str:
        """The GEMM hypothesis text, with {expr} parts of m, n, k (gemm/library_rules.py)."""
        if self.rule == SplitRule.FIXED and self.splits <= 1:
            return "hopper/serial"
        q = f"{K_ALIGN}*cdiv(cdiv(k, {K_ALIGN}), {self.count()})"
        extra = SCHEME_FIELDS.get(self.scheme, "")
        return f"hopper/serial[split_k={{cdiv(k, {q})}},split_range={K_ALIGN}{extra}]"

    def text(self) -> str:
        """How the rule's why names the label."""
        s = {
            SplitRule.FIXED: f"S={self.splits}",
            SplitRule.FILL: f"S={self.splits}//tiles of {self.tile[0]}x{self.tile[1]}",
            SplitRule.DEPTH: f"S=K/{self.splits}",
        }[self.rule]
        return f"{s} scheme {self.scheme}"

    @property
    def one_split_below(self) -> int:
        """K up to which the recipe has one part (K_ALIGN: one range), where it is one
        chain instead (split_range needs two); 0 without a split."""
        return K_ALIGN if self.splits > 1 or self.rule != SplitRule.FIXED else 0


FILL_SLOTS = (66, 132, 198, 264, 396, 528)
"""Slots of FILL labels: multiples of half the H100's and H200's 132 SMs. At deep K the
heuristic's S for the 64 x 64 and 128 x 128 tiles is floor(132 c / tiles) for c = 1/2,
1, 2, 4 on most sweep shapes (results/cublas/half.md)."""
FILL_TILES = ((64, 64), (128, 128), (128, 64), (256, 128))
"""Output tiles a FILL label counts (the sm80-style kernels' commonest CTA tiles)."""
DEPTH_ELEMENTS = (32, 48, 64, 96, 128)
"""Elements per split of DEPTH labels (between the fills, S grows about as K / 64)."""


def candidates(fixed: Iterable[Label]) -> list[Label]:
    """The labels a tree may give a box: the heuristic's own (`fixed`) and the FILL and
    DEPTH labels with each of their schemes."""
    fixed = sorted(set(fixed))
    schemes = sorted({lab.scheme for lab in fixed if lab.splits > 1})
    params = [
        Label(w, s, SplitRule.FILL, t) for w in FILL_SLOTS for t in FILL_TILES for s in schemes
    ]
    params += [Label(c, s, SplitRule.DEPTH) for c in DEPTH_ELEMENTS for s in schemes]
    return fixed + params


def ranges(splits: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Elements per split range (0: one chain) of S = `splits` at K = `k`: the
    recipe's q = 8*cdiv(cdiv(K, 8), S), or 0 where that leaves one range."""
    blocks = -(-k // K_ALIGN)  # cdiv(K, 8)
    q = K_ALIGN * -(-blocks // splits)
    return np.where((splits > 1) & (-(-k // q) > 1), q, 0)


def accepts(pts: list[tuple[tuple[int, int, int], Label]], labels: list[Label]) -> np.ndarray:
    """A[i, l]: label l cuts point i's K into the ranges and schemes its own label does
    (the same recipe, so the same bits)."""
    shapes = np.array([s for s, _ in pts], dtype=np.int64).reshape(-1, 3)
    m, n, k = shapes.T
    own_s = np.array([lab.splits for _, lab in pts])
    own_q = ranges(np.minimum(own_s, MAX_PARTIALS), k)
    own_scheme = np.where(own_q > 0, [lab.scheme for _, lab in pts], 0)
    A = np.zeros((len(pts), len(labels)), dtype=bool)
    for j, lab in enumerate(labels):
        q = ranges(lab.counts(m, n, k), k)
        A[:, j] = (q == own_q) & (np.where(q > 0, lab.scheme, 0) == own_scheme)
    return A


def label_of(fields: dict) -> Label:
    """The label of cuBLASLt heuristic fields (splitk_num, reduction_scheme)."""
    s = int(fields["splitk_num"])
    if s <= 1 or s > 4096:  # 1, 0 or -1 (unset): no split-K
        return Label(1)
    return Label(s, int(fields["reduction_scheme"]))


def misaligned(n: int, k: int) -> bool:
    """N or K not a multiple of 8 (for torch.matmul and F.linear: the operands' and the
    output's rows not 16-byte aligned)."""
    return n % 8 != 0 or k % 8 != 0


@cache
def _sweep(gpu: str, cls: str) -> dict[tuple[int, int, int], dict]:
    """{shape: heuristic fields} of the misaligned shapes with M, N >= 2 of `gpu`'s
    sweep for `cls`."""
    out: dict[tuple[int, int, int], dict] = {}
    for r in sweep_records(recording_dir(gpu, 0).parent, [cls]):
        if "f" in r and min(r["m"], r["n"]) >= 2 and misaligned(r["n"], r["k"]):
            out[(r["m"], r["n"], r["k"])] = dict(zip(FIELD_ORDER, r["f"]))
    return out


def answers(gpu: str, cls: str) -> list[tuple[tuple[int, int, int], dict]]:
    """(shape, heuristic fields) of every misaligned shape with M, N >= 2 of the sweep
    for `cls`, then of `cls`'s fit calls (their fields win where both have the shape)."""
    out = dict(_sweep(gpu, cls))
    for c in fit_calls(gpu):
        if c.cls.name == cls and c.cublaslt is not None and min(c.m, c.n) >= 2:
            if misaligned(c.n, c.k):
                out[(c.m, c.n, c.k)] = c.cublaslt
    return sorted(out.items())


def points(gpu: str, cls: str) -> list[tuple[tuple[int, int, int], Label]]:
    """(shape, label) of answers(gpu, cls)."""
    return [(s, label_of(f)) for s, f in answers(gpu, cls)]


def leaves(pts: list[tuple[tuple[int, int, int], Label]], depth: int = DEPTH):
    """[(box, label, points, points whose recipe it gives)] of the tree over `pts`: the
    heuristic's labels and the FILL and DEPTH ones (candidates), each point accepting
    every label that cuts its K as its own does (grow_accepting)."""
    labels = candidates(lab for _, lab in pts)
    X = _features(np.array([s for s, _ in pts], dtype=np.int64), FEATURES)
    tree = grow_accepting(X, accepts(pts, labels), max_depth=depth, min_leaf=MIN_LEAF)
    return [(box, labels[i], n, hit) for box, i, n, hit in tree]


def predict(tree, shape: tuple[int, int, int]) -> Label:
    """The label of the leaf holding `shape`."""
    vals = _features(np.array([shape]), FEATURES)[0]
    for box, lab, _, _ in tree:
        if all(lo <= v <= hi for v, (lo, hi) in zip(vals, box)):
            return lab
    raise AssertionError(shape)  # the leaves tile the whole space


def holdout_agreement(
    pts: list[tuple[tuple[int, int, int], Label]], folds: int = 5, seed: int = 0
) -> tuple[float, float]:
    """(same recipe, same split ranges) fractions of shapes for which the tree learnt
    without them gives the heuristic's recipe, and its ranges whatever the scheme
    (`folds`-fold cross-validation over `pts`)."""
    order = np.random.default_rng(seed).permutation(len(pts))
    shapes = np.array([s for s, _ in pts], dtype=np.int64)
    X = _features(shapes, FEATURES)
    own_q = ranges(np.array([min(lab.splits, MAX_PARTIALS) for _, lab in pts]), shapes[:, 2])
    every = candidates(lab for _, lab in pts)  # a superset of each fold's candidates
    A = accepts(pts, every)
    same = ranges_same = 0
    for f in range(folds):
        test = order[f::folds]
        held = set(test.tolist())
        tree = leaves([p for i, p in enumerate(pts) if i not in held])
        Xt = X[test]
        for box, lab, _, _ in tree:
            inside = np.ones(len(test), dtype=bool)
            for j, (lo, hi) in enumerate(box):
                inside &= (Xt[:, j] >= lo) & (Xt[:, j] <= hi)
            rows = test[inside]
            if not len(rows):
                continue
            m, n, k = shapes[rows].T
            q = ranges(lab.counts(m, n, k), k)
            ranges_same += int((q == own_q[rows]).sum())
            same += int(A[rows, every.index(lab)].sum())
    return same / len(pts), ranges_same / len(pts)


ROWS = {"m": 2, "n": 2}
"""Least M and N of the calls these tables decide (M = 1 or N = 1: the GEMV tables')."""


def _rule(gpu: str | None, box, recipe: str, why: str, tree: int = 0) -> str:
    only = f'gpu = ["{gpu}"]\n' if gpu else ""
    member = f"tree = {tree}\n" if tree else ""
    when = when_bounds(box, FEATURES, MISALIGNED_NK, ROWS)
    return f'[[rule]]\n{member}{only}when = {when}\nrecipe = "{recipe}"\nwhy = "{why}"\n'


TREES = 1
"""Trees of each ragged table; above 1 a vote table (gemm/library_rules.py): tree 0 learnt
from every shape, the others each from a bootstrap sample of them (bagging, Breiman 1996),
a shape getting the recipe most trees give. On the first sweep's 11,951 shapes a class,
nine trees gave the heuristic's recipe for 85.4 % of matmul.bf16.rr1 shapes against
tree 0's 83.2 % (five-fold, `--check --trees 9`); on the dense sweeps (206,038 shapes a
class) one tree gives 86.4 % of 20,000 shapes held back from it, and nine would cost nine
times the learning (results/cublas/half.md)."""


def bootstrap(pts: list, tree: int) -> list:
    """The points tree `tree` of a vote table learns from: all of them (tree 0), else a
    bootstrap sample (as many drawn with replacement, seeded by the tree's index)."""
    if tree == 0:
        return list(pts)
    rng = np.random.default_rng([4603, tree])
    return [pts[i] for i in rng.integers(0, len(pts), len(pts))]


def forest(pts: list, trees: int = TREES, depth: int = DEPTH) -> list[list]:
    """The leaves (as `leaves`) of each tree of a vote table over `pts`."""
    return [leaves(bootstrap(pts, t), depth) for t in range(trees)]


HEADER = """\
# {cls} (cuBLAS 13.1.0, torch 2.11.0+cu130) with N or K not a multiple of 8
# (the sm80-style kernels): the split-K count S and reduction scheme cuBLASLt's
# heuristic picks, learnt as boxes of M, N, K, M*N, the alignment and the output tiles
# from its answers over {n} misaligned shapes per GPU (the sweep and the fit calls'
# fields; hardware/half_tree.py wrote this file; do not edit by hand). S is a number, or
# slots // output tiles (a wave fill), or about K / e (e elements per split): whichever
# gives the recipe of most of the box's shapes. K in ranges of q = 8*cdiv(cdiv(K, 8), S) elements, one per
# split (split_range), fp32 partials added serially (scheme 4: each rounded to the
# output type first; scheme 1: added in place in the output type). Every chain runs in
# the k order most of the box's shapes get (half_order.py: the partial k-tile first;
# m16n8k8 steps for algo 24 without stages). {beside}
"""
TABLE_TAIL = """\
classes = {classes}
instr = "{instr}"
source = "cuBLASLt heuristic sweep and fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"

"""
"""The lines after each table's comment: what it covers, its instruction, its source."""


def _per_gpu(points_of, gpus: Iterable[str]) -> tuple[dict, int]:
    """({gpu: points_of(gpu)}, the most points of a GPU), one entry keyed None where
    every GPU's points are the same (the stored sweeps and fit fields agree)."""
    per_gpu = {gpu: points_of(gpu) for gpu in gpus}
    n = max(len(p) for p in per_gpu.values())
    first = next(iter(per_gpu.values()))
    if all(p == first for p in per_gpu.values()):
        per_gpu = {None: first}
    return per_gpu, n


class TableKind(str, Enum):
    """The two tables half_tree writes per class."""

    RAGGED = "ragged"  # split count, scheme and k order of the sm80-style kernels
    FFMA = "ffma"  # the algo-11 boxes (the CUDA-core kernel), read first


def table_name(cls: str, kind: TableKind = TableKind.RAGGED) -> str:
    """20-half-<kind>-<op>-<dtype>-<flag>: the ragged table of `cls`, or its FFMA one."""
    op, dtype, flag = cls.split(".")
    return f"20-half-{kind.value}-{op}-{dtype}-{flag}"


def table_text(cls: str, gpus: Iterable[str] = GPUS) -> str:
    """The table file of `cls` (TOML text): one tree per GPU, or one for all where the
    GPUs' points are the same (the stored sweeps and fit fields agree on these shapes)."""
    op, rest = cls.split(".", 1)
    src = f"{CHAIN_ONLY[op]}.{rest}" if op in CHAIN_ONLY else cls
    per_gpu, n_max = _per_gpu(lambda gpu: points(gpu, src), gpus)
    rules: list[str] = []
    trees = 1 if op in CHAIN_ONLY else TREES
    for gpu, pts in per_gpu.items():
        orders = shape_orders(gpu or next(iter(gpus)), src)
        shapes = [s for s, _ in pts]
        for tree, tree_leaves in enumerate(forest(pts, trees)):
            rules += _tree_rules(gpu, op, src, orders, shapes, tree, tree_leaves)
    classes = [cls] + ([f"{BESIDE[op]}.{rest}"] if op in BESIDE else [])
    beside = {
        "matmul": "matmul-at (A column-major) takes matmul's rules.",
        "linear": "matmul-bt (B column-major) takes F.linear's rules.",
        "bmm": "torch.bmm: one chain in matmul's order (its split counts are not matmul's).",
    }[op]
    head = HEADER.format(cls=cls, n=n_max, beside=beside)
    if trees > 1:
        head += VOTE_HEADER.format(trees=trees)
    head += TABLE_TAIL.format(classes=json.dumps(classes), instr="")
    if trees > 1:
        head += f"vote = {trees}\n\n"
    return head + "\n".join(rules)


def _keys(tree, X: np.ndarray, shapes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(q, scheme) per row of `rows` by `tree`'s leaves (q = 0: one chain, scheme 0)."""
    out = np.zeros((len(rows), 2), dtype=np.int64)
    Xt = X[rows]
    for box, lab, _, _ in tree:
        inside = np.ones(len(rows), dtype=bool)
        for j, (lo, hi) in enumerate(box):
            inside &= (Xt[:, j] >= lo) & (Xt[:, j] <= hi)
        if inside.any():
            m, n, k = shapes[rows[inside]].T
            q = ranges(lab.counts(m, n, k), k)
            out[inside] = np.column_stack([q, np.where(q > 0, lab.scheme, 0)])
    return out


def forest_agreement(
    pts: list[tuple[tuple[int, int, int], Label]], trees: int = TREES, folds: int = 5
) -> tuple[float, float]:
    """(tree 0, vote) fractions of shapes given the heuristic's recipe (split ranges and
    scheme) by a vote table learnt without them (`folds`-fold cross-validation, the folds
    of holdout_agreement): what bagging adds."""
    order = np.random.default_rng(0).permutation(len(pts))
    shapes = np.array([s for s, _ in pts], dtype=np.int64)
    X = _features(shapes, FEATURES)
    own_q = ranges(np.array([min(lab.splits, MAX_PARTIALS) for _, lab in pts]), shapes[:, 2])
    own = np.column_stack([own_q, np.where(own_q > 0, [lab.scheme for _, lab in pts], 0)])
    single = voted = 0
    for f in range(folds):
        test = order[f::folds]
        held = set(test.tolist())
        keys = np.stack(
            [
                _keys(tree, X, shapes, test)
                for tree in forest([p for i, p in enumerate(pts) if i not in held], trees)
            ]
        )  # trees x rows x 2
        single += int((keys[0] == own[test]).all(1).sum())
        for j, i in enumerate(test):
            given = [tuple(k) for k in keys[:, j]]
            voted += given[majority(given)] == tuple(own[i])
    return single / len(pts), voted / len(pts)


VOTE_HEADER = """\
# A vote table of {trees} trees (tree 0 from every shape, the others from bootstrap
# samples): a shape gets the recipe most trees' first matching rules give.
"""


def _tree_rules(
    gpu: str | None, op: str, src: str, orders, shapes: list, tree: int, tree_leaves: list
) -> list[str]:
    """The [[rule]] entries of one tree of `src`'s table: each leaf's recipe (one range
    below K = 8 where it splits) in the k order most of the box's shapes get; the why of
    a bootstrap tree's rule names its label only (the counts are of a sample)."""
    rules: list[str] = []

    def why_of(text: str, order: KernelOrder | None, hit: int, n: int) -> str:
        return text if tree else text + _order_why(order, hit, n)

    X = _features(np.array(shapes, dtype=np.int64).reshape(-1, 3), FEATURES)
    for box, lab, n, hit in tree_leaves:
        if op in CHAIN_ONLY:  # one chain in the box's order
            for sub, order, o_hit, o_n in box_orders(orders, shapes, box, names=FEATURES, X=X):
                why = why_of(f"{src}'s box", order, o_hit, o_n)
                rules.append(_rule(gpu, sub, ordered("hopper/serial", order), why, tree))
            continue
        why = f"{lab.text()}: {hit} of {n} shapes" if tree == 0 else lab.text()
        low = lab.one_split_below
        if low and box[2][0] <= low:
            one = [list(b) for b in box]
            one[2][1] = min(one[2][1], low)
            for sub, order, o_hit, o_n in box_orders(
                orders, shapes, one, depth=0, names=FEATURES, X=X
            ):
                say = why_of(f"{why}, one range", order, o_hit, o_n)
                rules.append(_rule(gpu, sub, ordered("hopper/serial", order), say, tree))
        for sub, order, o_hit, o_n in box_orders(orders, shapes, box, names=FEATURES, X=X):
            say = why_of(why, order, o_hit, o_n)
            rules.append(_rule(gpu, sub, ordered(lab.recipe(), order), say, tree))
    return rules


FFMA_ALGO = 11
"""cuBLASLt's algo id of the small-shape CUDA-core kernel. On fp16/bf16 operands it
computes what it does on fp32 ones (library_tree.SMALL_M: FFMA chains on the operands'
exact fp32 values, in halves of K for B row-major, 16 lanes for B column-major): of the
H200 fit calls it ran with N or K misaligned, that family reproduces 482 of 510 matmul
calls (one tensor-core chain: 446) and 30 of 31 F.linear and matmul-bt ones (26)."""
SMALL_M_FAMILY = {"matmul": Family.HALVES, "linear": Family.LANES}
"""The FFMA family of each FFMA table's op (B row-major or column-major)."""

FFMA_HEADER = """\
# {cls} (cuBLAS 13.1.0, torch 2.11.0+cu130) with N or K not a multiple of 8: where
# cuBLASLt's heuristic picks algo 11, the CUDA-core kernel of small shapes, learnt as a
# tree of boxes (algo 11 or not) over the ragged tables' features from its answers
# ({n} shapes per GPU). The kernel is fp32's (30-fp32.toml): FFMA on the operands' exact
# fp32 values; {family}. hardware/half_tree.py wrote this file (do not edit by hand).
# Read before 20-half-ragged-*, which decide the other shapes.
"""


def ffma_table_name(cls: str) -> str:
    return table_name(cls, TableKind.FFMA)


def ffma_table_text(cls: str, gpus: Iterable[str] = GPUS) -> str:
    """The FFMA table of `cls` (a matmul or linear class): the algo-11 leaves of a tree
    over its answers labelled algo 11 or not, each with its family's recipe."""
    op = cls.split(".")[0]
    per_gpu, n = _per_gpu(
        lambda gpu: [(s, int(f["algo_id"]) == FFMA_ALGO) for s, f in answers(gpu, cls)], gpus
    )
    recipe = SMALL_M[SMALL_M_FAMILY[op]].recipe()
    rules = [
        _rule(gpu, box, recipe, f"algo 11 at {hit} of {size} shapes")
        for gpu, pts in per_gpu.items()
        for box, ffma, size, hit in labelled_leaves(pts, DEPTH, MIN_LEAF, FEATURES)
        if ffma
    ]
    family = {
        Family.HALVES: "B row-major (matmul): K in two halves to K = 128, in four above",
        Family.LANES: "B column-major (F.linear): 16 lanes taking k mod 16",
    }[SMALL_M_FAMILY[op]]
    head = FFMA_HEADER.format(cls=cls, n=n, family=family)
    head += TABLE_TAIL.format(classes=json.dumps([cls]), instr="full-fp32")
    return head + "\n".join(rules)


def ordered(recipe: str, order: KernelOrder | None) -> str:
    """`recipe` (one chain, or a split over element ranges, split_range: each range
    laid out on its own) in the kernel's k order (half_order.py)."""
    return recipe if order is None else order.apply(recipe)


def _order_why(order: KernelOrder | None, hit: int, n: int) -> str:
    return "" if order is None else f"; {order.text()}: {hit} of {n}"


CLASSES = tuple(f"{op}.{d}.{f}" for op in OPS for d in DTYPES for f in FLAGS)
"""The classes the sweep covers, each with its own tree."""
BESIDE = {"matmul": "matmul-at", "linear": "matmul-bt"}
"""Classes (not swept) a tree's table decides beside its own: on the misaligned H200 fit
calls the matmul rules reproduce 297 of 364 matmul-at calls (one chain and the
small-shape tables: 287), F.linear's 325 of 393 matmul-bt calls (311)."""
CHAIN_ONLY = {"bmm": "matmul"}
"""Classes whose table runs one chain in the order of another class's boxes: bmm in
matmul's reproduces 309 of 383 misaligned H200 fit calls (one chain and the small-shape
tables: 264; matmul's split rules: 242)."""
TABLE_CLASSES = CLASSES + tuple(f"bmm.{d}.{f}" for d in DTYPES for f in FLAGS)
"""The class each ragged table is named after."""


def main(argv: list[str]) -> int:
    ap = OneLineParser(prog="half_tree")
    ap.add_argument("--out", default="schedules/library", help="the tables' folder")
    ap.add_argument(
        "--check", action="store_true", help="print 5-fold cross-validated agreement instead"
    )
    ap.add_argument("--trees", type=int, default=0, help="with --check: also a vote of T trees")
    ap.add_argument("--class", dest="only", action="append", help="only these classes' tables")
    ap.add_argument("--gpu", action="append", help="with --check: these GPUs (default both)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.check:
        for gpu in args.gpu or GPUS:
            for cls in args.only or CLASSES:
                pts = points(gpu, cls)
                if args.trees:
                    single, voted = forest_agreement(pts, args.trees)
                    print(
                        f"{gpu} {cls}: {len(pts)} shapes, recipe: tree 0 {single:.1%}, "
                        f"vote of {args.trees} {voted:.1%}"
                    )
                    continue
                same, ranges_same = holdout_agreement(pts)
                print(
                    f"{gpu} {cls}: {len(pts)} shapes, recipe {same:.1%}, split ranges "
                    f"{ranges_same:.1%}"
                )
        return 0
    out = Path(args.out)
    if not out.is_dir():
        print(f"half_tree: {out} is not a folder", file=sys.stderr)
        return 2
    for cls in TABLE_CLASSES:
        if args.only and cls not in args.only:
            continue
        (out / f"{table_name(cls)}.toml").write_text(table_text(cls))
        print(f"{table_name(cls)}.toml")
    for cls in CLASSES:
        if args.only and cls not in args.only:
            continue
        (out / f"{ffma_table_name(cls)}.toml").write_text(ffma_table_text(cls))
        print(f"{ffma_table_name(cls)}.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
