"""`reveal`: the accumulation tree of one output element of a library's dot, GEMV or GEMM,
learnt from its outputs on pair probes, then named as a GEMM hypothesis where a schedule
expresses it, and checked on random inputs.

The result assumes what the method assumes (Xie et al., USENIX ATC 2025): every output
element of a class (classes.py: outputs that answer alike) sums its K products in one and
the same tree, each addition rounds
(a fused add of several members at most once, dropping what is far below its largest
member), and the order does not depend on the values. The checks on random inputs are
what tests these assumptions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import UserError
from ..formats import Format
from .classes import Classes, blocks_of, reveal_classes
from .evaluate import ROUNDINGS, evaluate
from .hypothesis import find
from .oracles import make_oracle, np_dtype
from .tree import Tree, build, canonical, from_sizes, render, to_lists

MAX_K = 4096
CHECK_OUTPUTS = 64
"""Random outputs checked bit for bit by default (a sample of each class's outputs)."""
TREE_SUM_OUTPUTS = 4096
"""Outputs of each class whose fp32 tree sum (evaluate.py) is checked, at most."""


@dataclass
class ClassResult:
    """One class of output positions (classes.py) and what was learnt of it: the
    positions as half-open rectangles [m_lo, m_hi, n_lo, n_hi], the tree, the hypothesis
    (None when no schedule of the oracle's unit expresses it) and the checks on random
    inputs."""

    outputs: int
    blocks: list[list[int]]
    tree: Tree
    hypothesis: str | None = None
    instr: str | None = None
    reproduced: bool | None = None
    tree_check: dict[str, bool] = field(default_factory=dict)
    checked_outputs: int = 0
    others: list[str] = field(default_factory=list)
    """Further hypotheses with the same tree that round otherwise; the check on random
    inputs takes the first that reproduces the outputs."""

    def to_json(self) -> dict:
        return {
            "outputs": self.outputs,
            "blocks": self.blocks,
            "tree": to_lists(self.tree),
            "tree_text": render(self.tree),
            "hypothesis": self.hypothesis,
            "instr": self.instr,
            "reproduced": self.reproduced,
            "tree_reproduced": self.tree_check or None,
            "checked_outputs": self.checked_outputs,
        }


@dataclass
class RevealResult:
    """What `reveal` learnt: the classes of output positions with their trees, and at
    top level the class of output (0, 0) (its tree, hypothesis, checks); the calls and
    seconds the probing took; `reproduced` True only when every class's hypothesis
    reproduced its outputs."""

    oracle: str
    k: int
    dtype: str
    shape: tuple[int, int] | None
    classes: list[ClassResult]
    oracle_calls: int
    seconds: float
    probe_shape: tuple[int, int] | None = None
    check_calls: int = 0
    check_shape: tuple[int, int, int] | None = None
    note: str = ""

    @property
    def first(self) -> ClassResult:
        return self.classes[0]

    @property
    def tree(self) -> Tree:
        return self.first.tree

    @property
    def hypothesis(self) -> str | None:
        return self.first.hypothesis

    @property
    def instr(self) -> str | None:
        return self.first.instr

    @property
    def tree_check(self) -> dict[str, bool]:
        return self.first.tree_check

    @property
    def checked_outputs(self) -> int:
        return sum(c.checked_outputs for c in self.classes)

    @property
    def reproduced(self) -> bool | None:
        return _all(c.reproduced for c in self.classes)

    def to_json(self) -> dict:
        first = self.first.to_json()
        return {
            "oracle": self.oracle,
            "k": self.k,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape else None,
            "tree": first["tree"],
            "tree_text": first["tree_text"],
            "hypothesis": self.hypothesis,
            "instr": self.instr,
            "oracle_calls": self.oracle_calls,
            "seconds": round(self.seconds, 3),
            "reproduced": self.reproduced,
            "tree_reproduced": first["tree_reproduced"],
            "checked_outputs": self.checked_outputs,
            "check_calls": self.check_calls,
            "check_shape": list(self.check_shape) if self.check_shape else None,
            "probe_shape": list(self.probe_shape) if self.probe_shape else None,
            "classes": [c.to_json() for c in self.classes],
            "note": self.note,
        }


def _all(values) -> bool | None:
    """None when nothing was checked, else whether every check that ran passed."""
    got = [v for v in values if v is not None]
    return None if not got else all(got)


def reveal(
    oracle: str,
    k: int,
    dtype: str = "fp32",
    shape: tuple[int, int] | None = None,
    seed: int = 0,
    check: bool = True,
    check_outputs: int = CHECK_OUTPUTS,
) -> RevealResult:
    """The accumulation trees of `oracle` (ORACLES in order/oracles.py, or h100:CALL) over
    K products of `dtype` inputs, in output shape `shape` (M, N; default K x K), from pair
    probes: one tree per class of output positions that sum alike (classes.py; a dot is
    one output, a recording one class). UserError for bad input; ValueError (NotATree)
    when the oracle's outputs are not those of one summation tree per class. `check`: run
    the oracle on random inputs (seed `seed`) until `check_outputs` outputs are compared
    bit for bit with each class's hypothesis (tc.matmul) and, on a sample, with the tree
    summed in fp32 (evaluate.py)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 2 <= k <= MAX_K:
        raise UserError(f"--k {k}: K from 2 to {MAX_K}")
    if isinstance(check_outputs, bool) or not isinstance(check_outputs, (int, np.integer)):
        raise UserError(f"check_outputs {check_outputs!r}: a positive integer")
    if not 1 <= check_outputs <= 1 << 26:
        raise UserError(f"check_outputs {check_outputs}: from 1 to {1 << 26}")
    k = int(k)
    orc = make_oracle(oracle, dtype, shape)
    orc.check(k)
    t0 = time.monotonic()
    labels, trees, probe_shape = _probe(orc, k)
    seconds = time.monotonic() - t0
    calls = orc.calls
    res = RevealResult(
        oracle=orc.name,
        k=k,
        dtype=orc.fmt.spec.name,
        shape=shape,
        classes=[
            ClassResult(int((labels == c).sum()), blocks_of(labels == c), canonical(t))
            for c, t in enumerate(trees)
        ],
        oracle_calls=calls,
        seconds=seconds,
        probe_shape=probe_shape,
    )
    notes = []
    if len(trees) > 1:
        m, n = labels.shape
        notes.append(
            f"the {m} x {n} outputs sum in {len(trees)} trees (classes); the tree shown is "
            "that of output (0, 0)"
        )
    for cls in res.classes:
        _hypothesis(cls, orc, k)
    if orc.arch is None:
        notes.append("the oracle runs on no modelled unit: no hypothesis is sought")
    elif any(c.hypothesis is None for c in res.classes):
        notes.append(f"no GEMM schedule of {orc.arch} expresses this tree")
    res.note = "; ".join(notes)
    if check:
        _check(res, orc, seed, labels, check_outputs)
    return res


def _probe(orc, k: int) -> tuple[np.ndarray, list[Tree], tuple[int, int] | None]:
    """The class of each output position and the tree of each class."""
    if hasattr(orc, "sizes_call"):  # a GEMM: many pairs a call, classes of positions
        m, n = orc.mn(k)
        got: Classes = reveal_classes(lambda p, q: orc.sizes_call(k, p, q), k, m, n)
        return got.labels, got.trees, (m, n)
    if hasattr(orc, "column_call"):  # a GEMV: one pivot a call, classes of rows
        m = orc.rows or k
        got = reveal_classes(lambda p, q: orc.column_call(k, q, p).T, k, 1, m)
        return got.labels.T, got.trees, (m, 1)
    sizes = orc.full(k)
    if sizes is not None:
        return np.zeros((k, k), np.int64), [from_sizes(sizes)], (k, k)
    return np.zeros((1, 1), np.int64), [build(k, lambda p, o: orc.query(k, p, o))], None


def _hypothesis(cls: ClassResult, orc, k: int) -> None:
    """The hypotheses on the oracle's unit whose plan sums in the class's tree (the first,
    and others that round otherwise), with the oracle's output format where the
    instruction writes another (a CPU's bf16 GEMM: fp32 FMAs, then bf16)."""
    if orc.arch is None:
        return
    fmt = Format.FP32 if orc.fmt == Format.TF32 else orc.fmt
    found = find(cls.tree, k, orc.arch, orc.instr, fmt, orc.label)
    if found is None:
        return
    from ..api import resolve

    d_fmt = resolve(orc.arch, found.instr).d_fmt
    hyps = []
    for hyp in found.all:
        if orc.out != d_fmt:
            extra = f"out={orc.out.spec.name}"
            hyp = hyp[:-1] + f",{extra}]" if hyp.endswith("]") else f"{hyp}[{extra}]"
        hyps.append(hyp)
    cls.hypothesis, cls.instr, cls.others = hyps[0], found.instr, hyps[1:]


def _check(res: RevealResult, orc, seed: int, labels: np.ndarray, outputs: int) -> None:
    """Run the oracle on random inputs until `outputs` outputs are compared (all of a
    call's outputs, or a sample of each class's when fewer are asked); compare each class's
    outputs with its hypothesis (through tc.matmul) and a sample of them with its tree
    summed in fp32."""
    before = orc.calls
    done = 0
    mm, nn = res.shape or (res.k, res.k)
    tree_rows: list[list] = [[] for _ in res.classes]
    i = 0
    while done < outputs:
        a, b, d = orc.random(res.k, seed + i)
        d = np.asarray(d)
        full = getattr(orc, "random_shape", None) or d.shape
        res.check_shape = (int(full[0]), int(full[1]), res.k)
        lab = labels if labels.shape == d.shape else np.zeros(d.shape, np.int64)
        pick = _pick(lab, len(res.classes), outputs - done, seed + i)
        for c, cls in enumerate(res.classes):
            sel = pick & (lab == c)
            if not sel.any():
                continue
            rows, cols = np.nonzero(sel)
            cls.checked_outputs += len(rows)
            got = d[rows, cols]
            if cls.hypothesis is not None:
                pieces = _pieces(sel, cls, a, b, d, orc.widen)
                _compare(cls, pieces, np_dtype(orc.out))
            room = TREE_SUM_OUTPUTS - sum(len(x[0]) for x in tree_rows[c])
            if room > 0:
                take = slice(0, room)
                tree_rows[c].append((a[rows[take]], b[:, cols[take]].T, got[take]))
        done += int(pick.sum())
        i += 1
        if getattr(orc, "random_shape", None) is not None:
            break  # a recording: its one random call
    res.check_calls = orc.calls - before
    full = getattr(orc, "random_shape", None)
    if full is not None and tuple(full) != (mm, nn):
        res.note = (res.note + "; " if res.note else "") + (
            f"the random call checked is {full[0]} x {full[1]} x {res.k}, the probe "
            f"{mm} x {nn} x {res.k} (none of that shape recorded): a library may pick "
            "another kernel for another shape"
        )
    dt = np_dtype(orc.out)
    for cls, parts in zip(res.classes, tree_rows):
        if not parts or any(not isinstance(x, int) and len(x) > 2 for x in _nodes(cls.tree)):
            continue  # fused adds: the fp32 tree sum is no model of a unit's truncation
        ra = np.concatenate([x for x, _, _ in parts]).astype(np.float32)
        rb = np.concatenate([y for _, y, _ in parts]).astype(np.float32)
        want = np.concatenate([w for _, _, w in parts]).astype(dt)
        for r in ROUNDINGS:
            got = evaluate(cls.tree, ra, rb, r).astype(dt)  # one rounding to the output
            cls.tree_check[r] = _same_bits(got, want)


def _pieces(sel: np.ndarray, cls: ClassResult, a, b, d, widen: bool) -> list[tuple]:
    """The outputs `sel` of one class as (A rows, B columns, positions in their grid, the
    oracle's outputs there): the class's blocks when every output of the call is compared
    (no output computed twice), else one grid of the sampled rows and columns."""
    if widen:  # a CPU library reads bf16 inputs as fp32 (exact)
        a, b = a.astype(np.float32), b.astype(np.float32)
    if sel.sum() == cls.outputs and d.shape == sel.shape:
        out = []
        for m0, m1, n0, n1 in cls.blocks:
            grid = np.ones((m1 - m0, n1 - n0), bool)
            out.append((a[m0:m1], b[:, n0:n1], np.nonzero(grid), d[m0:m1, n0:n1][grid]))
        return out
    rows, cols = np.nonzero(sel)
    ur, ri = np.unique(rows, return_inverse=True)
    uc, ci = np.unique(cols, return_inverse=True)
    return [(a[ur], b[:, uc], (ri, ci), d[rows, cols])]


def _compare(cls: ClassResult, pieces: list[tuple], dt) -> None:
    """Compare one class's outputs (`pieces`, as `_pieces` gives them) with its
    hypothesis; on the first comparison, when it fails, take the first of `cls.others`
    that reproduces them instead."""

    def run(hyp: str) -> bool:
        return all(
            _same_bits(_run(hyp, cls.instr, ra, rb, dt)[at], np.asarray(got).astype(dt))
            for ra, rb, at, got in pieces
        )

    first = cls.reproduced is None
    ok = run(cls.hypothesis)
    if not ok and first:
        for other in cls.others:
            if run(other):
                cls.others = [x for x in [cls.hypothesis, *cls.others] if x != other]
                cls.hypothesis = other
                ok = True
                break
    cls.reproduced = ok and cls.reproduced is not False


def _pick(labels: np.ndarray, n_classes: int, room: int, seed: int) -> np.ndarray:
    """Outputs of one random call to compare: all when `room` holds them, else about
    room / classes of each class at random (every class at least one)."""
    if labels.size <= room:
        return np.ones(labels.shape, bool)
    rng = np.random.default_rng(seed)
    out = np.zeros(labels.size, bool)
    flat = labels.reshape(-1)
    share = max(1, -(-room // n_classes))
    for c in range(n_classes):
        where = np.flatnonzero(flat == c)
        if len(where):
            out[rng.choice(where, min(share, len(where)), replace=False)] = True
    return out.reshape(labels.shape)


def _run(hyp: str, instr: str | None, a: np.ndarray, b: np.ndarray, dt) -> np.ndarray:
    """The hypothesis on a @ b through tc.matmul, on the compiled engine (many outputs,
    many small blocks: the engine's default would take the interpreter for small ones)."""
    from ..gemm.emulate import matmul

    return np.asarray(matmul(hyp, a, b, instr=instr, engine="compiled")).astype(dt)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    u = {2: np.uint16, 4: np.uint32}[x.dtype.itemsize]
    return bool((x.view(u) == y.view(u)).all())


def _nodes(t: Tree):
    stack = [t]
    while stack:
        x = stack.pop()
        yield x
        if not isinstance(x, int):
            stack.extend(x)
