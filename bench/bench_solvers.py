"""Solver times on the project's key queries, beside paper 000's Table 4, and an encoding study.

Run with `python bench/bench_solvers.py` (or `make bench-solvers`). For each query and
each installed solver it prints the wall time of one solver run (a fresh child process
per run, start-up and parsing included: `tensorcore_smt.solvers.solve`), the best of
--repeat runs and their median, next to the time paper 000 reports for the same question
(Table 4: Z3 4.8.9 and cvc5 1.0.2 on a 32-core AMD EPYC 7502P, 6 h timeout), the goal
on this machine, the ratio paper / ours for the fastest solver, and PASS or MISS. Every
sat answer is re-run on the concrete interpreter (`tensorcore_smt.query.recheck`).

A solver that times out on a query is not run on the later queries with more terms (they
are larger instances of the same question); --keep-going runs it anyway.

`python bench/bench_solvers.py --study` measures what each encoding choice buys instead
(docs/encoding.md writes the results up): fixed inputs as constants or as equations,
sign symmetry, exponent windows, the carry register, DAG sharing, and solver options.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV, Bool
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, Term
from tensorcore_smt.formats import Format, decode, to_float
from tensorcore_smt.model import dot_add
from tensorcore_smt.query import (
    Constraint,
    ConstraintKind,
    Goal,
    Query,
    build,
    make_query,
    recheck,
    smtlib,
    symbolic,
    trivially_unsat,
)
from tensorcore_smt.solvers import Answer, SolveJob, SolveResult, available, solve

PAPER = "paper 000, Table 4 (Z3 4.8.9 / cvc5 1.0.2, 32-core AMD EPYC 7502P, 6 h timeout)"
SIX_HOURS = 6 * 3600.0
GRACE_S = 5.0  # seconds past its limit before a study child is killed


@dataclass(frozen=True)
class BenchQuery:
    """One benchmark question and what we compare it with."""

    name: str
    title: str
    x: str
    y: str
    instr: str | None
    goal: Goal
    terms: int  # products + c in one fused group
    expect: Answer
    goal_s: float
    paper: str = "—"  # the Table 4 figure as printed there
    paper_best_s: float | None = None  # the paper's fastest solver, seconds
    paper_lower_bound: bool = False  # the paper's figure is a timeout

    def query(self, constraints: tuple[Constraint, ...] = ()) -> Query:
        return make_query(self.x, self.y, self.instr, self.goal, constraints, self.name)

    @property
    def command(self) -> str:
        verb = "diff" if self.goal == Goal.DIFFER else "prove"
        instr = f" --instr {self.instr}" if self.instr else ""
        return f"tcsmt {verb} {self.x} '{self.y}'{instr}"


QUERIES = [
    BenchQuery(
        "a",
        "5 terms F=23 (Volta): 2 vs 3 carry bits",
        "volta",
        "volta[carry_bits=2]",
        None,
        Goal.DIFFER,
        5,
        Answer.SAT,
        2.0,
        "3 Carry Bits: z3 410.25 s, cvc5 72.793 s",
        72.793,
    ),
    BenchQuery(
        "c",
        "prove 5 terms 3 = 4 carry bits (Volta)",
        "volta",
        "volta[carry_bits=4]",
        None,
        Goal.EQUIVALENT,
        5,
        Answer.UNSAT,
        2.0,
    ),
    BenchQuery(
        "b",
        "9 terms F=24 (Ampere): 3 vs 4 carry bits",
        "ampere",
        "ampere[carry_bits=3]",
        "m16n8k8.f32.f16.f16.f32",
        Goal.DIFFER,
        9,
        Answer.SAT,
        10.0,
        "4 Carry Bits (Ampere): timeout 6 h (both)",
        SIX_HOURS,
        True,
    ),
    BenchQuery(
        "e9",
        "prove 9 terms 4 = 5 carry bits (Ampere)",
        "ampere",
        "ampere[carry_bits=5]",
        "m16n8k8.f32.f16.f16.f32",
        Goal.EQUIVALENT,
        9,
        Answer.UNSAT,
        10.0,
    ),
    BenchQuery(
        "d",
        "17 terms F=25 (Hopper): 4 vs 5 carry bits",
        "hopper",
        "hopper[carry_bits=4]",
        "m16n8k16.f32.f16.f16.f32",
        Goal.DIFFER,
        17,
        Answer.SAT,
        60.0,
    ),
    BenchQuery(
        "e17",
        "prove 17 terms 5 = 6 carry bits (Hopper)",
        "hopper",
        "hopper[carry_bits=6]",
        "m16n8k16.f32.f16.f16.f32",
        Goal.EQUIVALENT,
        17,
        Answer.UNSAT,
        60.0,
    ),
]
BY_NAME = {q.name: q for q in QUERIES}


# --- machine ---------------------------------------------------------------------------


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def solver_versions(solvers: list[str]) -> dict[str, str]:
    """Each solver's own version string (asked in a child, like every solver call)."""
    out = {}
    for s in solvers:
        r = solve(SolveJob("(declare-fun v () (_ BitVec 1))\n", ("v",), timeout=10), s)
        out[s] = r.version or available().get(s, "?")
    return out


