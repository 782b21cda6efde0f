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

from ..argtypes import Arg, check_all
from ..errors import UserError
from ..formats import Format
from .arithmetic import discriminating, learn, matches
from .classes import Classes, blocks_of, reveal_classes
from .evaluate import UNIFORM, Arithmetic, Products, TreeArithmetic, Width, supported
from .hypothesis import find
from .nans import learn_nan_rules
from .oracles import Model, make_oracle, np_dtype
from .structured import reveal_structured
from .tree import NotATree, Tree, big_stack, build, canonical, from_sizes, render, to_lists

MAX_K = 65536
"""K at most for a GEMM or model oracle (the rebuild of structured.py above CLASSES_K)."""
SMALL_K = 4096
"""K at most for numpy:dot and numpy:gemv (one pair or one pivot a call)."""
CLASSES_K = 4096
"""Above this K (and for M = 1 or N = 1) the outputs of a call are taken as one class
and the tree rebuilt by structured.py; up to it classes.py finds classes of outputs."""
MIN_OUTPUTS = 10_000
"""Outputs on discriminating inputs a class's check needs before `reproduced` is claimed."""
CHECK_OUTPUTS = MIN_OUTPUTS
"""Outputs of each class checked bit for bit by default."""
LEARN_OUTPUTS = 2048
"""Outputs of a class its arithmetic is learnt on (each sample; fewer at large K)."""
HYPOTHESIS_WORK = 1 << 27
"""Multiply-adds of the hypothesis (tc.matmul) run per class in the check, at most."""
MAX_CHECK_CALLS = 1 << 16
"""Oracle calls of the check, at most (a GEMV of a few rows: one output of a class a
call)."""


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
    arithmetic: TreeArithmetic | None = None
    hypothesis_reproduced: bool | None = None
    hypothesis_checked: int = 0
    checked_outputs: int = 0
    agreed: int = 0
    reason: str = ""
    others: list[str] = field(default_factory=list)
    """Further hypotheses with the same tree that round otherwise; the check on random
    inputs takes the first that reproduces the outputs."""
    widen: bool = False
    """The hypothesis reads the oracle's inputs as fp32 (a CPU's bf16 GEMM on fp32 FMAs)."""

    def to_json(self) -> dict:
        return {
            "outputs": self.outputs,
            "blocks": self.blocks,
            "tree": to_lists(self.tree),
            "tree_text": render(self.tree),
            "hypothesis": self.hypothesis,
            "instr": self.instr,
            "reproduced": self.reproduced,
            "reason": self.reason,
            "arithmetic": self.arithmetic.to_json() if self.arithmetic else None,
            "arithmetic_text": self.arithmetic.text(self.tree) if self.arithmetic else None,
            "agreed": self.agreed,
            "checked_outputs": self.checked_outputs,
            "hypothesis_reproduced": self.hypothesis_reproduced,
            "hypothesis_checked": self.hypothesis_checked,
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
    probe_outputs: int = 0
    """Outputs (elements of D) the probe calls computed; each sums K products."""
    method: str = ""

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
    def checked_outputs(self) -> int:
        return sum(c.checked_outputs for c in self.classes)

    @property
    def reproduced(self) -> bool | None:
        """False when a class has neither hypothesis nor arithmetic, or any class's check
        failed; True when every class was reproduced on at least MIN_OUTPUTS
        discriminating outputs; None otherwise (unchecked, or too few outputs)."""
        if any(c.hypothesis is None and c.arithmetic is None for c in self.classes):
            return False
        got = [c.reproduced for c in self.classes]
        if any(x is False for x in got):
            return False
        return None if any(x is None for x in got) else True

    @property
    def reason(self) -> str:
        """Why `reproduced` is what it is, in words."""
        bad = [
            i for i, c in enumerate(self.classes) if c.hypothesis is None and c.arithmetic is None
        ]
        if bad:
            return f"class(es) {', '.join(map(str, bad))} have no hypothesis that reproduces them"
        if len(self.classes) == 1:
            return self.first.reason
        return "; ".join(f"class {i}: {c.reason}" for i, c in enumerate(self.classes) if c.reason)

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
            "probe_outputs": self.probe_outputs,
            "probe_products": self.probe_outputs * self.k,
            "method": self.method,
            "seconds": round(self.seconds, 3),
            "reproduced": self.reproduced,
            "reason": self.reason,
            "arithmetic": first["arithmetic"],
            "arithmetic_text": first["arithmetic_text"],
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
    check_all(
        "reveal",
        [
            ("oracle", oracle, Arg.TEXT, False),
            ("dtype", dtype, Arg.TEXT, False),
            ("shape", shape, Arg.SHAPE, True),
            ("seed", seed, Arg.INTEGER, False),
            ("check", check, Arg.BOOL, False),
        ],
    )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 2 <= k <= MAX_K:
        raise UserError(f"--k {k}: K from 2 to {MAX_K}")
    if isinstance(check_outputs, bool) or not isinstance(check_outputs, (int, np.integer)):
        raise UserError(f"check_outputs {check_outputs!r}: a positive integer")
    if not 1 <= check_outputs <= 1 << 26:
        raise UserError(f"check_outputs {check_outputs}: from 1 to {1 << 26}")
    k = int(k)
    orc = make_oracle(oracle, dtype, shape)
    if k > SMALL_K and not hasattr(orc, "sizes_call"):
        raise UserError(f"--k {k}: {orc.name} takes K from 2 to {SMALL_K}")
    orc.check(k)
    if k > 2048:  # trees as deep as K: compared and written out on a big stack
        return big_stack(_reveal, orc, k, shape, seed, check, check_outputs)
    return _reveal(orc, k, shape, seed, check, check_outputs)


def _reveal(orc, k, shape, seed, check, check_outputs) -> RevealResult:
    t0 = time.monotonic()
    how: list = []
    try:
        labels, trees, probe_shape = _probe(orc, k, seed, how)
    except NotATree as e:
        if orc.name.startswith("model:"):
            why = _exact_groups(orc)
            raise NotATree(
                f"{orc.name}: the pair probes cannot read this unit ("
                + (why or f"its outputs on them are not those of one summation tree: {e}")
                + ")"
            ) from None
        raise
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
    res.probe_outputs = orc.probe_outputs
    if how:
        st = how[0]
        res.method = (
            f"structured rebuild: {st.asked} pivot question(s) asked, {st.predicted} "
            f"predicted from a translate, {st.confirmed} of them asked to confirm"
        )
    else:
        res.method = "rebuilt by classes of outputs"
    notes = []
    if len(trees) > 1:
        m, n = labels.shape
        notes.append(
            f"the {m} x {n} outputs sum in {len(trees)} trees (classes); the tree shown is "
            "that of output (0, 0)"
        )
    for cls in res.classes:
        _hypothesis(cls, orc, k)
    learn_nan_rules(res.classes, orc, k, labels, seed)  # calls beside the pair probes
    if orc.arch is None:
        notes.append("the oracle runs on no modelled unit: no hypothesis is sought")
    elif any(c.hypothesis is None for c in res.classes):
        notes.append(f"no GEMM schedule of {orc.arch} expresses this tree")
    res.note = "; ".join(notes)
    if check:
        _check(res, orc, seed, labels, check_outputs)
    return res


def _exact_groups(orc) -> str | None:
    """Why a model's unit cannot be read by the pair probes where its fused adds keep
    every bit (align=exact, more than one product a group: CDNA1's fp16 and bf16), else
    None."""
    from ..api import resolve
    from ..model.params import Algorithm
    from ..model.terms import AlignMode
    from .hypothesis import _instruction

    try:
        p = resolve(orc.arch, orc.instr or _instruction(orc.arch, orc.fmt))
    except UserError:
        return None
    if p.algorithm != Algorithm.FDA or p.align != AlignMode.EXACT or min(p.L, p.K) < 2:
        return None
    return (
        f"each fused add of {min(p.L, p.K)} products and the accumulator sums exactly "
        "(align=exact) and rounds once, so +big and -big cancel inside a group and its "
        "other products' units survive: an output counts the products after the pair's "
        "group plus the group's own, which no summation tree's subtree sizes give"
    )


def _probe(
    orc, k: int, seed: int = 0, how: list | None = None
) -> tuple[np.ndarray, list[Tree], tuple[int, int] | None]:
    """The class of each output position and the tree of each class; `how` gets the
    Structured record where structured.py rebuilt the tree."""
    if hasattr(orc, "sizes_call"):  # a GEMM: many pairs a call, classes of positions
        m, n = orc.mn(k)
        free = isinstance(orc, Model)  # a model sums every output alike: calls of any shape
        if k > CLASSES_K or min(m, n) == 1:
            st = reveal_structured(
                lambda p, q: orc.sizes_call(k, p, q), k, *((k, k) if free else (m, n)), free, seed
            )
            if how is not None:
                how.append(st)
            return np.zeros((m, n), np.int64), [st.tree], (m, n)
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
    instruction writes another (a CPU's bf16 GEMM: fp32 FMAs, then bf16). Where none
    does, the oracle's further units (`also`: a CPU's bf16 dot-product instruction)."""
    if orc.arch is None:
        return
    fmt = Format.FP32 if orc.fmt == Format.TF32 else orc.fmt
    arch, widen = orc.arch, orc.widen
    found = find(cls.tree, k, orc.arch, orc.instr, fmt, orc.label, as_data=False)
    for arch, instr in orc.also if found is None else ():
        found = find(cls.tree, k, arch, instr, fmt)
        if found is not None:
            widen = False  # the unit reads the input format itself
            break
    if found is None:  # chains given as data on the oracle's unit: after every layout
        arch = orc.arch
        found = find(cls.tree, k, orc.arch, orc.instr, fmt, orc.label, layouts=False)
    if found is None:
        return
    from ..api import resolve

    cls.widen = widen
    d_fmt = resolve(arch, found.instr).d_fmt
    hyps = []
    for hyp in found.all:
        if orc.out != d_fmt:
            extra = f"out={orc.out.spec.name}"
            hyp = hyp[:-1] + f",{extra}]" if hyp.endswith("]") else f"{hyp}[{extra}]"
        hyps.append(hyp)
    label = f"{orc.label or orc.arch}/"
    if orc.unfused and arch == orc.arch:  # the same schedules with products rounded first
        hyps += [orc.unfused + "/" + h[len(label) :] for h in hyps if h.startswith(label)]
    cls.hypothesis, cls.instr, cls.others = hyps[0], found.instr, hyps[1:]


def _check(res: RevealResult, orc, seed: int, labels: np.ndarray, outputs: int) -> None:
    """Learn each class's arithmetic on discriminating inputs (arithmetic.py), then run
    the oracle on fresh ones until `outputs` outputs of each class are compared, with
    the tree under the learnt arithmetic (every output) and with the hypothesis through
    tc.matmul (up to HYPOTHESIS_WORK multiply-adds). A recording is
    checked on its one recorded random call instead."""
    before = orc.calls
    if orc.outputs(np.zeros((1, res.k)), np.zeros((res.k, 1))) is None:
        _check_recorded(res, orc, seed, labels, outputs)
        res.check_calls = orc.calls - before
        return
    orc.calls = before
    k = res.k
    m, n = orc.check_shape(k)
    if labels.shape != (m, n):
        labels = np.zeros((m, n), np.int64)
    dt = np_dtype(orc.out)
    need = [outputs for _ in res.classes]
    call = [0]

    def run(keep: np.ndarray | None):
        a, b = discriminating(orc.fmt, m, k, n, seed + 1000003 * call[0])
        call[0] += 1
        if keep is not None:
            a[:, ~keep] = 0.0
        d = np.asarray(orc.outputs(a, b))
        if orc.widen:
            a, b = a.astype(np.float32), b.astype(np.float32)
        return a, b, d

    def run_many(count: int):
        """`count` calls whose A are the row blocks of one draw and whose B is one (one
        draw of discriminating inputs for many small calls: its row kinds spread over
        them): A and D stacked (count x M x K, count x M x N), B (K x N)."""
        big, b = discriminating(orc.fmt, count * m, k, n, seed + 1000003 * call[0])
        call[0] += count
        a = big.reshape(count, m, k)
        d = np.stack([np.asarray(orc.outputs(x, b)) for x in a])
        if orc.widen:
            a, b = a.astype(np.float32), b.astype(np.float32)
        return a, b, d

    rows_cap = max(64, min(LEARN_OUTPUTS, (1 << 24) // k))
    for c, cls in enumerate(res.classes):

        def sample(keep, s, c=c):
            got_a, got_b, got_d, have = [], [], [], 0
            while have < rows_cap and call[0] < MAX_CHECK_CALLS:
                a, b, d = run(keep)
                rr, cc = np.nonzero(labels == c)
                take = slice(0, rows_cap - have)
                rr, cc = rr[take], cc[take]
                got_a.append(a[rr])
                got_b.append(b[:, cc].T)
                got_d.append(d[rr, cc])
                have += len(rr)
            return np.concatenate(got_a), np.concatenate(got_b), np.concatenate(got_d)

        cls.arithmetic = learn(cls.tree, sample, dt, seed)
        _prefer(cls, orc)
    if res.probe_shape == (m, n):
        for c in range(len(res.classes)):
            if res.classes[c].arithmetic is None:
                labels = _split_by_arithmetic(res, c, labels, run, dt)
        need = [outputs for _ in res.classes]
    # the hypothesis on at least the outputs a claim needs where it is the only check
    hyp_room = [
        max(HYPOTHESIS_WORK // k, need[c] if cls.arithmetic is None else 1)
        for c, cls in enumerate(res.classes)
    ]
    res.check_shape = (m, n, k)
    if 2 * m * n <= CHECK_BATCH:  # small calls (a GEMV, M = 1): compared many at once
        _check_batched(res, orc, labels, run_many, need, hyp_room, call, dt)
    while any(x > 0 for x in need) and call[0] < MAX_CHECK_CALLS:
        a, b, d = run(None)
        for c, cls in enumerate(res.classes):
            if need[c] <= 0:
                continue
            rr, cc = _spread(labels == c, need[c], seed + call[0])
            need[c] -= len(rr)
            cls.checked_outputs += len(rr)
            want = d[rr, cc]
            if cls.arithmetic is not None:
                ok = matches(cls.tree, cls.arithmetic, a[rr], b[:, cc].T, want, dt)
                cls.agreed += int(ok.sum())
            if cls.hypothesis is not None and hyp_room[c] > 0:
                take = min(len(rr), hyp_room[c])
                hyp_room[c] -= take
                sel = np.zeros(d.shape, bool)
                sel[rr[:take], cc[:take]] = True
                typed = np.float32 if cls.widen else np_dtype(orc.fmt)
                pieces = _pieces(sel, cls, a.astype(typed), b.astype(typed), d, False)
                cls.hypothesis_checked += take
                _compare(cls, pieces, dt)
    res.check_calls = orc.calls - before
    for cls in res.classes:
        _verdict(cls, outputs)


def _prefer(cls: ClassResult, orc) -> None:
    """Order the class's hypotheses so that those that round as its learnt arithmetic
    says come first (the check takes the first that gives the outputs, and each one
    tried costs a run of tc.matmul): an fp64 tail (wide=) where the root adds in fp64,
    products rounded first (the unfused variant) where its products are rounded; else
    in find's order (the simplest first)."""
    ar = cls.arithmetic
    if ar is None or cls.hypothesis is None:
        return
    main = ar.parts[0]
    while not isinstance(main, Arithmetic):
        main = main.parts[0]
    wide = not ar.uniform and ar.root == Width.FP64
    unfused = orc.unfused or "\0"

    def miss(h: str) -> int:
        off = int(("wide=" in h) != wide)
        return off + int(h.startswith(unfused + "/") != (main.products == Products.ROUNDED))

    ranked = sorted([cls.hypothesis, *cls.others], key=miss)
    cls.hypothesis, cls.others = ranked[0], ranked[1:]


SPLIT_POSITIONS = 4096
"""Output positions of a class at most that are told apart by their arithmetic."""
SPLIT_CALLS = 16
"""Calls on discriminating inputs each position's arithmetic is read from."""


def _split_by_arithmetic(res: RevealResult, c: int, labels: np.ndarray, run, dt) -> np.ndarray:
    """Where no arithmetic reproduces class `c` as a whole, positions of the same tree
    may still round otherwise (OpenBLAS's GEMV: rows in blocks of four with FMAs, the
    rows left over with a separate multiply and add): each position takes the first
    uniform arithmetic (evaluate.UNIFORM) that gives all its outputs on SPLIT_CALLS
    calls, and the class is split by it, each part a class of its own with the same
    tree and hypotheses. The labels, with the new classes numbered after the others;
    unchanged where some position fits none, or the class is too large to read."""
    cls = res.classes[c]
    rr, cc = np.nonzero(labels == c)
    if len(rr) > SPLIT_POSITIONS or not supported(cls.tree):
        return labels
    fits = np.ones((len(UNIFORM), len(rr)), bool)
    for _ in range(SPLIT_CALLS):
        a, b, d = run(None)
        for i, ar in enumerate(UNIFORM):
            if fits[i].any():
                model = TreeArithmetic((ar,))
                fits[i] &= matches(cls.tree, model, a[rr], b[:, cc].T, d[rr, cc], dt)
    if not fits.any(axis=0).all():
        return labels
    first = fits.argmax(axis=0)
    kinds = np.unique(first)
    labels = labels.copy()
    for j, kind in enumerate(kinds):
        at = first == kind
        if j == 0:
            target = cls
        else:
            target = ClassResult(
                0, [], cls.tree, cls.hypothesis, cls.instr, others=list(cls.others)
            )
            target.widen = cls.widen
            res.classes.append(target)
            labels[rr[at], cc[at]] = len(res.classes) - 1
        target.arithmetic = TreeArithmetic((UNIFORM[kind],))
    for i in [c, *range(len(res.classes) - len(kinds) + 1, len(res.classes))]:
        res.classes[i].outputs = int((labels == i).sum())
        res.classes[i].blocks = blocks_of(labels == i)
    if len(kinds) > 1:
        res.note = (res.note + "; " if res.note else "") + (
            f"class {c}'s positions round in {len(kinds)} ways (same tree): split into "
            "classes by their arithmetic"
        )
    return labels


CHECK_BATCH = 1 << 16
"""Outputs of the small calls of the check compared at once (tc.matmul batched)."""
CHECK_INPUT = 1 << 24
"""Elements of the stacked A of one batch of the check, at most."""


def _check_batched(res: RevealResult, orc, labels, run_many, need, hyp_room, call, dt) -> None:
    """The check of `_check` for calls of few outputs: calls drawn in batches of about
    CHECK_BATCH outputs (`run_many(count)`: A and D of `count` calls stacked, their one
    B), every output of a class taken from each call (in call order, the last batch cut
    to what is needed), the hypothesis run on the stacked calls as one batched tc.matmul. `need` and `hyp_room` are counted down in place."""
    m, n = labels.shape
    k = res.k
    sizes = [int((labels == c).sum()) for c in range(len(res.classes))]
    while call[0] < MAX_CHECK_CALLS and any(x > 0 and s for x, s in zip(need, sizes)):
        left = max(-(-x // s) for x, s in zip(need, sizes) if s and x > 0)
        cap = min(CHECK_BATCH // (m * n), CHECK_INPUT // (m * k))
        batch = max(1, min(left, cap, MAX_CHECK_CALLS - call[0]))
        a, b, d = run_many(batch)
        for c, cls in enumerate(res.classes):
            rr, cc = np.nonzero(labels == c)
            room = need[c]
            if room <= 0 or not len(rr):
                continue
            want = d[:, rr, cc].reshape(-1)[:room]
            need[c] -= len(want)
            cls.checked_outputs += len(want)
            if cls.arithmetic is not None:
                ra = a[:, rr].reshape(-1, k)[:room]
                rb = np.tile(b[:, cc].T, (batch, 1))[:room]
                cls.agreed += int(matches(cls.tree, cls.arithmetic, ra, rb, want, dt).sum())
            if cls.hypothesis is None or hyp_room[c] <= 0:
                continue
            take = min(len(want), hyp_room[c])
            hyp_room[c] -= take
            typed = np.float32 if cls.widen else np_dtype(orc.fmt)
            ur, ri = np.unique(rr, return_inverse=True)
            uc, ci = np.unique(cc, return_inverse=True)
            ha, hb = a[:, ur].astype(typed), b[:, uc].astype(typed)  # b broadcast
            u = {2: np.uint16, 4: np.uint32}[np.dtype(dt).itemsize]
            exp = want[:take].astype(dt).view(u)
            args = (cls.instr, ha, hb, (ri, ci), exp, dt)
            cls.hypothesis_checked += take
            first = cls.hypothesis_reproduced is None
            ok = _gives(cls.hypothesis, *args)
            if not ok and first:
                for other in cls.others:
                    if _gives(other, *args):
                        cls.others = [x for x in [cls.hypothesis, *cls.others] if x != other]
                        cls.hypothesis = other
                        ok = True
                        break
            cls.hypothesis_reproduced = ok and cls.hypothesis_reproduced is not False


def _gives(hyp: str, instr, a, b, at, want_bits, dt) -> bool:
    """Whether hypothesis `hyp` gives the bits `want_bits` at positions `at` (rows,
    columns) of every call of the batch a @ b, in call order."""
    u = want_bits.dtype
    got = _run(hyp, instr, a, b, dt)[:, at[0], at[1]].reshape(-1)[: len(want_bits)]
    return bool((got.view(u) == want_bits).all())


def _spread(mask: np.ndarray, room: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `room` positions of `mask` (rows, columns), whole rows drawn at random
    from all of the class's rows, its first and last always among them (a class's edge
    tiles lie in its last rows and columns), in row-major order."""
    rr, cc = np.nonzero(mask)
    if len(rr) <= room:
        return rr, cc
    rows, per = np.unique(rr, return_counts=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    ends = [0, len(rows) - 1]
    order = np.concatenate([ends, order[~np.isin(order, ends)]])
    take = order[: int(np.searchsorted(np.cumsum(per[order]), room)) + 1]
    starts = np.concatenate([[0], np.cumsum(per)])
    got = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in take])[:room]
    got.sort()  # the last row drawn is the one cut short
    return rr[got], cc[got]


def _verdict(cls: ClassResult, outputs: int) -> None:
    """`reproduced` of one class from its checks: None below MIN_OUTPUTS outputs (too few
    to claim), else whether the tree with its learnt arithmetic, or where none was learnt
    the hypothesis, gave every output checked, and a hypothesis named gave every output
    it was run on."""
    if cls.arithmetic is None and cls.hypothesis is None:
        cls.reproduced = False
        cls.reason = "no hypothesis and no arithmetic reproduces this tree"
        return
    if cls.arithmetic is not None:
        ok = cls.agreed == cls.checked_outputs
        what = f"{cls.agreed} of {cls.checked_outputs} outputs"
    else:
        ok = bool(cls.hypothesis_reproduced)
        what = f"the hypothesis on {cls.hypothesis_checked} outputs"
    if cls.hypothesis is not None and cls.hypothesis_reproduced is False:
        # a hypothesis named is a claim: it must give the outputs too
        cls.reproduced = False
        cls.reason = (
            f"the hypothesis {cls.hypothesis} differs on some of {cls.hypothesis_checked} outputs"
            + (f" ({what} agree with the tree under its arithmetic)" if ok else "")
        )
        return
    counted = cls.checked_outputs if cls.arithmetic is not None else cls.hypothesis_checked
    if counted < MIN_OUTPUTS:
        cls.reproduced = None if ok else False
        cls.reason = (
            f"{what} agree; fewer than {MIN_OUTPUTS} checked: not claimed"
            if ok
            else (f"{what} agree")
        )
        return
    cls.reproduced = ok
    cls.reason = f"{what} agree"


def _check_recorded(res: RevealResult, orc, seed: int, labels: np.ndarray, outputs: int) -> None:
    """A recording: compare its one recorded random call (ordinary random inputs, not
    discriminating ones) with each class's hypothesis; `reproduced` stays None."""
    a, b, d = orc.random(res.k, seed)
    d = np.asarray(d)
    full = orc.random_shape
    res.check_shape = (int(full[0]), int(full[1]), res.k)
    mm, nn = res.shape or (res.k, res.k)
    lab = labels if labels.shape == d.shape else np.zeros(d.shape, np.int64)
    pick = _pick(lab, len(res.classes), outputs, seed)
    for c, cls in enumerate(res.classes):
        sel = pick & (lab == c)
        if not sel.any() or cls.hypothesis is None:
            continue
        cls.checked_outputs += int(sel.sum())
        cls.hypothesis_checked += int(sel.sum())
        _compare(cls, _pieces(sel, cls, a, b, d, cls.widen), np_dtype(orc.out))
        cls.reason = (
            f"the recorded random call ({int(sel.sum())} outputs, ordinary random inputs) "
            + ("agrees" if cls.hypothesis_reproduced else "differs")
            + " with the hypothesis: too few, and not discriminating, to claim reproduced"
        )
    if tuple(full) != (mm, nn):
        res.note = (res.note + "; " if res.note else "") + (
            f"the random call checked is {full[0]} x {full[1]} x {res.k}, the probe "
            f"{mm} x {nn} x {res.k} (none of that shape recorded): a library may pick "
            "another kernel for another shape"
        )


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

    first = cls.hypothesis_reproduced is None
    ok = run(cls.hypothesis)
    if not ok and first:
        for other in cls.others:
            if run(other):
                cls.others = [x for x in [cls.hypothesis, *cls.others] if x != other]
                cls.hypothesis = other
                ok = True
                break
    cls.hypothesis_reproduced = ok and cls.hypothesis_reproduced is not False


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
