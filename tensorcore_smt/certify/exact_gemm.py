"""Exact accumulation at the GEMM level: up to which K a schedule (chains, fp32
promotions, split-K partials and their combination, the epilogue) sums P-bit integer
slices exactly, with C = 0 (what Ozaki-scheme emulation computes: each slice product
A_i B_j on its own, the exact integer results added afterwards).

The argument, for one output element at depth K (the plan of gemm/plan.py):
 1. Instruction lemma (model/integer_sums.py): the instruction adds P-bit slices into an
    integer accumulator |acc| <= B exactly.
 2. A chain of J instructions from +0: the accumulator entering instruction j is at most
    j L m^2 (m = 2^P - 1, L products each); while (J - 1) L m^2 <= B every step is exact
    (induction, as certify/exact.py states for the serial chain).
 3. Every value outside the chains (a chain's result, a promotion into fp32, a split's
    partial, their fp32 combination, the epilogue's alpha * x + beta * C with alpha = 1 and
    C = 0, the conversion into the output format) is an integer of magnitude at most
    K m^2: each fp32 operation (and the output conversion, precision p_out) is exact when
    K m^2 <= 2^24 (2^p_out).
So K is proved exact when the plan's longest chain J_max satisfies (J_max - 1) L m^2 <= B
and, where the plan has fp32 operations or converts its output, K m^2 <= 2^p. Both sides
only grow with K for every schedule make_plan builds (its chains get longer or more
numerous as k-blocks are added, never shorter), so the largest such K is found by
bisection; tests/test_exact_gemm.py checks that the predicate is monotone on every K of
a range. Depths the schedule cannot cut (make_plan refuses them) claim nothing and are
skipped: the reported K and the witness's K are depths it runs. The witness at the next K is a row run through tc.matmul and measured exactly.

Soundness is checked, not assumed: the instruction lemma's extreme rows at its own B
run through the concrete model first (an inexact one and the lemma is not used), and
the claimed K's extreme rows (every slice at its largest, one sign, and small products
after the largest ones) run through tc.matmul (an inexact one and nothing is claimed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache

import numpy as np

from ..bv.dtypes import bit_view
from ..errors import UserError
from ..formats import Format, round_fraction, value_of
from ..model.integer_sums import argued_bound
from ..smt.argument_rows import counterexample

K_LIMIT = 1 << 22
"""The deepest K the search considers."""

SOUND_K_LIMIT = 1 << 16
"""The deepest claimed K whose extreme rows are run through tc.matmul."""


@dataclass
class GemmExactness:
    """What the argument proves about one GEMM hypothesis and slice width."""

    hypothesis: str
    instruction: str
    slice_bits: int
    B: int | None  # the instruction lemma's accumulator bound (None: no argument)
    K: int | None = None  # every K <= this is proved exact (None: not even one block)
    binding: str = ""  # which condition stops the next K
    witness_K: int | None = None
    witness_error: Fraction | None = None
    lines: list[str] = field(default_factory=list)
    sound_rows: int = 0  # extreme rows at the claimed K run through tc.matmul, all exact
    contradiction: str | None = None  # an inexact row at the claimed K or at the lemma's B


def _gemm(hypothesis: str, instr: str | None):
    from ..gemm.hypothesis import parse_gemm

    hyp = parse_gemm(hypothesis if "/" in hypothesis else f"{hypothesis}/serial", instr)
    return hyp, hyp.params(), hyp.instruction().name


def checked_gemm(hypothesis: str, instr: str | None):
    """(GemmHypothesis, its instruction's params, the instruction's name) of a hypothesis
    the exactness argument takes; UserError for a bad one or alpha other than 1."""
    hyp, p, name = _gemm(hypothesis, instr)
    if hyp.schedule.alpha != 1.0:
        raise UserError("exactness takes alpha = 1 (the result is then A*B exactly)")
    return hyp, p, name


def _runnable(hyp, p, K: int) -> bool:
    """Whether the schedule can cut depth K (make_plan refuses, e.g., a contiguous split
    that would leave a split without a k-tile)."""
    from ..gemm.plan import make_plan

    try:
        make_plan(hyp.schedule, K, p.K)
    except UserError:
        return False
    return True


def _exact_at(hyp, p, K: int, m2: int, B: int) -> tuple[bool, str]:
    """Whether the argument proves depth K exact, and which condition fails if not."""
    from ..gemm.plan import make_plan

    try:
        plan = make_plan(hyp.schedule, K, p.K)
    except UserError:
        return True, ""  # the schedule cannot cut this K: nothing to run, nothing claimed
    longest = max(len(c) for s in plan.splits for c in s.chains)
    if (longest - 1) * p.K * m2 > B:
        return False, f"a chain of {longest} instructions reaches (J - 1) L m^2 > B"
    out = hyp.schedule.out or p.d_fmt
    limits = []
    if plan.fp32_acc:
        limits.append(Format.FP32.spec.precision)
    if out != p.d_fmt:
        limits.append(out.spec.precision)
    for prec in limits:
        if K * m2 > 1 << prec:
            return False, f"K m^2 = {K * m2} > 2^{prec}: an fp32 operation or the output rounds"
    return True, ""


def gemm_exactness(
    hypothesis: str,
    slice_bits: int,
    *,
    instr: str | None = None,
    witness: bool = True,
    B: int | None = None,
) -> GemmExactness:
    """The largest K the argument (module docstring) proves exact for P-bit slices with
    C = 0, and a witness at the next K run through tc.matmul. `B`: an accumulator bound
    proved otherwise (by a solver, certify/exact.py) where it exceeds the argument's."""
    if slice_bits < 1:
        raise UserError(f"slice bits {slice_bits}: at least 1")
    hyp, p, name = checked_gemm(hypothesis, instr)
    res = GemmExactness(hyp.describe(), name, slice_bits, None)
    got = argued_bound(p, slice_bits)
    if not isinstance(got, str):
        ce = counterexample(p, slice_bits, got[0])
        if ce is not None:
            (a, b, c), d = ce
            res.contradiction = f"instruction row c = {c}, a = {a}, b = {b}: d = {d}"
            got = (
                f"the instruction argument claimed B = {got[0]}, but its extreme row "
                f"({res.contradiction}) is inexact on the model: not used"
            )
    if isinstance(got, str) and B is None:
        res.lines = [f"no instruction lemma: {got}"]
        return res
    if isinstance(got, str) or (B is not None and B > got[0]):
        res.B = B
        res.lines = [f"instruction: exact for |acc| <= B = {B} (proved by a solver)"]
    else:
        res.B, lemma = got
        res.lines = [f"instruction: {x}" for x in lemma]
    m2 = ((1 << slice_bits) - 1) ** 2
    kb = p.K
    lo, hi = 0, K_LIMIT // kb  # blocks: lo proved (0: none yet), hi an upper end
    if _exact_at(hyp, p, hi * kb, m2, res.B)[0]:
        res.K = hi * kb
        res.binding = f"none up to K = {res.K} (the search's limit)"
        return res
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _exact_at(hyp, p, mid * kb, m2, res.B)[0]:
            lo = mid
        else:
            hi = mid
    # report depths the schedule runs: the proved end and the first failing one
    while lo and not _runnable(hyp, p, lo * kb):
        lo -= 1
    while hi < K_LIMIT // kb and not _runnable(hyp, p, hi * kb):
        hi += 1
    res.K = lo * kb if lo else None
    _check_claim(res, hyp, p, slice_bits)
    res.binding = _exact_at(hyp, p, hi * kb, m2, res.B)[1]
    res.lines.append(
        f"chains exact while (J - 1) L m^2 <= B = {res.B}; fp32 operations and the output "
        f"exact while K m^2 <= 2^p; at K = {hi * kb}: {res.binding}"
    )
    if witness:
        _witness(res, hyp, p, hi * kb, slice_bits)
    return res