def print_machine(info: dict, versions: dict[str, str]) -> None:
    load = info.get("load_average")
    load_s = " / ".join(f"{x:.2f}" for x in load) if load else "?"
    print(
        f"machine: {info['cores']} cores, {info['cpu']}, {info['memory_gib']} GiB, "
        f"Python {info['python']}; load average at start {load_s} (1/5/15 min)"
    )
    print("solvers: " + ", ".join(f"{k} {v}" for k, v in versions.items()))


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Run:
    answer: Answer
    seconds: float
    reason: str = ""
    reproduces: bool | None = None  # sat only: the concrete re-check


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
        d = self.definite
        return min(r.seconds for r in d) if d else None

    @property
    def median(self) -> float | None:
        if self.runs and len(self.definite) == len(self.runs):
            return statistics.median(r.seconds for r in self.runs)
        return None

    @property
    def bad_witness(self) -> bool:
        return any(r.reproduces is False for r in self.runs)


def run_solver(q: Query, text: str, solver: str, timeout: float, seed: int = 0) -> Run:
    names = tuple(o.name for o in q.operands) + q.output_names
    r = solve(SolveJob(text, names, timeout=timeout, seed=seed), solver)
    return _as_run(q, r)


def _as_run(q: Query, r: SolveResult) -> Run:
    run = Run(r.answer, r.seconds, r.reason)
    if r.answer == Answer.SAT:
        run.reproduces = recheck(q, r.model).reproduces
    return run


def fmt_s(x: float) -> str:
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 10:
        return f"{x:.1f} s"
    return f"{x:.2f} s"


def cell_text(c: Cell, timeout: float) -> str:
    if c.skipped:
        return "not run"
    if c.best is None:
        reasons = {r.reason for r in c.runs}
        if all("timeout" in x for x in reasons):
            return f"> {timeout:g} s"
        return "unknown: " + "; ".join(sorted(reasons))[:40]
    text = fmt_s(c.best)
    if c.median is not None and len(c.runs) > 1:
        text += f" (med {fmt_s(c.median)})"
    tag = c.answer.value
    if c.answer == Answer.SAT:
        tag += " BAD" if c.bad_witness else " ok"
    return f"{text} {tag}"


def bench(args: argparse.Namespace, solvers: list[str]) -> list[dict]:
    picked = [q for q in QUERIES if not args.only or q.name in args.only]
    timed_out: dict[str, BenchQuery] = {}
    rows = []
    for bq in picked:
        q = bq.query()
        t0 = time.perf_counter()
        backend, _ = symbolic(q)
        text = smtlib(q)
        build_s = time.perf_counter() - t0
        cells = []
        for s in solvers:
            c = Cell(s)
            cells.append(c)
            prev = timed_out.get(s)
            if prev is not None and bq.terms > prev.terms and not args.keep_going:
                c.skipped = f"timed out on ({prev.name}) with fewer terms"
                continue
            for _ in range(args.repeat):
                c.runs.append(run_solver(q, text, s, args.timeout))
                print(f"  ({bq.name}) {s}: {cell_text(c, args.timeout)}", file=sys.stderr)
            if c.best is None and s not in timed_out:
                timed_out[s] = bq
        rows.append(_row(bq, cells, args.timeout, backend.node_count(), len(text), build_s))
    return rows


