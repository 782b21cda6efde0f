"""`reveal`: the accumulation tree of one output element of a library's dot, GEMV or GEMM,
learnt from its outputs on pair probes, then named as a GEMM hypothesis where a schedule
expresses it, and checked on random inputs.

The result assumes what the method assumes (Xie et al., USENIX ATC 2025): every output
element of a call sums its K products in one and the same tree, each addition rounds
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
from .evaluate import ROUNDINGS, evaluate
from .hypothesis import find
from .oracles import make_oracle, np_dtype
from .tree import NotATree, Tree, build, canonical, from_sizes, render, to_lists

MAX_K = 4096
CHECK_OUTPUTS = 64
"""Outputs of the random call checked bit for bit (a sub-grid of rows and columns when the
call has more)."""
FMA_STAND_IN = ("hopper", "fma.rn.f32")
"""The IEEE fp32 FMA of this project's presets (a·b + c rounded once to nearest even),
standing in for a CPU's FMA when a schedule is sought for a CPU library's tree."""
CHECK_CALLS = 16
"""Random calls checked, output (0, 0) each, when the tree is that of output (0, 0)."""


@dataclass
class RevealResult:
    """What `reveal` learnt: the tree, the hypothesis (None when no schedule expresses
    it), the calls and seconds it took, and the checks on random inputs."""

    oracle: str
    k: int
    dtype: str
    shape: tuple[int, int] | None
    tree: Tree
    hypothesis: str | None
    instr: str | None
    oracle_calls: int
    seconds: float
    reproduced: bool | None
    tree_check: dict[str, bool] = field(default_factory=dict)
    checked_outputs: int = 0
    check_calls: int = 0
    check_shape: tuple[int, int, int] | None = None
    fma_schedule: str | None = None
    fma_schedule_reproduced: bool | None = None
    note: str = ""

    def to_json(self) -> dict:
        return {
            "oracle": self.oracle,
            "k": self.k,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape else None,
            "tree": to_lists(self.tree),
            "tree_text": render(self.tree),
            "hypothesis": self.hypothesis,
            "instr": self.instr,
            "oracle_calls": self.oracle_calls,
            "seconds": round(self.seconds, 3),
            "reproduced": self.reproduced,
            "tree_reproduced": self.tree_check or None,
            "checked_outputs": self.checked_outputs,
            "check_calls": self.check_calls,
            "check_shape": list(self.check_shape) if self.check_shape else None,
            "fma_schedule": self.fma_schedule,
            "fma_schedule_reproduced": self.fma_schedule_reproduced,
            "note": self.note,
        }


def reveal(
    oracle: str,
    k: int,
    dtype: str = "fp32",
    shape: tuple[int, int] | None = None,
    seed: int = 0,
    check: bool = True,
) -> RevealResult:
    """The accumulation tree of `oracle` (ORACLES in order/oracles.py, or h100:CALL) over
    K products of `dtype` inputs, in output shape `shape` (M, N; default K x K), from pair
    probes. UserError for bad input; ValueError (NotATree) when the oracle's outputs are
    not those of one summation tree. `check`: run the oracle once on random inputs (seed
    `seed`) and compare bit for bit with the hypothesis (tc.matmul) and with the tree
    summed in fp32 (evaluate.py)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 2 <= k <= MAX_K:
        raise UserError(f"--k {k}: K from 2 to {MAX_K}")
    k = int(k)
    orc = make_oracle(oracle, dtype, shape)
    orc.check(k)
    t0 = time.monotonic()
    note = ""
    try:
        sizes = orc.full(k)
        if sizes is not None:
            tree = from_sizes(sizes)
    except (NotATree, ValueError) as e:
        if not hasattr(orc, "mn"):
            raise
        sizes = None
        note = (
            f"the outputs of one {k} x {k} call do not sum in one tree ({e}); this is the "
            "tree of output (0, 0), asked one pair a call"
        )
    if sizes is None:
        tree = build(k, lambda p, o: orc.query(k, p, o))
    tree = canonical(tree)
    seconds = time.monotonic() - t0
    calls = orc.calls
    found = None
    if orc.arch is not None:
        fmt = Format.FP32 if orc.fmt == Format.TF32 else orc.fmt
        found = find(tree, k, orc.arch, orc.instr, fmt, orc.label)
    res = RevealResult(
        oracle=orc.name,
        k=k,
        dtype=orc.fmt.spec.name,
        shape=shape,
        tree=tree,
        hypothesis=found.hypothesis if found else None,
        instr=found.instr if found else None,
        oracle_calls=calls,
        seconds=seconds,
        reproduced=None,
        note=note,
    )
    if found is None and orc.arch is not None:
        res.note = (
            note + ("; " if note else "") + "no GEMM schedule of this project expresses this tree"
        )
    if orc.arch is None:
        res.note = (
            note
            + ("; " if note else "")
            + ("the library runs on no modelled matrix unit: no GEMM hypothesis is sought")
        )
        if orc.fmt in (Format.FP32, Format.BF16):
            fma = find(tree, k, FMA_STAND_IN[0], FMA_STAND_IN[1], Format.FP32)
            if fma is not None:
                sched = fma.hypothesis.split("/", 1)[1]
                if orc.out != Format.FP32:
                    extra = f"out={orc.out.spec.name}"
                    sched = (
                        sched[:-1] + f",{extra}]" if sched.endswith("]") else f"{sched}[{extra}]"
                    )
                res.fma_schedule = sched
    if check:
        _check(res, orc, seed, one_output=sizes is None and hasattr(orc, "mn"))
    return res


