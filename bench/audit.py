"""An audit of every certified answer on small formats: each certificate the package
states (a composed normwise bound U of an instruction or of a GEMM schedule, the argued
exactness bound B of integer slices, the monotonicity argument, the no-clamp argument of
integer units, the overflow rows of `tcsmt bound`) compared with what the model
attains, row by row, over the certificate's own input class.

A case is a (variant, class, certificate) triple. The variants are drawn from a grid
over the parameter space (K <= 4, small F and L, carry bits, F2, alignment and
rounding modes, c's placement, c/d formats, flushes; GEMM schedules with promotion,
split-K, pairwise reduction and another output format) on instructions whose operands
are tiny formats (e2m1, e3m2, e2m3, e4m3, e5m2, CDNA3's fnuz fp8) or other formats
overridden to them. The rows of a case are every input of the class where that is
feasible (a and b enumerated, each position taking every distinct product of the
format; c over the format when it is tiny), else a dense structured sample that holds
every extreme row: the largest and smallest magnitudes, subnormals, one-term rows,
cancellations (c = -RN(sum) and its neighbours) and c at every binade around the
products. d comes from tc.simulate (instructions) or tc.matmul (GEMMs); errors are
found with error-free float64 sums (exact on these formats but for the final
division) and every row that reaches a certified value is re-measured with Fractions:
a verdict never rests on floating point.

    python bench/audit.py [--size fast|wide] [--seed N] [--show N]

prints how many cases were covered, refused (the certificate declined to state a
value) or not applicable, and every unsound case with its counterexample. Exit status 1
when any case is unsound.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tensorcore_smt.api import resolve, simulate_params  # noqa: E402
from tensorcore_smt.errors import UserError  # noqa: E402
from tensorcore_smt.formats import Format, format_hex, max_finite_bits, value_of  # noqa: E402
from tensorcore_smt.model.params import Algorithm, ModelParams  # noqa: E402
from tensorcore_smt.smt.query import Constraint, ConstraintKind  # noqa: E402

# --- outcomes ---------------------------------------------------------------------------

SOUND = "sound"
UNSOUND = "unsound"
REFUSED = "refused"  # the certificate states no value (a precondition fails)
NOT_APPLICABLE = "n/a"  # the variant or the class admits no such certificate / no rows
ERROR = "error"  # the certificate raised instead of answering or refusing in one line

KNOWN: dict[str, str] = {}
"""Unsound answers known and being fixed, by key: a case carries the key when its
variant is in that family, so a report can tell them from new ones. Empty: the chained
integer-sum argument, the GEMM bound with out != d and cdna3 with F2 < F - 1 (issue 42,
items 1, 2, 4) are fixed and audited as every other case."""

FOUND: dict[str, str] = {}
"""Unsound answers this audit found that no fix addresses yet (reported, same handling).
Empty: flush_inputs reading a subnormal c (the class must keep c normal too), a chained
group's subnormal result flushed as the next group's c (an absolute part per chained
group), chained roundings toward +/-inf overflowing (the overflow precondition covers
every rounding that can grow a magnitude) and round-down alignment with carry bits
(refused before the carry check) are fixed and audited as every other case."""


@dataclass
class Case:
    """One (variant, class, certificate) triple and its verdict."""

    variant: str
    instr: str
    cls: str
    cert: str
    status: str
    certified: Fraction | int | None = None
    attained: Fraction | float | int | None = None
    rows: int = 0
    exhaustive: bool = False
    witness: dict | None = None
    note: str = ""
    known: str | None = None

    def describe(self) -> str:
        head = f"{self.cert} {self.variant} {self.instr} class={self.cls}"
        val = f"certified {_show(self.certified)}, attained {_show(self.attained)}"
        known = f" [known: {self.known}]" if self.known else ""
        out = f"{head}: {self.status}: {val} over {self.rows} rows{known}"
        if self.note:
            out += f" ({self.note})"
        if self.witness:
            out += "\n    witness: " + ", ".join(f"{k}={v}" for k, v in self.witness.items())
        return out


def _show(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, Fraction):
        return f"{float(x):.6g}" if x.denominator != 1 else str(x.numerator)
    if isinstance(x, float):
        return "inf" if math.isinf(x) else f"{x:.6g}"
    return str(x)


# --- formats and values -----------------------------------------------------------------


def finite_patterns(fmt: Format, limit: int = 400, seed: int = 0) -> np.ndarray:
    """Every finite bit pattern of `fmt` when it has at most 8 bits, else a structured
    set: zeros, the smallest and largest subnormals and normals, and at every exponent
    the values 1.0, 1.5 and the largest significand, both signs (at most `limit`)."""
    s = fmt.spec
    if s.storage <= 8:
        pats = [x for x in range(1 << s.storage) if _finite(x, fmt)]
        return np.array(pats, dtype=np.uint64)
    sign = 1 << (s.storage - 1)
    top = (1 << s.mbits) - 1
    picks = {0, sign, 1, top, max_finite_bits(fmt)}
    for e in range(1, (1 << s.ebits) - 1):
        for m in (0, 1 << (s.mbits - 1), top):
            picks.add((e << s.mbits) | m)
    picks |= {x | sign for x in list(picks)}
    pats = sorted(x for x in picks if _finite(x, fmt))
    if len(pats) > limit:
        rng = random.Random(seed)
        keep = set(pats[:8]) | set(pats[-8:])
        keep |= set(rng.sample(pats, limit - len(keep)))
        pats = sorted(keep)
    return np.array(pats, dtype=np.uint64)


def _finite(bits: int, fmt: Format) -> bool:
    v = value_of(bits, fmt)
    return not isinstance(v, float)


def values(pats: np.ndarray, fmt: Format) -> np.ndarray:
    """The float64 values of patterns (exact for every format up to fp32; inf or nan
    where a pattern is not finite)."""
    return _c_values(np.asarray(pats, dtype=np.uint64), fmt)


def exact_values(pats: Iterable[int], fmt: Format) -> list[Fraction]:
    return [value_of(int(x), fmt) for x in pats]


def sign_bit(pats: np.ndarray, fmt: Format) -> np.ndarray:
    s = fmt.spec
    if not s.signed:
        return np.zeros(len(pats), dtype=bool)
    return ((pats >> np.uint64(s.storage - 1)) & np.uint64(1)).astype(bool)


def min_normal(fmt: Format) -> float:
    return 2.0**fmt.spec.emin


def max_finite(fmt: Format) -> float:
    return float(value_of(max_finite_bits(fmt), fmt))


# --- error-free sums ----------------------------------------------------------------------


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def exact_sum(terms: list[np.ndarray]) -> np.ndarray:
    """sum(terms) rounded faithfully: Shewchuk's grow-expansion (every component exact),
    its components then added from the smallest. Exact sums of dyadic values within
    float64's range; the rounding of the last additions only."""
    exp: list[np.ndarray] = []
    with np.errstate(invalid="ignore", over="ignore"):
        for t in terms:
            q = t
            new = []
            for e in exp:
                q, h = _two_sum(q, e)
                new.append(h)
            new.append(q)
            exp = new
        total = np.zeros_like(terms[0])
        for e in exp:
            total = total + e
    return total


def normwise(d: np.ndarray, c: np.ndarray, prods: np.ndarray) -> np.ndarray:
    """|d - (c + sum p)| / (|c| + sum |p|) per row (inf where d is not finite, or the
    denominator is 0 and d is not)."""
    err = np.abs(exact_sum([d, -c] + [-prods[:, k] for k in range(prods.shape[1])]))
    M = np.abs(c) + np.abs(prods).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = err / M
    r = np.where(M == 0, np.where(err == 0, 0.0, np.inf), r)
    return np.where(np.isfinite(d), r, np.inf)