def _row(bq: BenchQuery, cells: list[Cell], timeout: float, nodes, chars, build_s) -> dict:
    answered = [c for c in cells if c.best is not None]
    answers = {c.answer for c in answered}
    fastest = min(answered, key=lambda c: c.best) if answered else None
    ok = (
        fastest is not None
        and answers == {bq.expect}
        and not any(c.bad_witness for c in cells)
        and fastest.best <= bq.goal_s
    )
    note = ""
    if len(answers) > 1:
        note = "solvers disagree"
    elif answers and answers != {bq.expect}:
        note = f"expected {bq.expect.value}"
    elif any(c.bad_witness for c in cells):
        note = "a witness did not reproduce"
    ratio = None
    if fastest is not None and bq.paper_best_s is not None:
        ratio = bq.paper_best_s / fastest.best
    return {
        "query": bq.name,
        "title": bq.title,
        "command": bq.command,
        "variants": [bq.x, bq.y],
        "instruction": bq.query().instruction,
        "goal": bq.goal.value,
        "expected": bq.expect.value,
        "terms": bq.terms,
        "goal_s": bq.goal_s,
        "paper": bq.paper,
        "paper_best_s": bq.paper_best_s,
        "paper_lower_bound": bq.paper_lower_bound,
        "nodes": nodes,
        "smtlib_chars": chars,
        "build_s": round(build_s, 4),
        "timeout_s": timeout,
        "cells": [
            {
                "solver": c.solver,
                "skipped": c.skipped,
                "answer": c.answer.value,
                "best_s": c.best,
                "median_s": c.median,
                "runs": [
                    {
                        "answer": r.answer.value,
                        "seconds": round(r.seconds, 3),
                        "reason": r.reason,
                        "reproduces": r.reproduces,
                    }
                    for r in c.runs
                ],
                "text": cell_text(c, timeout),
            }
            for c in cells
        ],
        "fastest": fastest.solver if fastest else None,
        "fastest_s": fastest.best if fastest else None,
        "ratio_paper_over_ours": ratio,
        "verdict": "PASS" if ok else "MISS",
        "note": note,
    }


