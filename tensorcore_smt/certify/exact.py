"""Exact accumulation: up to which K a unit, and its chained GEMM, sums integer slices
exactly (the question the Ozaki scheme rests on).

Ozaki-scheme emulation splits each matrix into slices of P-bit integers times a shared
power of two and needs every slice product A_i B_j summed exactly. For bf16 slices of
P = 7 bits an fp32 accumulator that adds exactly holds every partial sum while
K (2^P - 1)^2 < 2^24, K <= 1040 (the rule ozaki-jax states). A real unit adds in its own
way (alignment to the largest exponent with F fraction bits, truncation), so the rule
is a question for the model:

1. Instruction lemma. For integer a_k, b_k with |a_k|, |b_k| <= 2^P - 1 and an integer
   c with |c| <= 2^b - 1, is d = c + sum a_k b_k on every input? Asked as the bound goal
   "abs error > 0" on the integer class (model/measure.py); unsat proves it for the
   whole range, a witness refutes it. The largest such b is searched from the fp32
   precision downwards: B = 2^b - 1 is the largest running accumulator the instruction
   provably takes without an error.
2. Chain induction (stated, and checked on the witness). A serial chain acc_0 = 0,
   acc_{j+1} = MMA(a block j, b block j, acc_j) with L products per instruction: every
   |acc_j| <= j L (2^P - 1)^2. While that bound is at most B, the lemma applies to
   instruction j + 1, so acc_{j+1} is exact and an integer; by induction the whole
   chain is exact for K = J L with J the largest number of instructions such that
   (J - 1) L (2^P - 1)^2 <= B. That is a proof for every input of the class.
3. A witness above: the lemma's lowest witness (at b + 1, or higher where a range
   between was undecided) gives (a, b, c_w) with an inexact
   result. Blocks of products that sum exactly to c_w (each block's accumulator below B,
   so exact by the lemma) followed by the witness block make a chain whose result is
   not exact; it is re-run through tc.matmul and measured exactly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..bv.dtypes import bit_view
from ..errors import UserError
from ..formats import round_fraction, value_of
from ..model.integer_sums import argued_bound
from ..model.measure import Measure
from ..smt.argument_rows import counterexample, rows_checked
from ..smt.query import Constraint, ConstraintKind, Goal, make_query, parse_integer
from ..smt.solve import Limits, Verdict, answer
from ..solvers import Answer


@dataclass
class LemmaStep:
    """One instruction-lemma question: integer c of at most `c_bits` bits."""

    c_bits: int
    verdict: Verdict
    seconds: float
    solver: str | None = None
    confirmed_by: str | None = None
    witness: dict[str, int] | None = None


@dataclass
class Exactness:
    """What is proved about exact accumulation of P-bit integer slices."""

    hypothesis: str
    instruction: str
    slice_bits: int
    L: int
    c_bits: int | None = None  # the largest b proved: exact for |c| <= 2^b - 1
    lemma_witness: dict[str, int] | None = None  # the inexact input of the lowest range
    steps: list[LemmaStep] = field(default_factory=list)
    chain_K: int | None = None  # every chain of at most this K is exact (induction)
    chain_witness_K: int | None = None  # a chain of this K, checked inexact by matmul
    chain_witness_error: Fraction | None = None
    seconds: float = 0.0
    # the composed argument (argued_bound): exact for every integer |c| <= argued_B
    argued_B: int | None = None
    argued_lines: list[str] = field(default_factory=list)
    above_witness: dict[str, int] | None = None  # |c| = argued_B + 1, inexact on the model
    # the argument's extreme rows at its own B run on the model (soundness): how many,
    # and the one that was inexact (then the argument is not used: argued_B is None)
    argued_rows: int = 0
    argued_contradiction: str | None = None

    @property
    def bound_B(self) -> int | None:
        """The largest running accumulator proved exact (by a solver or the argument)."""
        solver = None if self.c_bits is None else (1 << self.c_bits) - 1
        if self.argued_B is None:
            return solver
        return self.argued_B if solver is None else max(solver, self.argued_B)

    def argument(self) -> str:
        """The induction of the chain in words, with this result's numbers."""
        if self.bound_B is None:
            return "no accumulator range was proved exact: nothing is claimed for chains"
        m2 = ((1 << self.slice_bits) - 1) ** 2
        return (
            f"every |acc_j| <= j*L*(2^P-1)^2 = j*{self.L}*{m2}; the instruction is exact for "
            f"|c| <= B = {self.bound_B} (proved), so by induction a "
            f"serial chain of J = {self.chain_K // self.L} instructions (K = {self.chain_K}) "
            "is exact on every input of the class"
        )


