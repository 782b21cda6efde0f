"""The analytic normwise bound of the literature, for one instruction and for one output
element of a GEMM at depth K, as exact rationals: what a rounding error analysis
promises, beside what the certificates (compose.py, bound.py) prove and attain.

Source: P. Blanchard, N. J. Higham, F. Lopez, T. Mary, S. Pranesh, "Mixed precision
block fused multiply-add: error analysis and application to GPU tensor cores", SIAM J.
Sci. Comput. 42(3), C124-C141, 2020 (§3, Algorithm 3.1, eqs. (3.3)-(3.4), Theorem 3.2).

**The theorem.** A block FMA of size b computes D = C + A B with

  (H1) the products a_k b_k exact,
  (H2) the b + 1 terms (C and the b products) summed in some order by b additions, each
       satisfying the standard model fl(x + y) = (x + y)(1 + delta), |delta| <= u_bar
       (precision u_bar, round to nearest in the paper: u_bar = 2^-p),
  (H3) the result rounded to the block FMA's output precision u_FMA,

and no underflow or overflow anywhere. A product of K = q b terms computed by q chained
block FMAs (Algorithm 3.1: the result of one is C of the next) then satisfies, per
element,

  |d - d_exact| <= (gamma_q(u_eff) + gamma_n(u_bar) + gamma_q(u_eff) gamma_n(u_bar))
                   (|C| + |A| |B|),     n = q b,                                 (3.4)

gamma_n(u) = n u / (1 - n u) (valid while n u < 1), u_eff the output rounding that
counts (3.3): 0 when u_FMA <= u_bar (the output holds the internal result, the case of
every fp32-output unit here), else u_FMA. For one instruction (q = 1, n = b = K) the
bound is gamma_K(u_bar): the normwise measure of docs/bounds.md has exactly the
denominator |c| + sum |a_k b_k| of this bound.

**Which u.** M. Fasi, N. J. Higham, M. Mikaitis, S. Pranesh, "Numerical behavior of
NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021, found that the units do not add
to nearest: terms are aligned to the largest exponent with the bits below the
accumulator truncated (no guard digits) and the sum is rounded toward zero. A directed
rounding has unit roundoff 2^(1-p), twice that of rounding to nearest, so the bound is
taken with the binary32 accumulation of the paper's tensor-core model at u_bar = 2^-23
instead of 2^-24. A unit that keeps only F < 23 fraction bits below the largest
exponent holds its sum to F + 1 significant bits, a truncation with unit roundoff 2^-F:
u_bar = max(2^-23, 2^-F) (the FP8 wgmma, F = 13, rounding into E8M13: 2^-13). A unit
whose output format is narrower than binary32 (fp16 d) rounds once more, u_FMA = 2^(1-p)
of that format, counted as (3.3) says (u_eff = u_FMA > u_bar).

**Applies, or not.** Every result says which:

- *holds*: the unit's additions are IEEE operations to nearest (SFMA units: a chain of
  FMAs), or it sums exactly and rounds once to nearest: (H1)-(H3) hold literally and
  the bound is a theorem for the unit (where nothing underflows).
- *relaxed*: fused units that truncate in the alignment (every NVIDIA FDA preset). (H2)
  does not hold for single additions (Fasi et al.: c = -1 + 2^-24 plus 1 gives 2^-23, a
  relative error of 1), so the theorem is not a proof for the unit: the bound is the
  theorem's formula with u_bar = 2^(1-p) as above, and whether the unit keeps it is for
  the certificates to show: a composed U at or below it proves it for the class, a
  witness above it refutes it (results/bounds.md: with subnormal operands, Volta's and
  Hopper's alignment to an unnormalised exponent drops bits far above the product's
  value, and witnesses exceed the bound by two orders of magnitude and more).
- *not applicable* (bound None, with the reason): round-down alignment (CDNA3's FDRDA,
  GFDRDA: the floor of a signed term grows its magnitude, not a rounding of a sum in
  any precision), pairwise groups with flushed products and sums (GPS), block-scaled and
  split units (the products are not a_k b_k), too few carry bits (the register wraps),
  flushed subnormal inputs (products not exact) unless the inputs are normal, and
  gamma_n with n u >= 1 (the bound is void).

**GEMM schedules.** Algorithm 3.1 is the serial schedule (one chain of K / b
instructions, C in the chain): (3.4) as stated. Promoted chains (an fp32 accumulator
every `promote` products), split-K partials, C added in the epilogue and a conversion
of the output are further roundings on a product's way to d; they are counted as the
paper counts (each product's error is a product of at most n factors 1 + delta with
|delta| <= u, bounded by 1 + gamma_n(u), Higham, Accuracy and Stability of Numerical
Algorithms, 2nd ed., Lemma 3.1), per unit roundoff, giving prod_i (1 + gamma_{n_i}(u_i))
- 1, which is (3.4) for the serial schedule. That extension is ours, not the paper's;
the result says so (`source`).

The paper's analysis excludes underflow; the normwise classes of docs/bounds.md keep the
exact magnitudes normal but let partial sums and products be tiny, which the composed U
counts in its absolute terms and the analytic bound does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..formats import Format, Rounding
from ..model.fda import least_carry_bits
from ..model.params import Algorithm, ModelParams, Opposing, Split
from ..model.terms import AlignMode

BLANCHARD = (
    "Blanchard, Higham, Lopez, Mary, Pranesh, SIAM J. Sci. Comput. 42(3) 2020, "
    "Algorithm 3.1, eq. (3.4)"
)
FASI = "Fasi, Higham, Mikaitis, Pranesh, PeerJ Comput. Sci. 7:e330 2021"

HOLDS = "holds"
RELAXED = "relaxed"
NOT_APPLICABLE = "not applicable"


def gamma(n: int, u: Fraction) -> Fraction | None:
    """gamma_n(u) = n u / (1 - n u), or None when n u >= 1 (no bound)."""
    nu = n * Fraction(u)
    if nu >= 1:
        return None
    return nu / (1 - nu)


def unit_roundoff(fmt: Format, rounding: Rounding) -> Fraction:
    """u of rounding into `fmt`: 2^-p to nearest, 2^(1-p) for a directed rounding."""
    p = fmt.spec.precision
    nearest = rounding in (Rounding.RNE, Rounding.RNA)
    return Fraction(1, 2**p) if nearest else Fraction(2, 2**p)


@dataclass(frozen=True)
class Analytic:
    """The analytic normwise bound of one computation, or why there is none.

    `bound`: the bound on |d - exact| / (|c| + sum |a_k b_k|), None when the theorem
    does not apply (`hypothesis` NOT_APPLICABLE, `reason` says why) or is void.
    `terms`: (n, u) pairs, n roundings of unit roundoff u on a product's way to d; the
    bound is prod (1 + gamma_n(u)) - 1. `hypothesis`: HOLDS, RELAXED or NOT_APPLICABLE
    (module docstring). `source`: the paper, and whether the formula is stated there or
    counted as it counts."""

    bound: Fraction | None
    hypothesis: str
    reason: str
    terms: tuple[tuple[int, Fraction], ...] = ()
    source: str = BLANCHARD
    parts: tuple[str, ...] = ()  # a drift: the formulas of both bounds, added

    @property
    def applies(self) -> bool:
        return self.bound is not None

    def formula(self) -> str:
        """The bound as gamma terms, e.g. 'gamma_4(2^-23)'."""
        if self.parts:
            return " + ".join(self.parts)
        if not self.terms:
            return "-"
        parts = [f"gamma_{n}(2^{_log2(u)})" for n, u in self.terms]
        if len(parts) == 1:
            return parts[0]
        return "prod(1 + " + ", 1 + ".join(parts) + ") - 1"


def _log2(u: Fraction) -> int:
    return -(u.denominator.bit_length() - 1) if u.numerator == 1 else 0


def _combine(terms: list[tuple[int, Fraction]]) -> tuple[tuple[int, Fraction], ...]:
    """Counts of equal unit roundoff added up (1 + gamma_a)(1 + gamma_b) <= 1 +
    gamma_(a+b) (Higham, Lemma 3.3), largest u first; zero counts dropped."""
    by_u: dict[Fraction, int] = {}
    for n, u in terms:
        if n > 0 and u > 0:
            by_u[u] = by_u.get(u, 0) + n
    return tuple(sorted(((n, u) for u, n in by_u.items()), key=lambda t: -t[1]))


def _product_bound(terms: tuple[tuple[int, Fraction], ...]) -> Fraction | None:
    """prod (1 + gamma_n(u)) - 1, or None when some gamma is void (n u >= 1)."""
    total = Fraction(1)
    for n, u in terms:
        g = gamma(n, u)
        if g is None:
            return None
        total *= 1 + g
    return total - 1


def _refuse(reason: str) -> Analytic:
    return Analytic(None, NOT_APPLICABLE, reason)


ONES_REFUSAL = (
    "opposing=ones: a term of the other sign than c loses a unit of the register beyond "
    "its truncation (no end-around carry), so an exact cancellation need not give zero "
    "(rocm-systems #12056's adder): not a rounding of the sum in any precision"
)


def internal_roundoff(p: ModelParams) -> tuple[Fraction, Fraction, str, str] | Analytic:
    """(u_bar, u_FMA, hypothesis, why) of the unit: the unit roundoff of its additions,
    that of its output rounding, and whether the theorem's hypothesis holds; or a
    refusal (module docstring: which u, and why)."""
    if p.scale_fmt is not None:
        return _refuse("block-scaled: the unit adds scaled products, not a_k b_k")
    if p.split != Split.NONE:
        return _refuse("split operands: the products are of the split parts, not a_k b_k")
    if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
        return _refuse(
            "round-down alignment (floor of the signed terms): not a rounding of the sum "
            "in any precision, so the block-FMA model does not describe it"
        )
    if p.algorithm in (Algorithm.GPS, Algorithm.GDFS, Algorithm.SEQUENTIAL):
        return _refuse(f"{p.algorithm.value}: outside the block-FMA model (products rounded)")
    if p.flush_inputs or p.flush_products:
        return _refuse("subnormal inputs or products flushed: the products are not exact")
    if p.opposing != Opposing.EXACT:
        return _refuse(ONES_REFUSAL)
    if p.algorithm == Algorithm.SFMA:
        u = unit_roundoff(p.d_fmt, p.rounding)
        if p.rounding in (Rounding.RNE, Rounding.RNA):
            return u, u, HOLDS, f"IEEE FMAs to nearest in {p.d_fmt.spec.name}: u = 2^-p"
        return u, u, RELAXED, f"IEEE FMAs rounded {p.rounding.value}: u = 2^(1-p) ({FASI})"
    # FDA
    if p.carry_bits is not None and p.carry_bits < least_carry_bits(p):
        return _refuse(f"carry_bits={p.carry_bits} < {least_carry_bits(p)}: the register can wrap")
    out = p.out_fmt
    u_fma = unit_roundoff(out, p.rounding)
    name = out.spec.name
    if p.align == AlignMode.EXACT:
        if p.rounding in (Rounding.RNE, Rounding.RNA):
            return u_fma, u_fma, HOLDS, f"exact sum rounded to nearest in {name}: u = 2^-p"
        why = f"exact sum rounded {p.rounding.value} in {name}: u = 2^(1-p) ({FASI})"
        return u_fma, u_fma, RELAXED, why
    # the paper's tensor-core model sums in binary32 (its TC16 and TC32 differ only in
    # the output); a register of F fraction bits below the largest exponent truncates
    # with unit roundoff 2^-F, and a format wider than binary32 keeps its own precision
    p_acc = max(out.spec.precision, Format.FP32.spec.precision)
    u_bar = max(Fraction(1, 2**p.F), Fraction(2, 2**p_acc))
    why = (
        f"terms truncated to F = {p.F} fraction bits below the largest exponent, the sum "
        f"rounded {p.rounding.value} into {name}: no single addition satisfies the "
        f"standard model to nearest (no guard digits), so the sum is taken in binary32 "
        f"with round toward zero, u = 2^(1-p) ({FASI}), or in F + 1 bits where fewer: "
        f"u_bar = max(2^-23, 2^-F) = 2^{_log2(u_bar)}"
    )
    if u_fma > u_bar:
        why += f"; output rounded into {name}: u_FMA = 2^{_log2(u_fma)}"
    return u_bar, u_fma, RELAXED, why


def instruction_terms(p: ModelParams) -> tuple[list[tuple[int, Fraction]], str, str] | Analytic:
    """The roundings on a term's way through one instruction, as (n, u) pairs: K
    additions at u_bar (b = K in (3.4): c and K products, K additions), one more where
    c is converted into a narrower format first (SFMA), and the block FMA's output
    rounding u_FMA where it is coarser than u_bar ((3.3)); or a refusal."""
    got = internal_roundoff(p)
    if isinstance(got, Analytic):
        return got
    u_bar, u_fma, hyp, why = got
    terms = [(p.K, u_bar)]
    if p.algorithm == Algorithm.SFMA and p.c_fmt.spec.precision > p.d_fmt.spec.precision:
        terms.append((1, u_bar))
    if u_fma > u_bar:
        terms.append((1, u_fma))
    # d narrower than the format the sum is rounded into: one more rounding
    if p.algorithm == Algorithm.FDA and p.d_fmt.spec.precision < p.out_fmt.spec.precision:
        terms.append((1, unit_roundoff(p.d_fmt, Rounding.RNE)))
    return terms, hyp, why


def instruction_analytic(p: ModelParams, normal_inputs: bool = False) -> Analytic:
    """The analytic bound of one instruction (a block FMA of size b = K, q = 1 in (3.4)):
    gamma_K(u_bar) for the units here; `normal_inputs`: the class keeps a and b normal
    (then flushing subnormal inputs changes nothing)."""
    if normal_inputs and p.flush_inputs and not p.flush_products:
        import dataclasses

        p = dataclasses.replace(p, flush_inputs=False)
    got = instruction_terms(p)
    if isinstance(got, Analytic):
        return got
    terms, hyp, why = got
    t = _combine(terms)
    b = _product_bound(t)
    if b is None:
        return Analytic(None, hyp, f"{why}; n u >= 1: the bound is void", t)
    return Analytic(b, hyp, why, t)


def gemm_analytic(
    hypothesis: str,
    K: int,
    instr: str | None = None,
    against: str | None = None,
    normal_inputs: bool = False,
) -> Analytic:
    """The analytic bound of one output element of the GEMM hypothesis ARCH/SCHEDULE at
    depth K (of its drift against `against`: the sum of both bounds, by the triangle
    inequality through the exact result). Serial schedules are Algorithm 3.1 and get
    (3.4) with q = K / b steps; other schedules get the paper's counting extended to
    their fp32 additions (module docstring)."""
    from ..gemm.hypothesis import parse_gemm

    hx = parse_gemm(hypothesis if "/" in hypothesis else f"{hypothesis}/serial", instr)
    ax = _gemm_one(hx, K, normal_inputs)
    if against is None or not ax.applies:
        return ax
    hy = parse_gemm(against if "/" in against else f"{against}/serial", instr)
    ay = _gemm_one(hy, K, normal_inputs)
    if not ay.applies:
        return Analytic(None, ay.hypothesis, f"{against}: {ay.reason}", ay.terms, ay.source)
    hyp = RELAXED if RELAXED in (ax.hypothesis, ay.hypothesis) else HOLDS
    return Analytic(
        ax.bound + ay.bound,
        hyp,
        f"drift: the sum of both bounds; {hypothesis}: {ax.reason}; {against}: {ay.reason}",
        (),
        ax.source if ax.source == ay.source else f"{ax.source}; {ay.source}",
        (f"[{ax.formula()}]", f"[{ay.formula()}]"),
    )


def _gemm_one(h, K: int, normal_inputs: bool) -> Analytic:
    """gemm_analytic for one hypothesis (a GemmHypothesis)."""
    import dataclasses

    from ..gemm.plan import make_plan, padded_k, tree_leaves

    p = h.params()
    if normal_inputs and p.flush_inputs and not p.flush_products:
        p = dataclasses.replace(p, flush_inputs=False)
    s = h.schedule
    if s.alpha != 1.0 or (s.beta is not None and s.beta != 1.0):
        return _refuse("alpha = beta = 1 only: the bound is on A*B + C")
    got = instruction_terms(p)
    if isinstance(got, Analytic):
        return got
    inst, hyp, why = got
    plan = make_plan(s, padded_k(K, p.K), p.K)
    steps = max(len(c) for sp in plan.splits for c in sp.chains)
    terms = [(n * steps, u) for n, u in inst]  # every later step adds its b additions
    u32 = unit_roundoff(Format.FP32, Rounding.RNE)
    extra = 0
    promoted = any(sp.promoted for sp in plan.splits)
    if promoted:
        extra += max(len(sp.chains) for sp in plan.splits)  # fp32 acc + chain, from +0
    extra += _depth(plan.combine) if len(tree_leaves(plan.combine)) > 1 else 0
    if not plan.c_in_chain:
        extra += 1  # C added in the fp32 epilogue
    terms.append((extra, u32))
    out = s.out or p.d_fmt
    now = Format.FP32 if (plan.fp32_acc or not plan.c_in_chain) else p.d_fmt
    if out != now:
        terms.append((1, unit_roundoff(out, Rounding.RNE)))
    serial = len(plan.splits) == 1 and not promoted and plan.c_in_chain and out == now
    source = BLANCHARD if serial else f"{BLANCHARD}, counted as it counts for this schedule"
    t = _combine(terms)
    b = _product_bound(t)
    if b is None:
        return Analytic(None, hyp, f"{why}; n u >= 1 at K = {K}: the bound is void", t, source)
    return Analytic(b, hyp, why, t, source)


def _depth(t) -> int:
    """Additions on the longest way from a leaf to the root of a combination tree."""
    return 0 if isinstance(t, int) else 1 + max(_depth(t[0]), _depth(t[1]))


__all__ = [
    "Analytic",
    "HOLDS",
    "NOT_APPLICABLE",
    "RELAXED",
    "gamma",
    "gemm_analytic",
    "instruction_analytic",
    "internal_roundoff",
    "unit_roundoff",
]
