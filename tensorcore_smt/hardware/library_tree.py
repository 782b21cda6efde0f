"""A decision table for schedules/library grown from cuBLASLt's heuristic: which kernel
family (and split count) cuBLAS picks for an fp32 GEMM, learnt over the shapes of the
heuristic sweep (cublaslt_sweep.py, results/hardware/<gpu>/library/cublaslt.jsonl.gz)
and the fit calls' own heuristic fields, as boxes of M, N, K and M*N (a classification
tree, Breiman et al. 1984), each box one rule whose recipe is the family's template.

The families (what the recorded bits of the fit calls show, results/cublas/fp32.md):

- ``serial``: no split-K (SPLITK_NUM 1): one FFMA chain over all of K per thread;
- ``contiguous``: split-K kernels other than algo 55 (algo 20 on Hopper): split s sums
  the contiguous k-range [s*q, (s+1)*q), q = 4*ceil(K / (4*S)), each an FFMA chain from
  +0, the partials added in split order in fp32 (REDUCTION_SCHEME 2, compute type);
- ``interleaved``: algo 55 with S splits: k-tiles of 8 dealt round-robin to the splits;
- ``halves``: algo 11 (a small-M CUDA-core kernel) with B row-major (torch.matmul): K
  cut into two contiguous halves of ceil(K/2), the second added to the first, up to
  K = 128; above, four contiguous ranges of ceil(K/4) added in order (the fit calls show
  two at K <= 73 and four at K = 151, 212, 421; the cut between is not recorded, and
  K >= 764 follows neither: results/cublas/fp32.md);
- ``lanes``: algo 11 with B column-major (F.linear, matmul-bt): 16 lanes, lane j an
  FFMA chain over k = j mod 16, the lanes added in lane order.

`python -m tensorcore_smt.hardware.library_tree` rewrites the tables
(schedules/library/30-fp32*.toml) from the stored recordings (seconds; the same table every run).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np

from ..gemm.library_rules import ALIGN_BOUND, TILE_BOUND
from .cublaslt_sweep import FIELD_ORDER
from .library_fit import fit_calls, mismatches
from .library_fit import recording_dir as _seed_dir
from .sweep_store import sweep_records


class Family(str, Enum):
    """An FFMA kernel family: the order its threads sum one output in (module docstring)."""

    SERIAL = "serial"
    CONTIGUOUS = "contiguous"
    INTERLEAVED = "interleaved"
    HALVES = "halves"
    LANES = "lanes"


FAMILY_RECIPES: dict[Family, str] = {
    Family.SERIAL: "hopper",
    Family.CONTIGUOUS: (
        "hopper/serial[split_k={cdiv(k, min(4096, 4*cdiv(k, 4*S)))},"
        "split_tile={min(4096, 4*cdiv(k, 4*S))}]"
    ),
    Family.INTERLEAVED: (
        "hopper/serial[split_k={min(S, cdiv(k, 8))},split=interleaved,split_tile=8]"
    ),
    Family.HALVES: "hopper/serial[split_k={min(k, 2*clamp(cdiv(k, 128), 1, 2))},split_tile=1]",
    Family.LANES: "hopper/serial[split_k={min(S, k)},split=interleaved,split_tile=1]",
}
"""Recipe template of each family; S is the split count, k the call's K (the contiguous
split's range is capped at 4096, the widest k-tile a schedule takes)."""

FEATURES = ("m", "n", "k", "mn")
"""What a rule's bounds may test (library_rules.BOUNDS): the fp32 trees' features."""
KERNEL_FEATURES = (*FEATURES, "align", "tiles")
"""The features of the fp16/bf16 and TF32 trees: also `align`, the largest power of two
at most 8 dividing N and K (library_rules.ALIGN_BOUND; the width of the vector loads of
the kernels cuBLAS may take), and `tiles`, the output tiles of 128 x 128
(library_rules.TILE_BOUND; what waves over the SMs count). Five-fold cross-validated on
the H200 sweep they name the heuristic's label for 82.6 % of matmul.fp16.rr1 shapes
(76.7 % over M, N, K, M*N; 80.8 % with `align` alone), 76.5 % of matmul.bf16.rr1 (62.9 %;
73.3 %) and 83.4 % of matmul.tf32 (75.5 %; 79.2 %); the fp32 tree gains nothing from
`align` (77.9 % both)."""

UNBOUNDED = 1 << 62


@dataclass(frozen=True)
class Label:
    """A kernel family and its split count (1 where it has none)."""

    family: Family
    splits: int

    def recipe(self) -> str:
        return FAMILY_RECIPES[self.family].replace("S", str(self.splits))