def print_table(rows: list[dict], solvers: list[str], timeout: float) -> None:
    header = ["query", "answer", *solvers, PAPER.split(" (")[0], "goal", "paper/ours", "vs goal"]
    body = []
    for r in rows:
        ratio = r["ratio_paper_over_ours"]
        if ratio is None:
            ratio_s = "—"
        else:
            ratio_s = ("> " if r["paper_lower_bound"] else "") + f"{ratio:,.0f}x ({r['fastest']})"
        verdict = r["verdict"] + (f" ({r['note']})" if r["note"] else "")
        answer = r["expected"] if not r["note"] else "?"
        body.append(
            [
                f"({r['query']}) {r['title']}",
                answer,
                *[c["text"] for c in r["cells"]],
                r["paper"],
                f"<= {r['goal_s']:g} s",
                ratio_s,
                verdict,
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print(line)
    for b in body:
        print("  ".join(str(x).ljust(w) for x, w in zip(b, widths)).rstrip())
    print(line)
    print(
        f"times: wall seconds of one solver run in a fresh child process (start-up and parsing "
        f"included), best of the runs; 'med' the median; '> {timeout:g} s' no answer within the "
        f"timeout; 'not run' after a timeout on a query with fewer terms (--keep-going runs it)"
    )
    print(
        "sat ok: the witness re-checked on the concrete interpreter reproduces (BAD: it does "
        "not); paper/ours: the paper's fastest solver over our fastest"
    )
    print(f"paper figures: {PAPER}; '—': the paper gives no time for the query")
    print(
        "  Table 4 row '3 Carry Bits' is (a); its row '4 Carry Bits (Ampere)' is '-' (no answer "
        "within 6 h), i.e. (b); the paper states (c) in its section 4 without a time"
    )
    print("queries:")
    for r in rows:
        print(f"  ({r['query']}) {r['command']}    [{r['instruction']}, {r['terms']} terms]")


# --- study helpers -----------------------------------------------------------------------


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


def run_text(r: Run | None, timeout: float) -> str:
    if r is None:
        return "—"
    if not r.answer.definite:
        return f"> {timeout:g} s" if "timeout" in r.reason else f"unknown ({r.reason[:40]})"
    tag = r.answer.value
    if r.reproduces is not None:
        tag += " ok" if r.reproduces else " BAD"
    return f"{fmt_s(r.seconds)} {tag}"


def study_solvers(solvers: list[str]) -> list[str]:
    return [s for s in ("bitwuzla", "z3") if s in solvers]


# --- studies -----------------------------------------------------------------------------


def witness_for(bq: BenchQuery, timeout: float) -> dict[str, int]:
    q = bq.query()
    names = tuple(o.name for o in q.operands) + q.output_names
    r = solve(SolveJob(smtlib(q), names, timeout=timeout), "bitwuzla")
    if r.answer != Answer.SAT or not recheck(q, r.model).reproduces:
        raise RuntimeError(f"no re-checked witness for ({bq.name}): {r.answer.value} {r.reason}")
    return r.model


def study_fixed(args, solvers) -> dict:
    """(i) fixed inputs as constants (the current encoding) vs as equations."""
    out = []
    body = []
    wit_a = witness_for(BY_NAME["a"], args.timeout)
    wit_b = witness_for(BY_NAME["b"], args.timeout)
    witness = {"a": wit_a, "c": wit_a, "b": wit_b}
    for name in ("a", "b", "c"):
        bq = BY_NAME[name]
        q0 = bq.query()
        fixes = tuple(
            Constraint(ConstraintKind.FIX, o.name, bits=witness[name][o.name])
            for o in q0.operands
            if o.name != "c"
        )
        q = bq.query(fixes)
        s_const, _ = symbolic(q)
        variants = [
            ("all inputs free (reference)", q0, smtlib(q0), symbolic(q0)[0].node_count()),
            ("a, b fixed: constants (current)", q, smtlib(q), s_const.node_count()),
            ("a, b fixed: equations", q, *with_equalities(q)),
        ]
        for label, qq, text, nodes in variants:
            runs = {s: seeded(qq, text, s, args) for s in study_solvers(solvers)}
            body.append(
                [f"({name})", label, nodes, f"{len(text):,}"]
                + [_seed_text(runs.get(s), args.timeout) for s in ("bitwuzla", "z3")]
            )
            out.append(
                {
                    "query": name,
                    "variant": label,
                    "nodes": nodes,
                    "chars": len(text),
                    "runs": {s: [_run_json(r) for r in rs] for s, rs in runs.items()},
                }
            )
    study_table(
        f"(i) Fixed inputs: constants or equations ({_seeds(args)}: best / median)",
        ["query", "encoding", "nodes", "SMT-LIB chars", "bitwuzla", "z3"],
        body,
        [
            "a and b fixed to the bits of a re-checked bitwuzla witness of (a) (used for (c) "
            "too) or of (b); c stays free. 'nodes': the symbolic backend's node table."
        ],
    )
    return {"fixed": out}


def study_sign(args, solvers) -> dict:
    """(ii) sign symmetry: c >= 0, and a solver check of its premise (oddness)."""
    out = {"restriction": [], "oddness": []}
    body = []
    pos = (Constraint(ConstraintKind.POSITIVE, "c"),)
    for name in ("a", "b", "c"):
        bq = BY_NAME[name]
        for label, q in (("none", bq.query()), ("c >= 0", bq.query(pos))):
            text = smtlib(q)
            runs = {s: seeded(q, text, s, args) for s in study_solvers(solvers)}
            body.append(
                [f"({name})", label]
                + [_seed_text(runs.get(s), args.timeout) for s in ("bitwuzla", "z3")]
            )
            out["restriction"].append(
                {
                    "query": name,
                    "constraint": label,
                    "runs": {s: [_run_json(r) for r in rs] for s, rs in runs.items()},
                }
            )
    study_table(
        f"(ii) Sign symmetry: c >= 0 ({_seeds(args)}: best / median)",
        ["query", "restriction", "bitwuzla", "z3"],
        body,
        [],
    )
    body = []
    for variant, instr in (
        ("volta", None),
        ("volta[carry_bits=2]", None),
        ("volta[carry_bits=4]", None),
        ("volta[carry_bits=2,carry_overflow=renormalize]", None),
        ("volta[rounding=rtn]", None),
        ("ampere", "m16n8k8.f32.f16.f16.f32"),
        ("ampere[carry_bits=3]", "m16n8k8.f32.f16.f16.f32"),
    ):
        text, q, concrete = oddness_query(variant, instr)
        names = tuple(o.name for o in q.operands)
        r = solve(SolveJob(text, names, timeout=args.timeout), "bitwuzla")
        run = Run(r.answer, r.seconds, r.reason)
        example = ""
        if r.answer == Answer.SAT:
            run.reproduces, f_x, f_mx = concrete(r.model)
            d_fmt = q.p.d_fmt
            example = ", ".join(f"{k}={r.model[k]:#x}" for k in names if k in r.model)
            example += (
                f"; f(a, b, c) = {f_x:#x} ({decode_value(f_x, d_fmt)}), "
                f"f(-a, b, -c) = {f_mx:#x} ({decode_value(f_mx, d_fmt)})"
            )
        print(f"  odd {variant}: {run_text(run, args.timeout)}", file=sys.stderr)
        verdict = {Answer.UNSAT: "odd", Answer.SAT: "not odd"}.get(r.answer, "?")
        shown = example.split("; ")[-1] if example else ""
        body.append([f"`{variant}`", verdict, run_text(run, args.timeout), shown])
        out["oddness"].append(
            {
                "variant": variant,
                "answer": r.answer.value,
                "run": _run_json(run),
                "example": example,
            }
        )
    study_table(
        "(ii b) Is f(-a, b, -c) = -f(a, b, c) for every input? (bitwuzla)",
        ["variant", "verdict", "bitwuzla", "counterexample (outputs)"],
        body,
        [
            "unsat = odd: negating every a_k and c negates the output (or both are NaN, or "
            "both zero). 'sat ok': a counterexample the concrete interpreter reproduces."
        ],
    )
    return {"sign": out}


WINDOWS = [
    ("a", "ab=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 15, 15),)),
    ("a", "abc=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 15, 15),)),
    ("a", "abc=0:0", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 0, 0),)),
    (
        "a",
        "ab=0:0, c=1:1",
        (
            Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 0, 0),
            Constraint(ConstraintKind.EXPONENT_WINDOW, "c", 1, 1),
        ),
    ),
    ("b", "ab=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 15, 15),)),
    ("b", "abc=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 15, 15),)),
    ("b", "abc=0:0", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 0, 0),)),
    (
        "b",
        "ab=0:0, c=1:1",
        (
            Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 0, 0),
            Constraint(ConstraintKind.EXPONENT_WINDOW, "c", 1, 1),
        ),
    ),
]


