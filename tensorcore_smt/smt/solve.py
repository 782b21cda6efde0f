"""Answer a query: solvers (one or a portfolio), witness re-check, unsat confirmation.

This is the layer between the query data and the user: it never shows a witness the
concrete interpreter has not reproduced, and it asks a second solver to confirm an
unsat answer when one is installed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

from ..solvers import Answer, SolveJob, SolveResult
from ..solvers.runner import Progress, available, check_solver_names, portfolio
from .arguments import argued_unsat
from .query import Query, Recheck, recheck, smtlib, trivially_unsat

PORTFOLIO = "portfolio"


class Verdict(Enum):
    """What the query's answer means for the user."""

    WITNESS = "witness"  # sat, re-checked on the concrete model
    UNSAT = "unsat"  # no input satisfies the query (for differ: the variants are equal)
    UNKNOWN = "unknown"  # every solver timed out, ran out of memory or crashed
    BAD_WITNESS = "bad-witness"  # a solver's witness did not reproduce: a bug


MIN_CONFIRM_S = 0.5
"""An unsat answer is confirmed only when at least this much of the budget is left."""


@dataclass
class Limits:
    """How solvers are run. `timeout` is the wall-clock budget of one query: the solvers
    of the portfolio and the confirmation of an unsat answer all run within it."""

    solver: str = PORTFOLIO
    timeout: float = 300.0
    jobs: int | None = None
    memory_mb: int = 8192
    confirm: bool = True
    seed: int = 0


@dataclass
class Outcome:
    """The answer to a query with everything a report needs."""

    query: Query
    verdict: Verdict
    result: SolveResult | None
    runs: list[SolveResult] = field(default_factory=list)
    confirmations: list[SolveResult] = field(default_factory=list)
    witness: Recheck | None = None
    by_construction: bool = False  # proved without a solver (see `method`)
    seconds: float = 0.0
    note: str = ""
    argued: bool = False  # by_construction through a stated argument (smt/arguments.py)

    @property
    def method(self) -> str:
        """How an answer without a solver was reached: "argument" or "construction"."""
        return "argument" if self.argued else "construction"


def solvers_for(name: str) -> list[str]:
    """The solvers a `--solver` value stands for (ValueError if unknown/not installed)."""
    if name == PORTFOLIO:
        names = list(available())
        if not names:
            raise ValueError("no SMT solver is installed (pip install bitwuzla z3-solver cvc5)")
        return names
    check_solver_names([name])
    return [name]


def answer(q: Query, limits: Limits, progress: Progress | None = None) -> Outcome:
    """Solve `q`, re-check a witness, confirm an unsat; never raises for solver trouble."""
    t0 = time.monotonic()
    solvers = solvers_for(limits.solver)
    if trivially_unsat(q):
        return Outcome(
            q,
            Verdict.UNSAT,
            None,
            by_construction=True,
            seconds=time.monotonic() - t0,
            note="the goal simplifies to false: both variants build the same term",
        )
    argued = argued_unsat(q)
    if argued is not None:
        return Outcome(
            q,
            Verdict.UNSAT,
            None,
            by_construction=True,
            seconds=time.monotonic() - t0,
            note=argued,
            argued=True,
        )
    names = tuple(o.name for o in q.operands) + q.output_names
    job = SolveJob(smtlib(q), names, limits.timeout, limits.memory_mb, limits.seed)
    deadline = t0 + limits.timeout
    result, runs = portfolio(job, solvers, limits.jobs, progress, deadline)
    out = Outcome(q, Verdict.UNKNOWN, result, runs)
    if result.answer == Answer.SAT:
        _take_witness(out, result)
    elif result.answer == Answer.UNSAT:
        out.verdict = Verdict.UNSAT
        if limits.confirm:
            _confirm(out, job, result, limits, progress, deadline)
    out.seconds = time.monotonic() - t0
    return out


def _take_witness(out: Outcome, result: SolveResult) -> None:
    w = recheck(out.query, result.model)
    out.witness = w
    out.verdict = Verdict.WITNESS if w.reproduces else Verdict.BAD_WITNESS


def _confirm(
    out: Outcome,
    job: SolveJob,
    first: SolveResult,
    limits: Limits,
    progress: Progress | None,
    deadline: float,
) -> None:
    """Ask the other installed solvers (in parallel) for a second, independent answer,
    within what is left of the query's budget."""
    others = [s for s in available() if s != first.solver]
    if not others:
        return
    if deadline - time.monotonic() < MIN_CONFIRM_S:
        out.note = f"not confirmed by a second solver: the budget of {limits.timeout:g} s ran out"
        return
    r, runs = portfolio(job, others, limits.jobs, progress, deadline)
    out.confirmations = runs
    if r.answer == Answer.SAT:
        # Solvers disagree: the witness decides, after the concrete re-check.
        w = recheck(out.query, r.model)
        if w.reproduces:
            out.witness = w
            out.verdict = Verdict.WITNESS
            out.note = (
                f"{first.solver} answered unsat but {r.solver} found a witness that the "
                f"concrete model reproduces: {first.solver}'s answer is wrong"
            )
        else:
            out.note = f"{r.solver} answered sat with a witness that does not reproduce"
