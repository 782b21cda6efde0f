"""The Table 4 benchmark runner: each query, the paper's formulas and the floor timed on
every solver, --repeat runs each, every sat witness re-checked."""

from __future__ import annotations

import argparse
import sys
import time

from tensorcore_smt.smt.query import Query, smtlib, symbolic
from tensorcore_smt.solvers import SolveJob, solve
from tensorcore_smt.solvers.backends import all_backends

from .cells import Cell, Run, _as_run, _cell_json, solver_cell_text
from .formulas import FLOOR_FORMULAS, PAPER_FORMULAS
from .queries import BAR, BY_NAME, BenchQuery


def run_solver(q: Query, text: str, solver: str, timeout: float, seed: int = 0) -> Run:
    names = tuple(o.name for o in q.operands) + q.output_names
    r = solve(SolveJob(text, names, timeout=timeout, seed=seed), solver)
    return _as_run(q, r)


def measure(
    q: Query | None, text: str, names: tuple[str, ...], solver: str, args: argparse.Namespace
) -> Cell:
    """--repeat runs of one solver, run i with seed i (only one when the first takes
    longer than --slow)."""
    c = Cell(solver)
    for i in range(args.repeat):
        r = solve(SolveJob(text, names, timeout=args.timeout, seed=i), solver)
        c.runs.append(_as_run(q, r))
        if not r.answer.definite or (i == 0 and r.seconds > args.slow):
            break
    return c


def measure_if_read(text: str, solver: str, args: argparse.Namespace) -> Cell:
    """`measure` for a formula without a model query, or a skipped cell for a solver that
    lacks one of the formula's theories (Yices and Boolector: no floating-point)."""
    if not all_backends()[solver].reads(text):
        return Cell(solver, skipped="no floating-point theory (pySMT)")
    return measure(None, text, (), solver, args)


def bench(args: argparse.Namespace, solvers: list[str], picked: list[BenchQuery]) -> list[dict]:
    timed_out: dict[tuple[str, str], BenchQuery] = {}
    rows = []
    for bq in picked:
        q = bq.query()
        t0 = time.perf_counter()
        backend, _ = symbolic(q)
        text = smtlib(q)
        build_s = time.perf_counter() - t0
        names = tuple(o.name for o in q.operands) + q.output_names
        cells = []
        for s in solvers:
            prev = timed_out.get((bq.family, s)) if bq.family else None
            if prev is not None and bq.terms > prev.terms and not args.keep_going:
                cells.append(Cell(s, skipped=f"timed out on ({prev.name}) with fewer terms"))
                continue
            c = measure(q, text, names, s, args)
            cells.append(c)
            print(f"  ({bq.name}) {s}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
            if c.best is None and bq.family:
                timed_out.setdefault((bq.family, s), bq)
        rows.append(_row(bq, q, cells, args.timeout, backend.node_count(), len(text), build_s))
    return rows


def _row(bq: BenchQuery, q: Query, cells: list[Cell], timeout: float, nodes, chars, build_s):
    answered = [c for c in cells if c.best is not None]
    answers = {c.answer for c in answered}
    note = ""
    if len(answers) > 1:
        note = "solvers disagree"
    elif answers and answers != {bq.expect}:
        note = f"expected {bq.expect.value}"
    elif any(c.bad_witness for c in cells):
        note = "a witness did not reproduce"
    elif not answers:
        note = "no answer"
    timed = [c for c in answered if c.typical_solver is not None]
    fastest = min(timed, key=lambda c: c.typical_solver) if timed else None
    fastest_wall = min(answered, key=lambda c: c.best) if answered else None
    row = {
        "query": bq.name,
        "title": bq.title,
        "table4": bq.table4,
        "source": bq.source,
        "command": bq.command,
        "variants": list(q.variants),
        "instruction": q.instruction,
        "constraints": [c.describe() for c in q.constraints],
        "goal": q.goal.value,
        "expected": bq.expect.value,
        "terms": bq.terms,
        "nodes": nodes,
        "smtlib_chars": chars,
        "build_s": round(build_s, 4),
        "timeout_s": timeout,
        "cells": [_cell_json(c, timeout) for c in cells],
        "note": note,
    }
    if bq.table4:
        paper_best = bq.paper_best_s
        ours = fastest.typical_solver if fastest else None
        ratio = paper_best / ours if ours else None
        row.update(
            paper_query=bq.paper_query,
            paper_z3_s=bq.paper_z3,
            paper_cvc5_s=bq.paper_cvc5,
            paper_timeout=bq.paper_timeout,
            paper=bq.paper,
            paper_best_s=paper_best,
            bar_s=paper_best / BAR,
            fastest=fastest.solver if fastest else None,
            fastest_solver_s=ours,
            ratio_paper_over_ours=ratio,
            verdict="PASS"
            if not note and ours is not None and ours <= paper_best / BAR
            else "MISS",
        )
    else:
        ok = not note and fastest_wall is not None and fastest_wall.best <= bq.goal_s
        row.update(
            goal_s=bq.goal_s,
            fastest=fastest_wall.solver if fastest_wall else None,
            fastest_s=fastest_wall.best if fastest_wall else None,
            verdict="PASS" if ok else "MISS",
        )
    return row


def calibrate(args: argparse.Namespace, solvers: list[str], picked: list[str]) -> list[dict]:
    """The paper's own formulas (PAPER_FORMULAS) timed like our queries (no model to
    re-check: the text declares floating-point constants)."""
    out = []
    for name, (what, formula) in PAPER_FORMULAS.items():
        if name not in picked:
            continue
        bq = BY_NAME[name]
        text = formula()
        cells = []
        for s in solvers:
            c = measure_if_read(text, s, args)
            cells.append(c)
            print(f"  paper {name} {s}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
        timed = [c for c in cells if c.typical_solver is not None]
        fastest = min(timed, key=lambda c: c.typical_solver) if timed else None
        answers = {c.answer for c in cells if c.best is not None}
        out.append(
            {
                "query": name,
                "table4": bq.table4,
                "formula": what,
                "smtlib": text,
                "cells": [_cell_json(c, args.timeout) for c in cells],
                "answers": sorted(a.value for a in answers),
                "paper_z3_s": bq.paper_z3,
                "paper_cvc5_s": bq.paper_cvc5,
                "paper_best_s": bq.paper_best_s,
                "fastest": fastest.solver if fastest else None,
                "fastest_solver_s": fastest.typical_solver if fastest else None,
                "ratio_paper_over_ours": (
                    bq.paper_best_s / fastest.typical_solver if fastest else None
                ),
            }
        )
    return out


def floor(args: argparse.Namespace, solvers: list[str]) -> list[dict]:
    """FLOOR_FORMULAS timed like the queries, on every solver."""
    out = []
    for name, (what, text) in FLOOR_FORMULAS.items():
        cells = []
        for sv in solvers:
            c = measure_if_read(text, sv, args)
            cells.append(c)
            print(f"  floor {name} {sv}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
        out.append(
            {
                "formula": name,
                "what": what,
                "smtlib": text,
                "cells": [_cell_json(c, args.timeout) for c in cells],
            }
        )
    return out
