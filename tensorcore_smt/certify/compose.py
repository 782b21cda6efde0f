"""Upper bounds on normwise errors composed by a stated argument, for an instruction and
for a whole GEMM schedule, where one solver query over the whole formula does not end.

The argument (docs/bounds.md, "Composed upper bounds"). Every computation is a tree of
nodes; a node takes the values v_i of its children and returns one value r with

    |r - sum v_i|  <=  delta * sum |v_i|  +  b                                   (N)

(delta relative, b absolute). If every child i carries an error e_i <= g_i M_i + A_i
against its exact value, with M_i the sum of the magnitudes of the exact terms below it,
then, since sum |v_i| <= M + sum e_i (M = sum M_i),

    |r - exact| <= sum e_i + delta (M + sum e_i) + b
               <= [(1 + delta)(1 + max g_i) - 1] M + (1 + delta) sum A_i + b,

so g = (1 + delta)(1 + max g_i) - 1 and A = (1 + delta) sum A_i + b. Leaves (a product
a_k b_k, exact in every unit modelled; an input c) have g = A = 0. Over the class
M >= 2^e_min of the output (no-underflow), A <= A 2^-e_min M, so the normwise error
|d - exact| / M is at most U = g + A 2^-e_min.

(N) for one fused group of the FDA algorithm (model/fda.py, fused_sum), terms t_0 = c,
t_1..t_n = a_k b_k, E = the largest term exponent (or e_zero when a zero term raises it):
 1. alignment: each term is cut to the grid 2^(E - F) (truncation toward zero, or the
    floor of the signed value): an error below 2^(E - F), and none for a term all of
    whose bits lie on the grid (the term at E when its fraction bits are at most F).
    With m terms that can lose bits, at most m 2^(E - F). The largest nonzero term is
    at least rho 2^E (rho = 1 for normal operands; a subnormal operand's significand can
    be as small as 2^-mbits) when E is a product's exponent, at least 2^e_min(c) when it
    is c's (subnormal c: absolute), and E = e_zero adds at most m 2^(e_zero - F)
    absolute;
 2. the fixed-point sum of the cut terms is exact: the register cannot overflow when
    carry_bits >= least_carry_bits (fda.least_carry_bits, proved by the carry-bits
    property) or the register is unlimited;
 3. the rounding to the group's output format (p.out_fmt) errs by at most
    u |s| + u 2^e_min (u = 2^-p to nearest, 2^(1-p) otherwise; a flushed subnormal
    result: 2^e_min absolute), with |s| <= sum |t_i| (1 + alpha); a directed rounding
    of s, a multiple of the grid step G, loses a multiple of G below one ulp, so steps
    1 and 3 together lose at most (m - 1) G + max(G, u |s|).
So delta = alpha + u (1 + alpha) (to nearest) or (m - 1) G' + max(G', u (1 + alpha))
(directed; G' = 2^-F / rho), alpha = m G', and b = the absolute parts. A
chained group is a node whose first child is the previous group's result; c added after
the chain (c_add=after) is one IEEE addition (delta = u of d, b = u 2^e_min). An FMA
(SFMA) is a node with delta = u, b = u 2^e_min. A GEMM (gemm/plan.py) is a tree of
instruction nodes (each chain step: the running accumulator and K products), fp32
promotion and split-combination additions (delta = 2^-24, b = 2^-24 2^-126), the epilogue
addition of C and the conversion to the output format.

CDNA3's round-down groups (FDRDA, GFDRDA; model/cdna3.py) have their own (N), derived in
compose_cdna3.py (fdrda_preconditions and fdrda_instruction below chain them).

Every figure is an exact rational rounded upward to a dyadic of ROUND_BITS bits, so the
bound stays sound. The argument is checked where it can fail: random rows and the
witnesses of `tcsmt bound` never exceed it (tests/test_compose.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..formats import Format, Rounding, max_finite_bits, value_of
from ..inputs.constraints import Constraint
from ..inputs.implications import (
    forced_normal,
    gemm_class,
    largest,
    product_rho_bits,
    running_class,
)
from ..inputs.kinds import ConstraintKind
from ..model.fda import least_carry_bits
from ..model.params import Algorithm, CAddend, ModelParams, Opposing, ProductExponent, Split
from ..model.terms import AlignMode
from . import compose_cdna3
from .alignment import group_bound
from .analytic import ONES_REFUSAL, unit_roundoff
from .chain_induction import chain_induction_upper
from .chain_mass import chain_mass_upper
from .chain_regimes import chain_upper
from .compose_ieee import IEEE_TREES, largest_step, rounding_node
from .nodes import LEAF, Composed, NodeBound, up
from .zero_products import exact_lines, why_not_exact


@dataclass
class Refusal:
    """Why no bound is composed for a hypothesis (a precondition of the argument fails)."""

    reason: str


@dataclass
class Argument:
    """The composed U of one computation, with the figures of each step in words.

    `low`, `high` (GEMM bounds): the class the U holds over, stated for the element's
    exact magnitude M = |c| + sum |a_k b_k|: M = 0 or low <= M <= high (gemm_class);
    None for an instruction bound, whose class is its query's."""

    upper: Fraction
    lines: list[str] = field(default_factory=list)
    low: Fraction | None = None
    high: Fraction | None = None

    def in_class(self, M: Fraction) -> bool:
        """Whether an element of exact magnitude M lies in the class U holds over."""
        if M == 0 or self.low is None or self.high is None:
            return True
        return self.low <= M <= self.high