def exact_normwise(a, b, c, d, fmts) -> Fraction | float:
    """The normwise error of one row with Fractions (math.inf for a non-finite d)."""
    fa, fb, fc, fd = fmts
    dv = value_of(int(d), fd)
    cv = value_of(int(c), fc)
    ts = [value_of(int(x), fa) * value_of(int(y), fb) for x, y in zip(a, b)]
    if isinstance(dv, float):
        return math.inf
    e = cv + sum(ts)
    M = abs(cv) + sum(abs(t) for t in ts)
    err = abs(dv - e)
    if M == 0:
        return Fraction(0) if err == 0 else math.inf
    return err / M


# --- input classes ----------------------------------------------------------------------


@dataclass(frozen=True)
class ClassSpec:
    """An input class as the certificate states it (constraints) and as the audit reads
    it (per-operand predicates on bit patterns, evaluated here independently of the
    package's class language; the global no-overflow / no-underflow on M)."""

    name: str
    extra: tuple[Constraint, ...]
    normal: str = ""  # operand groups kept zero or normal
    positive: str = ""  # operand groups with the sign bit clear
    window: tuple[str, int, int] | None = None  # (groups, lo, hi): 2^lo <= |x| < 2^(hi+1)
    zero_ab: bool = False  # every a and b is +0 (--terms 0)

    def constraints(self) -> tuple[Constraint, ...]:
        from tensorcore_smt.certify.bound import default_class

        return default_class() + self.extra

    def operand_ok(self, group: str, pats: np.ndarray, fmt: Format) -> np.ndarray:
        v = np.abs(values(pats, fmt))
        ok = np.ones(len(pats), dtype=bool)
        if group in self.normal:
            ok &= (v == 0) | (v >= min_normal(fmt))
        if group in self.positive:
            ok &= ~sign_bit(pats, fmt)
        if self.window is not None and group in self.window[0]:
            lo, hi = self.window[1], self.window[2]
            ok &= (v == 0) | ((v >= 2.0**lo) & (v < 2.0 ** (hi + 1)))
        if self.zero_ab and group in "ab":
            ok &= pats == 0
        return ok


def classes(products_lo: int, products_hi: int) -> list[ClassSpec]:
    """The classes every instruction case is asked over: the default (finite, no
    overflow, no underflow), normal operands, one sign, c in a window around the
    products' exponents, and every product fixed to zero (--terms 0: the class on which
    certify/zero_products.py claims d = c)."""
    lo, hi = products_lo - 2, products_hi + 2
    return [
        ClassSpec("default", ()),
        ClassSpec("normal:ab", (Constraint(ConstraintKind.NORMAL_ONLY, "ab"),), normal="ab"),
        ClassSpec("normal:abc", (Constraint(ConstraintKind.NORMAL_ONLY, "abc"),), normal="abc"),
        ClassSpec("positive", (Constraint(ConstraintKind.POSITIVE, "abc"),), positive="abc"),
        ClassSpec(
            f"window:c={lo}:{hi}",
            (Constraint(ConstraintKind.EXPONENT_WINDOW, "c", lo, hi),),
            window=("c", lo, hi),
        ),
        ClassSpec("terms:0", (Constraint(ConstraintKind.TERMS, "ab", 0),), zero_ab=True),
    ]


def in_global_class(M: np.ndarray, fmt: Format) -> np.ndarray:
    """no-overflow and no-underflow of M = |c| + sum |a_k b_k| in `fmt`."""
    return (M <= max_finite(fmt)) & ((M == 0) | (M >= min_normal(fmt)))


def exact_global(row_a, row_b, c, fmts, out: Format) -> bool:
    fa, fb, fc = fmts[:3]
    M = abs(value_of(int(c), fc)) + sum(
        abs(value_of(int(x), fa) * value_of(int(y), fb)) for x, y in zip(row_a, row_b)
    )
    top = value_of(max_finite_bits(out), out)
    return M <= top and (M == 0 or M >= Fraction(2) ** out.spec.emin)


# --- rows ---------------------------------------------------------------------------------


