"""Certified intervals on the worst error of a unit: [L, U] with a witness and a proof.

The worst case of a measure (model/measure.py) over an input class is bracketed by two
kinds of solver answers to one question, "is there an input in the class whose
measure exceeds T?" (goal error-exceeds):
 - sat gives a witness. It is re-run on the concrete model (smt/solve.py does that
   before anything is shown) and its measure computed with exact rationals here: L is
   the largest measure a witness attained;
 - unsat, confirmed by a second solver where one answers, proves U = T.
Between them the thresholds are chosen by bisection on the exponent scale (the
geometric mean of L and U, rounded to a dyadic rational of few bits so the constants
stay small), until U <= L (1 + R) or the budget ends. Before an upper bound is known
the threshold grows by factors of 4 from L. An unknown answer proves nothing: the
interval stays open on that side and the report says so, never rounding it into a
claim.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..argtypes import Arg, check_all, check_items, check_type
from ..errors import UserError
from ..formats import value_of
from ..model.measure import Measure, exact_value, measure_value
from ..smt.query import EXACT, Constraint, ConstraintKind, Goal, Query, make_query
from ..smt.solve import Limits, Outcome, Verdict, answer
from ..solvers.result import Answer
from .int_bound import integer_interval, integer_units
from .nodes import up

DEFAULT_RESOLUTION = Fraction(1, 16)
GROWTH = 4
"""Factor by which the threshold grows above L while no upper bound is proved."""
MIN_QUERY_S = 1.0
"""A query is asked only with at least this much of the budget left."""
QUERY_SHARE = 2
"""One question gets at most 1/QUERY_SHARE of the whole budget (at least MIN_QUERY_S),
so that an unknown answer leaves time to ask elsewhere."""
SEARCH_S = 30.0
"""Most seconds the structured search for large errors takes before the solvers."""
MAX_UNKNOWNS = 3
"""Unknown answers in a row after which the search stops."""


class WitnessBug(RuntimeError):
    """A solver's witness that the concrete model does not reproduce (a bug)."""


@dataclass
class Step:
    """One question of the search and its answer."""

    threshold: Fraction
    verdict: Verdict
    solver: str | None
    confirmed_by: str | None
    seconds: float
    measure: Fraction | float | None = None  # the witness's measure (sat)
    sampled_rows: int = 0  # a lower bound from random rows, not a solver question

    def describe(self) -> str:
        who = self.solver or "-"
        if self.sampled_rows:
            what = self.solver or "random rows"
            return f"{what}: best of {self.sampled_rows} at {fmt_value(self.measure)}"
        if self.verdict == Verdict.WITNESS:
            return f"> {fmt_fraction(self.threshold)}: witness ({who}) at {fmt_value(self.measure)}"
        if self.verdict.unsat:
            conf = f", confirmed by {self.confirmed_by}" if self.confirmed_by else ", unconfirmed"
            kind = "unsat by argument" if self.verdict == Verdict.UNSAT_BY_ARGUMENT else "unsat"
            return f"> {fmt_fraction(self.threshold)}: {kind} ({who}{conf})"
        return f"> {fmt_fraction(self.threshold)}: {self.verdict.value}"


@dataclass
class Certificate:
    """The worst measure of X (against the exact result or Y) over the input class lies in
    [lower, upper]: lower attained by `witness`, upper proved (None: not proved)."""

    hypothesis: str
    against: str
    instruction: str
    measure: Measure
    constraints: tuple[Constraint, ...]
    resolution: Fraction
    lower: Fraction | float = Fraction(0)
    upper: Fraction | None = None
    witness: dict[str, int] | None = None
    witness_outputs: tuple[int, int] | None = None
    query: Query | None = None
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    # "solver" (unsat), "argument" (unsat by a stated argument, smt/arguments.py) or
    # "composed" (certify/compose.py)
    upper_method: str | None = None
    argument: list[str] = field(default_factory=list)  # the composed bound's steps

    @property
    def closed(self) -> bool:
        """Whether the interval is narrowed to the resolution: U <= L (1 + R)."""
        if self.upper is None:
            return math.isinf(self.lower) if isinstance(self.lower, float) else False
        if isinstance(self.lower, float):
            return False
        return self.upper <= self.lower * (1 + self.resolution)


def fmt_fraction(x: Fraction) -> str:
    """A threshold as p/q with its float value."""
    return f"{x.numerator}/{x.denominator} ({float(x):.6g})" if x.denominator != 1 else str(x)


