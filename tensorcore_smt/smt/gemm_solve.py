"""Answer a GEMM query: first with the k-blocks inside chains fixed to +0 (a small query
whose witness is a witness of the whole question), then, when that finds none, the whole
query. Everything else (portfolio, re-check, confirmation) is `smt.solve.answer`."""

from __future__ import annotations

import time

from ..solvers.runner import Progress
from .gemm_query import GemmQuery, focused
from .query import Goal, Query
from .solve import Limits, Outcome, Verdict, answer

FOCUS_PER_BLOCK = 2
"""Positions left free at the start of each focused k-block (the rest of it +0)."""


def answer_gemm(
    q: GemmQuery, limits: Limits, progress: Progress | None = None, focus: bool = True
) -> Outcome:
    """`answer(q)`, asking the focused query first when the goal is a difference and
    the query does not already leave positions out. The outcome's query is the one whose
    answer it reports; its note says when the focused query answered."""
    if not focus or q.goal != Goal.DIFFER or q.focused:
        return answer(q, limits, progress)
    t0 = time.monotonic()
    qf = focused(q, FOCUS_PER_BLOCK)
    if len(qf.constraints) == len(q.constraints):  # every position is free anyway
        return answer(q, limits, progress)
    first = answer(qf, limits, progress)
    if first.verdict in (Verdict.WITNESS, Verdict.BAD_WITNESS):
        free = q.K - sum(c.hi - c.lo for c in qf.constraints[len(q.constraints) :])
        first.note = (
            f"found with {free} of {q.K} k-positions free (the first {FOCUS_PER_BLOCK} of the "
            "first and last k-block of every chain of either plan; the others +0)"
            + (f"; {first.note}" if first.note else "")
        )
        return first
    full = answer(q, limits, progress)
    why = "unsat" if first.verdict.unsat else "unknown"
    full.note = (
        f"the focused query (k-blocks inside chains +0) was {why} in {first.seconds:.2f} s; "
        "the full query answered" + (f"; {full.note}" if full.note else "")
    )
    full.seconds += time.monotonic() - t0 - full.seconds
    return full


def answer_query(q: Query | GemmQuery, limits: Limits, progress: Progress | None = None) -> Outcome:
    """`answer` for an instruction query, `answer_gemm` for a GEMM query."""
    if isinstance(q, GemmQuery):
        return answer_gemm(q, limits, progress)
    return answer(q, limits, progress)
