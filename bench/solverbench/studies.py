"""The encoding studies (i)-(v): fixed inputs, sign symmetry, exponent windows, the carry
register and DAG sharing (docs/encoding.md writes them up)."""

from __future__ import annotations

import sys
import time

from tensorcore_smt.smt.query import (
    Constraint,
    ConstraintKind,
    Goal,
    make_query,
    recheck,
    smtlib,
    symbolic,
    trivially_unsat,
)
from tensorcore_smt.solvers import Answer, SolveJob, solve

from .cells import Run, _run_json, run_text
from .queries import BY_NAME, QUERIES, BenchQuery
from .study_tools import (
    _seed_text,
    _seeds,
    dag_sizes,
    decode_value,
    oddness_query,
    seeded,
    study_solvers,
    study_table,
    timed,
    with_equalities,
)


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
