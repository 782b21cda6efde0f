"""Answer a query: solvers (one or a portfolio), witness re-check, unsat confirmation.

This is the layer between the query data and the user: it never shows a witness the
concrete interpreter has not reproduced, and it asks a second solver to confirm an
unsat answer when one is installed.

A stated argument (smt/arguments.py) answers Verdict.UNSAT_BY_ARGUMENT, its own kind,
only after its extreme rows at its bound reproduce on the concrete model; the solvers
are then still asked within the query's budget: their unsat confirms it, a reproducing
witness overrides it (Verdict.WITNESS, the argument named wrong), no answer within the
budget leaves the argument's answer with a note saying so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import Enum

from ..solvers import Answer, SolveJob, SolveResult
from ..solvers.runner import (
    Progress,
    available,
    check_solver_names,
    confirmed_portfolio,
    portfolio,
)
from .arguments import Argued, stated_argument
from .query import Query, Recheck, recheck, smtlib, trivially_unsat
from .search import SearchRun, search, searchable

PORTFOLIO = "portfolio"


class Verdict(Enum):
    """What the query's answer means for the user."""

    WITNESS = "witness"  # sat, re-checked on the concrete model
    UNSAT = "unsat"  # no input satisfies the query (for differ: the variants are equal)
    # unsat by a stated argument (smt/arguments.py) whose extreme rows at its bound
    # reproduce on the concrete model; a solver's unsat, when one came, is a confirmation
    UNSAT_BY_ARGUMENT = "unsat-by-argument"
    UNKNOWN = "unknown"  # every solver timed out, ran out of memory or crashed
    BAD_WITNESS = "bad-witness"  # a solver's witness did not reproduce: a bug

    @property
    def unsat(self) -> bool:
        """Whether the verdict says no input satisfies the query (by a solver, by
        construction or by an argument)."""
        return self in (Verdict.UNSAT, Verdict.UNSAT_BY_ARGUMENT)


MIN_CONFIRM_S = 0.5
"""An unsat answer is confirmed only when at least this much of the budget is left."""


@dataclass
class Limits:
    """How solvers are run. `timeout` is the wall-clock budget of one query: the concrete
    search (`search` seconds of it, 0: none; smt/search.py), the solvers of the
    portfolio and the confirmation of an unsat answer all run within it."""

    solver: str = PORTFOLIO
    timeout: float = 300.0
    jobs: int | None = None
    memory_mb: int = 8192
    confirm: bool = True
    seed: int = 0
    search: float = 0.0


SEARCH = "search"
"""The name a witness of the concrete search answers under (`Outcome.method`)."""
CONSTRUCTED = "constructed"
"""The name a witness built from the question answers under (smt/constructed.py)."""


@dataclass
class Outcome:
    """The answer to a query with everything a report needs."""

    query: Query
    verdict: Verdict
    result: SolveResult | None
    runs: list[SolveResult] = field(default_factory=list)
    confirmations: list[SolveResult] = field(default_factory=list)
    witness: Recheck | None = None
    by_construction: bool = False  # the goal folds to false: no solver needed
    seconds: float = 0.0
    note: str = ""
    search: SearchRun | None = None  # the concrete search before the solvers, if one ran
    argued: bool = False  # the verdict is UNSAT_BY_ARGUMENT (smt/arguments.py)
    # the stated argument that applied to the query, whether it decided the verdict,
    # was contradicted by its extreme rows, or was overridden by a solver's witness
    argument: Argued | None = None

    @property
    def method(self) -> str:
        """What decided the verdict: "argument" (a stated argument, smt/arguments.py),
        "construction" (the goal folds to false), "search" (a witness of the concrete
        search, no solver run), "solver", or "" (no answer)."""
        if self.argued:
            return "argument"
        if self.by_construction:
            return "construction"
        if self.result is None or not self.result.answer.definite:
            return ""
        return self.result.solver if self.result.solver in (SEARCH, CONSTRUCTED) else "solver"


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
    """Solve `q`, re-check a witness, confirm an unsat; never raises for solver trouble.
    A stated argument that applies is checked on its extreme rows and confirmed by the
    solvers within the budget (module docstring)."""
    t0 = time.monotonic()
    solvers_for(limits.solver)  # an unknown solver name fails before any work
    if trivially_unsat(q):
        return Outcome(
            q,
            Verdict.UNSAT,
            None,
            by_construction=True,
            seconds=time.monotonic() - t0,
            note="the goal simplifies to false: both variants build the same term",
        )
    arg = stated_argument(q)
    if arg is None:
        built = _constructed(q, t0)
        return built if built is not None else _solve(q, limits, progress, t0)
    bad = arg.check()
    if bad is not None:
        out = _solve(q, limits, progress, t0)
        out.argument = arg
        out.note = _join(
            f"{arg.kind.title} was not used: an extreme row at its bound contradicts it "
            f"on the concrete model ({bad})",
            out.note,
        )
        return out
    checked = f"{arg.rows} extreme rows at its bound reproduce on the concrete model"
    left = limits.timeout - (time.monotonic() - t0)
    if not limits.confirm or left < MIN_CONFIRM_S:
        why = (
            "not confirmed by a solver (--no-confirm)"
            if not limits.confirm
            else f"no solver asked: the budget of {limits.timeout:g} s ran out"
        )
        return Outcome(
            q,
            Verdict.UNSAT_BY_ARGUMENT,
            None,
            seconds=time.monotonic() - t0,
            note=f"{arg.note}; {checked}; {why}",
            argued=True,
            argument=arg,
        )
    out = _solve(q, replace(limits, timeout=left), progress, time.monotonic())
    out.argument = arg
    out.seconds = time.monotonic() - t0
    if out.verdict == Verdict.WITNESS:
        out.note = _join(
            f"{arg.kind.title} was wrong: it claimed unsat ({'; '.join(arg.steps)}), but the "
            "witness reproduces on the concrete model",
            out.note,
        )
    elif out.verdict == Verdict.BAD_WITNESS:
        out.note = _join(f"{arg.kind.title} claims unsat", out.note)
    elif out.verdict == Verdict.UNSAT:
        who = [r.solver for r in [out.result, *out.confirmations] if r and r.answer == Answer.UNSAT]
        out.verdict = Verdict.UNSAT_BY_ARGUMENT
        out.argued = True
        out.note = f"{arg.note}; {checked}; confirmed by {', '.join(dict.fromkeys(who))} (unsat)"
    else:
        out.verdict = Verdict.UNSAT_BY_ARGUMENT
        out.argued = True
        out.note = (
            f"{arg.note}; {checked}; not confirmed: no solver answered within the budget of "
            f"{limits.timeout:g} s"
        )
    return out