def _lemma_query(hypothesis: str, instr: str | None, p_bits: int, c_bits: int):
    cons: tuple[Constraint, ...] = (
        Constraint(ConstraintKind.FINITE),
        parse_integer(f"ab={p_bits}"),
    )
    if c_bits > 0:
        cons += (parse_integer(f"c={c_bits}"),)
    else:
        cons += (Constraint(ConstraintKind.FIX, "c", bits=0),)
    return make_query(
        hypothesis,
        None,
        instr,
        Goal.ERROR_EXCEEDS,
        cons,
        measure=Measure.ABS,
        threshold=Fraction(0),
    )


def exactness(
    hypothesis: str,
    slice_bits: int,
    *,
    instr: str | None = None,
    timeout: float = 600.0,
    limits: Limits | None = None,
    on_step=None,
) -> Exactness:
    """Search the largest accumulator range the instruction adds P-bit integer slices
    into exactly (a proof), the witness just above it, the chain length the induction
    proves exact and a chain witness re-run through tc.matmul."""
    if slice_bits < 1:
        raise UserError(f"slice bits {slice_bits}: at least 1")
    q0 = _lemma_query(hypothesis, instr, slice_bits, 1)
    p = q0.p
    if p.c_fmt != p.d_fmt:
        raise UserError(f"{q0.instruction}: c and d formats differ; a chain needs d = c")
    if p.scale_fmt is not None:
        raise UserError(
            f"{q0.instruction} is block-scaled: exact sums of integer slices under per-block "
            "scale factors are not modelled; pick an instruction without .block_scale"
        )
    limits = limits or Limits()
    res = Exactness(hypothesis, q0.instruction, slice_bits, p.K)
    t0 = time.monotonic()
    argued = argued_bound(p, slice_bits)
    if isinstance(argued, tuple):
        B, lines = argued
        bad = sound_at(p, slice_bits, B)
        res.argued_rows = rows_checked(p, slice_bits, B)
        if bad is None:
            res.argued_B, res.argued_lines = B, lines
            res.argued_lines.append(
                f"checked: {res.argued_rows} extreme rows at |c| = B run on the model, all exact"
            )
            res.above_witness = above_witness(p, slice_bits, res.argued_B)
        else:
            res.argued_contradiction = bad
            res.argued_lines = [
                f"the composed argument claimed B = {B} but an extreme row at B is inexact on "
                f"the model ({bad}): the argument is wrong here and not used"
            ]
    else:
        res.argued_lines = [f"no composed argument: {argued}"]
    deadline = t0 + timeout
    top = p.c_fmt.spec.precision + 1  # integers beyond 2^precision are not all representable
    # the argument proved B and a witness at B + 1 shows it tight: nothing left to ask
    b = -1 if res.above_witness is not None else top
    proved = None
    while b >= 0 and time.monotonic() < deadline - 1:
        q = _lemma_query(hypothesis, q0.instruction, slice_bits, b)
        # one question gets at most half the budget: an undecided range leaves time to
        # prove a smaller one
        left = min(deadline - time.monotonic(), max(1.0, timeout / 2))
        o = answer(
            q,
            Limits(limits.solver, left, limits.jobs, limits.memory_mb, limits.confirm, limits.seed),
        )
        who = o.method if o.argued else (o.result.solver if o.result is not None else None)
        step = LemmaStep(b, o.verdict, o.seconds, who)
        if o.verdict.unsat:
            step.confirmed_by = next(
                (r.solver for r in o.confirmations if r.answer == Answer.UNSAT), None
            )
            proved = b
        elif o.verdict == Verdict.WITNESS:
            step.witness = dict(o.witness.inputs)
            res.lemma_witness = step.witness
        res.steps.append(step)
        if on_step:
            on_step(step)
        if o.verdict.unsat:
            break  # the largest range proved, searching downwards
        b -= 1  # a witness, or undecided: a smaller range may still be proved
    res.c_bits = proved
    if res.bound_B is not None:
        m2 = ((1 << slice_bits) - 1) ** 2
        res.chain_K = chain_length_B(res.bound_B, p.K, slice_bits)
        if res.lemma_witness is None and res.above_witness is not None:
            res.lemma_witness = res.above_witness
        if res.lemma_witness is not None:
            _chain_witness(res, q0, m2)
    res.seconds = time.monotonic() - t0
    return res