@dataclass
class Rows:
    """Dot-product rows as bit patterns: a, b (n, K), c (n,), and whether they are every
    input of the classes asked (a and b enumerated over the distinct products, c over
    its format)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    exhaustive: bool


def pair_representatives(p: ModelParams, pa: np.ndarray, pb: np.ndarray) -> tuple:
    """One (a, b) pair per distinct (product, a subnormal, b subnormal, sign a, sign b):
    every pair the unit could treat differently (flushes and class predicates read the
    operands' kinds and signs, the unit reads the product otherwise)."""
    va, vb = values(pa, p.a_fmt), values(pb, p.b_fmt)
    sa, sb = sign_bit(pa, p.a_fmt), sign_bit(pb, p.b_fmt)
    suba = (va != 0) & (np.abs(va) < min_normal(p.a_fmt))
    subb = (vb != 0) & (np.abs(vb) < min_normal(p.b_fmt))
    seen: dict = {}
    for i in range(len(pa)):
        for j in range(len(pb)):
            key = (va[i] * vb[j], suba[i], subb[j], sa[i], sb[j])
            if key not in seen:
                seen[key] = (pa[i], pb[j])
    reps = list(seen.values())
    return np.array([r[0] for r in reps], np.uint64), np.array([r[1] for r in reps], np.uint64)


def c_patterns(fmt: Format, prod_lo: int, prod_hi: int, F: int) -> np.ndarray:
    """c values that stress an alignment: every finite pattern of a tiny format, else
    zeros, the format's extremes, and at each binade from below the products to F bits
    above them 2^e, 1.5 2^e and the largest significand, both signs."""
    s = fmt.spec
    if s.storage <= 8:
        return finite_patterns(fmt)
    sign = 1 << (s.storage - 1)
    top = (1 << s.mbits) - 1
    picks = {0, 1, top, (1 << s.mbits) | 0, max_finite_bits(fmt), max_finite_bits(fmt) - 1}
    lo = max(s.emin, prod_lo - 4)
    hi = min(s.emax, prod_hi + max(F, 4) + 4)
    for e in range(lo, hi + 1):
        be = e + s.bias
        if 1 <= be < (1 << s.ebits) - 1:
            for m in (0, 1 << (s.mbits - 1), top, 1):
                picks.add((be << s.mbits) | m)
    picks |= {x | sign for x in list(picks)}
    return np.array(sorted(x for x in picks if _finite(x, fmt)), dtype=np.uint64)


def _round_to(vals: np.ndarray, fmt: Format) -> np.ndarray:
    """Patterns of `fmt` nearest to float64 values (fp16/fp32 by numpy's conversion;
    other formats through the package's rounding)."""
    from tensorcore_smt.formats import round_fraction

    if fmt == Format.FP32:
        return vals.astype(np.float32).view(np.uint32).astype(np.uint64)
    if fmt == Format.FP16:
        with np.errstate(over="ignore"):
            return vals.astype(np.float16).view(np.uint16).astype(np.uint64)
    return np.array([round_fraction(Fraction(float(v)), fmt) for v in vals], dtype=np.uint64)


def _neighbours(pats: np.ndarray, fmt: Format, steps=(-2, -1, 1, 2)) -> list[np.ndarray]:
    """Patterns a few steps away (in the magnitude's encoding), kept finite."""
    out = []
    top = np.uint64((1 << fmt.spec.storage) - 1)
    for s in steps:
        q = (pats.astype(np.int64) + s).astype(np.uint64) & top
        out.append(q)
    return out


def product_range(p: ModelParams) -> tuple[int, int]:
    """The binades of the smallest and the largest nonzero product of the formats."""
    va = np.abs(values(finite_patterns(p.a_fmt), p.a_fmt))
    vb = np.abs(values(finite_patterns(p.b_fmt), p.b_fmt))
    lo = va[va > 0].min() * vb[vb > 0].min()
    hi = va.max() * vb.max()
    return int(math.floor(math.log2(lo))), int(math.floor(math.log2(hi)))


def make_rows(p: ModelParams, budget: int, seed: int, cls: ClassSpec | None = None) -> Rows:
    """The rows of one instruction variant (module docstring) whose operands satisfy the
    class's per-operand predicates: exhaustive when the distinct products over K
    positions times c fit `budget`, else extremes and a random sample of product
    tuples, each with structured c values and its cancellations."""
    rng = np.random.default_rng(seed)
    pa, pb = finite_patterns(p.a_fmt), finite_patterns(p.b_fmt)
    plo, phi = product_range(p)
    cs = c_patterns(p.c_fmt, plo, phi, p.F)
    if cls is not None:
        pa = pa[cls.operand_ok("a", pa, p.a_fmt)]
        pb = pb[cls.operand_ok("b", pb, p.b_fmt)]
        cs = cs[cls.operand_ok("c", cs, p.c_fmt)]
    ra, rb = pair_representatives(p, pa, pb)
    prod = values(ra, p.a_fmt) * values(rb, p.b_fmt)
    n_reps, K = len(ra), p.K
    full = n_reps**K
    exhaustive = full * len(cs) <= budget
    if exhaustive:
        idx = np.array(list(itertools.product(range(n_reps), repeat=K)), dtype=np.int64)
        idx = np.repeat(idx, len(cs), axis=0)
        c = np.tile(cs, full)
    else:
        order = np.argsort(np.abs(prod))
        zero = int(np.nonzero(prod == 0)[0][0]) if (prod == 0).any() else int(order[0])
        big = order[-8:]
        small = order[np.abs(prod[order]) > 0][:8]
        special = []
        # every one-term row, and rows of the largest / smallest products at every position
        for i in range(n_reps):
            for k in range(K):
                t = [zero] * K
                t[k] = i
                special.append(t)
        for grp in (big, small):
            for i in grp:
                special.append([i] * K)
                for j in grp[:4]:
                    special.append([i] + [j] * (K - 1))
        # cancellations: a product and its negation
        neg = {prod[i]: i for i in range(n_reps)}
        for i in range(n_reps):
            j = neg.get(-prod[i])
            if j is not None and K >= 2:
                special.append([i, j] + [zero] * (K - 2))
        per = 6
        special = np.array(special, dtype=np.int64).reshape(-1, K)
        cap = max(1, budget // (2 * per))
        if len(special) > cap:  # the extremes and cancellations first, one-term rows sampled
            n_one = n_reps * K
            ext, one = special[n_one:], special[:n_one]
            one = one[rng.choice(len(one), max(0, cap - len(ext)), replace=False)]
            special = np.concatenate([ext[:cap], one])
        n_rand = max(0, budget // (2 * per) - len(special))
        rand = rng.integers(0, n_reps, size=(n_rand, K))
        tuples = np.concatenate([special, rand])
        idx = np.repeat(tuples, per, axis=0)
        c = cs[rng.integers(0, len(cs), size=len(idx))]
        # the extreme rows meet every c
        head = special[n_reps * K :][: max(1, budget // (4 * len(cs)))]
        if not len(head):
            head = special[:1]
        idx = np.concatenate([idx, np.repeat(head, len(cs), axis=0)])
        c = np.concatenate([c, np.tile(cs, len(head))])
    a, b = ra[idx], rb[idx]
    # cancellations of c against the products' sum, with its neighbours
    uniq = np.unique(idx, axis=0)
    if len(uniq) > budget // 20:
        uniq = uniq[rng.choice(len(uniq), budget // 20, replace=False)]
    s_u = prod[uniq].sum(axis=1)
    with np.errstate(over="ignore"):
        cc = _round_to(-s_u, p.c_fmt)
    extra_c = [cc] + _neighbours(cc, p.c_fmt)
    a = np.concatenate([a] + [ra[uniq]] * len(extra_c))
    b = np.concatenate([b] + [rb[uniq]] * len(extra_c))
    c = np.concatenate([c] + extra_c)
    keep = np.array([True] * len(c))
    cv = _c_values(c, p.c_fmt)
    keep &= np.isfinite(cv)
    # every input: a and b over the distinct products, c over its whole (tiny) format
    return Rows(a[keep], b[keep], c[keep], exhaustive and p.c_fmt.spec.storage <= 8)


_CACHE: dict = {}


def _c_values(c: np.ndarray, fmt: Format) -> np.ndarray:
    """float64 values of c patterns (inf/nan for non-finite ones)."""
    if fmt == Format.FP32:
        return c.astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt == Format.FP16:
        return c.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt.spec.storage > 16:
        return np.array([_to_float(int(x), fmt) for x in c], dtype=np.float64)
    key = ("vals", fmt)
    table = _CACHE.get(key)
    if table is None:
        n = 1 << fmt.spec.storage
        table = np.array([_to_float(x, fmt) for x in range(n)], dtype=np.float64)
        _CACHE[key] = table
    return table[c.astype(np.int64)]


def _to_float(x: int, fmt: Format) -> float:
    v = value_of(x, fmt)
    return v if isinstance(v, float) else float(v)


def _vals(pats: np.ndarray, fmt: Format) -> np.ndarray:
    return _c_values(pats, fmt)


# --- certificate: the composed U of an instruction -----------------------------------------


def _witness(p: ModelParams, a, b, c, d=None) -> dict:
    w = {
        "a": " ".join(format_hex(int(x), p.a_fmt) for x in a),
        "b": " ".join(format_hex(int(x), p.b_fmt) for x in b),
        "c": format_hex(int(c), p.c_fmt),
    }
    if d is not None:
        w["d"] = format_hex(int(d), p.d_fmt)
    return w


def audit_instruction_U(
    variant: str, instr: str, p: ModelParams, budget: int, seed: int, known: str | None = None
) -> list[Case]:
    """The composed U (certify/compose.instruction_bound, the upper bound `tcsmt bound`
    and tc.bound report) of `variant` over each class, against the largest error of the
    class's rows (make_rows). The overflow rows `tcsmt bound` seeds its interval with
    (certify/overflow_rows.py) join the rows, and are themselves checked: each must lie
    in the class and give a non-finite d."""
    from tensorcore_smt.certify.bound import make_bound_query
    from tensorcore_smt.certify.compose import Argument, instruction_bound
    from tensorcore_smt.certify.overflow_rows import overflow_witness
    from tensorcore_smt.model.measure import Measure
    from tensorcore_smt.model.sparse import dense_params

    fmts = (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt)
    out = []
    for cls in classes(*product_range(p)):
        cons = cls.constraints()
        case = Case(variant, instr, cls.name, "U", NOT_APPLICABLE, known=known)
        from tensorcore_smt.formats import Rounding

        chained = p.algorithm == Algorithm.FDA and len(p.groups()) > 1
        if known is None and chained and p.rounding in (Rounding.RTP, Rounding.RTN):
            case.known = "directed-overflow"
        elif known is None and p.flush_inputs and len(p.groups()) > 1:
            case.known = "flush-chain"
        elif known is None and p.flush_inputs and p.flush_c and "c" not in cls.normal:
            case.known = "flush-c"
        try:
            from tensorcore_smt.model.terms import AlignMode

            if p.align == AlignMode.ROUND_DOWN and p.carry_bits is not None:
                case.known = "round-down-carry"
        except ImportError:
            pass
        try:
            arg = instruction_bound(dense_params(p), cons)
        except Exception as e:  # noqa: BLE001 - a crash of the certificate is a finding
            case.status = ERROR
            case.note = f"the certificate raised {type(e).__name__}: {e}"
            out.append(case)
            continue
        extra_rows = []
        try:
            q = make_bound_query(variant, None, instr, Measure.NORMWISE, cons)
            ow = overflow_witness(q)
        except UserError:
            ow = None
        if ow is not None:
            out.append(_check_overflow_row(variant, instr, p, cls, ow.inputs, known))
            extra_rows.append(ow.inputs)
        if not isinstance(arg, Argument):
            case.status = REFUSED
            case.note = arg.reason
            out.append(case)
            continue
        U = arg.upper
        case.certified = U
        rows = make_rows(p, budget, seed, cls)
        for w in extra_rows:
            rows.a = np.concatenate([rows.a, [[w[f"a{k}"] for k in range(p.K)]]]).astype(np.uint64)
            rows.b = np.concatenate([rows.b, [[w[f"b{k}"] for k in range(p.K)]]]).astype(np.uint64)
            rows.c = np.concatenate([rows.c, [w["c"]]]).astype(np.uint64)
        case.exhaustive = rows.exhaustive
        d = simulate_params(p, rows.a, rows.b, rows.c, engine="numpy")
        va = values(rows.a.reshape(-1), p.a_fmt).reshape(rows.a.shape)
        vb = values(rows.b.reshape(-1), p.b_fmt).reshape(rows.b.shape)
        prods = va * vb
        cv = values(rows.c, p.c_fmt)
        err = normwise(values(np.asarray(d, dtype=np.uint64), p.d_fmt), cv, prods)
        M = np.abs(cv) + np.abs(prods).sum(axis=1)
        mask = in_global_class(M, p.d_fmt) & cls.operand_ok("c", rows.c, p.c_fmt)
        mask &= cls.operand_ok("a", rows.a.reshape(-1), p.a_fmt).reshape(rows.a.shape).all(1)
        mask &= cls.operand_ok("b", rows.b.reshape(-1), p.b_fmt).reshape(rows.b.shape).all(1)
        case.rows = int(mask.sum())
        if not mask.any():
            case.note = "no row of the class"
            out.append(case)
            continue
        e = np.where(mask, err, -1.0)
        case.status = SOUND
        # every row whose float error reaches U within the float error is re-measured
        cand = np.nonzero(e >= float(U) * (1 - 1e-9))[0]
        top = np.argsort(e)[-3:]
        best: Fraction | float = Fraction(0)
        for i in list(cand[:200]) + [int(t) for t in top if e[t] >= 0]:
            a_i, b_i, c_i = rows.a[i], rows.b[i], rows.c[i]
            if not exact_global(a_i, b_i, c_i, fmts, p.d_fmt):
                continue
            m = exact_normwise(a_i, b_i, c_i, d[i], fmts)
            if m > best:
                best = m
                if m > U:
                    case.status = UNSOUND
                    case.witness = _witness(p, a_i, b_i, c_i, d[i])
        case.attained = best
        out.append(case)
    return out


def _check_overflow_row(variant, instr, p, cls: ClassSpec, w: dict, known) -> Case:
    """An overflow row's claim: in the class, exact result finite, d not finite."""
    a = [w[f"a{k}"] for k in range(p.K)]
    b = [w[f"b{k}"] for k in range(p.K)]
    fmts = (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt)
    case = Case(variant, instr, cls.name, "overflow-row", SOUND, rows=1, known=known)
    ok = exact_global(a, b, w["c"], fmts, p.d_fmt)
    ok &= bool(cls.operand_ok("a", np.array(a, np.uint64), p.a_fmt).all())
    ok &= bool(cls.operand_ok("b", np.array(b, np.uint64), p.b_fmt).all())
    ok &= bool(cls.operand_ok("c", np.array([w["c"]], np.uint64), p.c_fmt).all())
    d = simulate_params(
        p, np.array([a], np.uint64), np.array([b], np.uint64), np.array([w["c"]], np.uint64),
        engine="numpy",
    )[0]  # fmt: skip
    m = exact_normwise(a, b, w["c"], d, fmts)
    case.certified = math.inf
    case.attained = m
    if not ok or not (isinstance(m, float) and math.isinf(m)):
        case.status = UNSOUND
        case.note = "the row is outside the class" if not ok else "d is finite"
        case.witness = _witness(p, a, b, w["c"], d)
    return case


# --- certificate: the composed U of a GEMM schedule ------------------------------------------


def gemm_columns(p: ModelParams, Kg: int, n: int, seed: int, worst: list) -> tuple:
    """Columns of depth Kg: the instruction's worst rows repeated along the chain (each
    k-block meets the same loss), all-largest and all-smallest columns, cancelling
    columns, and random ones of several exponent spreads."""
    rng = np.random.default_rng(seed)
    pa, pb = finite_patterns(p.a_fmt), finite_patterns(p.b_fmt)
    cs = c_patterns(p.c_fmt, *product_range(p), p.F)
    va, vb = values(pa, p.a_fmt), values(pb, p.b_fmt)
    A, B, C = [], [], []
    reps = -(-Kg // p.K)
    for a, b, c in worst:
        A.append((list(a) * reps)[:Kg])
        B.append((list(b) * reps)[:Kg])
        C.append(c)
        A.append((list(a) * reps)[:Kg])
        B.append((list(b) * reps)[:Kg])
        C.append(0)
    for pats, vals_ in ((pa, va), (pb, vb)):
        del pats, vals_
    amax, bmax = pa[np.argmax(np.abs(va))], pb[np.argmax(np.abs(vb))]
    apos = pa[(va > 0)]
    bpos = pb[(vb > 0)]
    amin, bmin = apos[np.argmin(values(apos, p.a_fmt))], bpos[np.argmin(values(bpos, p.b_fmt))]
    for x, y in ((amax, bmax), (amin, bmin), (amax, bmin)):
        for c in cs[:: max(1, len(cs) // 8)]:
            A.append([x] * Kg)
            B.append([y] * Kg)
            C.append(c)
    while len(A) < n:
        spread = rng.integers(0, 3)
        if spread == 0:
            ia = rng.integers(0, len(pa), Kg)
            ib = rng.integers(0, len(pb), Kg)
        else:
            ia = np.argsort(np.abs(va))[-rng.integers(1, len(pa), Kg)]
            ib = np.argsort(np.abs(vb))[-rng.integers(1, len(pb), Kg)]
        a, b = list(pa[ia]), list(pb[ib])
        if rng.random() < 0.3 and Kg >= 2:  # the second half cancels the first
            h = Kg // 2
            sign = np.uint64(1 << (p.a_fmt.spec.storage - 1))
            a[h : 2 * h] = [x ^ sign for x in a[:h]]
            b[h : 2 * h] = b[:h]
        A.append(a)
        B.append(b)
        C.append(cs[rng.integers(0, len(cs))] if rng.random() < 0.7 else 0)
    return (np.array(A, np.uint64), np.array(B, np.uint64), np.array(C, np.uint64))


def audit_gemm_U(
    text: str,
    instr: str,
    Kg: int,
    p: ModelParams,
    worst: list,
    n: int,
    seed: int,
    known=None,
    cls: ClassSpec | None = None,
) -> Case:
    """The composed GEMM U (certify/compose.gemm_bound, `tcsmt bound --gemm`) of one
    schedule at depth Kg over the default class, against columns run through tc.matmul.
    The class is read as stated: no overflow and no underflow of M in the instruction's
    d format; a schedule that writes another `out` must bound the error in that format."""
    import tensorcore_smt as tc
    from tensorcore_smt.bv.dtypes import bit_view
    from tensorcore_smt.certify.compose import Argument, gemm_bound
    from tensorcore_smt.gemm.hypothesis import parse_gemm
    from tensorcore_smt.intake import bits_dtype, from_bits

    cls = cls or ClassSpec("default", ())
    case = Case(text, instr, f"{cls.name} K={Kg}", "U-gemm", NOT_APPLICABLE, known=known)
    try:
        hyp = parse_gemm(text, instr)
        arg = gemm_bound(hyp, Kg, cls.constraints())
    except UserError as e:
        case.status = REFUSED
        case.note = f"refused: {e}"
        return case
    except Exception as e:  # noqa: BLE001
        case.status = ERROR
        case.note = f"the certificate raised {type(e).__name__}: {e}"
        return case
    if not isinstance(arg, Argument):
        case.status = REFUSED
        case.note = arg.reason
        return case
    U = arg.upper
    case.certified = U
    A, B, C = gemm_columns(p, Kg, n, seed, worst)
    out_fmt = hyp.schedule.out or p.d_fmt
    try:
        # C as an array of its own format, so that it is read in c's format where it
        # joins, in the chain or in the epilogue (gemm/element.c_format)
        Cf = from_bits(C.astype(bits_dtype(p.c_fmt)), p.c_fmt)
        D = tc.matmul(hyp, A[:, None, :], B[:, :, None], Cf[:, None, None], instr=instr)
    except UserError as e:
        case.status = REFUSED
        case.note = f"tc.matmul refused: {e}"
        return case
    D = bit_view(np.asarray(D)).reshape(-1).astype(np.uint64)
    va = _vals(A.reshape(-1), p.a_fmt).reshape(A.shape)
    vb = _vals(B.reshape(-1), p.b_fmt).reshape(B.shape)
    prods = va * vb
    cv = _c_values(C, p.c_fmt)
    dv = _c_values(D, out_fmt)
    err = normwise(dv, cv, prods)
    M = np.abs(cv) + np.abs(prods).sum(axis=1)
    low = getattr(arg, "low", None)
    high = getattr(arg, "high", None)
    if low is None or high is None:  # the class as the query states it: d's format
        low, high = Fraction(2) ** p.d_fmt.spec.emin, value_of(max_finite_bits(p.d_fmt), p.d_fmt)
    case.note = f"class M = 0 or {float(low):.3g} <= M <= {float(high):.6g}"
    mask = ((M == 0) | ((M >= float(low)) & (M <= float(high)))) & np.isfinite(cv)
    mask &= cls.operand_ok("c", C, p.c_fmt)
    mask &= cls.operand_ok("a", A.reshape(-1), p.a_fmt).reshape(A.shape).all(1)
    mask &= cls.operand_ok("b", B.reshape(-1), p.b_fmt).reshape(B.shape).all(1)
    case.rows = int(mask.sum())
    e = np.where(mask, err, -1.0)
    case.status = SOUND
    best: Fraction | float = Fraction(0)
    fmts = (p.a_fmt, p.b_fmt, p.c_fmt, out_fmt)
    cand = list(np.nonzero(e >= float(U) * (1 - 1e-9))[0][:50]) + list(np.argsort(e)[-2:])
    for i in cand:
        if e[i] < 0:
            continue
        Mx = abs(value_of(int(C[i]), p.c_fmt)) + sum(
            abs(value_of(int(x), p.a_fmt) * value_of(int(y), p.b_fmt)) for x, y in zip(A[i], B[i])
        )
        if not (Mx == 0 or low <= Mx <= high):
            continue
        m = exact_normwise(A[i], B[i], C[i], D[i], fmts)
        if m > best:
            best = m
            if m > U:
                case.status = UNSOUND
                w = _witness(p, A[i], B[i], C[i])
                w["d"] = format_hex(int(D[i]), out_fmt)
                case.witness = w
    case.attained = best
    return case


# --- certificate: the argued exactness bound B of integer slices ------------------------------


def int_patterns(fmt: Format, m: int) -> np.ndarray | None:
    """Patterns of the integers -m..m in `fmt` (None when one is not representable)."""
    from tensorcore_smt.formats import round_fraction

    out = []
    for v in range(-m, m + 1):
        x = round_fraction(Fraction(v), fmt)
        if value_of(x, fmt) != v:
            return None
        out.append(x)
    return np.array(out, dtype=np.uint64)


def audit_integer_B(
    variant: str, instr: str, p: ModelParams, P: int, budget: int, seed: int, known=None
) -> Case:
    """model/integer_sums.argued_bound (what `tcsmt exact`, smt/arguments.py and the GEMM
    exactness take as proved): every row of P-bit integer slices with an integer
    |c| <= B must give d = c + sum a_k b_k exactly."""
    from tensorcore_smt.model.integer_sums import argued_bound

    case = Case(variant, instr, f"integer P={P}", "B", NOT_APPLICABLE, known=known)
    m = (1 << P) - 1
    ia, ib = int_patterns(p.a_fmt, m), int_patterns(p.b_fmt, m)
    if ia is None or ib is None:
        case.note = f"{P}-bit integers are not all representable in the operand formats"
        return case
    try:
        got = argued_bound(p, P)
    except Exception as e:  # noqa: BLE001
        case.status = ERROR
        case.note = f"the certificate raised {type(e).__name__}: {e}"
        return case
    if isinstance(got, str):
        case.status = REFUSED
        case.note = got
        return case
    B = got[0]
    case.certified = B
    rng = np.random.default_rng(seed)
    vals_ = np.arange(-m, m + 1)
    # distinct products with a representative (a, b) each
    reps: dict[int, tuple[int, int]] = {}
    for i, x in enumerate(vals_):
        for j, y in enumerate(vals_):
            reps.setdefault(int(x * y), (i, j))
    keys = sorted(reps)
    n_r, K = len(keys), p.K
    # c: the bound's edges, zero, small values, and each c that brings the running sum
    # to a power of two (the alignment and rounding edges)
    cset = {0, 1, -1, B, -B, B - 1, 1 - B}
    j = 1
    while (1 << j) <= 2 * B + 2 * K * m * m:
        for t in (1 << j, (1 << j) - 1, (1 << j) + 1):
            for s in range(-K * m * m, K * m * m + 1, max(1, m * m // 2)):
                v = t - s
                if abs(v) <= B:
                    cset.add(v)
                    cset.add(-v)
        j += 1
    cset |= {int(x) for x in rng.integers(-B, B + 1, 64)}
    cs = np.array(sorted(cset), dtype=np.int64)
    full = n_r**K
    if full * len(cs) <= budget:
        tup = np.array(list(itertools.product(range(n_r), repeat=K)), dtype=np.int64)
        T = np.repeat(tup, len(cs), axis=0)
        Cv = np.tile(cs, full)
        case.exhaustive = len(cs) == 2 * B + 1
    else:
        ext = [0, n_r - 1, keys.index(0)]
        sp = np.array(list(itertools.product(ext, repeat=K)), dtype=np.int64)
        n_rand = max(1, budget // len(cs) - len(sp))
        tup = np.concatenate([sp, rng.integers(0, n_r, (n_rand, K))])
        T = np.repeat(tup, len(cs), axis=0)
        Cv = np.tile(cs, len(tup))
    pv = np.array(keys, dtype=np.int64)
    exact = Cv + pv[T].sum(axis=1)
    ai = np.array([reps[k][0] for k in keys])
    bi = np.array([reps[k][1] for k in keys])
    A, Bm = ia[ai[T]], ib[bi[T]]
    Cp = _round_to(Cv.astype(np.float64), p.c_fmt)
    ok_c = _c_values(Cp, p.c_fmt) == Cv
    D = simulate_params(p, A, Bm, Cp, engine="numpy")
    dv = _c_values(np.asarray(D, np.uint64), p.d_fmt)
    bad = ok_c & (dv != exact)
    case.rows = int(ok_c.sum())
    case.status = SOUND
    case.attained = int(np.abs(Cv[ok_c]).max()) if ok_c.any() else None
    if bad.any():
        i = int(np.nonzero(bad)[0][np.argmin(np.abs(Cv[bad]))])
        case.status = UNSOUND
        case.attained = int(abs(Cv[i]))
        case.note = f"inexact at |c| = {abs(int(Cv[i]))}: d = {dv[i]!r}, exact {int(exact[i])}"
        case.witness = _witness(p, A[i], Bm[i], Cp[i], D[i])
    return case


# --- certificate: monotonicity in c ------------------------------------------------------------


def audit_monotone(variant: str, instr: str, p: ModelParams, budget: int, seed: int) -> Case:
    """model/monotone.monotone_in_c (smt/arguments.argued_monotone: the c-grows query
    answered unsat): with nonnegative inputs, c_1 <= c_2 must give d_1 <= d_2."""
    from tensorcore_smt.model.monotone import monotone_in_c

    case = Case(variant, instr, "positive, c grows", "monotone", NOT_APPLICABLE)
    why = monotone_in_c(p)
    if why is None:
        case.status = REFUSED
        case.note = "the argument does not apply"
        return case
    rng = np.random.default_rng(seed)
    pa, pb = finite_patterns(p.a_fmt), finite_patterns(p.b_fmt)
    pa, pb = pa[~sign_bit(pa, p.a_fmt)], pb[~sign_bit(pb, p.b_fmt)]
    ra, rb = pair_representatives(p, pa, pb)
    prod = values(ra, p.a_fmt) * values(rb, p.b_fmt)
    nz = prod[prod > 0]
    cs = c_patterns(p.c_fmt, int(math.log2(nz.min())), int(math.log2(nz.max())), p.F)
    cs = cs[~sign_bit(cs, p.c_fmt)]
    cs = cs[np.argsort(_c_values(cs, p.c_fmt))]
    # consecutive c, c and its next pattern, and random pairs
    pairs = [(cs[i], cs[i + 1]) for i in range(len(cs) - 1)]
    pairs += [(x, x + np.uint64(1)) for x in cs[:-1]]
    n_t = max(1, budget // max(1, len(pairs)))
    tup = rng.integers(0, len(ra), (n_t, p.K))
    c1 = np.array([x for x, _ in pairs], np.uint64)
    c2 = np.array([y for _, y in pairs], np.uint64)
    T = np.repeat(tup, len(pairs), axis=0)
    C1, C2 = np.tile(c1, n_t), np.tile(c2, n_t)
    fin = np.isfinite(_c_values(C2, p.c_fmt)) & (_c_values(C2, p.c_fmt) >= _c_values(C1, p.c_fmt))
    T, C1, C2 = T[fin], C1[fin], C2[fin]
    A, Bm = ra[T], rb[T]
    d1 = _c_values(np.asarray(simulate_params(p, A, Bm, C1, engine="numpy"), np.uint64), p.d_fmt)
    d2 = _c_values(np.asarray(simulate_params(p, A, Bm, C2, engine="numpy"), np.uint64), p.d_fmt)
    bad = d2 < d1
    case.rows = len(T)
    case.status = SOUND
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        case.status = UNSOUND
        case.note = f"d({_show(float(_c_values(C1[i : i + 1], p.c_fmt)[0]))}) = {d1[i]!r} > d(c2) = {d2[i]!r}"
        case.witness = _witness(p, A[i], Bm[i], C1[i]) | {"c2": format_hex(int(C2[i]), p.c_fmt)}
    return case


# --- certificate: no clamp on integer units -------------------------------------------------------


def audit_no_clamp(variant: str, instr: str, p: ModelParams, budget: int, seed: int) -> Case:
    """model/integer.no_clamp_bound (smt/arguments.argued_no_clamp): with |c| <= B no sum
    leaves the s32 range, so wrap-around, `.satfinite` (either order) and the exact sum
    agree on every row."""
    from tensorcore_smt.model.integer import no_clamp_bound, term_range
    from tensorcore_smt.model.params import IntClamp, Order

    B, _ = no_clamp_bound(p)
    case = Case(variant, instr, "|c| <= B", "no-clamp", SOUND, certified=B)
    rng = np.random.default_rng(seed)
    lo_a, hi_a = p.a_fmt.spec.int_range
    lo_b, hi_b = p.b_fmt.spec.int_range
    pick = lambda lo, hi: sorted({lo, lo + 1, -1 if lo < 0 else 0, 0, 1, hi - 1, hi})  # noqa: E731
    av, bv = pick(lo_a, hi_a), pick(lo_b, hi_b)
    pairs = list(itertools.product(av, bv))
    tmin, tmax = term_range(p)
    pairs.sort(key=lambda t: t[0] * t[1])
    n_p, K = len(pairs), p.K
    if n_p**K * 8 <= budget:
        tup = np.array(list(itertools.product(range(n_p), repeat=K)), dtype=np.int64)
    else:
        ext = [0, n_p - 1]
        tup = np.concatenate(
            [
                np.array(list(itertools.product(ext, repeat=K)), dtype=np.int64),
                rng.integers(0, n_p, (budget // 8, K)),
            ]
        )
    A_v = np.array([pairs[i][0] for i in range(n_p)])[tup]
    B_v = np.array([pairs[i][1] for i in range(n_p)])[tup]
    T = (A_v * B_v).sum(axis=1)
    # c at the bound on the side the terms push towards, and at -B, 0
    cvals = np.stack([np.full(len(T), B), np.full(len(T), -B), np.zeros(len(T), np.int64)], 1)
    cvals[:, 2] = np.where(T >= 0, B, -B)
    cvals[:, 2] = np.clip(cvals[:, 2], -B, B)
    A_v = np.repeat(A_v, 3, axis=0)
    B_v = np.repeat(B_v, 3, axis=0)
    C = cvals.reshape(-1)
    exact = C + (A_v * B_v).sum(axis=1)

    def bits(v, fmt):
        return (v.astype(np.int64) & ((1 << fmt.spec.storage) - 1)).astype(np.uint64)

    A, Bm, Cb = bits(A_v, p.a_fmt), bits(B_v, p.b_fmt), bits(C, Format.S32)
    case.rows = len(C)
    del tmin, tmax
    for clamp, order in itertools.product(IntClamp, (Order.C_FIRST, Order.C_LAST)):
        try:
            q = p.with_(int_clamp=clamp, order=order)
        except ValueError:
            continue
        d = np.asarray(simulate_params(q, A, Bm, Cb, engine="numpy")).astype(np.int64)
        d = np.where(d >= 1 << 31, d - (1 << 32), d)
        bad = d != exact
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            case.status = UNSOUND
            case.note = f"{clamp.value}/{order.value}: d = {int(d[i])}, exact {int(exact[i])}"
            case.witness = {"a": list(A_v[i]), "b": list(B_v[i]), "c": int(C[i])}
            break
    return case


# --- the grid of variants ----------------------------------------------------------------------

TINY = ("e2m1", "e3m2", "e2m3", "e4m3", "e5m2")

BASES: list[tuple[str, str, bool]] = [
    # (arch, instruction, whether its operand formats may be overridden by tiny ones)
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", False),
    ("hopper", "wgmma.m64n8k32.f16.e4m3.e4m3", False),
    ("hopper", "m16n8k32.f32.e4m3.e4m3.f32", False),
    ("hopper", "m16n8k16.f32.f16.f16.f32", True),
    ("ada", "m16n8k16.f32.e5m2.e5m2.f32", False),
    ("ada", "m16n8k16.f16.e4m3.e4m3.f16", False),
    ("blackwell", "tcgen05.m64n8k32.kind::f8f6f4.f32.e2m1.e2m1", False),
    ("blackwell", "tcgen05.m64n8k32.kind::f8f6f4.f32.e3m2.e2m3", False),
    ("blackwell", "tcgen05.m64n8k32.kind::f8f6f4.f16.e2m1.e2m1", False),
    ("volta", "m8n8k4.f32.f16.f16.f32", True),
    ("volta", "m8n8k4.f16.f16.f16.f16", True),
    ("ampere", "m16n8k16.f32.f16.f16.f32", True),
    ("cdna3", "v_mfma_f32_32x32x16_fp8_fp8", False),
    ("cdna3", "v_mfma_f32_32x32x8_f16", True),
    ("cdna2", "v_mfma_f32_32x32x4f16", True),
    ("cdna1", "v_mfma_f32_32x32x8f16", True),
    ("rdna3", None, True),
]

SPACE: dict[str, tuple] = {
    "K": (1, 2, 3, 4),
    "L": (None, 1, 2, 3, 4),
    "F": (None, 0, 1, 2, 3, 4, 5, 6, 8, 10, 12),
    "carry_bits": (None, "none", 0, 1, 2, 3),
    "align": (None, "truncate", "round-down", "exact"),
    "rounding": (None, "rne", "rz", "rtp", "rtn", "rna"),
    "c_add": (None, "fused", "after"),
    "F2": (None, 0, 4, 8, 12, 16, 20, 23, 24, 31),
    "cd": (None, "fp16", "e5m2"),
    "ab": (None, *TINY),
    "flush_inputs": (None, "true"),
}
"""Each override's values (None: the instruction's own); the grid and the Hypothesis
strategy draw from it alike."""


def variant_text(arch: str, choice: dict, base_p: ModelParams, tiny_ok: bool) -> str:
    """The variant expression of one point of SPACE on a base instruction."""
    items = []
    for name in ("K", "L", "F", "carry_bits", "align", "rounding", "c_add", "F2", "flush_inputs"):
        v = choice.get(name)
        if v is None:
            continue
        if name == "L" and base_p.algorithm not in (
            Algorithm.FDA,
            Algorithm.FDRDA,
            Algorithm.GFDRDA,
        ):
            continue
        if name == "F2" and base_p.algorithm not in (Algorithm.FDRDA, Algorithm.GFDRDA):
            continue
        if name in ("F", "carry_bits", "align", "c_add") and base_p.algorithm != Algorithm.FDA:
            if not (name == "F" and base_p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA)):
                continue
        items.append(f"{name}={v}")
    ab = choice.get("ab")
    if ab is not None and tiny_ok:
        items += [f"a_fmt={ab}", f"b_fmt={ab}"]
    cd = choice.get("cd")
    if cd is not None:
        items += [f"c_fmt={cd}", f"d_fmt={cd}"]
        if base_p.rounding_fmt is not None:
            items.append("rounding_fmt=none")
        if base_p.unpack is not None and cd == "e5m2":
            pass
    return f"{arch}[{','.join(items)}]" if items else arch


def draw_choice(rng: random.Random) -> dict:
    return {k: rng.choice(v) for k, v in SPACE.items()}


def known_family(p: ModelParams) -> str | None:
    """The known-unsound family a variant belongs to (KNOWN), or None."""
    del p
    return None


def _instr_name(arch: str, instr: str | None) -> str:
    from tensorcore_smt.spec.presets import PRESETS

    return instr or PRESETS[arch].default_instr


def grid(n: int, seed: int) -> list[tuple[str, str, ModelParams]]:
    """n variants drawn from SPACE over BASES (round robin), each the model accepts;
    the preset instructions themselves (at K <= 4) first."""
    rng = random.Random(seed)
    out: list[tuple[str, str, ModelParams]] = []
    seen = set()
    tries = 0
    while len(out) < n and tries < 20 * n:
        arch, instr, tiny_ok = BASES[tries % len(BASES)]
        instr = _instr_name(arch, instr)
        tries += 1
        base = resolve(arch, instr)
        choice = draw_choice(rng) if tries > len(BASES) else {"K": min(base.K, 4)}
        if choice.get("K") is None or base.K <= 4:
            choice.setdefault("K", min(base.K, 4))
        if tiny_ok and choice.get("ab") is None:
            choice["ab"] = rng.choice(TINY)
        text = variant_text(arch, choice, base, tiny_ok)
        try:
            p = resolve(text, instr)
        except UserError:
            continue
        if p.K > 4 or p.a_fmt.spec.storage > 8 or p.b_fmt.spec.storage > 8:
            continue
        if (text, instr) in seen:
            continue
        seen.add((text, instr))
        out.append((text, instr, p))
    return out


# --- the integer-slice, monotone and no-clamp grids --------------------------------------------

INTEGER_BASES = [
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("hopper", "m16n8k16.f32.f16.f16.f32"),
    ("ampere", "m16n8k16.f32.f16.f16.f32"),
    ("volta", "m8n8k4.f32.f16.f16.f32"),
    ("blackwell", "tcgen05.m64n8k32.kind::f8f6f4.f32.e2m3.e2m3"),
    ("cdna3", "v_mfma_f32_32x32x8_f16"),
    ("cdna2", "v_mfma_f32_32x32x4f16"),
]


def integer_grid(n: int, seed: int) -> list[tuple[str, str, ModelParams, int]]:
    """(variant, instruction, params, P) for the integer-sum argument: small F (so the
    2^(F+1) term binds), K and L up to 4 (chained groups where L < K), P = 1..4."""
    rng = random.Random(seed)
    out = []
    tries = 0
    while len(out) < n and tries < 30 * n:
        arch, instr = INTEGER_BASES[tries % len(INTEGER_BASES)]
        tries += 1
        base = resolve(arch, instr)
        items = [f"K={rng.choice((1, 2, 3, 4))}"]
        if base.algorithm in (Algorithm.FDA, Algorithm.FDRDA, Algorithm.GFDRDA):
            items.append(f"L={rng.choice((1, 2, 3, 4))}")
            items.append(f"F={rng.choice((4, 5, 6, 7, 8, 9, 10, 12, 13))}")
        if base.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
            items.append(f"F2={rng.choice((4, 6, 8, 10, 12, 16, 23))}")
        if base.a_fmt.spec.storage > 8:
            ab = rng.choice(("e4m3", "e3m2", "e2m3", "fp16"))
            items += [f"a_fmt={ab}", f"b_fmt={ab}"]
        if rng.random() < 0.3 and base.algorithm == Algorithm.FDA:
            items.append(f"rounding={rng.choice(('rne', 'rz', 'rtn', 'rtp'))}")
        if rng.random() < 0.3:
            items += ["c_fmt=fp16", "d_fmt=fp16"]
            if base.rounding_fmt is not None:
                items.append("rounding_fmt=none")
        text = f"{arch}[{','.join(items)}]"
        try:
            p = resolve(text, instr)
        except UserError:
            continue
        P = rng.choice((1, 2, 3, 4))
        out.append((text, instr, p, P))
    return out


def integer_known(p: ModelParams) -> str | None:
    return known_family(p)


MONOTONE_BASES = [
    ("cdna3", "v_mfma_f32_32x32x8_f16", True),
    ("cdna3", "v_mfma_f32_32x32x4_xf32", True),
    ("cdna3", "v_mfma_f32_32x32x16_fp8_fp8", False),
]


def monotone_grid(n: int, seed: int) -> list[tuple[str, str, ModelParams]]:
    rng = random.Random(seed)
    out = []
    tries = 0
    while len(out) < n and tries < 30 * n:
        arch, instr, tiny_ok = MONOTONE_BASES[tries % len(MONOTONE_BASES)]
        tries += 1
        F = rng.choice((10, 12, 23, 24, 26, 30))
        F2 = rng.choice((F - 1, F, 23, 24, 28, 31))
        items = [
            f"K={rng.choice((1, 2, 3, 4))}",
            f"L={rng.choice((1, 2, 4))}",
            f"F={F}",
            f"F2={F2}",
        ]
        if tiny_ok:
            ab = rng.choice(TINY)
            items += [f"a_fmt={ab}", f"b_fmt={ab}"]
        if F < 23 or rng.random() < 0.3:
            items += ["c_fmt=fp16", "d_fmt=fp16"]
        text = f"{arch}[{','.join(items)}]"
        try:
            p = resolve(text, instr)
        except UserError:
            continue
        out.append((text, instr, p))
    return out


CLAMP_BASES = [
    ("turing", "m8n8k16.s32.s8.s8.s32"),
    ("turing", "m8n8k16.s32.u8.s8.s32"),
    ("turing", "m8n8k32.s32.s4.s4.s32"),
    ("turing", "m8n8k32.s32.u4.u4.s32"),
    ("turing", "m8n8k16.satfinite.s32.s8.s8.s32"),
]


def clamp_grid(n: int, seed: int) -> list[tuple[str, str, ModelParams]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        arch, instr = CLAMP_BASES[i % len(CLAMP_BASES)]
        items = [f"K={rng.choice((1, 2, 3, 4))}"]
        if "satfinite" in instr:
            items.append(f"L={rng.choice((1, 2, 3, 4))}")
        text = f"{arch}[{','.join(items)}]"
        try:
            out.append((text, instr, resolve(text, instr)))
        except UserError:
            continue
    return out


SCHEDULES = (
    "serial",
    "serial[promote={k}]",
    "serial[split_k=2,split_tile={k}]",
    "serial[split_k=2,split_tile={k},reduce=pairwise]",
    "serial[split_k=3,split_tile={k},split=interleaved]",
    "serial[c_join=epilogue]",
    "serial[out=fp16]",
    "serial[out=bf16]",
    "serial[promote={k},out=fp16]",
)


def gemm_classes(p: ModelParams) -> list[ClassSpec]:
    """The default class, and c within a few binades of the products (where the
    composed GEMM bound refuses the default class for a rounding to nearest that could
    overflow near the largest finite value)."""
    lo, hi = product_range(p)
    lo, hi = lo - 2, hi + 4
    return [
        ClassSpec("default", ()),
        ClassSpec(
            f"window:c={lo}:{hi}",
            (Constraint(ConstraintKind.EXPONENT_WINDOW, "c", lo, hi),),
            window=("c", lo, hi),
        ),
    ]


def gemm_known(text: str, p: ModelParams) -> str | None:
    del text
    return known_family(p)


# --- the audit ---------------------------------------------------------------------------------


@dataclass
class Size:
    variants: int  # instruction variants (each asked over every class)
    rows: int  # row budget per variant
    gemm: int  # instruction variants whose schedules are asked
    gemm_cols: int
    integer: int
    monotone: int
    clamp: int


SIZES = {
    "fast": Size(variants=8, rows=6000, gemm=2, gemm_cols=120, integer=10, monotone=3, clamp=4),
    "wide": Size(
        variants=340, rows=16000, gemm=16, gemm_cols=300, integer=200, monotone=30, clamp=30
    ),
}


@dataclass
class Report:
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    variant_refusals: int = 0

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cases)

    @property
    def covered(self) -> int:
        return self.count(SOUND) + self.count(UNSOUND)

    def unsound(self, known: bool | None = None) -> list[Case]:
        out = [c for c in self.cases if c.status == UNSOUND]
        if known is True:
            return [c for c in out if c.known]
        if known is False:
            return [c for c in out if not c.known]
        return out

    def summary(self, show: int = 10) -> str:
        by_cert: dict[str, list[int]] = {}
        for c in self.cases:
            row = by_cert.setdefault(c.cert, [0, 0, 0, 0, 0, 0])
            row[[SOUND, UNSOUND, REFUSED, NOT_APPLICABLE, ERROR].index(c.status)] += 1
            row[5] += c.rows
        lines = [
            f"audit: {self.covered} variant x class cases covered "
            f"({sum(c.exhaustive for c in self.cases if c.status in (SOUND, UNSOUND))} on "
            f"every input of the class), {self.count(REFUSED)} certificates refused, "
            f"{self.count(NOT_APPLICABLE)} not applicable, {self.count(ERROR)} raised, "
            f"{len(self.unsound())} unsound "
            f"({len(self.unsound(known=True))} of a known family), "
            f"{sum(c.rows for c in self.cases)} rows, {self.seconds:.1f} s",
        ]
        for cert, (s, u, r, na, err, rows) in by_cert.items():
            lines.append(
                f"  {cert:13s} sound {s:5d}  unsound {u:4d}  refused {r:4d}  n/a {na:4d}  "
                f"error {err:3d}  rows {rows}"
            )
        errors = [c for c in self.cases if c.status == ERROR]
        for title, cases in (
            ("unsound, new", self.unsound(known=False)),
            ("unsound, known family", self.unsound(known=True)),
            ("certificate errors", errors),
        ):
            if cases:
                lines.append(f"{title} (first {min(show, len(cases))} of {len(cases)}):")
                lines += ["  " + c.describe() for c in cases[:show]]
        return "\n".join(lines)


def run_instruction_cases(size: Size, seed: int, log=None) -> list[Case]:
    cases = []
    for text, instr, p in grid(size.variants, seed):
        got = audit_instruction_U(text, instr, p, size.rows, seed, known_family(p))
        cases += got
        if log:
            log(got)
    return cases


def _worst_rows(cases_rows: list, p: ModelParams) -> list:
    return cases_rows


def run_gemm_cases(size: Size, seed: int, log=None) -> list[Case]:
    """Schedules over instruction variants of the grid (chained FDA and SFMA units,
    K_instr <= 4): each at depths of two and three k-blocks."""
    cases = []
    variants = [v for v in grid(size.variants * 3, seed + 1) if v[2].algorithm != Algorithm.GPS][
        : size.gemm
    ]
    for text, instr, p in variants:
        if "/" in text:
            continue
        rows = make_rows(p, size.rows // 4, seed)
        worst = _instruction_worst(p, rows)
        k = p.K
        for sched in SCHEDULES:
            for Kg in (2 * k, 3 * k):
                s = sched.format(k=k)
                if "split_k=3" in s and Kg < 3 * k:
                    continue
                hyp = f"{text}/{s}"
                for cls in gemm_classes(p):
                    case = audit_gemm_U(
                        hyp, instr, Kg, p, worst, size.gemm_cols, seed, gemm_known(hyp, p), cls
                    )
                    cases.append(case)
                    if log:
                        log([case])
    return cases


def _instruction_worst(p: ModelParams, rows: Rows, n: int = 6) -> list:
    """The rows of largest normwise error in the default class (to repeat along a chain)."""
    d = simulate_params(p, rows.a, rows.b, rows.c, engine="numpy")
    va = _vals(rows.a.reshape(-1), p.a_fmt).reshape(rows.a.shape)
    vb = _vals(rows.b.reshape(-1), p.b_fmt).reshape(rows.b.shape)
    prods = va * vb
    cv = _c_values(rows.c, p.c_fmt)
    err = normwise(_c_values(np.asarray(d, np.uint64), p.d_fmt), cv, prods)
    M = np.abs(cv) + np.abs(prods).sum(axis=1)
    err = np.where(in_global_class(M, p.d_fmt) & np.isfinite(err), err, -1)
    top = np.argsort(err)[-n:]
    return [(list(rows.a[i]), list(rows.b[i]), int(rows.c[i])) for i in top]


def run_integer_cases(size: Size, seed: int, log=None) -> list[Case]:
    cases = []
    for text, instr, p, P in integer_grid(size.integer, seed):
        case = audit_integer_B(text, instr, p, P, size.rows, seed, integer_known(p))
        cases.append(case)
        if log:
            log([case])
    return cases


def run_monotone_cases(size: Size, seed: int, log=None) -> list[Case]:
    cases = []
    for text, instr, p in monotone_grid(size.monotone, seed):
        case = audit_monotone(text, instr, p, size.rows, seed)
        case.known = known_family(p)
        cases.append(case)
        if log:
            log([case])
    return cases


def run_clamp_cases(size: Size, seed: int, log=None) -> list[Case]:
    cases = []
    for text, instr, p in clamp_grid(size.clamp, seed):
        case = audit_no_clamp(text, instr, p, size.rows, seed)
        cases.append(case)
        if log:
            log([case])
    return cases


PARTS: dict[str, Callable] = {
    "U": run_instruction_cases,
    "U-gemm": run_gemm_cases,
    "B": run_integer_cases,
    "monotone": run_monotone_cases,
    "no-clamp": run_clamp_cases,
}


def audit(size: str | Size = "fast", seed: int = 0, parts=None, log=None) -> Report:
    """Run the audit (every part, or those named in `parts`)."""
    sz = SIZES[size] if isinstance(size, str) else size
    t0 = time.monotonic()
    rep = Report()
    for name, fn in PARTS.items():
        if parts is not None and name not in parts:
            continue
        rep.cases += fn(sz, seed, log)
    rep.seconds = time.monotonic() - t0
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="wide")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=10, help="counterexamples shown per kind")
    ap.add_argument("--part", action="append", choices=sorted(PARTS), help="only these parts")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per unsound case")
    args = ap.parse_args(argv)

    def log(cases):
        if args.verbose:
            for c in cases:
                if c.status == UNSOUND:
                    print(c.describe(), flush=True)

    rep = audit(args.size, args.seed, args.part, log)
    print(rep.summary(args.show))
    return 1 if rep.unsound() else 0


if __name__ == "__main__":
    sys.exit(main())
