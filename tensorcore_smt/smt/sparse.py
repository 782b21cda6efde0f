"""Solver questions about structured-sparse instructions (PTX mma.sp): do two hypotheses
of the dense unit behind a sparse one (model/sparse.py, params.Sparsity) ever give
different bits for a given metadata?

The metadata is fixed per question (it selects operands; it does no arithmetic), so both
sides are the model's own DAGs on shared inputs: a (n_a entries), b (K), c. A witness
(sat) is re-run on the concrete interpreter before it is reported; unsat is asked of a
second solver where one is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..bv.smtlib import to_smtlib
from ..bv.symbolic import SymbolicBackend
from ..formats import decode
from ..model import dot_add
from ..model.params import ModelParams
from ..model.sparse import check_metadata
from ..solvers.result import Answer
from ..solvers.runner import SolveJob, available, solve
from .solve import Verdict


@dataclass
class SparseAnswer:
    """The verdict of one question and its evidence."""

    verdict: Verdict  # WITNESS, UNSAT (equal on every input) or UNKNOWN
    solvers: list[str] = field(default_factory=list)  # solvers whose answer it rests on
    inputs: dict[str, int] = field(default_factory=dict)  # the witness
    outputs: tuple[int, int] | None = None  # X's and Y's d on the witness, re-run
    reason: str = ""


def _names(p: ModelParams) -> list[str]:
    return [f"a{j}" for j in range(p.n_a)] + [f"b{k}" for k in range(p.K)] + ["c"]


def _run(p_x: ModelParams, p_y: ModelParams, meta: list[int], inputs: dict[str, BV]):
    a = [inputs[f"a{j}"] for j in range(p_x.n_a)]
    b = [inputs[f"b{k}"] for k in range(p_x.K)]
    c = inputs["c"]
    return dot_add(a, b, c, p_x, meta=meta), dot_add(a, b, c, p_y, meta=meta)


def _widths(p: ModelParams) -> dict[str, int]:
    w = {f"a{j}": p.a_fmt.spec.storage for j in range(p.n_a)}
    w.update({f"b{k}": p.b_fmt.spec.storage for k in range(p.K)})
    w["c"] = p.c_fmt.spec.storage
    return w


def differ(
    p_x: ModelParams,
    p_y: ModelParams,
    meta: list[int],
    solvers: list[str] | None = None,
    timeout: float = 120.0,
    finite: bool = False,
) -> SparseAnswer:
    """Inputs on which hypotheses `p_x` and `p_y` of one sparse instruction give
    different d for metadata `meta`, or a proof (two solvers' unsat) that none exist;
    `finite`: only inputs without NaN or Inf (the arithmetic, not the special values)."""
    if (p_x.K, p_x.n_a, p_x.a_fmt, p_x.b_fmt, p_x.c_fmt) != (
        p_y.K,
        p_y.n_a,
        p_y.a_fmt,
        p_y.b_fmt,
        p_y.c_fmt,
    ):
        raise ValueError("the two hypotheses take different operands")
    meta = check_metadata(meta, p_x)
    widths = _widths(p_x)
    s = SymbolicBackend()
    inputs = {n: s.var(n, w) for n, w in widths.items()}
    dx, dy = _run(p_x, p_y, meta, inputs)
    goal = dx.ne(dy)
    if finite:
        for n, v in inputs.items():
            fmt = p_x.a_fmt if n[0] == "a" else p_x.b_fmt if n[0] == "b" else p_x.c_fmt
            u = decode(v, fmt)
            goal = goal & ~u.is_nan & ~u.is_inf
    if goal.v.op == "bconst" and not goal.v.value:
        return SparseAnswer(Verdict.UNSAT, reason="the two DAGs are identical")
    text = to_smtlib([goal.v]).replace("(check-sat)\n", "")
    job = SolveJob(text, tuple(widths), timeout=timeout)
    names = solvers or list(available())
    unsat: list[str] = []
    reasons = []
    for name in names:
        r = solve(job, name)
        if r.answer == Answer.SAT:
            values = {n: r.model.get(n, 0) for n in widths}
            conc = {n: BV.const(CONCRETE, v, widths[n]) for n, v in values.items()}
            x, y = _run(p_x, p_y, meta, conc)
            outs = (int(x.v), int(y.v))
            if outs[0] == outs[1]:
                reasons.append(f"{name}: its witness does not reproduce")
                continue
            return SparseAnswer(Verdict.WITNESS, [name], values, outs)
        if r.answer == Answer.UNSAT:
            unsat.append(name)
            if len(unsat) == 2:
                return SparseAnswer(Verdict.UNSAT, unsat)
        else:
            reasons.append(f"{name}: {r.reason or r.answer.value}")
    if unsat and len(names) == 1:
        return SparseAnswer(Verdict.UNSAT, unsat, reason="one solver (no second installed)")
    return SparseAnswer(Verdict.UNKNOWN, unsat, reason="; ".join(reasons))