SMALL_M = {Family.HALVES: Label(Family.HALVES, 2), Family.LANES: Label(Family.LANES, 16)}
"""What algo 11 computes, by the layout of B: two halves of K (B row-major: matmul), or
16 lanes taking k mod 16, added in lane order (B column-major: F.linear, matmul-bt)."""


def label_of(fields: dict, small_m: Family = Family.HALVES) -> Label:
    """The family of cuBLASLt heuristic fields (algo_id, splitk_num); algo 11 is
    SMALL_M[small_m]."""
    algo, s = fields["algo_id"], fields["splitk_num"]
    if algo == 11:
        return SMALL_M[small_m]
    if s <= 1 or s > 4096:  # 1, 0 or -1 (unset): no split-K
        return Label(Family.SERIAL, 1)
    if algo == 55:
        return Label(Family.INTERLEAVED, s)
    return Label(Family.CONTIGUOUS, s)


def sweep_points(gpu: str, cls: str = "matmul.fp32") -> list[tuple[tuple[int, int, int], Label]]:
    """(shape, label) of every answered shape of the heuristic sweep for `cls`."""
    out = []
    for r in sweep_records(_seed_dir(gpu, 0).parent, [cls]):
        if "f" in r:
            out.append(((r["m"], r["n"], r["k"]), label_of(dict(zip(FIELD_ORDER, r["f"])))))
    return out


def fit_points(
    gpu: str, classes: Iterable[str], small_m: Family = Family.HALVES
) -> list[tuple[tuple[int, int, int], Label]]:
    """(shape, label) of the heuristic fields recorded with the fit calls of `classes`."""
    want = set(classes)
    seen: dict[tuple[int, int, int], Label] = {}
    for c in fit_calls(gpu):
        if c.cls.name in want and c.cublaslt is not None:
            seen[(c.m, c.n, c.k)] = label_of(c.cublaslt, small_m)
    return list(seen.items())


Box = list[list[int]]