def fda_group(
    p: ModelParams,
    n_products: int,
    c_fmt: Format,
    constraints,
    c_input: bool = False,
    root: bool = False,
    whole: bool = False,
    normal_sums: bool = False,
) -> NodeBound:
    """(N) for one fused group of `n_products` products and c in `c_fmt` (see the
    module docstring, steps 1-3); `c_input`: c is the instruction's input (the class may
    keep it normal), not a previous group's result. `root`: the group returns the whole
    computation's result, whose rounding error u max(|s|, 2^e_min) is then relative to
    M (the class has M >= 2^e_min, and |s| <= (M + sum e_i)(1 + alpha)).
    `normal_sums`: the lemma of fda_normal_sums holds (c is 0 or normal, every cut sum
    is 0 or at least 2^e_min of the output, no zero term raises E above a nonzero one),
    so no absolute part arises: the rounding errs by at most u |s'|."""
    af = p.unpack or p.a_fmt
    bf = p.unpack or p.b_fmt
    if p.align == AlignMode.EXACT:
        m = 0
    else:
        fb_prod = af.spec.mbits + bf.spec.mbits
        fb_c = c_fmt.spec.mbits
        # the term at E is exact when its fraction bits fit in F; which term that is is
        # not known, so count every term that could lose bits, less one only when all fit
        m = n_products + 1
        if fb_prod <= p.F and fb_c <= p.F:
            m -= 1
    F = p.F if p.align != AlignMode.EXACT else 0
    rho_bits = sum(product_rho_bits(p, constraints))  # a and b as the unit multiplies them
    grid = Fraction(m, 2**F) if m else Fraction(0)
    alpha = grid * 2**rho_bits
    out = p.out_fmt
    u = unit_roundoff(out, p.rounding)
    e_min_out = Fraction(2) ** out.spec.emin
    c_normal = normal_sums or (c_input and forced_normal("c", c_fmt, constraints))
    b = Fraction(0)
    if m:
        if not c_normal:
            b += grid * Fraction(2) ** c_fmt.spec.emin  # c at E, subnormal: absolute
        if p.e_zero is not None and not normal_sums:
            b += grid * Fraction(2) ** p.e_zero
    b = b * (1 + u)
    flush = p.flush_outputs or p.flush_sums
    # max form (nodes.NodeBound.tiny_emin): no absolute part but the rounding's own,
    # which is then u max(|s|, 2^e_min) (to nearest; or no term can lose bits)
    nearest = p.rounding in (Rounding.RNE, Rounding.RNA)
    tiny = out.spec.emin if (not b and not flush and (m == 0 or nearest)) else None
    if flush and not normal_sums:
        b += e_min_out
    elif not (root or normal_sums):
        b += u * e_min_out
    delta = alpha + u * (1 + alpha)
    if m and p.rounding not in (Rounding.RNE, Rounding.RNA):
        # A directed rounding of s', a multiple of the grid step G = 2^(E-F), into a
        # format whose ulp is a power-of-two multiple of G loses a multiple of G below
        # one ulp: at most ulp - G (nothing when ulp <= G). With the m cut terms losing
        # less than G each: m G + max(0, ulp - G) <= (m - 1) G + max(G, u |s'|).
        step = alpha / m
        delta = (m - 1) * step + max(step, u * (1 + alpha))
    plain = NodeBound(up(delta), up(b), tiny)
    if not m or p.align != AlignMode.TRUNCATE:
        return plain
    normal = (
        ("a", forced_normal("a", p.a_fmt, constraints)),
        ("b", forced_normal("b", p.b_fmt, constraints)),
        ("c", c_normal),
    )
    g = group_bound(p, n_products, c_fmt, normal, whole)
    b2 = g.b * (1 + u)
    if flush and not normal_sums:
        b2 += e_min_out
    elif not (root or normal_sums):
        b2 += u * e_min_out
    exact = NodeBound(up(g.delta), up(b2))
    scale = Fraction(2) ** (-out.spec.emin)
    return min((plain, exact), key=lambda n: n.delta + n.b * scale)


def ieee_add(fmt: Format, root: bool = False) -> NodeBound:
    """(N) for one IEEE addition (or FMA) into `fmt`, round to nearest (`root`: the
    result of the whole computation, see fda_group)."""
    return rounding_node(fmt, Rounding.RNE, False, root)


