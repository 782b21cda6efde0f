"""The answer part of query reports, shared by the instruction and GEMM reports
(report.py, gemm_report.py): values in hex and decimal, which solver answered what, the
verdict in words."""

from __future__ import annotations

from fractions import Fraction

from ..formats import Format, format_hex, int_value, to_float, value_of
from ..solvers.result import Answer
from .query import Goal
from .solve import CONSTRUCTED, SEARCH, Outcome, Verdict


def describe(bits: int, fmt: Format) -> str:
    """`0x3f800000 (1.0)`: hex and an exact decimal rendering (`(~)` marks a rounded one)."""
    return f"{format_hex(bits, fmt)} ({decimal(bits, fmt)})"


def decimal(bits: int, fmt: Format) -> str:
    if fmt.spec.is_integer:
        return str(int_value(bits, fmt))
    v = value_of(bits, fmt)
    if isinstance(v, float):
        return "nan" if v != v else ("-inf" if v < 0 else "inf")
    if v == 0:
        return "-0.0" if str(to_float(bits, fmt)).startswith("-") else "0.0"
    return repr(float(v)) if Fraction(float(v)) == v else f"{float(v)!r} (~)"


def answer_json(o: Outcome, files: list[str]) -> dict:
    """The answer's fields of a JSON report: verdict, time, the method that decided it
    (solver; search: a witness of the concrete search, no solver run; construction;
    argument: a stated argument, smt/arguments.py, whose verdict is
    "unsat-by-argument"), the argument that applied (its kind, steps, extreme rows run
    and any contradiction; null when none did), the concrete search when one ran, every
    solver run and confirmation, the agreeing solvers, the note and the files written."""
    out = {
        "verdict": o.verdict.value,
        "seconds": round(o.seconds, 3),
        "method": o.method,
        "argument": o.argument.to_json() if o.argument is not None else None,
    }
    if o.search is not None:
        out["search"] = o.search.to_json()
    return out | {
        "solver": o.result.to_json() if o.result else None,
        "runs": [r.to_json() for r in o.runs],
        "confirmations": [r.to_json() for r in o.confirmations],
        "agreeing_solvers": agreeing(o),
        "by_construction": o.by_construction,
        "note": o.note,
        "files": files,
    }


def agreeing(o: Outcome) -> list[str]:
    """Solvers that gave the verdict's answer (none for a witness of the search)."""
    want = Answer.SAT if o.verdict in (Verdict.WITNESS, Verdict.BAD_WITNESS) else Answer.UNSAT
    if o.verdict == Verdict.UNKNOWN:
        return []
    rs = ([o.result] if o.result else []) + o.confirmations
    names = []
    for r in rs:
        if r.answer == want and r.solver not in (SEARCH, CONSTRUCTED) and r.solver not in names:
            names.append(r.solver)
    return names


def run_line(r) -> str:
    ver = f" {r.version}" if r.version else ""
    why = f" ({r.reason})" if r.reason else ""
    return f"{r.solver}{ver}: {r.answer.value} in {r.seconds:.2f} s{why}"


def answer_lines(o: Outcome) -> list[str]:
    """The answer part of a report, shared by instruction and GEMM queries: which solver
    answered what, the confirmations, who agreed on an unsat, and the outcome's note."""
    lines: list[str] = []
    s = o.search
    arg = o.argument
    if o.by_construction:
        lines.append(f"answer:      unsat, by {o.method} ({o.note}); no solver needed")
    elif o.argued and arg is not None:
        lines.append(f"answer:      unsat by argument: {arg.kind.title} ({arg.kind.value})")
        for i, step in enumerate(arg.steps):
            lines.append(f"{'argument:' if i == 0 else '':<13}{step}")
        lines.append(
            f"rows:        {arg.rows} extreme rows at the argument's bound, run on the concrete "
            "model: every one as the argument says"
        )
        for r in ([o.result] if o.result else []) + [r for r in o.runs if r is not o.result]:
            lines.append(f"solver:      {run_line(r)}")
    elif o.method == SEARCH:
        lines.append(
            f"answer:      search: sat in {s.seconds:.2f} s (the concrete search, "
            f"{s.rows:,} candidate inputs of the class on the vector interpreter, seed "
            f"{s.seed}); no solver was run"
        )
    elif o.method == CONSTRUCTED:
        lines.append(f"answer:      {o.note}")
    elif o.result:
        if s is not None:
            lines.append(
                f"search:      no witness in {s.rows:,} candidate inputs ({s.seconds:.2f} s), "
                "then the solvers"
            )
        lines.append(f"answer:      {run_line(o.result)}")
        for r in o.runs:
            if r is not o.result:
                lines.append(f"             {run_line(r)}")
    for r in o.confirmations:
        lines.append(f"confirm:     {run_line(r)}")
    if o.verdict == Verdict.UNSAT and not o.by_construction:
        agree = agreeing(o)
        lines.append(
            "agreed:      "
            + (", ".join(agree) if len(agree) > 1 else f"{agree[0]} only (not confirmed)")
        )
    if o.note and not o.by_construction and o.method not in (SEARCH, CONSTRUCTED):
        lines.append(f"note:        {o.note}")
    return lines


def verdict_words(o: Outcome) -> str:
    """The verdict in words; an unsat by argument says so."""
    words = _verdict_words(o)
    if o.verdict == Verdict.UNSAT_BY_ARGUMENT:
        return f"{words} (unsat by argument: {o.argument.kind.title})" if o.argument else words
    return words


def _verdict_words(o: Outcome) -> str:
    q = o.query
    if o.verdict == Verdict.WITNESS:
        if q.goal == Goal.NON_MONOTONE:
            return "X is not monotone: u <= u_2 but X(u_2) < X(u)"
        return (
            "X is more accurate than Y on this input"
            if q.goal == Goal.COMPARE_ERRORS
            else "the variants differ on this input"
        )
    if o.verdict.unsat:
        if q.goal == Goal.COMPARE_ERRORS:
            return "X is never more accurate than Y (under the constraints)"
        if q.goal == Goal.NON_MONOTONE:
            return "proved: X never decreases when its inputs grow as the relation says" + (
                " (under the constraints)" if q.constraints else ""
            )
        return "proved: the variants agree on every input" + (
            " satisfying the constraints" if q.constraints else ""
        )
    if o.verdict == Verdict.BAD_WITNESS:
        return "internal error: a solver witness did not reproduce"
    return "unknown: no solver answered"
