"""Stated arguments that two GEMM hypotheses are equal, for pairs whose GEMM question the
solvers leave open at depth K (K / k instructions chained: hundreds of products).

**Flushing the instruction's output** (`flush_outputs`: a subnormal d of a fused group
becomes zero, model/fda.py step 5). Take two hypotheses with one schedule and plan whose
instructions differ only in flush_outputs. Let 2^q be the least bit a product can carry
(the operands' least bits added: e4m3 x e4m3 gives 2^-9 * 2^-9 = 2^-18;
model/zero_exponent.kinds). Claim: every finite value that enters or leaves an
instruction of a chain is an integer multiple of 2^q, when
 (a) every chain starts from +0 (C joins after the chains: not plan.c_in_chain, no
     seeded chain), so an instruction's c is +0 or the previous instruction's d;
 (b) the operands reach the unit as given (no operand scaling or TF32 rounding) and the
     unit is a fused group (FDA) with exact opposing terms, its products exact;
 (c) 2^q is at least the smallest normal number of the group's rounding format and of
     d, and the rounding format's largest finite number is a multiple of 2^q.
By induction over the chain: the products and c are multiples of 2^q; alignment to the
grid 2^(e_max - F) either leaves a term (a finer grid) or truncates or floors it to a
coarser power of two, a multiple of 2^q either way; their fixed-point sum, also taken
modulo the register's 2^(e_max + int_bits + carry_bits + 1) > 2^q (a nonzero term is
below 2^(e_max + int_bits)) or halved onto a coarser grid (renormalising), stays one;
rounding into the output format moves a multiple of 2^q to its binade's grid, a coarser
power of two, or leaves it (a finer one), and overflow gives Inf or the largest finite
number. A nonzero multiple of 2^q has magnitude at least 2^q, a normal number, which no
flush touches; zeros, Inf and NaN pass unflushed alike. So both instructions compute the
same d at every step of every chain, and everything after the chains (promotion, split-K,
epilogue) reads only those d and C: the two hypotheses give the same output on every
input. Where (a) fails a subnormal C in the first chain is flushed, and the hypotheses
differ (tests/test_gemm_arguments.py).

An argument is a proof on paper, and a proof on paper can be wrong: each comes with its
extreme rows (`flush_rows`: products at the least magnitudes, sums cancelling to a few
units of 2^q in every chain, subnormal and random C), run through both models by the
model's own code; the loop uses the argument only when every row agrees
(`GemmArgument.check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..formats import Format, Specials
from ..gemm.model import GemmModel, run_rows
from ..model.params import Algorithm, CAddend, Opposing, Sparsity
from ..model.zero_exponent import kinds
from ..smt.arguments import ExtremeRows
from .pool import Rows, _enc


@dataclass
class GemmArgument(ExtremeRows):
    """A stated argument that two GEMM models are equal: its steps in words and the check
    of its extreme rows on both models (`run_check`: rows run, the first row on which the
    models differ in words or None)."""

    name: str
    steps: list[str]
    run_check: Callable[[], tuple[int, str | None]] = field(repr=False)
    checked_on: str = "both models"
    source: str = "identify/gemm_arguments.py"
    rows: int = 0
    contradiction: str | None = None
    checked: bool = False

    @property
    def note(self) -> str:
        """The argument and its check, for a proof's note."""
        return (
            f"equal by a stated argument ({self.name}, {self.source}): "
            f"{'; '.join(self.steps)}; its {self.rows} extreme rows give the same d on "
            f"{self.checked_on}; no solver asked"
        )


def least_product_bit(ma: GemmModel) -> int:
    """q: the exponent of the least bit a product of the unit can carry."""
    return kinds(ma.p, 0)[0].low_bit


def flush_outputs_steps(ma: GemmModel, mb: GemmModel) -> list[str] | None:
    """The flush_outputs argument's steps (module docstring) when `ma` and `mb` differ
    only in the instruction's flush_outputs and its conditions hold; else None."""
    from ..gemm.element import rounds_operands
    from ..gemm.schedule import AlphaOn

    p = ma.p
    if (
        p.flush_outputs == mb.p.flush_outputs
        or replace(p, flush_outputs=mb.p.flush_outputs) != mb.p
    ):
        return None
    if ma.schedule != mb.schedule or ma.plan != mb.plan or ma.c_fmt != mb.c_fmt:
        return None
    if ma.plan.c_in_chain or ma.plan.seeds:
        return None
    if ma.schedule.alpha_on != AlphaOn.EPILOGUE or any(
        rounds_operands(f) for f in (p.a_fmt, p.b_fmt)
    ):
        return None
    if (
        p.algorithm != Algorithm.FDA
        or p.opposing != Opposing.EXACT
        or p.c_add != CAddend.FUSED
        or p.scale_fmt is not None
        or p.unpack is not None
        or p.sparse != Sparsity.NONE
    ):
        return None
    q = least_product_bit(ma)
    out = p.out_fmt.spec
    if q < out.emin or q < p.d_fmt.spec.emin or out.emax - out.mbits < q:
        return None
    return [
        "every chain starts from +0 (C joins after the chains), so an instruction's c is "
        "+0 or the previous instruction's d",
        f"every product is a multiple of 2^{q} (the operands' least bits); alignment, the "
        "fixed-point sum and the rounding keep every finite value a multiple of 2^"
        f"{q} (module docstring)",
        f"a nonzero multiple of 2^{q} is at least the smallest normal 2^{out.emin} of "
        f"{p.out_fmt.spec.name}: no d of an instruction is subnormal, so flushing outputs "
        "changes none",
    ]