def preconditions(p: ModelParams, constraints: tuple[Constraint, ...]) -> Refusal | None:
    """Why the argument does not apply to `p` over the class, or None."""
    kinds = {c.kind for c in constraints}
    if ConstraintKind.NO_UNDERFLOW not in kinds:
        return Refusal(
            "the class must exclude underflow (--where no-underflow): the bound is normwise"
        )
    if ConstraintKind.NO_OVERFLOW not in kinds or ConstraintKind.FINITE not in kinds:
        return Refusal("the class must be finite without overflow (--where finite, no-overflow)")
    if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
        return fdrda_preconditions(p, constraints)
    if p.algorithm not in (Algorithm.FDA, Algorithm.SFMA, *IEEE_TREES):
        return Refusal(f"no composed bound for the {p.algorithm.value} algorithm")
    if p.scale_fmt is not None or p.split != Split.NONE:
        return Refusal("no composed bound for block-scaled or split instructions")
    if p.algorithm == Algorithm.FDA and p.opposing != Opposing.EXACT:
        return Refusal(ONES_REFUSAL)
    if p.algorithm == Algorithm.FDA:
        # round-down first: least_carry_bits bounds only truncating or exact alignments
        if p.align == AlignMode.ROUND_DOWN:
            return Refusal("round-down alignment can grow a term past the output range")
        if p.carry_bits is not None:
            if p.product_exponent != ProductExponent.UNNORMALIZED:
                return Refusal(
                    f"carry_bits={p.carry_bits} with product_exponent="
                    f"{p.product_exponent.value}: no least carry bits are proved, the "
                    "register can overflow"
                )
            least = least_carry_bits(p)
            if p.carry_bits < least:
                return Refusal(f"carry_bits={p.carry_bits} < {least}: the register can overflow")
    if p.flush_inputs:
        # a subnormal a, b or c read as 0 loses up to 2^e_min of its format: relative to
        # nothing in M, so the class must keep every flushed operand normal
        fmts = {"a": p.a_fmt, "b": p.b_fmt, "c": p.c_fmt}
        ops = "abc" if flushes_c(p) else "ab"
        if not all(forced_normal(op, fmts[op], constraints) for op in ops):
            return Refusal(f"flushed subnormal inputs: add --where normal-only:{ops}")
    if rounds_up_midway(p) and not (
        small_steps(p, constraints) or far_from_overflow(p, p.K, constraints)
    ):
        return Refusal(OVERFLOW_EDGE)
    return None


OVERFLOW_EDGE = (
    "an intermediate sum rounded away from zero (to nearest: up by half an ulp; toward "
    "+/-inf: up by an ulp) can overflow in the next addition when |c| + sum |a_k b_k| is "
    "within a few ulps of the largest finite value: narrow c, e.g. --where "
    "exponent-window:c=-149:125"
)


def flushes_c(p: ModelParams) -> bool:
    """Whether the unit reads its input c through flush_inputs (a subnormal c as 0): FDA
    with flush_c and c fused (c added after the chain is an IEEE addition of c as
    given), and every IEEE-operation unit (SEQUENTIAL, GPS, SFMA flush a, b and c)."""
    if not p.flush_inputs:
        return False
    if p.algorithm == Algorithm.FDA:
        return p.flush_c and p.c_add == CAddend.FUSED
    return p.algorithm in (Algorithm.SFMA, *IEEE_TREES)


def flushes_chain(p: ModelParams) -> bool:
    """Whether chained FDA groups read each previous group's result through flush_inputs:
    a subnormal running accumulator (in d's format) is then read as 0 by the next group,
    although every input of the class is normal."""
    return p.algorithm == Algorithm.FDA and p.flush_inputs and p.flush_c and len(p.groups()) > 1


def rounds_up_midway(p: ModelParams) -> bool:
    """Whether a rounding that can grow a magnitude feeds a later addition: chained FDA
    groups that round other than toward zero, or a chain of FMAs. To nearest grows a
    magnitude by up to half an ulp, toward +inf (-inf) a positive (negative) one by up to
    an ulp: from below the largest finite value a chained step can then reach Inf (an
    e5m2 accumulator 49152 plus tiny products rounded up twice: 57344, then Inf). Only
    truncation and rounding toward zero never grow a magnitude, so every running sum then
    stays within the exact terms' sum M, below the largest finite value in a no-overflow
    class."""
    grows = p.rounding != Rounding.RZ
    if p.algorithm == Algorithm.SFMA:
        return p.K > 1
    if p.algorithm == Algorithm.GPS:
        return True
    if p.algorithm == Algorithm.SEQUENTIAL:
        return p.acc_rounding != Rounding.RZ
    return grows and len(p.groups()) > 1