def study_window(args, solvers) -> dict:
    """(iii) exponent windows: a restriction can turn a satisfiable query unsat."""
    out = []
    body = []
    for name, label, cons in [(n, "none", ()) for n in ("a", "b")] + WINDOWS:
        bq = BY_NAME[name]
        q = bq.query(cons)
        r = timed(q, smtlib(q), "bitwuzla", args.timeout)
        body.append([f"({name})", label, run_text(r, args.timeout)])
        out.append({"query": name, "window": label, "run": _run_json(r)})
    study_table(
        "(iii) Exponent windows (bitwuzla)",
        ["query", "--exponent-window", "bitwuzla"],
        body,
        [
            "A window LO:HI keeps zero or 2^LO <= |x| < 2^(HI+1) for the inputs named; "
            "fp16 normal exponents are -14..15."
        ],
    )
    return {"window": out}


def static_variant(variant: str, instr: str | None) -> str:
    """The variant a static bound would build: the unbounded accumulator when the sum of
    n terms each below 2^int_bits units can never reach 2^(int_bits + carry_bits)."""
    p = make_query(variant, variant, instr).p
    if p.carry_bits is not None and min(p.L, p.K) + 1 <= (1 << p.carry_bits):
        base = variant.split("[")[0]
        over = variant[len(base) :].strip("[]")
        kept = [x for x in over.split(",") if x and not x.startswith("carry_bits")]
        return f"{base}[{','.join(kept + ['carry_bits=none'])}]"
    return variant


