"""One solver's runs on one query (`Run`, `Cell`), and their text and JSON forms."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from tensorcore_smt.smt.query import Query, recheck
from tensorcore_smt.solvers import Answer, SolveResult


@dataclass
class Run:
    answer: Answer
    seconds: float  # wall time of the run (a fresh child process)
    reason: str = ""
    reproduces: bool | None = None  # sat only: the concrete re-check
    solver_s: float | None = None  # the solver's own parse + check time


@dataclass
class Cell:
    """One solver on one query: its runs."""

    solver: str
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""

    @property
    def definite(self) -> list[Run]:
        return [r for r in self.runs if r.answer.definite]

    @property
    def answer(self) -> Answer:
        d = self.definite
        return d[0].answer if d else Answer.UNKNOWN

    @property
    def best(self) -> float | None:
        """Best wall time of the definite runs."""
        d = self.definite
        return min(r.seconds for r in d) if d else None

    @property
    def median(self) -> float | None:
        if self.runs and len(self.definite) == len(self.runs):
            return statistics.median(r.seconds for r in self.runs)
        return None

    @property
    def best_solver(self) -> float | None:
        """Best solver_s of the definite runs."""
        d = [r.solver_s for r in self.definite if r.solver_s is not None]
        return min(d) if d else None

    @property
    def median_solver(self) -> float | None:
        d = [r.solver_s for r in self.runs if r.solver_s is not None]
        if self.runs and len(self.definite) == len(self.runs) and len(d) == len(self.runs):
            return statistics.median(d)
        return None

    @property
    def typical_solver(self) -> float | None:
        """The figure a row is judged by: the median solver_s over the runs (each run
        has its own seed, so a local search's luck on one seed does not count), or the
        one run's figure."""
        return self.median_solver if self.median_solver is not None else self.best_solver

    @property
    def bad_witness(self) -> bool:
        return any(r.reproduces is False for r in self.runs)


def _as_run(q: Query | None, r: SolveResult) -> Run:
    run = Run(r.answer, r.seconds, r.reason, solver_s=r.solver_s)
    if r.answer == Answer.SAT and q is not None:
        run.reproduces = recheck(q, r.model).reproduces
    return run


def fmt_s(x: float) -> str:
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 0.1:
        return f"{x:.2f} s"
    if x >= 0.01:
        return f"{x * 1000:.0f} ms"
    return f"{x * 1000:.1f} ms"


def _unanswered(c: Cell, timeout: float) -> str | None:
    if c.skipped:
        return f"not run: {c.skipped}"
    if c.best is None:
        reasons = {r.reason for r in c.runs}
        if reasons and all("timeout" in x for x in reasons):
            return f"> {timeout:g} s"
        return "unknown: " + "; ".join(sorted(reasons))[:40]
    return None


def _tag(c: Cell) -> str:
    """The answer; for sat, 'ok' when every witness was re-checked and reproduced."""
    tag = c.answer.value
    if c.answer == Answer.SAT:
        if c.bad_witness:
            tag += " BAD"
        elif all(r.reproduces for r in c.definite):
            tag += " ok"
    return tag


def cell_text(c: Cell, timeout: float) -> str:
    """Wall time: best (median)."""
    missing = _unanswered(c, timeout)
    if missing:
        return missing
    text = fmt_s(c.best)
    if c.median is not None and len(c.runs) > 1:
        text += f" (med {fmt_s(c.median)})"
    return f"{text} {_tag(c)}"


def solver_cell_text(c: Cell, timeout: float, wall: bool = True) -> str:
    """Query time: best (median), and the best wall time."""
    missing = _unanswered(c, timeout)
    if missing:
        return missing
    if c.best_solver is None:
        return cell_text(c, timeout)
    if c.median_solver is not None and len(c.runs) > 1:
        text = (
            f"{fmt_s(c.median_solver)} (median of {len(c.runs)} seeds; best {fmt_s(c.best_solver)})"
        )
    else:
        text = fmt_s(c.best_solver)
    if wall:
        text += f"; wall {fmt_s(c.best)}"
    return f"{text} {_tag(c)}"


def run_text(r: Run | None, timeout: float) -> str:
    if r is None:
        return "—"
    if not r.answer.definite:
        return f"> {timeout:g} s" if "timeout" in r.reason else f"unknown ({r.reason[:40]})"
    tag = r.answer.value
    if r.reproduces is not None:
        tag += " ok" if r.reproduces else " BAD"
    return f"{fmt_s(r.seconds)} {tag}"


def _cell_json(c: Cell, timeout: float) -> dict:
    return {
        "solver": c.solver,
        "skipped": c.skipped,
        "answer": c.answer.value,
        "best_solver_s": c.best_solver,
        "median_solver_s": c.median_solver,
        "best_s": c.best,
        "median_s": c.median,
        "runs": [_run_json(r) for r in c.runs],
        "text": solver_cell_text(c, timeout),
        "wall_text": cell_text(c, timeout),
    }


def _run_json(r: Run) -> dict:
    return {
        "answer": r.answer.value,
        "seconds": round(r.seconds, 3),
        "solver_s": None if r.solver_s is None else round(r.solver_s, 6),
        "reason": r.reason,
        "reproduces": r.reproduces,
    }