def sound_at(p, slice_bits: int, B: int) -> str | None:
    """Whether the argument's claim holds on its own extreme rows at B
    (model/integer_sums.extreme_rows run through the concrete model): None when every
    row is exact, else the first inexact row in words."""
    ce = counterexample(p, slice_bits, B)
    if ce is None:
        return None
    (a, b, c), d = ce
    exact = c + sum(x * y for x, y in zip(a, b))
    return f"c = {c}, a = {a}, b = {b}: d = {d}, exact {exact}"


def above_witness(p, slice_bits: int, B: int, tries: int = 4096, seed: int = 0):
    """Inputs with |c| = B + 1 on which the model is not exact (None if none was found):
    c and the products at their largest, one sign, small variations, checked on the
    concrete model against the exact integer sum."""
    import random

    from ..api import simulate_params

    rng = random.Random(seed)
    m = (1 << slice_bits) - 1
    rows = []
    for i in range(tries):
        sign = -1 if i % 2 else 1
        c = sign * (B + 1)
        a = [sign * m] * p.K
        b = [m] * p.K
        # the first rows at their largest; then a few products lowered (the parity and
        # the size of the sum move), or small products (bits below a coarse grid)
        for _ in range(0 if i < 2 else rng.randint(1, 3)):
            k = rng.randrange(p.K)
            a[k] = sign * rng.randint(0, m)
        if i >= 2 and rng.random() < 0.2:
            a = [sign * rng.randint(0, 1) for _ in range(p.K)]
        rows.append((a, b, c))
    from .exact_gemm import slice_pattern  # each distinct value rounded once

    A = np.array([[slice_pattern(x, p.a_fmt) for x in r[0]] for r in rows], dtype=np.uint64)
    Bm = np.array([[slice_pattern(x, p.b_fmt) for x in r[1]] for r in rows], dtype=np.uint64)
    C = np.array([slice_pattern(r[2], p.c_fmt) for r in rows], dtype=np.uint64)
    if any(value_of(int(x), p.c_fmt) != r[2] for x, r in zip(C[:8], rows[:8])):
        return None  # B + 1 is not representable in c's format
    D = simulate_params(p, A, Bm, C)
    for i, (a, b, c) in enumerate(rows):
        exact = c + sum(x * y for x, y in zip(a, b))
        if value_of(int(C[i]), p.c_fmt) != c:
            continue
        if value_of(int(D[i]), p.d_fmt) != exact:
            w = {f"a{k}": int(A[i, k]) for k in range(p.K)}
            w.update({f"b{k}": int(Bm[i, k]) for k in range(p.K)})
            w["c"] = int(C[i])
            return w
    return None