def study_carry(args, solvers) -> dict:
    """(iv) the carry register: what the solver proves vs what a static bound would fold."""
    out = []
    body = []
    for name in ("a", "c", "b", "e9", "d", "e17"):
        bq = BY_NAME[name]
        q = bq.query()
        p = q.p
        n = min(p.L, p.K) + 1
        sx, sy = static_variant(bq.x, bq.instr), static_variant(bq.y, bq.instr)
        qs = make_query(sx, sy, bq.instr, bq.goal, name=f"{name} static")
        now = {s: timed(q, smtlib(q), s, args.timeout) for s in study_solvers(solvers)}
        t0 = time.perf_counter()
        folded = trivially_unsat(qs)
        fold_s = time.perf_counter() - t0
        if folded:
            static = {s: None for s in study_solvers(solvers)}
            static_text = f"by construction ({fold_s * 1000:.0f} ms)"
        else:
            text = smtlib(qs)
            static = {s: timed(qs, text, s, args.timeout) for s in study_solvers(solvers)}
            static_text = " / ".join(run_text(static[s], args.timeout) for s in static)
        bits = f"carry {p.carry_bits} vs {q.params[1].carry_bits}"
        body.append(
            [
                f"({name})",
                f"{n} terms, {bits}",
                " / ".join(run_text(now[s], args.timeout) for s in now),
                f"`{sx}` vs `{sy}`",
                static_text,
            ]
        )
        out.append(
            {
                "query": name,
                "terms": n,
                "carry_bits": [p.carry_bits, q.params[1].carry_bits],
                "static_variants": [sx, sy],
                "by_construction": folded,
                "fold_s": fold_s,
                "now": {s: _run_json(r) for s, r in now.items()},
                "static": {s: _run_json(r) for s, r in static.items() if r is not None},
            }
        )
    premise = []
    for name, x, instr in (
        ("c'", "volta", None),
        ("e9'", "ampere", "m16n8k8.f32.f16.f16.f32"),
        ("e17'", "hopper", "m16n8k16.f32.f16.f16.f32"),
    ):
        y = static_variant(x, instr)
        q = make_query(x, y, instr, Goal.EQUIVALENT, name=name)
        text = smtlib(q)
        runs = {s: timed(q, text, s, args.timeout) for s in study_solvers(solvers)}
        premise.append(
            [
                f"({name})",
                f"`{x}` = `{y}`",
                " / ".join(run_text(r, args.timeout) for r in runs.values()),
            ]
        )
        out.append(
            {"query": name, "variants": [x, y], "runs": {s: _run_json(r) for s, r in runs.items()}}
        )
    solver_names = " / ".join(study_solvers(solvers))
    study_table(
        "(iv) The carry register: built always (now) or only when a static bound fails",
        ["query", "group", f"now: {solver_names}", "with the static bound", solver_names],
        body,
        [
            "Static bound: a group of n terms, each below 2^int_bits units of 2^e_max, sums "
            "below n * 2^int_bits <= 2^(int_bits + carry_bits) when n <= 2^carry_bits, so the "
            "register can be replaced by the unbounded accumulator (`carry_bits=none`)."
        ],
    )
    study_table(
        "(iv b) The bound's premise, proved by the solver: the preset's register never overflows",
        ["query", "proof", solver_names],
        premise,
        [],
    )
    return {"carry": out}


def study_dag(args, solvers) -> dict:
    """(v) hash-consing: node counts, text size, and the tree the sharing avoids."""
    out = []
    body = []
    for bq in QUERIES:
        q = bq.query()
        t0 = time.perf_counter()
        s, built = symbolic(q)
        text = smtlib(q)
        build_s = time.perf_counter() - t0
        roots = [built.constraint.v, built.goal.v, *(o.v for o in built.outputs)]
        reachable, tree = dag_sizes(roots)
        defs = text.count("(define-fun")
        body.append(
            [
                f"({bq.name})",
                bq.terms,
                s.node_count(),
                reachable,
                defs,
                f"{tree:.2e}",
                f"{len(text):,}",
                f"{build_s * 1000:.0f} ms",
            ]
        )
        out.append(
            {
                "query": bq.name,
                "table_nodes": s.node_count(),
                "reachable_nodes": reachable,
                "define_funs": defs,
                "tree_nodes": tree,
                "chars": len(text),
                "build_s": build_s,
            }
        )
    study_table(
        "(v) DAG sharing",
        [
            "query",
            "terms",
            "node table",
            "reachable",
            "define-funs",
            "as a tree",
            "SMT-LIB chars",
            "build + print",
        ],
        body,
        [
            "'as a tree': nodes of the same formula with every shared subterm repeated at each "
            "use, i.e. the size of the text without sharing (let-free, define-free)."
        ],
    )
    return {"dag": out}