@cache
def slice_pattern(value: int, fmt: Format) -> int:
    """The pattern of the integer slice `value` in `fmt` (rows repeat a few values over
    up to 2^16 entries: each is rounded once, not once an entry)."""
    return round_fraction(Fraction(value), fmt)


ROW_ENTRIES = 1 << 22
"""Entries of A a batch of rows brings to one tc.matmul call (the rows of a claim run
as one batched GEMM, not one call a row)."""


def _encode(vals: np.ndarray, fmt: Format) -> np.ndarray:
    """Patterns of integer slice values (each distinct value rounded once)."""
    from ..api import bits_dtype

    uniq, inv = np.unique(vals, return_inverse=True)
    pats = np.array([slice_pattern(int(v), fmt) for v in uniq], dtype=bits_dtype(fmt))
    return pats[inv.reshape(-1)].reshape(vals.shape)


def _inexact_rows(
    res: GemmExactness, hyp, p, rows: list[tuple[list[int], list[int]]]
) -> list[Fraction | None]:
    """Run rows (A 1 x K, B K x 1 each; one K) through tc.matmul as one batched GEMM:
    per row |d - exact| when d is not the exact integer sum (Fraction(-1) for a
    non-finite d), else None."""
    from ..gemm.emulate import matmul

    a_vals = np.array([a for a, _ in rows], dtype=object)
    b_vals = np.array([b for _, b in rows], dtype=object)
    n, K = a_vals.shape
    A = _encode(a_vals.astype(np.int64), p.a_fmt).reshape(n, 1, K)
    Bm = _encode(b_vals.astype(np.int64), p.b_fmt).reshape(n, K, 1)
    D = np.asarray(matmul(hyp, A, Bm, instr=res.instruction, engine="compiled")).reshape(-1)
    D = bit_view(D)
    out: list[Fraction | None] = []
    for i in range(n):
        d = value_of(int(D[i]), hyp.schedule.out or p.d_fmt)
        exact = sum(a_vals[i] * b_vals[i])  # Python integers: exact at any depth
        if not isinstance(d, Fraction):
            out.append(Fraction(-1))
        else:
            out.append(abs(d - exact) if d != exact else None)
    return out