def small_steps(p: ModelParams, constraints) -> bool:
    """Whether no rounding to nearest can overflow because each adds little: a rounding
    that adds n products (at most n max|a| max|b| in the class) to a finite running
    value v, |v| <= max, rounds a value below max + ulp(max)/2 when twice that sum is
    below ulp(max)/2 (twice: the products may themselves be rounded or summed first,
    each growing by less than a factor 1 + u), so it returns at most max and the next
    step starts again from a finite value. fp16 products (below 2^32) beside fp32's
    half ulp at the top (2^103) always pass; bf16, tf32, fp32 and fp64 products do not
    (c = max - 2 ulp, a tie rounded up, then 1.5 ulp overflows: certify/overflow_rows.py).

    Roundings to nearest only: a directed rounding away from zero turns max plus any
    nonzero step into Inf, however small the step (then only far_from_overflow clears
    the chain)."""
    nearest = (Rounding.RNE, Rounding.RNA)
    if p.algorithm == Algorithm.SEQUENTIAL:
        if p.acc_rounding not in nearest:
            return False
        if p.acc_fmt != p.d_fmt and p.rounding not in nearest:
            return False  # an accumulator grown past d's max converts to Inf
    elif p.algorithm in (Algorithm.FDA, Algorithm.SFMA) and p.rounding not in nearest:
        return False
    if p.algorithm in IEEE_TREES:
        n = largest_step(p)
        fmts = [p.acc_fmt if p.algorithm == Algorithm.SEQUENTIAL else Format.FP32, p.d_fmt]
    elif p.algorithm == Algorithm.SFMA:
        n, fmts = 1, [p.d_fmt]
    else:
        n = max(hi - lo for lo, hi in p.groups())
        fmts = [p.out_fmt, p.d_fmt]
    step = n * largest(p.a_fmt, "a", constraints) * largest(p.b_fmt, "b", constraints)
    for f in fmts:
        half_ulp = Fraction(2) ** (f.spec.emax - f.spec.mbits - 1)
        if not 2 * step < half_ulp:
            return False
    return True


def far_from_overflow(p: ModelParams, K: int, constraints) -> bool:
    """Whether every sum of the class stays below half the output's largest finite
    value, |c| + K max|a| max|b| <= max/2: then no running sum, however rounded (each
    within a factor 1 + U < 2 of the exact terms' sum), can reach the overflow threshold."""
    from ..formats import max_finite_bits, value_of

    top = largest(p.c_fmt, "c", constraints) + K * largest(p.a_fmt, "a", constraints) * (
        largest(p.b_fmt, "b", constraints)
    )
    return top <= value_of(max_finite_bits(p.d_fmt), p.d_fmt) / 2


def instruction(
    p: ModelParams,
    constraints: tuple[Constraint, ...],
    root: bool = False,
    normal_sums: bool = False,
) -> tuple[NodeBound, list[str]]:
    """The instruction as one node (N) over its inputs (c and its K products): its groups
    composed, with the steps in words (`root`: its result is the whole computation's;
    `normal_sums`: fda_normal_sums holds, FDA groups only)."""
    if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
        return fdrda_instruction(p, constraints, root)
    c_flush = flushes_c(p) and not (normal_sums or forced_normal("c", p.c_fmt, constraints))
    if p.algorithm in IEEE_TREES:
        tree, lines = IEEE_TREES[p.algorithm](p, root, forced_normal("c", p.c_fmt, constraints))
        return _flushed_c(p, as_node(tree), lines, c_flush)
    lines = []
    if p.algorithm == Algorithm.SFMA:
        n = ieee_add(p.d_fmt)
        cb = LEAF
        for k in range(p.K):
            cb = LEAF.node([cb, LEAF], ieee_add(p.d_fmt, root) if k == p.K - 1 else n)
        lines.append(f"{p.K} FMAs into {p.d_fmt.spec.name}: delta = {float(n.delta):.3g} each")
        return _flushed_c(p, as_node(cb), lines, c_flush)
    after = p.c_add == CAddend.AFTER
    cb = LEAF
    c_fmt = p.c_fmt
    groups = p.groups()
    # a chained group reads the previous group's result through flush_inputs: a
    # subnormal accumulator (below 2^e_min(d)) is read as 0 unless no accumulator of
    # the chain is subnormal (fda_normal_sums)
    chain_flush = flushes_chain(p) and not (
        normal_sums or fda_normal_sums(p, constraints) is not None
    )
    for i, (lo, hi) in enumerate(groups):
        first = not (i or after)
        last = root and not after and i == len(groups) - 1
        n = fda_group(
            p,
            hi - lo,
            c_fmt if first else p.d_fmt,
            constraints,
            c_input=first,
            root=last,
            whole=first and last,
            normal_sums=normal_sums,
        )
        if chain_flush and i > 0:
            n = NodeBound(n.delta, up(n.b + Fraction(2) ** p.d_fmt.spec.emin))
        lines.append(
            f"group {i}: {hi - lo} products, F = {p.F}: delta = {float(n.delta):.4g}, "
            f"b = {float(n.b):.3g}"
        )
        cb = LEAF.node([cb] + [LEAF] * (hi - lo), n)
    if chain_flush:
        lines.append(
            f"flush_inputs reads each chained group's c, the running accumulator, as 0 "
            f"where it is subnormal: b += 2^{p.d_fmt.spec.emin} in every group after the first"
        )
    if after:
        n = ieee_add(p.d_fmt, root)
        cb = LEAF.node([cb, LEAF], n)
        lines.append(
            f"c added after the chain in {p.d_fmt.spec.name}: delta = {float(n.delta):.3g}"
        )
    return _flushed_c(p, as_node(cb), lines, c_flush)