def _features(shapes: np.ndarray, names: tuple[str, ...] = FEATURES) -> np.ndarray:
    """The columns `names` (FEATURES, KERNEL_FEATURES) of (M, N, K) rows `shapes`."""
    shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
    m, n, k = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    cols = {
        "m": m,
        "n": n,
        "k": k,
        "mn": m * n,
        "align": np.gcd(np.gcd(n, k), ALIGN_BOUND),
        "tiles": -(-m // TILE_BOUND) * -(-n // TILE_BOUND),
        "mnk": m * n * k,
    }
    return np.column_stack([cols[f] for f in names])


def _best_split(X: np.ndarray, y: np.ndarray, n_labels: int, min_leaf: int):
    """(feature, threshold) of the split (x <= threshold left) with the lowest Gini
    impurity, or None when no split lowers it."""
    n = len(y)
    onehot = np.zeros((n, n_labels))
    onehot[np.arange(n), y] = 1
    best, best_score = None, (onehot.sum(0) ** 2).sum() / n + 1e-9
    for f in range(X.shape[1]):
        order = np.argsort(X[:, f], kind="stable")
        xs = X[order, f]
        score, nl = _gini_cuts(onehot, order)
        valid = (xs[1:] != xs[:-1]) & (nl >= min_leaf) & (n - nl >= min_leaf)
        if not valid.any():
            continue
        score = np.where(valid, score, -1.0)
        i = int(np.argmax(score))
        if score[i] > best_score:
            best, best_score = (f, int(xs[i])), score[i]
    return best


def _gini_cuts(Y: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Gini score of each cut, left sizes) of rows `Y` (label weights) taken in `order`:
    cut i puts the first i + 1 rows left; a higher score is a purer split."""
    n = len(Y)
    total = Y.sum(0)
    left = np.cumsum(Y[order], 0)[:-1]
    nl = np.arange(1, n)
    return (left**2).sum(1) / nl + ((total - left) ** 2).sum(1) / (n - nl), nl


def _best_split_accepting(X: np.ndarray, A: np.ndarray, Y: np.ndarray, min_leaf: int):
    """(feature, threshold) of the split whose two sides' best labels are accepted by
    the most points (A[i, l]: label l gives point i's answer), ties broken by the Gini
    impurity of the canonical labels `Y` (one-hot); None when neither improves."""
    n = len(A)
    A = A[:, A.any(0)].astype(np.float32)  # labels no point here accepts add nothing
    total = A.sum(0)  # counts below 2**24: exact in float32
    best, best_score = None, (float(total.max()), (Y.sum(0) ** 2).sum() / n + 1e-9)
    for f in range(X.shape[1]):
        order = np.argsort(X[:, f], kind="stable")
        xs = X[order, f]
        left = np.cumsum(A[order], 0)[:-1]
        hits = (left.max(1) + (total - left).max(1)).astype(np.float64)
        gini, nl = _gini_cuts(Y, order)
        valid = (xs[1:] != xs[:-1]) & (nl >= min_leaf) & (n - nl >= min_leaf)
        if not valid.any():
            continue
        i = int(np.argmax(np.where(valid, hits * 1e6 + gini, -np.inf)))
        if (hits[i], gini[i]) > best_score:
            best, best_score = (f, int(xs[i])), (hits[i], gini[i])
    return best


def _grow(X: np.ndarray, leaf, split, max_depth: int) -> list[tuple[Box, int, int, int]]:
    """The leaves (box, label, points, points it answers) of a tree over the rows of `X`:
    `leaf(rows)` = (label, points it answers), `split(rows)` = (feature, threshold) or
    None; depth first, left before right."""
    leaves: list[tuple[Box, int, int, int]] = []
    stack = [(np.arange(len(X)), [[1, UNBOUNDED] for _ in range(X.shape[1])], 0)]
    while stack:
        rows, box, depth = stack.pop()
        label, hit = leaf(rows)
        cut = split(rows) if depth < max_depth and hit < len(rows) else None
        if cut is None:
            leaves.append((box, label, len(rows), hit))
            continue
        f, thr = cut
        go_left = X[rows, f] <= thr
        lbox = [list(b) for b in box]
        rbox = [list(b) for b in box]
        lbox[f][1], rbox[f][0] = thr, thr + 1
        stack.append((rows[~go_left], rbox, depth + 1))
        stack.append((rows[go_left], lbox, depth + 1))
    return leaves


def grow(
    X: np.ndarray, y: np.ndarray, n_labels: int, max_depth: int = 12, min_leaf: int = 2
) -> list[tuple[Box, int, int, int]]:
    """The leaves (box, label, points, points of that label) of a classification tree."""

    def leaf(rows: np.ndarray) -> tuple[int, int]:
        counts = np.bincount(y[rows], minlength=n_labels)
        return int(np.argmax(counts)), int(counts.max())

    return _grow(X, leaf, lambda r: _best_split(X[r], y[r], n_labels, min_leaf), max_depth)


def grow_accepting(
    X: np.ndarray, A: np.ndarray, max_depth: int = 12, min_leaf: int = 2
) -> list[tuple[Box, int, int, int]]:
    """The leaves (box, label, points, points it answers) of a tree whose points accept
    several labels (A[i, l] true: label l gives point i's answer, as split counts that cut
    K alike do): each leaf takes the label most of its points accept, each split raises
    that count (ties: the Gini impurity of each point's canonical label, the accepted
    label most points accept)."""
    A = A.astype(float)
    freq = A.sum(0)
    canon = np.argmax(A * (freq + np.arange(A.shape[1], 0, -1) * 1e-6), 1)
    Y = np.zeros_like(A)
    Y[np.arange(len(A)), canon] = 1

    def leaf(rows: np.ndarray) -> tuple[int, int]:
        acc = A[rows].sum(0)
        return int(np.argmax(acc)), int(acc.max())

    return _grow(X, leaf, lambda r: _best_split_accepting(X[r], A[r], Y[r], min_leaf), max_depth)


def when_bounds(
    box: Box,
    names: tuple[str, ...] = FEATURES,
    extra: str = "",
    least: dict[str, int] | None = None,
) -> str:
    """A rule's `when` (TOML inline table) for a tree's `box` over the features `names`:
    `extra` first, then each bound that cuts a feature's range; `least`: the least value
    of a feature in the table's calls (m, n >= 2 beside the GEMV tables), written as its
    lower bound where the box reaches below it."""
    parts = [extra] if extra else []
    for name, (lo, hi) in zip(names, box):
        lo = max(lo, (least or {}).get(name, 1))
        if lo > 1:
            parts.append(f"{name}_min = {lo}")
        if hi < UNBOUNDED:
            parts.append(f"{name}_max = {hi}")
    return "{ " + ", ".join(parts) + " }"


def table_rules(
    gpu: str,
    points: list[tuple[tuple[int, int, int], Label]],
    only: Family | None = None,
    as_label: Label | None = None,
    **kw,
) -> list[str]:
    """The [[rule]] entries (TOML text) of `gpu`'s tree over `points`; with `only`, the
    leaves of that family alone, their recipe `as_label`'s."""
    labels = sorted({lab for _, lab in points}, key=lambda lab: (lab.family.value, lab.splits))
    index = {lab: i for i, lab in enumerate(labels)}
    X = _features(np.array([s for s, _ in points], dtype=np.int64))
    y = np.array([index[lab] for _, lab in points])
    out = []
    for box, i, n, hit in grow(X, y, len(labels), **kw):
        lab = labels[i]
        if only is not None:
            if lab.family != only:
                continue
            lab = as_label or lab
        out.append(
            f'[[rule]]\ngpu = ["{gpu}"]\nwhen = {when_bounds(box)}\nrecipe = "{lab.recipe()}"\n'
            f'why = "{lab.family.value} S={lab.splits}: {hit} of {n} shapes"\n'
        )
    return out


HEADER = """\
# torch fp32 GEMMs at float32 matmul precision "highest" (cuBLAS SGEMM: FFMA chains,
# fma.rn.f32): the kernel family and split-K count cuBLASLt's heuristic picks, learnt as
# boxes of M, N, K, M*N from its answers for {sweep} shapes per GPU (the swept ones and
# the fit calls' own; tensorcore_smt/hardware/library_tree.py wrote this file; do not edit
# by hand). The families, checked on the recorded bits: results/cublas/fp32.md.
# The recorded shapes of each class come first (30-fp32-*.toml); bmm: 31-fp32-bmm.toml.
classes = ["matmul.fp32", "linear.fp32", "matmul-at.fp32", "matmul-bt.fp32"]
instr = "full-fp32"
source = "cuBLASLt heuristic sweep and fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"

"""

SHAPES_HEADER = """\
# {what} on fp32 operands at float32 matmul precision "highest": the FFMA order
# that reproduces the fit calls of each recorded shape (M, N > 1), the heuristic's family
# tried first (tensorcore_smt/hardware/library_tree.py wrote this file; do not edit by
# hand). Other shapes fall through to 30-fp32.toml.
classes = {classes}
instr = "full-fp32"
source = "cuBLASLt heuristic fields of the fit calls on an H200 and an H100 (torch 2.11.0+cu130, cuBLAS 13.1.0)"

"""

SHAPE_TABLES: dict[str, tuple[str, tuple[str, ...], Family]] = {
    "30-fp32-at": ("torch.matmul with A column-major", ("matmul-at.fp32",), Family.HALVES),
    "30-fp32-bt": (
        "F.linear and torch.matmul with B column-major",
        ("linear.fp32", "matmul-bt.fp32"),
        Family.LANES,
    ),
    "30-fp32-mm": ("torch.matmul", ("matmul.fp32",), Family.HALVES),
}
"""The recorded-shape tables: file stem -> (what they cover, classes, what algo 11
computes there: SMALL_M). A table whose algo 11 is not the tree's also takes the tree's
algo 11 boxes with its own recipe (after its recorded shapes)."""

OWN_TREE = ("30-fp32-at",)
"""Recorded-shape tables whose other shapes follow a tree over their own class's fit
fields rather than the matmul sweep's (matmul-at: 45 of 87 fit shapes' orders predicted
in 5-fold cross-validation, against 37 by the matmul tree)."""


def shape_candidates(lab: Label, k: int) -> list[str]:
    """Recipes to try at a recorded shape of K = `k`, the heuristic's label first: its
    family's recipe, then contiguous splits of ranges q = g*ceil(K / (g*S)) for widths
    g = 1..64, the other families at the same S, and one chain."""
    from ..gemm.library_rules import evaluate

    def text(recipe: str) -> str:
        return re.sub(r"\{([^{}]+)\}", lambda mo: str(evaluate(mo.group(1), {"k": k})), recipe)

    S = max(lab.splits, 2)
    out = [text(lab.recipe())]
    for g in (1, 2, 4, 8, 16, 32, 64):
        q = g * -(-k // (g * S))
        if q < k and q <= 4096:
            out.append(f"hopper/serial[split_k={-(-k // q)},split_tile={q}]")
    out += [text(Label(f, S).recipe()) for f in (Family.INTERLEAVED, Family.HALVES)]
    out += [text(SMALL_M[Family.LANES].recipe()), "hopper"]
    return list(dict.fromkeys(out))


def shape_recipe(calls: list, lab: Label) -> tuple[str, bool]:
    """(recipe, reproduced): the first candidate that reproduces every fit call of one
    shape, else the label's own recipe."""
    cands = shape_candidates(lab, calls[0].k)
    for recipe in cands:
        if all(mismatches(c, recipe) == 0 for c in calls):
            return recipe, True
    return cands[0], False


def shape_rules(gpu: str, classes: Iterable[str], small_m: Family = Family.HALVES) -> list[str]:
    """One [[rule]] per recorded shape of `classes` on `gpu` (TOML text): the recipe that
    reproduces its fit calls (shape_recipe)."""
    want = set(classes)
    by_shape: dict[tuple[int, int, int], list] = {}
    for c in fit_calls(gpu):
        if c.cls.name in want and c.m > 1 and c.n > 1:
            by_shape.setdefault((c.m, c.n, c.k), []).append(c)
    fields = dict(fit_points(gpu, classes, small_m))
    out = []
    for (m, n, k), calls in sorted(by_shape.items()):
        lab = fields.get((m, n, k), Label(Family.SERIAL, 1))
        recipe, ok = shape_recipe(calls, lab)
        when = f"m_min = {m}, m_max = {m}, n_min = {n}, n_max = {n}, k_min = {k}, k_max = {k}"
        why = (
            f"{len(calls)} fit calls reproduced"
            if ok
            else f"heuristic {lab.family.value} S={lab.splits}; not reproduced"
        )
        out.append(
            f'[[rule]]\ngpu = ["{gpu}"]\nwhen = {{ {when} }}\nrecipe = "{recipe}"\nwhy = "{why}"\n'
        )
    return out


def write_tables(folder: Path, gpus: Iterable[str], max_depth: int = 12) -> Counter:
    """Write the recorded-shape tables and the tree table for `gpus` into `folder`; the
    count of rules per file."""
    count: Counter = Counter()
    gpus = list(gpus)
    points = {}
    for gpu in gpus:
        pts = dict(sweep_points(gpu))
        pts.update(fit_points(gpu, ("matmul.fp32",)))
        points[gpu] = sorted(pts.items())
    for stem, (what, classes, small_m) in SHAPE_TABLES.items():
        rules: list[str] = []
        for gpu in gpus:
            rules += shape_rules(gpu, classes, small_m)
        if stem in OWN_TREE:
            for gpu in gpus:
                own = [p for p in fit_points(gpu, classes, small_m) if min(p[0][:2]) > 1]
                rules += table_rules(gpu, sorted(own), max_depth=max_depth, min_leaf=1)
        elif small_m != Family.HALVES:
            for gpu in gpus:
                rules += table_rules(
                    gpu, points[gpu], Family.HALVES, SMALL_M[small_m], max_depth=max_depth
                )
        head = SHAPES_HEADER.format(what=what, classes=json.dumps(list(classes)))
        (folder / f"{stem}.toml").write_text(head + "\n".join(rules))
        count[stem] = len(rules)
    rules = []
    for gpu in gpus:
        rules += table_rules(gpu, points[gpu], max_depth=max_depth)
    sweep = max(len(p) for p in points.values())
    (folder / "30-fp32.toml").write_text(HEADER.format(sweep=sweep) + "\n".join(rules))
    count["30-fp32"] = len(rules)
    return count


def write_table(path: Path, text: str) -> None:
    """Write a generated decision table to `path` and say how many rules it holds; a
    table without a rule (a class with no such shape) removes `path` instead."""
    if "[[rule]]" not in text:
        path.unlink(missing_ok=True)
        return
    path.write_text(text)
    print(f"{path}: {text.count('[[rule]]')} rules")


def labelled_leaves(
    pts: list, depth: int, min_leaf: int, names: tuple[str, ...] = FEATURES
) -> list:
    """[(box, label, points, points of that label)] of the classification tree (`grow`
    over `_features`) learnt from `pts` = [((m, n, k), label)], labels any sortable
    values; used by the tree tables of every family (fp16/bf16, TF32)."""
    labels = sorted({lab for _, lab in pts})
    index = {lab: i for i, lab in enumerate(labels)}
    X = _features(np.array([s for s, _ in pts], dtype=np.int64), names)
    y = np.array([index[lab] for _, lab in pts])
    return [
        (box, labels[i], n, hit)
        for box, i, n, hit in grow(X, y, len(labels), max_depth=depth, min_leaf=min_leaf)
    ]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="library_tree")
    ap.add_argument("--out", default="schedules/library", help="the tables' folder")
    ap.add_argument("--gpu", action="append", help="GPUs (default: h200 and h100)")
    ap.add_argument("--depth", type=int, default=12)
    args = ap.parse_args(argv)
    count = write_tables(Path(args.out), args.gpu or ["h200", "h100"], args.depth)
    print(", ".join(f"{t}.toml: {n} rules" for t, n in count.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
