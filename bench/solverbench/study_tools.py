"""Helpers the encoding studies share: formula text and sizes, the oddness query, study
tables, timed and seeded solver runs."""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable

from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV, Bool
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, Term
from tensorcore_smt.formats import Format, decode, to_float
from tensorcore_smt.model import dot_add
from tensorcore_smt.smt.query import Query, build, make_query
from tensorcore_smt.solvers import Answer

from .cells import Run, fmt_s, run_text
from .run import run_solver


def body_of(roots: list[Term]) -> str:
    """SMT-LIB2 text as the solvers get it (no check-sat)."""
    return to_smtlib(roots).replace("(check-sat)\n", "")


def with_equalities(q: Query) -> tuple[str, int]:
    """The query with a variable for every input, fixed inputs tied by an equation (the
    alternative to the constants `query._symbolic_inputs` uses): text and node count."""
    s = SymbolicBackend()
    inputs = {o.name: s.var(o.name, o.width) for o in q.operands}
    built = build(q, inputs)  # FIX constraints become `input = bits` equations here
    roots = [built.constraint.v, built.goal.v]
    for name, out in zip(q.output_names, built.outputs):
        roots.append(s.var(name, out.w).eq(out).v)
    return body_of(roots), s.node_count()


def dag_sizes(roots: list[Term]) -> tuple[int, int]:
    """Nodes reachable from the roots, and the size of the same formula as a tree
    (every shared node repeated at each use: what the text would be without sharing)."""
    tree: dict[int, int] = {}
    stack = list(roots)
    while stack:
        t = stack[-1]
        if t.uid in tree:
            stack.pop()
            continue
        pending = [a for a in t.args if a.uid not in tree]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        tree[t.uid] = 1 + sum(tree[a.uid] for a in t.args)
    return len(tree), sum(tree[r.uid] for r in roots)


def oddness_query(
    variant: str, instr: str | None
) -> tuple[str, Query, Callable[[dict[str, int]], tuple[bool, int, int]]]:
    """SMT-LIB text whose models are inputs where f(-a, b, -c) is not -f(a, b, c) (and
    not both NaN, not both zero): unsat means the variant is an odd function, the
    premise of the sign-symmetry restriction. Returns text, query and a concrete check."""
    q = make_query(variant, variant, instr)
    p = q.p

    def formula(inputs: dict[str, BV]) -> tuple[Bool, BV, BV]:
        a = [inputs[f"a{i}"] for i in range(p.K)]
        b = [inputs[f"b{i}"] for i in range(p.K)]
        c = inputs["c"]
        sa = 1 << (p.a_fmt.spec.storage - 1)
        sc = 1 << (p.c_fmt.spec.storage - 1)
        sd = 1 << (p.d_fmt.spec.storage - 1)
        out = dot_add(a, b, c, p)
        mirrored = dot_add([x ^ sa for x in a], b, c ^ sc, p)
        u, m = decode(out, p.d_fmt), decode(mirrored, p.d_fmt)
        odd = mirrored.eq(out ^ sd) | (u.is_nan & m.is_nan) | (u.is_zero & m.is_zero)
        return ~odd, out, mirrored

    s = SymbolicBackend()
    inputs = {o.name: s.var(o.name, o.width) for o in q.operands}
    text = body_of([formula(inputs)[0].v])

    def concrete(model: dict[str, int]) -> tuple[bool, int, int]:
        """(the counterexample holds, f(a, b, c), f(-a, b, -c)) on the concrete model."""
        vals = {o.name: BV.const(CONCRETE, model.get(o.name, 0), o.width) for o in q.operands}
        bad, out, mirrored = formula(vals)
        return bool(bad.v), int(out.v), int(mirrored.v)

    return text, q, concrete


def decode_value(bits: int, fmt: Format) -> str:
    """The value of an output bit pattern, for the reader."""
    return repr(to_float(bits, fmt))


def study_table(title: str, header: list[str], body: list[list], notes: list[str]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for b in body:
        print("| " + " | ".join(str(x) for x in b) + " |")
    for n in notes:
        print(f"\n{n}")
    sys.stdout.flush()


def timed(q: Query, text: str, solver: str, timeout: float) -> Run:
    r = run_solver(q, text, solver, timeout)
    print(f"  {q.name or q.slug} {solver}: {run_text(r, timeout)}", file=sys.stderr)
    return r


def seeded(q: Query, text: str, solver: str, args: argparse.Namespace) -> list[Run]:
    """One run per seed 0..--seeds-1 (z3's time in particular depends on the seed)."""
    runs = []
    for seed in range(args.seeds):
        r = run_solver(q, text, solver, args.timeout, seed)
        print(f"  {q.name} {solver} seed {seed}: {run_text(r, args.timeout)}", file=sys.stderr)
        runs.append(r)
    return runs


def study_solvers(solvers: list[str]) -> list[str]:
    return [s for s in ("bitwuzla", "z3") if s in solvers]


def _seeds(args: argparse.Namespace) -> str:
    return "seed 0" if args.seeds == 1 else f"seeds 0..{args.seeds - 1}"


def _seed_text(runs: list[Run] | None, timeout: float, solver_s: bool = False) -> str:
    if not runs:
        return "—"
    if len(runs) == 1 and not solver_s:
        return run_text(runs[0], timeout)
    bad = [r for r in runs if not r.answer.definite]
    if bad and "not compiled in" in bad[0].reason:
        return "not compiled in"
    if bad:
        return f"> {timeout:g} s ({len(bad)}/{len(runs)})"
    ts = [r.solver_s if solver_s and r.solver_s is not None else r.seconds for r in runs]
    answers = {r.answer.value for r in runs}
    tag = "/".join(sorted(answers))
    if runs[0].answer == Answer.SAT:
        tag += " BAD" if any(r.reproduces is False for r in runs) else " ok"
    return f"{fmt_s(min(ts))} / {fmt_s(statistics.median(ts))} {tag}"