def _flushed_c(
    p: ModelParams, n: NodeBound, lines: list[str], flushed: bool
) -> tuple[NodeBound, list[str]]:
    """The instruction's node where flush_inputs may read a subnormal c (one the class,
    or the chain, does not keep normal: a GEMM's running accumulator) as 0: the unit
    then computes on (0, products), within (N) of those, and loses |c| < 2^e_min(c)
    more, an absolute part (and no max form)."""
    if not flushed:
        return n, lines
    lines.append(f"flush_inputs reads a subnormal c as 0: b += 2^{p.c_fmt.spec.emin}")
    return NodeBound(n.delta, up(n.b + Fraction(2) ** p.c_fmt.spec.emin)), lines


def as_node(cb: Composed) -> NodeBound:
    """A composed computation as one node of a larger one: (g, A), in max form where
    the computation is a chain in max form (nodes.Composed.h, at most g)."""
    tiny = cb.h_emin if cb.h is not None and cb.h <= cb.g else None
    return NodeBound(cb.g, cb.A, tiny)


def _fdrda_rho(p: ModelParams, constraints) -> tuple[int, int]:
    return product_rho_bits(p, constraints, compose_cdna3.unit_formats(p))


def fdrda_preconditions(p: ModelParams, constraints: tuple[Constraint, ...]) -> Refusal | None:
    """Why the FDRDA/GFDRDA argument (compose_cdna3.py) does not apply to `p`, or None."""
    ab_normal = all(forced_normal(op, f, constraints) for op, f in (("a", p.a_fmt), ("b", p.b_fmt)))
    why = compose_cdna3.refusal(p, _fdrda_rho(p, constraints), ab_normal)
    return None if why is None else Refusal(why)


def fdrda_instruction(
    p: ModelParams, constraints: tuple[Constraint, ...], root: bool = False
) -> tuple[NodeBound, list[str]]:
    """A CDNA3 FDRDA/GFDRDA instruction as one node: its groups (compose_cdna3.group_node)
    chained, each group's c the previous group's fp32 result."""
    rho = _fdrda_rho(p, constraints)
    lines = []
    cb = LEAF
    groups = p.groups()
    for i, (lo, hi) in enumerate(groups):
        c_fmt = p.c_fmt if i == 0 else p.d_fmt
        flushable = p.flush_inputs and not (i == 0 and forced_normal("c", c_fmt, constraints))
        last = root and i == len(groups) - 1
        delta, b, alpha, e = compose_cdna3.group_node(p, hi - lo, c_fmt, rho, flushable, last)
        n = NodeBound(up(delta), up(b))
        where = "c above the products" if e is None else f"e_dot = {e}"
        lines.append(
            f"{p.algorithm.value} group {i}: {hi - lo} products, F = {p.F}, F2 = {p.F2}: "
            f"alpha = {float(alpha):.4g} ({where}), delta = {float(n.delta):.4g}, "
            f"b = {float(n.b):.3g}"
        )
        cb = LEAF.node([cb] + [LEAF] * (hi - lo), n)
    return NodeBound(cb.g, cb.A), lines


def instruction_bound(p: ModelParams, constraints: tuple[Constraint, ...]) -> Argument | Refusal:
    """The composed U of the normwise error of one instruction over the class (0 at
    once where the class fixes every product to zero and d = c: zero_products.py)."""
    if why_not_exact(p, constraints) is None:
        return Argument(Fraction(0), exact_lines(p))
    why = preconditions(p, constraints)
    if why is not None:
        return why
    n, lines = instruction(p, constraints, root=True)
    U = LEAF.node([], n).normwise(p.d_fmt.spec.emin)
    if p.algorithm not in (Algorithm.FDRDA, Algorithm.GFDRDA):
        if rounds_up_midway(p) and not small_steps(p, constraints):
            # far_from_overflow's premise: every running sum, within g M + A of its exact
            # terms' sum M <= top, stays at or below the largest finite value
            top = largest(p.c_fmt, "c", constraints) + p.K * largest(p.a_fmt, "a", constraints) * (
                largest(p.b_fmt, "b", constraints)
            )
            if top * (1 + n.delta) + n.b > value_of(max_finite_bits(p.d_fmt), p.d_fmt):
                return Refusal(OVERFLOW_EDGE)
    if flushes_chain(p) and fda_normal_sums(p, constraints) is None:
        # the chain bounds below do not count a flushed accumulator
        lines.append(f"U = g + A 2^-e_min({p.d_fmt.spec.name}) = {float(U):.6g}")
        return Argument(U, lines)
    by_cases = chain_upper(p, constraints, lambda op, f: forced_normal(op, f, constraints), U)
    if by_cases is not None and by_cases < U:
        U = by_cases
        lines.append(
            "chained groups bounded case by case (certify/chain_regimes.py): the worst "
            "combination of each group's cases, not the sum of every case's worst"
        )
    normal_of = lambda op, f: forced_normal(op, f, constraints)  # noqa: E731
    for bound_of, why in (
        (chain_mass_upper, "by mass (certify/chain_mass.py): each loss charged to the "
         "products or accumulator it comes from, the largest group ratio once"),
        (chain_induction_upper, "by induction (certify/chain_induction.py): the "
         "accumulator loses at most the mass it carries"),
    ):  # fmt: skip
        other = bound_of(p, normal_of)
        if other is not None and other < U:
            U = other
            lines.append(f"chained groups bounded {why}")
    lines.append(f"U = g + A 2^-e_min({p.d_fmt.spec.name}) = {float(U):.6g}")
    return Argument(U, lines)