def _check(res: RevealResult, orc, seed: int, one_output: bool) -> None:
    """Run the oracle on random inputs; compare outputs with the hypothesis (through
    tc.matmul) and with the tree summed in fp32: a sample of CHECK_OUTPUTS outputs of one
    call, or output (0, 0) of CHECK_CALLS calls when the tree is that of output (0, 0)."""
    before = orc.calls
    blocks = []  # (A rows, B columns, the oracle's outputs there)
    for i in range(CHECK_CALLS if one_output else 1):
        a, b, d = orc.random(res.k, seed + i)
        m, n = d.shape
        if one_output:
            rows, cols = np.array([0]), np.array([0])
        else:
            rng = np.random.default_rng(seed)
            n_cols = min(n, int(CHECK_OUTPUTS**0.5))
            rows = np.sort(rng.choice(m, min(m, CHECK_OUTPUTS // n_cols), replace=False))
            cols = np.sort(rng.choice(n, n_cols, replace=False))
        blocks.append((a[rows], b[:, cols], np.asarray(d)[np.ix_(rows, cols)]))
    res.check_calls = orc.calls - before
    full = getattr(orc, "random_shape", None) or (a.shape[0], b.shape[1])
    res.check_shape = (int(full[0]), int(full[1]), res.k)
    res.checked_outputs = sum(w.size for _, _, w in blocks)
    mm, nn = res.shape or (res.k, res.k)
    if hasattr(orc, "random_shape") and tuple(full) != (mm, nn):
        res.note = (res.note + "; " if res.note else "") + (
            f"the random call checked is {full[0]} x {full[1]} x {res.k}, the probe "
            f"{mm} x {nn} x {res.k} (none of that shape recorded): a library may pick "
            "another kernel for another shape"
        )
    if res.hypothesis is not None:
        from ..gemm.emulate import matmul

        res.reproduced = all(
            _same_bits(
                np.asarray(matmul(res.hypothesis, ra, rb, instr=res.instr, engine="numpy")).astype(
                    np.float32
                ),
                np.asarray(w, np.float32),
            )
            for ra, rb, w in blocks
        )
    if res.fma_schedule is not None:
        from ..gemm.emulate import matmul

        hyp = f"{FMA_STAND_IN[0]}/{res.fma_schedule}"
        dt = np_dtype(orc.out)
        res.fma_schedule_reproduced = all(
            _same_bits(
                np.asarray(
                    matmul(
                        hyp,
                        ra.astype(np.float32),
                        rb.astype(np.float32),
                        instr=FMA_STAND_IN[1],
                        engine="numpy",
                    )
                ).astype(dt),
                np.asarray(w).astype(dt),
            )
            for ra, rb, w in blocks
        )
    if any(not isinstance(c, int) and len(c) > 2 for c in _nodes(res.tree)):
        return  # fused adds: the fp32 tree sum is no model of a matrix unit's truncation
    ra = np.concatenate([np.repeat(x.astype(np.float32), w.shape[1], axis=0) for x, _, w in blocks])
    rb = np.concatenate([np.tile(y.astype(np.float32).T, (w.shape[0], 1)) for _, y, w in blocks])
    dt = np_dtype(orc.out)
    flat = np.concatenate([np.asarray(w).reshape(-1) for _, _, w in blocks]).astype(dt)
    for r in ROUNDINGS:
        got = evaluate(res.tree, ra, rb, r).astype(dt)  # one rounding to the output format
        res.tree_check[r] = _same_bits(got, flat)


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