BITWUZLA_CONFIGS = [
    ("default", {}),
    ("ABSTRACTION=false", {"ABSTRACTION": False}),
    ("REWRITE_LEVEL=1", {"REWRITE_LEVEL": 1}),
    ("PREPROCESS=false", {"PREPROCESS": False}),
    ("PP_VARIABLE_SUBST_NORM_BV_INEQ=true", {"PP_VARIABLE_SUBST_NORM_BV_INEQ": True}),
    ("BV_SOLVER=preprop", {"BV_SOLVER": "preprop"}),
    ("SAT_SOLVER=kissat", {"SAT_SOLVER": "kissat"}),
    ("SAT_SOLVER=cms", {"SAT_SOLVER": "cms"}),
]
CVC5_CONFIGS = [
    ("default", {}),
    ("bitblast=eager", {"bitblast": "eager"}),
    ("bitblast=eager, bv-assert-input", {"bitblast": "eager", "bv-assert-input": "true"}),
]


def study_options(args, solvers) -> dict:
    """(vi) solver options, each run in a fresh child through this script's own driver."""
    out = {"bitwuzla": [], "cvc5": []}
    seeds = list(range(args.seeds))
    names = ("a", "b", "c", "d")
    texts = {bq.name: (bq.query(), smtlib(bq.query())) for bq in QUERIES}
    body = []
    if "bitwuzla" in solvers:
        for label, opts in BITWUZLA_CONFIGS:
            row = [f"`{label}`"]
            for n in names:
                q, text = texts[n]
                runs = [drive(q, text, "bitwuzla", opts, args.timeout, sd) for sd in seeds]
                row.append(_seed_text(runs, args.timeout))
                out["bitwuzla"].append(
                    {"config": label, "query": n, "runs": [_run_json(r) for r in runs]}
                )
                if any("not compiled in" in r.reason for r in runs):
                    break
            row += [""] * (len(names) + 1 - len(row))
            body.append(row)
        study_table(
            f"(vi) bitwuzla options ({_seeds(args)}: best / median)",
            ["option", *(f"({n})" for n in names)],
            body,
            [],
        )
    body = []
    if "cvc5" in solvers:
        cnames = ("a", "c", "b", "e9", "d", "e17")
        for label, opts in CVC5_CONFIGS:
            row = [f"`{label}`"]
            timed_out_at = None
            for n in cnames:
                q, text = texts[n]
                if timed_out_at is not None and BY_NAME[n].terms > BY_NAME[timed_out_at].terms:
                    row.append("not run")
                    continue
                r = drive(q, text, "cvc5", opts, args.timeout, 0)
                if not r.answer.definite:
                    timed_out_at = timed_out_at or n
                row.append(run_text(r, args.timeout))
                out["cvc5"].append({"config": label, "query": n, "run": _run_json(r)})
            body.append(row)
        study_table(
            "(vi b) cvc5 options (seed 0)",
            ["option", *(f"({n})" for n in cnames)],
            body,
            [],
        )
    return {"options": out}


def _seeds(args: argparse.Namespace) -> str:
    return "seed 0" if args.seeds == 1 else f"seeds 0..{args.seeds - 1}"


def _seed_text(runs: list[Run] | None, timeout: float) -> str:
    if not runs:
        return "—"
    if len(runs) == 1:
        return run_text(runs[0], timeout)
    bad = [r for r in runs if not r.answer.definite]
    if bad and "not compiled in" in bad[0].reason:
        return "not compiled in"
    if bad:
        return f"> {timeout:g} s ({len(bad)}/{len(runs)})"
    ts = [r.seconds for r in runs]
    answers = {r.answer.value for r in runs}
    tag = "/".join(sorted(answers))
    if runs[0].answer == Answer.SAT:
        tag += " BAD" if any(r.reproduces is False for r in runs) else " ok"
    return f"{fmt_s(min(ts))} / {fmt_s(statistics.median(ts))} {tag}"


def _run_json(r: Run) -> dict:
    return {
        "answer": r.answer.value,
        "seconds": round(r.seconds, 3),
        "reason": r.reason,
        "reproduces": r.reproduces,
    }


# --- the study's own solver driver (options the back ends do not set) ---------------------