def fda_normal_sums(
    p: ModelParams, constraints: tuple[Constraint, ...], c_in_chain: bool = True
) -> str | None:
    """The no-underflow lemma of a chain of FDA instructions, as a sentence, or None
    where it is not shown. Premises: FDA groups with truncating alignment and c fused
    (not added after), a and b normal in the class, so every nonzero product has
    magnitude at least 2^t, t = e_min(a) + e_min(b) (its alignment exponent e_a + e_b is
    at least t); the chain's first c is +0 (C joins after the chain: `c_in_chain`
    False) or normal in the class; t - F >= e_min of the group's output and of d; every
    normal c of the chain (c_fmt's, then d's) at least 2^e_min(out), and a zero term's
    exponent e_zero at or below every nonzero term's.

    Claim: every group's cut sum s' is 0 or at least 2^max(e_min(out), e_min(d)), so
    every group result, running accumulator and c of the chain is 0 or normal. By
    induction over the groups: c is 0 or normal (the premise, then the claim). When a
    product is nonzero, E >= t, every cut term is a multiple of G = 2^(E - F) >= 2^(t - F),
    and so is their sum: 0 or at least G. When every product is zero and c is not, E is
    c's exponent (a zero term's e_zero lies below it), c keeps its leading bit and
    |s'| >= 2^e_c. A rounding (any direction) of |s'| >= 2^e, 2^e representable, keeps
    it at least 2^e, and so does a conversion into d.

    Consequence (fda_group's normal_sums): no term or c is subnormal, no zero term cuts
    a nonzero one, and each rounding errs by at most u |s'|: the chain's instruction
    nodes have no absolute part."""
    if p.algorithm != Algorithm.FDA or p.align != AlignMode.TRUNCATE:
        return None
    if p.c_add != CAddend.FUSED:
        return None
    if not all(forced_normal(op, f, constraints) for op, f in (("a", p.a_fmt), ("b", p.b_fmt))):
        return None
    if c_in_chain and not forced_normal("c", p.c_fmt, constraints):
        return None
    out, d = p.out_fmt.spec, p.d_fmt.spec
    floor = max(out.emin, d.emin)
    t = p.a_fmt.spec.emin + p.b_fmt.spec.emin
    c_emins = [d.emin] + ([p.c_fmt.spec.emin] if c_in_chain else [])
    if t - p.F < floor or min(c_emins) < floor:
        return None
    if p.e_zero is not None and p.e_zero > min([t] + c_emins):
        return None
    return (
        f"no underflow in the chain (compose.fda_normal_sums): normal a, b make every "
        f"nonzero product at least 2^{t}, every cut sum a multiple of 2^({t} - F) = "
        f"2^{t - p.F} >= 2^{floor} or c's leading bit, so every running accumulator is 0 "
        f"or normal and no instruction step has an absolute part"
    )


def nongrowing(p: ModelParams) -> bool:
    """Whether every instruction step of a chain returns a value no larger than the sum
    of its inputs' magnitudes, |r| <= |c| + sum |a_k b_k|: FDA groups whose alignment
    truncates toward zero (|t'| <= |t|), with an exact fixed-point sum and a rounding
    toward zero, c fused, the groups' format held exactly by d. Then, by induction, every
    running accumulator of a chain from +0 or C has |acc| <= M_acc, the magnitude of the
    exact terms it sums, and a chain step's (N) composes additively (chain_step)."""
    if p.algorithm != Algorithm.FDA or p.align != AlignMode.TRUNCATE:
        return False
    if p.rounding != Rounding.RZ or p.c_add != CAddend.FUSED:
        return False
    if p.opposing != Opposing.EXACT:
        return False
    o, d = p.out_fmt.spec, p.d_fmt.spec
    return o.mbits <= d.mbits and o.emin >= d.emin and o.emax <= d.emax