def _inexact(res: GemmExactness, hyp, p, a_vals: list[int], b_vals: list[int]) -> Fraction | None:
    """`_inexact_rows` of one row."""
    return _inexact_rows(res, hyp, p, [(a_vals, b_vals)])[0]


def claim_rows(K: int, m: int, L: int):
    """The extreme rows of a claimed depth K: every slice at its largest with one sign
    (every chain's accumulator at its largest), and every L-block's products small (1 x 1,
    m x 1) after all the blocks before it at their largest (the low bits a coarse
    alignment grid would cut)."""
    for s in (1, -1):
        yield [s * m] * K, [m] * K
        for j in range(0, K, L):
            for x, y in ((1, 1), (m, 1)):
                a = [s * m] * j + [s * x] * (K - j)
                b = [m] * j + [y] * (K - j)
                yield a, b


def _check_claim(res: GemmExactness, hyp, p, slice_bits: int) -> None:
    """Run the claimed K's extreme rows through tc.matmul: an inexact one withdraws the
    claim (res.K = None, the row named in res.lines)."""
    if res.K is None:
        return
    if res.K > SOUND_K_LIMIT:
        res.lines.append(
            f"the rows at K = {res.K} are not run (deeper than {SOUND_K_LIMIT}); the claim rests "
            "on the argument and the instruction rows"
        )
        return
    m = (1 << slice_bits) - 1
    rows = list(dict.fromkeys((tuple(a), tuple(b)) for a, b in claim_rows(res.K, m, p.K)))
    batch = max(1, ROW_ENTRIES // res.K)
    for i in range(0, len(rows), batch):
        for err in _inexact_rows(res, hyp, p, rows[i : i + batch]):
            if err is not None:
                res.contradiction = f"a row at K = {res.K} is inexact (|error| = {err})"
                res.lines.append(
                    f"{res.contradiction}: the argument is wrong here, nothing claimed"
                )
                res.K = None
                return
    n = len(rows)
    res.sound_rows = n
    res.lines.append(f"checked: {n} extreme rows at K = {res.K} through tc.matmul, all exact")


def _candidates(K: int, m: int, L: int, B: int):
    """Integer rows (a_k, b_k) likely to be inexact at depth K: one product lowered to
    m (m - 1) so that the largest sum is odd, every product m^2, and a chain
    whose last instruction meets an accumulator just above B with an odd remainder."""
    a = [m] * K
    a[-1] = m - 1 if m > 1 else 0
    yield a, [m] * K
    yield [m] * K, [m] * K
    a = [m] * K
    b = [m] * K
    b[0] = 1
    yield a, b
    # blocks from +0 to just above B, then products of 1 (bits below a coarse grid)
    full = (B // m**2) + 1
    if full < K:
        a = [m] * full + [1] * (K - full)
        yield a, [m] * full + [1] * (K - full)


def _witness(res: GemmExactness, hyp, p, K: int, slice_bits: int) -> None:
    m = (1 << slice_bits) - 1
    for a_vals, b_vals in _candidates(K, m, p.K, res.B):
        err = _inexact(res, hyp, p, a_vals, b_vals)
        if err is not None:
            res.witness_K = K
            res.witness_error = None if err < 0 else err
            return


__all__ = ["K_LIMIT", "GemmExactness", "checked_gemm", "gemm_exactness"]