def drive(q: Query, text: str, solver: str, opts: dict, timeout: float, seed: int) -> Run:
    """Run `solver` with `opts` on `text` in a fresh child; wall time of the child."""
    names = [o.name for o in q.operands] + list(q.output_names)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        path = Path(tmp) / "query.smt2"
        path.write_text(text)
        cmd = [sys.executable, __file__, "--driver", solver, str(path), json.dumps(opts)]
        cmd += [repr(timeout), str(seed), ",".join(names)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout + GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Run(Answer.UNKNOWN, time.monotonic() - t0, f"timeout after {timeout:g} s")
        seconds = time.monotonic() - t0
    try:
        data = json.loads(stdout.decode().strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = stderr.decode(errors="replace").strip().splitlines()
        return Run(Answer.UNKNOWN, seconds, err[-1][:200] if err else f"exit {proc.returncode}")
    run = Run(Answer(data["answer"]), seconds, data.get("reason", ""))
    if run.answer == Answer.SAT:
        run.reproduces = recheck(q, {k: int(v) for k, v in data["model"].items()}).reproduces
    print(f"  {q.name} {solver} {opts} seed {seed}: {run_text(run, timeout)}", file=sys.stderr)
    return run


def driver_main(argv: list[str]) -> int:
    solver, path, opts_json, timeout_s, seed_s, names_s = argv
    opts, timeout, seed = json.loads(opts_json), float(timeout_s), int(seed_s)
    names = [n for n in names_s.split(",") if n]
    text = Path(path).read_text()
    out: dict = {"answer": "unknown", "model": {}, "reason": ""}
    try:
        from tensorcore_smt.solvers.backends import BACKENDS

        answer, model, reason = BACKENDS[solver].solve(
            text, names, timeout, seed, extra_options=opts
        )
        out.update(answer=answer, model={k: str(v) for k, v in model.items()})
        if reason:
            out["reason"] = reason
    except Exception as e:  # noqa: BLE001 - reported to the parent as the reason
        out["reason"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
    print(json.dumps(out))
    return 0


# --- main --------------------------------------------------------------------------------

STUDIES = {
    "fixed": study_fixed,
    "sign": study_sign,
    "window": study_window,
    "carry": study_carry,
    "dag": study_dag,
    "options": study_options,
}
ROMAN = {"i": "fixed", "ii": "sign", "iii": "window", "iv": "carry", "v": "dag", "vi": "options"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--driver"]:
        return driver_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--solvers", help="comma-separated (default: every installed solver)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per solver run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per query and solver")
    ap.add_argument(
        "--only", action="append", help=f"query names, comma-separated ({', '.join(BY_NAME)})"
    )
    ap.add_argument("--keep-going", action="store_true", help="no skipping after a timeout")
    ap.add_argument("--json", type=Path, help="write the raw results to this file")
    ap.add_argument(
        "--study",
        nargs="?",
        const="all",
        help=f"run the encoding study instead: all, or some of {', '.join(STUDIES)} (or i..vi)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds per option in the study")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.only:
        args.only = {n.strip() for x in args.only for n in x.split(",") if n.strip()}
        unknown = args.only - set(BY_NAME)
        if unknown:
            ap.error(f"--only: no query {', '.join(sorted(unknown))}; known: {', '.join(BY_NAME)}")
    inst = available()
    solvers = [s.strip() for s in args.solvers.split(",")] if args.solvers else list(inst)
    missing = [s for s in solvers if s not in inst]
    if missing:
        ap.error(f"not installed: {', '.join(missing)} (installed: {', '.join(inst)})")
    picked: list[str] = []
    if args.study:
        names = list(STUDIES) if args.study == "all" else args.study.split(",")
        for x in names:
            key = ROMAN.get(x.strip().lower(), x.strip().lower())
            if key not in STUDIES:
                ap.error(f"--study: no study {x!r}; known: {', '.join(STUDIES)} (or i..vi)")
            picked.append(key)
    info = machine()
    versions = solver_versions(solvers)
    print_machine(info, versions)
    t0 = time.monotonic()
    result: dict = {"machine": info, "solvers": versions, "timeout_s": args.timeout}
    if picked:
        print(f"encoding study: {', '.join(picked)}; timeout {args.timeout:g} s per run")
        for key in picked:
            result.update(STUDIES[key](args, solvers))
    else:
        print(f"timeout {args.timeout:g} s per run, {args.repeat} run(s) per query and solver\n")
        rows = bench(args, solvers)
        print_table(rows, solvers, args.timeout)
        result.update(repeat=args.repeat, rows=rows)
    elapsed = time.monotonic() - t0
    result["elapsed_s"] = elapsed
    result["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    print(f"\ntotal {elapsed:.0f} s; load average at end {result['load_average_end'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"raw results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
