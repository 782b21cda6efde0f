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
FMA_STAND_IN = ("hopper", "fma.rn.f32")
"""The IEEE fp32 FMA of this project's presets (a·b + c rounded once to nearest even),
standing in for a CPU's FMA when a schedule is sought for a CPU library's tree."""


@dataclass
class ClassResult:
    """One class of output positions (classes.py) and what was learnt of it: the
    positions as half-open rectangles [m_lo, m_hi, n_lo, n_hi], the tree, the hypothesis
    (None when no schedule on a modelled unit expresses it), the schedule of IEEE fp32 FMAs
    with that tree (CPU libraries) and the checks on random inputs."""

    outputs: int
    blocks: list[list[int]]
    tree: Tree
    hypothesis: str | None = None
    instr: str | None = None
    fma_schedule: str | None = None
    reproduced: bool | None = None
    fma_schedule_reproduced: bool | None = None
    tree_check: dict[str, bool] = field(default_factory=dict)
    checked_outputs: int = 0
    others: list[str] = field(default_factory=list)
    """Further schedules with the same tree (hypotheses, or fp32 FMA schedules for a CPU
    library) that round otherwise; the check on random inputs takes the first that
    reproduces the outputs."""

    def to_json(self) -> dict:
        return {
            "outputs": self.outputs,
            "blocks": self.blocks,
            "tree": to_lists(self.tree),
            "tree_text": render(self.tree),
            "hypothesis": self.hypothesis,
            "instr": self.instr,
            "fma_schedule": self.fma_schedule,
            "reproduced": self.reproduced,
            "fma_schedule_reproduced": self.fma_schedule_reproduced,
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
    def fma_schedule(self) -> str | None:
        return self.first.fma_schedule

    @property
    def tree_check(self) -> dict[str, bool]:
        return self.first.tree_check

    @property
    def checked_outputs(self) -> int:
        return sum(c.checked_outputs for c in self.classes)

    @property
    def reproduced(self) -> bool | None:
        return _all(c.reproduced for c in self.classes)

    @property
    def fma_schedule_reproduced(self) -> bool | None:
        return _all(c.fma_schedule_reproduced for c in self.classes)

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
            "fma_schedule": self.fma_schedule,
            "fma_schedule_reproduced": self.fma_schedule_reproduced,
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
    if orc.arch is not None and any(c.hypothesis is None for c in res.classes):
        notes.append("no GEMM schedule of this project expresses this tree")
    if orc.arch is None:
        if any(c.fma_schedule for c in res.classes):
            notes.append(
                "no matrix unit: the schedule named is one of IEEE fp32 FMAs "
                f"({FMA_STAND_IN[1]} standing in for the CPU's)"
            )
        else:
            notes.append("no schedule of IEEE fp32 FMAs expresses this tree")
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
    """The hypothesis of one class's tree on the oracle's unit, or for a CPU library the
    schedule of IEEE fp32 FMAs that sums in it."""
    if orc.arch is not None:
        fmt = Format.FP32 if orc.fmt == Format.TF32 else orc.fmt
        found = find(cls.tree, k, orc.arch, orc.instr, fmt, orc.label)
        if found is not None:
            cls.hypothesis, cls.instr = found.hypothesis, found.instr
            cls.others = list(found.others)
        return
    if orc.fmt not in (Format.FP32, Format.BF16):
        return
    fma = find(cls.tree, k, FMA_STAND_IN[0], FMA_STAND_IN[1], Format.FP32)
    if fma is None:
        return
    scheds = []
    for hyp in fma.all:
        sched = hyp.split("/", 1)[1]
        if orc.out != Format.FP32:
            extra = f"out={orc.out.spec.name}"
            sched = sched[:-1] + f",{extra}]" if sched.endswith("]") else f"{sched}[{extra}]"
        scheds.append(sched)
    cls.fma_schedule, cls.others = scheds[0], scheds[1:]


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
            ur, ri = np.unique(rows, return_inverse=True)
            uc, ci = np.unique(cols, return_inverse=True)
            ra, rb = a[ur], b[:, uc]
            if cls.hypothesis is not None:
                _compare(cls, "hypothesis", cls.instr, ra, rb, (ri, ci), got, np.float32)
            if cls.fma_schedule is not None:
                _compare(
                    cls, "fma_schedule", FMA_STAND_IN[1], ra, rb, (ri, ci), got, np_dtype(orc.out)
                )
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


def _compare(cls: ClassResult, what: str, instr, ra, rb, at, got, dt) -> None:
    """Compare one class's outputs `got` (at grid positions `at` of ra @ rb) with its
    hypothesis (`what`: hypothesis or fma_schedule); on the first comparison, when it
    fails, take the first of `cls.others` that reproduces them instead."""
    ok_name = "reproduced" if what == "hypothesis" else "fma_schedule_reproduced"

    def run(text: str) -> bool:
        hyp = text if what == "hypothesis" else f"{FMA_STAND_IN[0]}/{text}"
        a, b = (ra, rb) if what == "hypothesis" else (ra.astype(np.float32), rb.astype(np.float32))
        return _same_bits(_run(hyp, instr, a, b, dt)[at], got.astype(dt))

    first = getattr(cls, ok_name) is None
    ok = run(getattr(cls, what))
    if not ok and first:
        for other in cls.others:
            if run(other):
                rest = [x for x in [getattr(cls, what), *cls.others] if x != other]
                setattr(cls, what, other)
                cls.others = rest
                ok = True
                break
    setattr(cls, ok_name, ok and getattr(cls, ok_name) is not False)


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
    from ..gemm.emulate import matmul

    return np.asarray(matmul(hyp, a, b, instr=instr)).astype(dt)


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