def fmt_value(x: Fraction | float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "inf" if math.isinf(x) else repr(x)
    return fmt_fraction(x)


def dyadic_between(lo: Fraction, hi: Fraction) -> Fraction:
    """A dyadic rational m 2^e with few bits in (lo, hi), near their geometric mean (their
    mean when lo is 0): the next threshold of the bisection."""
    if lo <= 0:
        target = hi / 2
    else:
        target = Fraction(math.sqrt(lo * hi)) if hi / lo < 2**60 else lo * 2**30
    if not lo < target < hi:  # the float root of an interval narrower than its precision
        target = (lo + hi) / 2
    # the coarsest dyadic grid on which a multiple of the step lies in (lo, hi)
    e = math.floor(math.log2(hi - lo)) + 1 if hi > lo else 0
    while True:
        step = Fraction(2) ** e
        m = round(target / step)
        t = m * step
        if lo < t < hi:
            return t
        e -= 1


def witness_measure(q: Query, inputs: dict[str, int], outputs: tuple[int, int]):
    """The measure of a re-checked witness, with exact rationals (independent of the
    grid integers the solver was asked about)."""
    p = q.p
    a = [inputs[f"a{i}"] for i in range(p.K)]
    b = [inputs[f"b{i}"] for i in range(p.K)]
    e, n = exact_value(a, b, inputs["c"], (p.a_fmt, p.b_fmt, p.c_fmt))
    ref = e if q.against_exact else value_of(outputs[1], p.d_fmt)
    return measure_value(value_of(outputs[0], p.d_fmt), ref, n, q.measure, p.d_fmt)


def default_class() -> tuple[Constraint, ...]:
    """Finite inputs whose exact magnitudes |c| + sum |a_k b_k| lie in the output
    format's normal range: an overflowing exact result makes every measure infinite, and
    one below the smallest normal number loses its bits to the output format whatever
    the unit does (a result of 1e-75 in fp32 is 0 for every unit: a normwise error of
    1), so neither says anything about the unit's arithmetic; a non-finite input has no
    error to measure."""
    return (
        Constraint(ConstraintKind.FINITE, reason="a non-finite input has no error to measure"),
        Constraint(
            ConstraintKind.NO_OVERFLOW,
            reason="an exact result beyond the output range makes every measure infinite",
        ),
        Constraint(
            ConstraintKind.NO_UNDERFLOW,
            reason="magnitudes below the output's normal range are lost to its format",
        ),
    )


def make_bound_query(
    hypothesis: str,
    against: str | None,
    instr: str | None,
    measure: Measure,
    constraints: tuple[Constraint, ...],
    threshold: Fraction = Fraction(0),
    meta: Sequence[int] | None = None,
    against_instr: str | None = None,
) -> Query:
    """The error-exceeds query of a bound (UserError for bad variants or classes); a
    sparse instruction's for the metadata `meta` (smt/query.with_meta); `against_instr`:
    the reference variant's instruction where it is not `instr`."""
    q = make_query(
        hypothesis,
        against or EXACT,
        instr,
        Goal.ERROR_EXCEEDS,
        constraints,
        measure=measure,
        threshold=threshold,
        meta=meta,
        instr_b=against_instr,
    )
    if q.p.scale_fmt is not None:
        raise UserError(
            f"{q.instruction} is block-scaled: bounds of scaled instructions are not modelled "
            "(the exact reference has no scale factors)"
        )
    return q


def _with_threshold(q: Query, t: Fraction) -> Query:
    from dataclasses import replace

    return replace(q, threshold=t)


def bound(
    hypothesis: str,
    against: str | None = None,
    *,
    instr: str | None = None,
    measure: Measure | str = Measure.NORMWISE,
    constraints: tuple[Constraint, ...] | None = None,
    resolution: Fraction | float = DEFAULT_RESOLUTION,
    timeout: float = 300.0,
    limits: Limits | None = None,
    progress=None,
    on_step=None,
    check_class: bool = True,
    sample_rows: int = 1000,
    search_share: float = 0.2,
    meta: Sequence[int] | None = None,
    against_instr: str | None = None,
) -> Certificate:
    """The certified interval of `hypothesis`'s worst `measure` against the exact result
    (or against the variant `against`) over the class `constraints` (default: finite
    inputs, no overflow). `timeout` is the budget of the whole search; `limits` picks the
    solvers; `search_share` of it (at most SEARCH_S) goes to the structured search for
    large errors (extremal.py) before the solvers. Ctrl-C ends the search with the
    interval found so far (`interrupted`). `meta`: a sparse (mma.sp) instruction's
    metadata (default: the first pattern in every group). `against_instr`: the
    instruction of `against` where it is not `instr` (one shape and operand formats:
    e.g. A100's mma.sync bf16 against H100's wgmma bf16)."""
    _check_arguments(hypothesis, against, instr, measure, constraints, resolution, timeout, meta)
    check_all("bound", [("against_instr", against_instr, Arg.TEXT, True)])
    if isinstance(measure, str):
        try:
            measure = Measure.parse(measure)
        except ValueError as e:
            raise UserError(str(e)) from None
    resolution = Fraction(resolution.strip() if isinstance(resolution, str) else resolution)
    if resolution <= 0:
        raise UserError(f"resolution {resolution} must be positive")
    t0 = time.monotonic()  # the budget counts from here: the class check is part of it
    deadline = t0 + timeout
    from .classes import UNRESOLVED, class_is_empty, resolve_fixes

    cons = default_class() if constraints is None else tuple(constraints)
    unfixed = tuple(
        c for c in cons if not (c.kind == ConstraintKind.FIX and c.operands == UNRESOLVED)
    )
    kw = {"meta": meta, "against_instr": against_instr}
    q0 = make_bound_query(hypothesis, against, instr, measure, unfixed, **kw)
    cons = resolve_fixes(cons, q0)
    q0 = make_bound_query(hypothesis, against, instr, measure, cons, **kw)
    cons = q0.constraints
    if integer_units(q0):  # exact by argument, at once (certify/int_bound.py)
        return _integer_certificate(hypothesis, against, q0, resolution, t0)
    limits = limits or Limits()
    if check_class and class_is_empty(q0, limits):
        raise UserError(
            "the input class is empty: no input satisfies " + " ".join(c.describe() for c in cons)
        )
    cert = Certificate(
        hypothesis,
        against or EXACT,
        q0.instruction,
        measure,
        cons,
        resolution,
        query=q0,
    )
    _compose_upper(cert, q0, against, cons)
    t = Fraction(0)
    try:
        if cert.upper is None:
            _seed_from_overflow(cert, q0, on_step)
        if sample_rows > 0 and not cert.closed:
            t = _seed_from_sample(cert, q0, sample_rows, on_step)
        if search_share > 0 and not cert.closed:
            share = min(SEARCH_S, timeout * search_share, max(0.0, deadline - time.monotonic()))
            t = _seed_from_search(cert, q0, share, on_step) or t
        while not cert.closed:
            left = deadline - time.monotonic()
            if left < MIN_QUERY_S:
                break
            q = _with_threshold(q0, t)
            left = min(left, max(MIN_QUERY_S, timeout / QUERY_SHARE))
            lim = Limits(
                limits.solver, left, limits.jobs, limits.memory_mb, limits.confirm, limits.seed
            )
            o = answer(q, lim, progress)
            step = _record(cert, q, o, t)
            if on_step:
                on_step(step)
            if o.verdict == Verdict.BAD_WITNESS:
                raise WitnessBug(
                    "a solver's witness does not reproduce on the concrete model; please "
                    "report this bound"
                )
            if cert.closed:
                break
            nxt = _next_threshold(cert, t, o.verdict)
            if nxt is None:
                break
            t = nxt
    except KeyboardInterrupt:
        cert.interrupted = True
    cert.seconds = time.monotonic() - t0
    if cert.upper is not None and cert.witness is not None and cert.lower > cert.upper:
        raise WitnessBug(
            f"a witness's measure {fmt_value(cert.lower)} exceeds the proved upper bound "
            f"{fmt_value(cert.upper)} ({cert.upper_method}); please report this bound"
        )
    return cert


def _integer_certificate(
    hypothesis: str, against: str | None, q: Query, resolution: Fraction, started: float
) -> Certificate:
    """[0, 0], closed, by the integer argument (certify/int_bound.py), at once: one step,
    error > 0 unsat by argument, whose edge rows reproduce on the concrete model."""
    import shlex

    cmd = f"tcsmt exact {shlex.quote(hypothesis)} --instr {shlex.quote(q.instruction)}"
    lines, bad = integer_interval(q, [hypothesis] + ([against] if against else []), cmd)
    if bad is not None:
        raise WitnessBug(bad)
    cert = Certificate(hypothesis, q.variants[1], q.instruction, q.measure, q.constraints,
                       resolution, Fraction(0), Fraction(0), query=q, upper_method="argument",
                       argument=lines)  # fmt: skip
    cert.seconds = time.monotonic() - started
    rows = "its edge rows on the concrete model"
    step = Step(Fraction(0), Verdict.UNSAT_BY_ARGUMENT, "integer argument", rows, cert.seconds)
    cert.steps.append(step)
    return cert


def _check_arguments(hypothesis, against, instr, measure, constraints, resolution, timeout, meta):
    """UserError naming the first argument of `bound` of a wrong type or out of range."""
    check_all(
        "bound",
        [
            ("hypothesis", hypothesis, Arg.TEXT, False),
            ("against", against, Arg.TEXT, True),
            ("instr", instr, Arg.TEXT, True),
            ("resolution", resolution, Arg.RATIONAL, False),
            ("timeout", timeout, Arg.POSITIVE, False),
            ("meta", meta, Arg.INTEGERS, True),
        ],
    )
    check_type("bound: measure", measure, (Measure, str), "a Measure or its name")
    if constraints is not None:
        check_items(
            "bound: constraints", constraints, Constraint, "Constraint (inputs.parse_where)"
        )


def one_sign(cons) -> bool:
    """Whether the class keeps every input nonnegative (--where positive on a, b and c):
    then every term has one sign and |e| = |c| + sum |a_k b_k| = M."""
    covered = set()
    for c in cons:
        if c.kind == ConstraintKind.POSITIVE:
            covered |= set(c.operands)
    return set("abc") <= covered


def _compose_upper(cert: Certificate, q: Query, against: str | None, cons) -> None:
    """The composed upper bound (certify/compose.py) when its preconditions hold: the
    normwise U_X against the exact result, U_X + U_Y between two variants (|d_X - d_Y|
    <= |d_X - e| + |e - d_Y|). Over a class of one sign (one_sign: |e| = M) it also
    bounds rel and ulp: rel = normwise against e; against Y, |d_Y| >= M (1 - U_Y); and
    ulp(r) > 2^-p |r| (p: d's precision; r in its binade [2^E, 2^(E+1)), ulp 2^(E-p+1)),
    so ulp <= 2^p rel. A sparse instruction's bound is its dense unit's
    (model/sparse.dense_params): the unit on the selected products, or on all K with
    the others +0, a subset of that unit's inputs either way."""
    from ..model.sparse import dense_params
    from .compose import Argument, instruction_bound
    from .zero_products import exact_lines, why_not_exact

    names = [cert.hypothesis] + ([against] if against is not None else [])
    units = [dense_params(p) for p in q.params[: len(names)]]
    if all(why_not_exact(p, cons) is None for p in units):
        # every product fixed to zero and d = c on each side (zero_products.py): every
        # measure of d against the exact result c, or against the other side's d = c, is 0
        cert.upper, cert.upper_method = Fraction(0), "composed"
        cert.argument = [f"{n}: {x}" for n, p in zip(names, units) for x in exact_lines(p)]
        return
    scaled = cert.measure in (Measure.REL, Measure.ULP)
    if cert.measure != Measure.NORMWISE and not (scaled and one_sign(cons)):
        return
    parts = [(cert.hypothesis, q.params[0])]
    if against is not None:
        parts.append((against, q.params[1]))
    total = Fraction(0)
    lines: list[str] = []
    uppers = []
    for name, p in parts:
        arg = instruction_bound(dense_params(p), cons)
        if not isinstance(arg, Argument):
            cert.argument = [f"no composed bound for {name}: {arg.reason}"]
            return
        total += arg.upper
        uppers.append(arg.upper)
        lines += [f"{name}: {x}" for x in arg.lines]
    if len(parts) == 2:
        lines.append("drift: U_X + U_Y (triangle inequality through the exact result)")
    if scaled:
        if against is not None:
            if uppers[1] >= 1:
                cert.argument = lines + ["rel/ulp: U_Y >= 1 leaves |d_Y| unbounded below"]
                return
            total = up(total / (1 - uppers[1]))
            lines.append("rel: (U_X + U_Y) / (1 - U_Y), since |d_Y| >= M (1 - U_Y)")
        else:
            lines.append("rel: the normwise U, since one sign makes |e| = M")
        if cert.measure == Measure.ULP:
            prec = q.p.d_fmt.spec.precision
            total = total * 2**prec
            lines.append(f"ulp: 2^{prec} rel, since ulp(r) > 2^-{prec} |r|")
    cert.upper = total
    cert.upper_method = "composed"
    cert.argument = lines


def _take_lower(cert: Certificate, best, source: str, seconds: float, on_step) -> None:
    """A searched row (random or structured) as the certificate's lower bound and step."""
    step = Step(Fraction(0), Verdict.WITNESS, source, None, seconds, best.measure, best.rows)
    cert.steps.append(step)
    cert.lower = best.measure
    cert.witness = best.inputs
    cert.witness_outputs = best.outputs
    if on_step:
        on_step(step)


def _seed_from_overflow(cert: Certificate, q: Query, on_step) -> None:
    """A row on which an intermediate rounding overflows while the exact result is
    finite (overflow_rows.py): an infinite error, attained; the interval is then closed
    at infinity and no solver is asked."""
    from .overflow_rows import overflow_witness

    t_start = time.monotonic()
    best = overflow_witness(q)
    if best is not None:
        _take_lower(cert, best, "overflow row", time.monotonic() - t_start, on_step)


def _seed_from_search(cert: Certificate, q: Query, seconds: float, on_step) -> Fraction | None:
    """The structured search (extremal.py) as a further lower bound; the next threshold
    when it raised L (None otherwise)."""
    from .extremal import structured_best

    t_start = time.monotonic()
    stop_at = None if cert.upper is None else cert.upper / (1 + cert.resolution)
    best = structured_best(q, seconds, stop_at=stop_at)
    if best is None or isinstance(best.measure, float) or not best.measure > cert.lower:
        return None
    _take_lower(cert, best, "structured search", time.monotonic() - t_start, on_step)
    if cert.closed:
        return None
    return _next_threshold(cert, Fraction(0), Verdict.WITNESS)


def _seed_from_sample(cert: Certificate, q: Query, rows: int, on_step) -> Fraction:
    """Random rows of the class as the first lower bound (certify/sample.py); the first
    threshold to ask the solvers (0 when the sample shows no error)."""
    from .sample import sample_best

    t_start = time.monotonic()
    best = sample_best(q, rows)
    if best is None or not best.measure > 0:
        return Fraction(0)
    _take_lower(cert, best, "random rows", time.monotonic() - t_start, on_step)
    if isinstance(best.measure, float):
        return Fraction(0)
    return _next_threshold(cert, Fraction(0), Verdict.WITNESS) or Fraction(0)


def _record(cert: Certificate, q: Query, o: Outcome, t: Fraction) -> Step:
    if o.argued or o.by_construction:
        solver = o.method
    else:
        solver = o.result.solver if o.result is not None else None
    confirmed = None
    if o.verdict.unsat:
        if o.by_construction:
            confirmed = "construction"
        else:
            for r in o.confirmations:
                if r.answer == Answer.UNSAT:
                    confirmed = r.solver
    step = Step(t, o.verdict, solver, confirmed, o.seconds)
    if o.verdict == Verdict.WITNESS:
        w = o.witness
        m = witness_measure(q, w.inputs, w.outputs)
        step.measure = m
        if not (m > t):
            raise RuntimeError(f"witness measure {m} does not exceed the threshold {t}")
        if cert.witness is None or m > cert.lower:
            cert.lower = m
            cert.witness = dict(w.inputs)
            cert.witness_outputs = tuple(w.outputs)
    elif o.verdict.unsat:
        if cert.upper is None or t < cert.upper:
            cert.upper = t
            cert.upper_method = "argument" if o.argued else "solver"
    cert.steps.append(step)
    return step


def _next_threshold(cert: Certificate, t: Fraction, verdict: Verdict) -> Fraction | None:
    """The next threshold, or None when no question can move the interval."""
    lo = cert.lower
    if isinstance(lo, float):  # an infinite error was attained: nothing above it
        return None
    hi = cert.upper
    if verdict == Verdict.UNKNOWN:
        # no answer at t: ask between L and t, where a witness (the easier answer) is
        # more likely and raises L; stop after a few unknowns in a row
        unknowns = 0
        for s in reversed(cert.steps):
            if s.verdict != Verdict.UNKNOWN:
                break
            unknowns += 1
        if unknowns >= MAX_UNKNOWNS or not lo < t:
            return None
        return dyadic_between(lo, t)
    if hi is None:
        base = lo if lo > 0 else Fraction(1, 2**30)
        return dyadic_between(base * (GROWTH - 1), base * (GROWTH + 1))
    return dyadic_between(lo, hi)