def _constructed(q: Query, t0: float) -> Outcome | None:
    """The outcome of a witness built from the question (smt/constructed.py), or None."""
    from .constructed import floor_witness

    got = floor_witness(q)
    if got is None:
        return None
    w, rows = got
    r = SolveResult(CONSTRUCTED, Answer.SAT, time.monotonic() - t0)
    return Outcome(
        q,
        Verdict.WITNESS,
        r,
        [r],
        witness=w,
        seconds=time.monotonic() - t0,
        note=f"constructed: the first of {rows:,} rows below the zero-exponent floor "
        "(model/zero_exponent.py) on which the units differ; no solver was run",
    )


def _join(first: str, rest: str) -> str:
    """Two notes in one."""
    return f"{first}; {rest}" if rest else first


def _solve(q: Query, limits: Limits, progress: Progress | None, t0: float) -> Outcome:
    """The concrete search (if asked), the solvers and the confirmation of an unsat, all
    within `limits.timeout` from `t0`."""
    solvers = solvers_for(limits.solver)
    run = None
    if limits.search > 0 and searchable(q):
        run = search(q, min(limits.search, limits.timeout), limits.seed)
        if run.witness is not None:
            return _searched(q, run, time.monotonic() - t0)
    names = tuple(o.name for o in q.operands) + q.output_names
    job = SolveJob(smtlib(q), names, limits.timeout, limits.memory_mb, limits.seed)
    deadline = t0 + limits.timeout
    # an unsat answer is confirmed by another solver: the portfolio's other solvers go on
    # from where they are, the installed solvers outside it join as job slots free
    if limits.confirm:
        others = [s for s in available() if s not in solvers]
        result, runs, confirmations = confirmed_portfolio(
            job, solvers, others, limits.jobs, progress, deadline, MIN_CONFIRM_S
        )
    else:
        result, runs = portfolio(job, solvers, limits.jobs, progress, deadline)
        confirmations = []
    out = Outcome(q, Verdict.UNKNOWN, result, runs, search=run)
    if result.answer == Answer.SAT:
        _take_witness(out, result)
    elif result.answer == Answer.UNSAT:
        out.verdict = Verdict.UNSAT
        if limits.confirm:
            _confirm(out, result, confirmations, limits)
    out.seconds = time.monotonic() - t0
    return out


def _searched(q: Query, run: SearchRun, seconds: float) -> Outcome:
    """The outcome of a witness the concrete search found (re-checked on the concrete
    interpreter by the search): no solver was run."""
    r = SolveResult(SEARCH, Answer.SAT, run.seconds)
    return Outcome(
        q,
        Verdict.WITNESS,
        r,
        [r],
        witness=run.witness,
        seconds=seconds,
        note=f"found by the concrete search ({run.rows:,} candidate inputs of the class on "
        "the vector interpreter, the query's own constraint and goal); no solver was run",
        search=run,
    )


def with_search(limits: Limits, seconds: float) -> Limits:
    """`limits` with `seconds` of concrete search before the solvers."""
    return replace(limits, search=seconds)


def _take_witness(out: Outcome, result: SolveResult) -> None:
    w = recheck(out.query, result.model)
    out.witness = w
    out.verdict = Verdict.WITNESS if w.reproduces else Verdict.BAD_WITNESS


def _confirm(
    out: Outcome, first: SolveResult, confirmations: list[SolveResult], limits: Limits
) -> None:
    """Take the second, independent answer of an unsat (the first run of
    `confirmations` when it is definite): a witness of another solver decides against
    the unsat, after the concrete re-check."""
    if any(s != first.solver for s in available()) and not confirmations:
        out.note = f"not confirmed by a second solver: the budget of {limits.timeout:g} s ran out"
        return
    out.confirmations = confirmations
    r = confirmations[0] if confirmations else None
    if r is not None and r.answer == Answer.SAT:
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