def chain_length_B(B: int, L: int, slice_bits: int) -> int:
    """K = J L for the largest J with (J - 1) L (2^P - 1)^2 <= B (chain_length for any
    proved bound B, not only 2^b - 1)."""
    m2 = ((1 << slice_bits) - 1) ** 2
    return (B // (L * m2) + 1) * L


def chain_length(c_bits: int, L: int, slice_bits: int) -> int:
    """K = J L for the largest J with (J - 1) L (2^P - 1)^2 <= 2^b - 1: every incoming
    accumulator of a serial chain of J instructions stays within the range the lemma
    proved (acc_j <= j L (2^P - 1)^2 for j < J), so the chain is exact (module docstring,
    step 2)."""
    m2 = ((1 << slice_bits) - 1) ** 2
    return (((1 << c_bits) - 1) // (L * m2) + 1) * L


MAX_CHAIN_WITNESS_K = 1 << 20
"""Longest chain built to show a lemma witness at the end of a GEMM chain."""


def _fill_blocks(target: int, L: int, m: int, B: int) -> list[list[tuple[int, int]]] | None:
    """Blocks of L integer products (|x|, |y| <= m) whose running sums reach `target`
    exactly with every block's incoming accumulator within B (None if it cannot)."""
    blocks: list[list[tuple[int, int]]] = []
    acc = 0
    sign = 1 if target >= 0 else -1
    while acc != target:
        if abs(acc) > B:
            return None
        block = []
        for _ in range(L):
            rest = abs(target - acc)
            if rest == 0:
                block.append((0, 0))
                continue
            if rest >= m * m:
                x, y = m, m
            elif rest >= m:
                x, y = m, rest // m
            else:
                x, y = 1, rest
            block.append((sign * x, y))
            acc += sign * x * y
        blocks.append(block)
    return blocks


def _chain_witness(res: Exactness, q0, m2: int) -> None:
    """The lemma's witness placed at the end of a chain that reaches its c exactly; the
    chain run through tc.matmul and its error measured with exact rationals."""
    from ..api import bits_dtype
    from ..gemm.emulate import matmul

    p = q0.p
    w = res.lemma_witness
    c_val = value_of(w["c"], p.c_fmt)
    m = (1 << res.slice_bits) - 1
    if abs(c_val) // (m * m) > MAX_CHAIN_WITNESS_K:
        return  # a chain of millions of products: not built (the lemma witness stands)
    blocks = _fill_blocks(int(c_val), p.K, m, res.bound_B)
    if blocks is None:
        return
    a_vals: list[int] = []
    b_vals: list[int] = []
    for blk in blocks:
        for x, y in blk:
            a_vals.append(x)
            b_vals.append(y)
    a_vals += [int(value_of(w[f"a{i}"], p.a_fmt)) for i in range(p.K)]
    b_vals += [int(value_of(w[f"b{i}"], p.b_fmt)) for i in range(p.K)]
    K = len(a_vals)
    A = np.array(
        [[round_fraction(Fraction(v), p.a_fmt) for v in a_vals]], dtype=bits_dtype(p.a_fmt)
    )
    B = np.array(
        [[round_fraction(Fraction(v), p.b_fmt)] for v in b_vals], dtype=bits_dtype(p.b_fmt)
    )
    hyp = res.hypothesis if "/" in res.hypothesis else f"{res.hypothesis}/serial"
    D = np.asarray(matmul(hyp, A, B, instr=res.instruction, engine="compiled")).reshape(-1)
    D = bit_view(D)  # matmul returns values in d's dtype: read their bits
    d = value_of(int(D[0]), p.d_fmt)
    exact = sum(x * y for x, y in zip(a_vals, b_vals))
    if isinstance(d, Fraction) and d != exact:
        res.chain_witness_K = K
        res.chain_witness_error = abs(d - exact)


__all__ = [
    "Exactness",
    "LemmaStep",
    "above_witness",
    "argued_bound",
    "chain_length_B",
    "exactness",
    "sound_at",
]