def chain_step(prev: Composed, n: NodeBound) -> Composed:
    """One chain step whose inputs (the running accumulator and exact products) never
    exceed the magnitudes of their exact terms (nongrowing): sum |v_i| <= M, so
    |r - exact| <= e_acc + delta sum |v_i| + b <= (g_acc + delta) M + A_acc + b. The
    relative parts add up, where the plain node multiplies (1 + delta)(1 + g_acc).
    And |r - exact| <= |r| + |exact| <= 2 M whatever the steps lose: g = 2, A = 0 once
    the sum of the deltas reaches 2."""
    g = up(prev.g + n.delta)
    if g >= 2:
        return Composed(Fraction(2), Fraction(0), None, None)
    return Composed(g, up(prev.A + n.b), None, None)


def chain_nodes(
    p: ModelParams, constraints: tuple[Constraint, ...], normal_sums: bool = False
) -> tuple[NodeBound, NodeBound, list[str]]:
    """The instruction as a node of a GEMM chain: (first, later, lines). `first` takes
    the input C (or +0) as its c, under the class's constraints on c; `later` takes the
    running accumulator, which the class does not constrain (running_class), so its
    subnormal values enter every absolute part as an unconstrained c's would, unless
    `normal_sums` (fda_normal_sums proved it 0 or normal, and every group sum too)."""
    first, lines = instruction(p, constraints, normal_sums=normal_sums)
    later, _ = instruction(p, running_class(constraints), normal_sums=normal_sums)
    return first, later, lines


def overflow_threshold(fmt: Format) -> Fraction:
    """The smallest magnitude a round-to-nearest conversion into `fmt` turns into Inf:
    the largest finite value plus half its ulp (a tie there rounds to the even
    neighbour, 2^(e_max+1), which is Inf)."""
    top = Fraction(value_of(max_finite_bits(fmt), fmt))
    return top + Fraction(2) ** (fmt.spec.emax - fmt.spec.mbits - 1)


