"""The solver-option studies: (vi) bitwuzla's and cvc5's options on the carry-bit queries,
(vii) bitwuzla's on the small queries, each run in a fresh child through the driver."""

from __future__ import annotations

from tensorcore_smt.smt.query import smtlib

from .cells import Run, _run_json, run_text
from .driver import drive
from .queries import BY_NAME, QUERIES, TABLE4
from .study_tools import _seed_text, _seeds, study_table

BITWUZLA_OWN = {"PROP_FIRST": 0, "BV_SOLVER": "bitblast", "PP_NORMALIZE": True}
"""bitwuzla's own defaults in place of the back end's (no local-search phase first,
the normalization pass on): the configuration before study (vii)."""

BITWUZLA_CONFIGS = [
    ("default (PROP_FIRST=250000, BV_SOLVER=preprop, PP_NORMALIZE=false)", {}),
    ("bitwuzla's own (PROP_FIRST=0, BV_SOLVER=bitblast, PP_NORMALIZE=true)", BITWUZLA_OWN),
    ("ABSTRACTION=false", {"ABSTRACTION": False}),
    ("REWRITE_LEVEL=1", {"REWRITE_LEVEL": 1}),
    ("PREPROCESS=false", {"PREPROCESS": False}),
    ("PP_VARIABLE_SUBST_NORM_BV_INEQ=true", {"PP_VARIABLE_SUBST_NORM_BV_INEQ": True}),
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


SMALL_CONFIGS = [
    ("bitwuzla's own: PROP_FIRST=0, BV_SOLVER=bitblast, PP_NORMALIZE=true", BITWUZLA_OWN),
    ("PROP_FIRST=0, BV_SOLVER=bitblast", {"PROP_FIRST": 0, "BV_SOLVER": "bitblast"}),
    ("PROP_FIRST=0, BV_SOLVER=preprop, PP_NORMALIZE=true", {"PROP_FIRST": 0, "PP_NORMALIZE": True}),
    ("PROP_FIRST=0", {"PROP_FIRST": 0}),
    ("PROP_FIRST=100000", {"PROP_FIRST": 100_000}),
    ("default: PROP_FIRST=250000", {}),
    ("PROP_FIRST=1000000", {"PROP_FIRST": 1_000_000}),
]
"""(label, bitwuzla options on top of the back end's): `PROP_FIRST` is the budget of the
local-search phase (0: none), the rest apply to the bit-blasting phase."""


def study_small(args, solvers) -> dict:
    """(vii) bitwuzla options on the Table 4 rows and the carry-bit queries (a), (c),
    (b), (e9): the solver's own query time (solver_s), each run in a fresh child. The
    configurations take turns on each query and seed, so that a change in the machine's
    load during the study reaches them all alike."""
    out = []
    names = [*TABLE4, "c", "e9"]
    runs: dict[tuple[str, str], list[Run]] = {}
    for n in names:
        q = BY_NAME[n].query()
        text = smtlib(q)
        for sd in range(args.seeds):
            for label, opts in SMALL_CONFIGS:
                r = drive(q, text, "bitwuzla", opts, args.timeout, sd)
                runs.setdefault((label, n), []).append(r)
    body = []
    for label, _ in SMALL_CONFIGS:
        row = [f"`{label}`"]
        for n in names:
            rs = runs[(label, n)]
            row.append(_seed_text(rs, args.timeout, solver_s=True))
            out.append({"config": label, "query": n, "runs": [_run_json(r) for r in rs]})
        body.append(row)
    study_table(
        f"(vii) bitwuzla options on small queries (solver_s, {_seeds(args)}: best / median)",
        ["option", *(f"({n})" for n in names)],
        body,
        ["solver_s: parse + check inside the child, the figure Table 4 compares."],
    )
    return {"small": out}