FLUSH_ROWS = 2048
"""Extreme rows of the flush_outputs argument (one vector pass of each model)."""


def flush_rows(ma: GemmModel, n: int = FLUSH_ROWS, seed: int = 0) -> Rows:
    """Rows that drive chain results to the least magnitudes the argument allows: every
    product of subnormal (or least normal) operands, signs mixed so that sums cancel to a
    few units of 2^q; some rows add a large product and its negation in other k-blocks of
    a chain (a large e_max, so the tiny terms are truncated, then the large ones cancel);
    C is ±0, the least and largest subnormal of its format, or random bits."""
    rng = np.random.default_rng(seed)
    K, p = ma.K, ma.p
    sa, sb = p.a_fmt.spec, p.b_fmt.spec
    sign = rng.integers(0, 2, size=(n, K)).astype(np.uint64)
    # subnormal a (every mantissa, the least first among them), subnormal or least normal b
    a = _fields(p.a_fmt, sign, 0, rng.integers(0, 1 << sa.mbits, size=(n, K)))
    b_exp = (rng.random((n, K)) < 0.25).astype(np.int64)
    b = _fields(p.b_fmt, 0, b_exp, rng.integers(0, 1 << sb.mbits, size=(n, K)))
    live = rng.random((n, K)) < rng.choice([0.02, 0.2, 1.0], size=(n, 1))
    a = np.where(live, a, np.uint64(0))
    b = np.where(live, b, np.uint64(0))
    big = np.flatnonzero(rng.random(n) < 0.5)
    kb = p.K
    for r in big:  # +big and -big in two k-blocks (possibly one), tiny terms around them
        i, j = rng.integers(0, K // kb, size=2) * kb + rng.integers(0, kb, size=2)
        if i == j:
            continue
        top = _enc(p.a_fmt, np.array([0, 1]), np.array([sa.emax, sa.emax]), np.zeros(2, np.uint64))
        a[r, i], a[r, j] = top
        b[r, i] = b[r, j] = _enc(p.b_fmt, np.array(0), np.array(sb.emax), np.array(0, np.uint64))
    c = _c_extremes(ma.c_fmt, rng, n)
    return Rows(a, b, c, ["flush-extreme"] * n)


def _fields(fmt: Format, sign, e_field, mant) -> np.ndarray:
    """Bit patterns of `fmt` from the sign, the biased exponent field and the mantissa."""
    s = fmt.spec
    u = np.uint64
    bits = (np.asarray(sign, dtype=u) << u(s.ebits + s.mbits)) if s.signed else u(0)
    bits = bits | (np.asarray(e_field, dtype=u) << u(s.mbits)) | np.asarray(mant, dtype=u)
    return np.asarray(bits << u(s.ignored_low), dtype=u)


def _c_extremes(fmt: Format, rng: np.random.Generator, n: int) -> np.ndarray:
    """C of `n` rows: ±0, the least and the largest subnormal, random bit patterns."""
    s = fmt.spec
    sign = np.uint64(1) << np.uint64(s.storage - 1)
    sub_max = np.uint64((1 << s.mbits) - 1) if s.specials != Specials.FNUZ else np.uint64(1)
    picks = np.array([0, sign, 1, sign | np.uint64(1), sub_max, sign | sub_max], dtype=np.uint64)
    c = picks[rng.integers(0, len(picks), size=n)]
    rand = rng.random(n) < 0.25
    c[rand] = rng.integers(0, 1 << s.storage, size=int(rand.sum()), dtype=np.uint64)
    return c


def flush_outputs_argument(ma: GemmModel, mb: GemmModel) -> GemmArgument | None:
    """The flush_outputs argument for `ma` and `mb` (unchecked: `GemmArgument.check`
    runs its extreme rows), or None where it does not apply."""
    steps = flush_outputs_steps(ma, mb)
    if steps is None:
        return None

    def run_check() -> tuple[int, str | None]:
        rows = flush_rows(ma)
        da = run_rows(ma, rows.a, rows.b, rows.c)
        db = run_rows(mb, rows.a, rows.b, rows.c)
        bad = np.flatnonzero(da != db)
        if not len(bad):
            return len(rows), None
        i = int(bad[0])
        return len(rows), f"extreme row {i} gives {int(da[i]):#x} and {int(db[i]):#x}"

    return GemmArgument("flush_outputs never acts", steps, run_check)


def instruction_argument(query, composed: str) -> GemmArgument | None:
    """The stated argument (smt/arguments.py) of the instruction-level `query` that
    decides a GEMM pair (`GemmSpace.reduced_query`: the GEMM element composes the two
    instructions alike, `composed` says why), as a GEMM argument; its extreme rows run on
    the two instructions. None where no argument applies."""
    from ..smt.arguments import stated_argument

    arg = stated_argument(query)
    if arg is None:
        return None
    return GemmArgument(
        arg.kind.title,
        [*arg.steps, composed],
        arg.run_check,
        checked_on="both instructions",
        source="smt/arguments.py",
    )


ARGUMENTS = (flush_outputs_argument,)
"""Every stated argument for two GEMM models, tried in this order."""


def gemm_argument(ma: GemmModel, mb: GemmModel) -> GemmArgument | None:
    """The first argument that says `ma` and `mb` are equal (unchecked), or None."""
    for make in ARGUMENTS:
        got = make(ma, mb)
        if got is not None:
            return got
    return None