def gemm_bound(hyp, K: int, constraints: tuple[Constraint, ...]) -> Argument | Refusal:
    """The composed U of the normwise error of one output element of the GEMM hypothesis
    `hyp` (a GemmHypothesis) at depth K: its plan (gemm/plan.py) as a tree of instruction
    nodes and fp32 additions, the first chain step taking C under the class's
    constraints on c and every later one the running accumulator (chain_nodes), then
    the conversion to the schedule's output format.

    The class (gemm_class): M = 0 or 2^e_min(T) <= M <= high, T the narrower of d and
    the output format; U is normalised by 2^e_min(T). Where the final conversion does
    not saturate and the accumulator's composed error (g M + A) can carry an element of
    M <= high past the output's overflow threshold (Inf: an infinite error), the class
    is restricted to M(1 + g) + A below that threshold, and the argument says so."""
    from ..gemm.plan import make_plan, padded_k, tree_leaves

    p = hyp.params()
    why = preconditions(p, constraints)
    if why is not None:
        return why
    s = hyp.schedule
    if s.alpha != 1.0 or (s.beta is not None and s.beta != 1.0):
        return Refusal(
            "composed GEMM bounds take alpha = beta = 1 (the exact result is then A*B + C)"
        )
    plan = make_plan(s, padded_k(K, p.K), p.K)
    if plan.library_steps():
        return Refusal(
            "no composed GEMM bound for the schedule fields "
            f"{', '.join(plan.library_steps())}: the argument models chains, fp32 "
            "promotions and combinations, the epilogue and the output conversion only"
        )
    lemma = fda_normal_sums(p, constraints, plan.c_in_chain)
    node, later, lines = chain_nodes(p, constraints, normal_sums=lemma is not None)
    flat = nongrowing(p)
    grows = p.rounding != Rounding.RZ  # a chain step's d rounded up can grow
    fp32_adds = sum(len(sp.chains) for sp in plan.splits if sp.promoted) + len(plan.splits) - 1
    # roundings inside the chains add a few products each (small_steps can clear them);
    # fp32 promotions and split combinations add whole partial sums
    midway_chain = rounds_up_midway(p) or (grows and plan.steps() > 1)
    midway_partials = fp32_adds > 1 or (fp32_adds == 1 and not plan.c_in_chain)
    far = far_from_overflow(p, K, constraints)
    if (midway_partials and not far) or (midway_chain and not (far or small_steps(p, constraints))):
        return Refusal(OVERFLOW_EDGE)
    fp32 = ieee_add(Format.FP32)

    def accumulate(additive: bool) -> Composed:
        partials = []
        for i, sp in enumerate(plan.splits):
            acc = LEAF if not sp.promoted else None
            for j, chain in enumerate(sp.chains):
                cb = LEAF
                for step in range(len(chain)):
                    # only the step that takes C itself sees c as the class states it
                    takes_c = plan.c_in_chain and i == 0 and j == 0 and step == 0
                    n = node if takes_c else later
                    cb = chain_step(cb, n) if additive else LEAF.node([cb] + [LEAF] * p.K, n)
                acc = cb if acc is None or not sp.promoted else LEAF.node([acc, cb], fp32)
            partials.append(acc)
        tree = plan.combine

        def walk(t):
            if isinstance(t, int):
                return partials[t]
            return LEAF.node([walk(t[0]), walk(t[1])], fp32)

        return walk(tree) if len(tree_leaves(tree)) > 1 else partials[0]

    total = accumulate(False)
    if flat:
        # the same chains with their steps' relative parts added (chain_step): never
        # larger in g or A, but without the max form; the smaller U is kept below
        added = accumulate(True)
        e = gemm_class(p, s.out or p.d_fmt)[0].spec.emin
        if added.normwise(e) <= total.normwise(e):
            total = added
            lines.append(
                "truncating chains never grow a running sum (compose.nongrowing): each "
                "chain step adds its delta to g (g = sum of the steps' deltas), where the "
                "plain node multiplies (1 + delta)(1 + g)"
            )
    if (midway_partials or midway_chain) and not (
        not midway_partials and small_steps(p, constraints)
    ):
        # far_from_overflow cleared the overflow edge on its premise that every running
        # sum stays within a factor 1 + U < 2 of its exact terms' sum: check it on the
        # composed g and A, in every format a running sum is rounded to
        from ..formats import max_finite_bits, value_of

        top = largest(p.c_fmt, "c", constraints) + K * largest(p.a_fmt, "a", constraints) * (
            largest(p.b_fmt, "b", constraints)
        )
        fmts = [p.d_fmt] + ([Format.FP32] if fp32_adds or plan.fp32_acc else [])
        most = min(value_of(max_finite_bits(f), f) for f in fmts)
        if top * (1 + total.g) + total.A > most:
            return Refusal(OVERFLOW_EDGE)
    if lemma is not None:
        lines.append(lemma)
    out = s.out or p.d_fmt
    now = Format.FP32 if plan.fp32_acc else p.d_fmt
    if not plan.c_in_chain:
        now = Format.FP32
    convert = out != now
    if not plan.c_in_chain:
        total = LEAF.node([total, LEAF], ieee_add(Format.FP32, root=not convert))
        lines.append("C added in the fp32 epilogue: one addition")
    low_fmt, high = gemm_class(p, out)
    if convert:
        if s.saturates(out):
            # a saturated result lies between e (|e| <= M <= high <= max) and the
            # accumulator, so it errs no more than the accumulator does
            lines.append(f"conversion to {out.spec.name} saturates: no Inf from finite sums")
        else:
            limit = overflow_threshold(out)
            if high * (1 + total.g) + total.A >= limit:
                # every accumulator of the class errs by at most g M + A: keep the
                # elements whose accumulator stays below the threshold
                high = (limit - total.A) / (1 + total.g) * (1 - Fraction(1, 2**60))
                lines.append(
                    f"class restricted to |c| + sum |a_k b_k| <= {float(high):.9g}: above "
                    f"it the accumulator (error <= {float(total.g):.3g} M + "
                    f"{float(total.A):.3g}) can reach {out.spec.name}'s overflow threshold "
                    f"{float(limit):.9g}, where the conversion returns Inf"
                )
        total = LEAF.node([total], ieee_add(out, root=True))
        lines.append(f"converted from {now.spec.name} to {out.spec.name}")
    low = Fraction(2) ** low_fmt.spec.emin
    if high < low:
        return Refusal(
            f"no element of the class converts to a finite {out.spec.name} with an error "
            "the argument bounds"
        )
    steps = plan.steps()
    lines.insert(0, f"instruction node: delta = {float(node.delta):.4g}, b = {float(node.b):.3g}")
    lines.insert(
        1,
        f"later chain steps (the running accumulator as c, "
        f"{'0 or normal' if lemma else 'possibly subnormal'}): "
        f"delta = {float(later.delta):.4g}, b = {float(later.b):.3g}",
    )
    lines.append(
        f"plan: {len(plan.splits)} split(s), {steps} instruction steps, "
        f"{'promoted' if plan.splits[0].promoted else 'unpromoted'} chains"
    )
    lines.append(
        f"class: |c| + sum |a_k b_k| = 0 or in [2^{low_fmt.spec.emin} "
        f"(e_min of {low_fmt.spec.name}), {float(high):.9g}]"
    )
    U = total.normwise(low_fmt.spec.emin)
    lines.append(f"U = g + A 2^-e_min({low_fmt.spec.name}) = {float(U):.6g}")
    return Argument(U, lines, low, high)


__all__ = [
    "Argument",
    "Composed",
    "NodeBound",
    "Refusal",
    "chain_nodes",
    "chain_step",
    "fda_normal_sums",
    "nongrowing",
    "fda_group",
    "fdrda_instruction",
    "fdrda_preconditions",
    "gemm_bound",
    "gemm_class",
    "overflow_threshold",
    "running_class",
    "ieee_add",
    "instruction_bound",
    "preconditions",
    "unit_roundoff",
    "up",
]
