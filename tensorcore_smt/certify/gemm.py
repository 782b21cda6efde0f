"""Certified intervals at the GEMM level: the normwise error of one output element of a
GEMM hypothesis at depth K (or the drift between two hypotheses), over the class of
finite inputs without overflow or underflow.

U comes from the composed argument (compose.py, `gemm_bound`): the schedule's plan as a
tree of instruction nodes and fp32 additions. L comes from inputs run through
`tc.matmul` and measured with exact rationals: random columns drawn from the class
(several magnitude spreads); when given, an instruction-level witness placed in the
first k-block of the product with zeros after it (the instruction's worst case is then
one element of the GEMM); the instruction's worst-case rows repeated in every k-block;
and constructed worst-case columns of truncating chains (anchored_columns: each chain's
running sum held at a power of two while every later product is cut to nothing, so
every step, promotion and split errs the same way). The certificate names the kind of
column that attained L (COLUMN_KINDS).

Every value is read in the format it has where it is used: the output in the schedule's
`out` (else the instruction's d), C in the format it joins in (gemm.element.c_format:
the instruction's c in the chain, the output's in the epilogue). A column counts only
where its exact magnitude |c| + sum |a_k b_k| lies in the class U holds over
(inputs/implications.gemm_class, possibly restricted where the final conversion could
overflow).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..bv.dtypes import bit_view
from ..errors import UserError
from ..formats import Format, round_fraction, value_of
from ..inputs.constraints import Constraint
from ..model.measure import Measure, exact_value, measure_value
from ..model.params import Algorithm
from .compose import Argument, gemm_bound

COLUMN_KINDS = {
    "random": "a random column",
    "witness": "the instruction witness given",
    "repeated": "the instruction's worst case repeated in every k-block",
    "anchored": "an anchored column (a chain's running sum held at 2^E, every later "
    "product cut to nothing)",
}
"""What the columns measured for L are (gemm_certificate), as the report names them."""

SPREADS = (0, 4, 12)
"""Exponent spreads of the random inputs (0: all of one binade)."""


@dataclass
class GemmCertificate:
    """[lower, upper] on the worst normwise error of one output element."""

    hypothesis: str
    against: str
    K: int
    lower: Fraction = Fraction(0)
    upper: Fraction | None = None
    argument: list[str] = field(default_factory=list)
    witness: dict | None = None  # {"a": [...], "b": [...], "c": int} bit patterns
    rows: int = 0
    sampled: Fraction = Fraction(0)  # the largest error of the random columns alone
    lower_from: str = ""  # which kind of column attained `lower` (COLUMN_KINDS)
    seconds: float = 0.0

    def to_json(self) -> dict:
        def rat(x):
            return None if x is None else f"{x.numerator}/{x.denominator}"

        return {
            "hypothesis": self.hypothesis,
            "against": self.against,
            "K": self.K,
            "measure": Measure.NORMWISE.value,
            "lower": rat(self.lower),
            "upper": rat(self.upper),
            "upper_method": "composed" if self.upper is not None else None,
            "argument": self.argument,
            "lower_from": f"{self.rows} columns run through tc.matmul, measured exactly; "
            f"the largest from {self.lower_from or 'none'}",
            "witness": self.witness,
            "sampled": rat(self.sampled),
            "seconds": round(self.seconds, 3),
        }


def _draw(
    fmt: Format,
    n: int,
    spread: int,
    rng: random.Random,
    positive: bool = False,
    shift: int = 0,
) -> list[int]:
    """n finite normal values of `fmt` with exponents in shift + [-spread/2, spread/2]
    (kept within the format's normal exponents), as bits (`positive`: all of one sign,
    where truncations along a chain all err one way)."""
    s = fmt.spec
    out = []
    for _ in range(n):
        e = rng.randint(-(spread // 2), spread // 2) + shift
        e = min(max(e, s.emin), s.emax)
        m = rng.getrandbits(s.mbits) if s.mbits else 0
        sign = 0 if positive else rng.getrandbits(1)
        out.append((sign << (s.storage - 1)) | ((e + s.bias) << s.mbits) | m)
    return out


def _repeated_worst(h, K: int, constraints) -> list[tuple[list[int], list[int], int]]:
    """Columns that repeat the instruction's worst case (compose's argument, built by
    extremal.argument_rows) in every k-block: with c large and the products tiny, every
    step of a chain meets the same running sum and loses the same, so the chain's error
    grows with its length as the composed U does."""
    from ..certify.bound import make_bound_query
    from .extremal import argument_rows
    from .sample import best_of, in_class

    p = h.params()
    try:
        q = make_bound_query(
            h.variant.text, None, h.instruction().name, Measure.NORMWISE, constraints
        )
    except UserError:
        return []
    rows = argument_rows(q, {})
    rows = [r for r, ok in zip(rows, in_class(q, rows)) if ok]  # only the class's inputs
    if not rows:
        return []
    best = best_of(q, rows)
    picks = [best.inputs] if best is not None else []
    # the same shapes with c = 0 in the chain (C joining in the epilogue) lose nothing
    # large; keep a few more of the rows too
    picks += rows[:: max(1, len(rows) // 6)]
    out = []
    reps = -(-K // p.K)
    for w in picks:
        a = [w[f"a{k}"] for k in range(p.K)] * reps
        b = [w[f"b{k}"] for k in range(p.K)] * reps
        out.append((a[:K], b[:K], w["c"]))
    return out


def _normal_bits(fmt: Format, e: int, m: int) -> int:
    """The bits of the positive normal value m 2^(e - mbits) of `fmt` (m with its
    hidden bit: 2^mbits <= m < 2^(mbits + 1))."""
    s = fmt.spec
    return ((e + s.bias) << s.mbits) | (m - (1 << s.mbits))


def _near_two(fa: Format, fb: Format) -> tuple[int, int]:
    """Significands (ma, mb), hidden bits included, of normal a and b whose product
    significand ma mb 2^-(mbits_a + mbits_b) is the largest below 2 (searched over ma
    where a's significands are few; else ma = 2 - ulp, mb = 1)."""
    sa, sb = fa.spec.mbits, fb.spec.mbits
    two = 1 << (sa + sb + 1)
    if sa > 12:
        return (2 << sa) - 1, 1 << sb
    best = ((2 << sa) - 1, 1 << sb)
    for ma in range(1 << sa, 2 << sa):
        mb = min((2 << sb) - 1, -(-two // ma) - 1)
        if mb >= 1 << sb and ma * mb > best[0] * best[1]:
            best = (ma, mb)
    return best


def _chain_starts(h, K: int) -> list[int]:
    """The k positions at which the chains of `h`'s plan for depth K start (each
    split's and each promoted chain's first k-block, as the chain takes them)."""
    from ..gemm.plan import make_plan, padded_k

    p = h.params()
    plan = make_plan(h.schedule, padded_k(K, p.K), p.K)
    starts = {chain[0] * p.K for sp in plan.splits for chain in sp.chains}
    return sorted(x for x in starts if x < K)


def anchored_columns(hyps, K: int) -> list[tuple[list[int], list[int], int]]:
    """Constructed worst-case columns of a truncating chain (a, b, C as bits; C in the
    instruction's c format): an anchor product 2^E (a = 2^ea, b = 2^eb, normal) that
    starts a chain, and dust, products just below the grid step 2^(E - F) of a running
    sum at 2^E (the largest significand product below 2 at exponent E - F - 1). Every
    dust product is cut to nothing, so the running sum stays at 2^E, at the foot of its
    binade, and every later step of the chain loses all of its products, one sign,
    all in the same direction: the error grows with the chain's length as the composed
    U does. Patterns, for each hypothesis h (the first with C as the anchor where C
    joins its chain): an anchor at every chain start of h's plan (each promotion and
    split partial then errs the same way), dust everywhere else; and an anchor at 0,
    zeros through h's first chain, dust after (for drift rows: a promoted schedule
    sums that dust exactly, a single chain loses it). [] where the unit does not
    truncate (AlignMode.TRUNCATE) or the formats leave no room."""
    from ..model.params import Algorithm
    from ..model.terms import AlignMode

    hx = hyps[0]
    p = hx.params()
    if p.align != AlignMode.TRUNCATE or p.algorithm != Algorithm.FDA:
        return []
    fa, fb = p.a_fmt, p.b_fmt
    sa, sb = fa.spec, fb.spec
    E = sa.emin + sb.emin + p.F + 1  # dust at E - F - 1 >= the smallest normal product
    if E > sa.emax + sb.emax:
        return []
    ea = max(sa.emin, E - sb.emax)
    anchor = (_normal_bits(fa, ea, 1 << sa.mbits), _normal_bits(fb, E - ea, 1 << sb.mbits))
    xd = E - p.F - 1
    xa = max(sa.emin, xd - sb.emax)
    if xd - xa < sb.emin or xa > sa.emax:
        return []
    ma, mb = _near_two(fa, fb)
    dust = (_normal_bits(fa, xa, ma), _normal_bits(fb, xd - xa, mb))
    out: list[tuple[list[int], list[int], int]] = []

    def column(anchors: set[int], zeros: range = range(0), c: int = 0):
        a = [anchor[0] if k in anchors else 0 if k in zeros else dust[0] for k in range(K)]
        b = [anchor[1] if k in anchors else 0 if k in zeros else dust[1] for k in range(K)]
        if (a, b, c) not in out:
            out.append((a, b, c))

    for h in hyps:
        starts = _chain_starts(h, K)
        column(set(starts))
        if h.schedule.c_in_chain and h is hx:
            cf = p.c_fmt.spec
            if cf.emin <= E <= cf.emax:
                column(set(starts) - {0}, c=_normal_bits(p.c_fmt, E, 1 << cf.mbits))
        if len(starts) > 1:
            column({0}, range(1, starts[1]))
    return out


def _shift(K: int, spread: int, high: Fraction) -> int:
    """The exponent offset of a and b for columns of depth K whose magnitudes would
    otherwise pass `high` (the class's largest |c| + sum |a_k b_k|): each product is
    below 2^(2 (spread/2 + shift + 1)), so K of them stay below high / 2."""
    top = high.numerator.bit_length() - high.denominator.bit_length() - 1
    room = top - 1 - K.bit_length() - 2 * (spread // 2 + 1)
    return min(0, room // 2)


def _measure(hyps, K: int, a_cols, b_cols, c_vals, fmts) -> list[Fraction | float]:
    """The normwise error of each column (or the drift of two hypotheses): `fmts` the
    formats of a, b, C as it joins, and the output."""
    import tensorcore_smt as tc

    fa, fb, fc, fd = fmts
    A = np.array(a_cols, dtype=np.uint64)  # (n, K): row i is output i's a
    B = np.array(b_cols, dtype=np.uint64).T  # (K, n)
    n = len(c_vals)
    C = np.zeros((n, n), dtype=np.uint64)
    C[np.arange(n), np.arange(n)] = c_vals
    outs = []
    for h in hyps:
        d = np.asarray(tc.matmul(h, A, B, C, instr=h.instr or h.instruction().name))
        outs.append(bit_view(d))
    res = []
    for i in range(n):
        e, den = exact_value(list(a_cols[i]), list(b_cols[i]), int(c_vals[i]), (fa, fb, fc))
        d = value_of(int(outs[0][i, i]), fd)  # the output's own format (out, else d)
        ref = e if len(outs) == 1 else value_of(int(outs[1][i, i]), fd)
        res.append(measure_value(d, ref, den, Measure.NORMWISE, fd))
    return res


def gemm_certificate(
    hypothesis: str,
    K: int,
    constraints: tuple[Constraint, ...],
    against: str | None = None,
    rows: int = 256,
    seed: int = 0,
    witness: dict | None = None,
    instr: str | None = None,
) -> GemmCertificate:
    """The certified interval of `hypothesis` (ARCH/SCHEDULE) at depth K (see the module
    docstring). `witness`: an instruction-level witness {"a", "b", "c"} to extend;
    `instr`: the instruction (default: the one libraries use for fp16 inputs)."""
    from ..gemm.element import c_format
    from ..gemm.hypothesis import parse_gemm
    from ..inputs.implications import gemm_class

    t0 = time.monotonic()
    hx = parse_gemm(hypothesis if "/" in hypothesis else f"{hypothesis}/serial", instr)
    hyps = [hx]
    px = hx.params()
    if px.algorithm == Algorithm.INTEGER:  # refused before any work (certify/int_bound.py)
        raise UserError(
            f"--gemm: {hx.instruction().name} is an integer unit, exact until its s32 "
            f"accumulator overflows: `tcsmt exact {hx.arch} --instr {hx.instruction().name}` "
            "gives the longest chain without overflow"
        )
    out_fmt = hx.schedule.out or px.d_fmt
    c_fmt = c_format(px, hx.schedule)
    if against is not None:
        hy = parse_gemm(against if "/" in against else f"{against}/serial", instr)
        py = hy.params()
        if (
            py.a_fmt != px.a_fmt
            or py.d_fmt != px.d_fmt
            or (hy.schedule.out or py.d_fmt) != out_fmt
            or c_format(py, hy.schedule) != c_fmt
        ):
            raise UserError(f"{against}: takes other operand or output formats than {hypothesis}")
        hyps.append(hy)
    cert = GemmCertificate(hypothesis, against or "exact", K)
    total = Fraction(0)
    low_fmt, high = gemm_class(px, out_fmt)
    low = Fraction(2) ** low_fmt.spec.emin
    for h in hyps:
        arg = gemm_bound(h, K, constraints)
        if not isinstance(arg, Argument):
            cert.argument.append(f"no composed bound for {h.text or hypothesis}: {arg.reason}")
            total = None
            break
        total += arg.upper
        if arg.low is not None and arg.high is not None:
            low, high = max(low, arg.low), min(high, arg.high)
        cert.argument += [f"{h.text or hypothesis}: {x}" for x in arg.lines]
    if total is not None:
        if against is not None:
            cert.argument.append("drift: U_X + U_Y (triangle inequality through the exact result)")
        cert.upper = total
    p = px
    fmts = (p.a_fmt, p.b_fmt, c_fmt, out_fmt)
    rng = random.Random(seed)
    cols_a, cols_b, cs = [], [], []
    for i in range(rows):
        spread = SPREADS[i % len(SPREADS)]
        pos = i % 4 >= 2
        shift = _shift(K, spread, high)
        cols_a.append(_draw(p.a_fmt, K, spread, rng, pos, shift))
        cols_b.append(_draw(p.b_fmt, K, spread, rng, pos, shift))
        cs.append(_draw(c_fmt, 1, spread, rng, shift=2 * shift)[0] if i % 2 else 0)
    n_random = len(cs)
    kinds = ["random"] * n_random
    extra: list[tuple[list[int], list[int], int, Format]] = []
    if witness is not None:
        k = len(witness["a"])
        wa = [int(x) for x in witness["a"]] + [0] * (K - k)
        wb = [int(x) for x in witness["b"]] + [0] * (K - k)
        extra.append((wa, wb, int(witness["c"]), p.c_fmt))
        kinds.append("witness")
    for kind, cols in (
        ("repeated", _repeated_worst(hx, K, constraints)),
        ("anchored", anchored_columns(hyps, K)),
    ):
        extra += [(a_w, b_w, c_w, p.c_fmt) for a_w, b_w, c_w in cols]
        kinds += [kind] * len(cols)
    for a_w, b_w, c_w, f in extra:
        # an instruction-level row's c is in the instruction's c format: read it in the
        # format C joins in (rounded where that differs; the row is measured as it runs)
        cols_a.append(a_w)
        cols_b.append(b_w)
        cs.append(c_w if f == c_fmt else round_fraction(_finite_value(c_w, f), c_fmt))
    keep = [
        i
        for i in range(len(cs))
        if _in_class(exact_value(cols_a[i], cols_b[i], cs[i], fmts[:3])[1], low, high)
    ]
    cert.rows = len(keep)
    if not keep:
        cert.seconds = time.monotonic() - t0
        return cert
    cols_a = [cols_a[i] for i in keep]
    cols_b = [cols_b[i] for i in keep]
    cs = [cs[i] for i in keep]
    errs = _measure(hyps, K, cols_a, cols_b, cs, fmts)
    best = max(range(len(errs)), key=lambda i: errs[i])
    cert.lower = errs[best]
    cert.lower_from = kinds[keep[best]]
    n_random = sum(1 for i in keep if i < n_random)
    cert.sampled = max(errs[:n_random], default=Fraction(0))
    cert.witness = {
        "a": [f"0x{x:0{p.a_fmt.spec.storage // 4}x}" for x in cols_a[best]],
        "b": [f"0x{x:0{p.b_fmt.spec.storage // 4}x}" for x in cols_b[best]],
        "c": f"0x{cs[best]:0{c_fmt.spec.storage // 4}x}",
    }
    if cert.upper is not None and cert.lower > cert.upper:
        from .bound import WitnessBug

        raise WitnessBug(
            f"a measured error {float(cert.lower)} exceeds the composed bound "
            f"{float(cert.upper)}; please report this bound"
        )
    cert.seconds = time.monotonic() - t0
    return cert


def _finite_value(bits: int, fmt: Format) -> Fraction:
    """The value of finite bits of `fmt` (0 for a non-finite pattern, never drawn)."""
    v = value_of(bits, fmt)
    return v if isinstance(v, Fraction) else Fraction(0)


def _in_class(M: Fraction, low: Fraction, high: Fraction) -> bool:
    """Whether an exact magnitude |c| + sum |a_k b_k| lies in the class: 0 or in
    [low, high]."""
    return M == 0 or low <= M <= high


__all__ = ["GemmCertificate", "gemm_certificate"]
