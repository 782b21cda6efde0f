"""The arithmetic of one GEMM output element, written once on the BV interface.

Small step functions, each a call into the model (never a second copy of a rule), composed
by a Plan (plan.py). Any interpreter runs them: concrete ints, numpy vectors over many
output elements at once, the symbolic DAG for the solvers, the compiled engine.

- mma_step: one instruction of a chain, the running accumulator as its c (PTX ISA
  "Matrix multiply-accumulate": D = A*B + C) - model.dot_add;
- promote_add: a chain's result added into the fp32 accumulator, IEEE round to nearest
  (cuBLAS FP8 without fast accumulation; DeepSeek-V3 §3.3.2) - model.ieee.add;
- combine: two split-K partials added in fp32, round to nearest - model.ieee.add;
- epilogue: D = alpha*acc + beta*C as one fp32 FMA (or mul then add), then one
  round-to-nearest conversion to the output format, FP8 saturating (cuBLASLt
  cublasLtMatmul: "D = alpha*(A*B) + beta*(C)"; torch._scaled_mm: alpha = scale_a*scale_b)
  - model.ieee.fma / mul / add / convert; alpha = 0 is D = beta*C without reading A and
  B (reference BLAS xGEMM), decided once in `Epilogue.of`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..formats import Format, Rounding, Specials, decode, default_nan_bits
from ..model import dot_add
from ..model.ieee import add_unpacked, convert_unpacked, fma_unpacked, mul_unpacked
from ..model.nan import GEMM_PROPAGATES, gemm_nan
from ..model.params import ModelParams
from ..model.rounding import Overflow
from .plan import Plan, SplitPlan, Tree
from .schedule import EpilogueOp, Schedule

RN = Rounding.RNE
T = TypeVar("T")


def acc_format(p: ModelParams) -> Format:
    """The format of the promotion accumulator, the split-K combination and the epilogue:
    fp32 (cuBLASLt CUBLAS_COMPUTE_32F), fp64 for an fp64 instruction (DGEMM)."""
    return Format.FP64 if p.d_fmt == Format.FP64 else Format.FP32


def canonical_nan(fmt: Format, p: ModelParams) -> int:
    """The NaN the GEMM level writes in `fmt` for an invalid operation (and for every
    NaN result where the rule does not propagate operands, model.nan.gemm_nan): under a
    rule the GEMM level follows (x86 a-b-acc) the instruction's own `nan_bits` in its d
    format (x86: QNaN floating-point indefinite, 0xFFC00000); else the positive
    all-ones-payload NaN for an instruction with a canonical NaN (NVIDIA: 0x7FFFFFFF,
    0x7FFF, 0x7F), else the format's default quiet NaN (FNUZ formats: their one NaN)."""
    s = fmt.spec
    if p.nan_rule in GEMM_PROPAGATES and p.nan_bits is not None and fmt == p.d_fmt:
        return p.nan_bits
    if p.nan_bits is None or s.specials == Specials.FNUZ:
        return default_nan_bits(fmt)
    return (1 << (s.storage - 1)) - 1


def mma_step(p: ModelParams, a_blk: Sequence[BV], b_blk: Sequence[BV], acc: BV) -> BV:
    """One instruction of a chain: d = acc + sum a_k b_k as the unit computes it."""
    return dot_add(list(a_blk), list(b_blk), acc, p)


def promote_add(acc: BV, chain_d: BV, d_fmt: Format, acc_fmt: Format, p: ModelParams) -> BV:
    """acc + chain_d in `acc_fmt` (fp32), IEEE round to nearest even; a NaN as the
    instruction's rule says at the GEMM level (model.nan.gemm_nan: chain_d, then acc)."""
    return add_partials(acc, acc_fmt, chain_d, d_fmt, acc_fmt, p)


def combine(x: BV, y: BV, fx: Format, fy: Format, acc_fmt: Format, p: ModelParams) -> BV:
    """Two split partials x + y added in `acc_fmt` (fp32), round to nearest even; a NaN
    as the instruction's rule says at the GEMM level (y, the later addend, then x)."""
    return add_partials(x, fx, y, fy, acc_fmt, p)


def add_partials(x: BV, fx: Format, y: BV, fy: Format, acc_fmt: Format, p: ModelParams) -> BV:
    """x + y in `acc_fmt`, round to nearest even: the one addition of the GEMM level. A
    NaN result is model.nan.gemm_nan's: x86 (a-b-acc) returns y's NaN, else x's (a
    later addend before the running sum, as numpy's OpenBLAS sgemm adds its split
    partials), else the indefinite NaN; the other rules the GEMM's canonical NaN."""
    ux, uy = decode(x, fx), decode(y, fy)
    r = add_unpacked(ux, uy, acc_fmt, RN, canonical_nan(acc_fmt, p))
    return gemm_nan(p, [(y, uy, fy), (x, ux, fx)], r, acc_fmt)


def float_bits(value: float, fmt: Format) -> int:
    """A Python float rounded to nearest into `fmt` by the model's conversion (the
    epilogue's fp32 scalars alpha and beta)."""
    x64 = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(convert_unpacked(decode(BV(CONCRETE, x64, 64), Format.FP64), fmt, RN).v)


@dataclass(frozen=True)
class Epilogue:
    """The epilogue with its scalars resolved to bits of `ep_fmt` (fp32, or fp64 for an
    fp64 GEMM). `beta` None: no C term in the epilogue. `reads_ab` False (alpha = 0):
    D = beta*C (or +0 without a C term), A and B not read."""

    alpha: int
    beta: int | None
    op: EpilogueOp
    ep_fmt: Format
    out_fmt: Format
    saturate: bool
    reads_ab: bool = True

    @staticmethod
    def of(schedule: Schedule, p: ModelParams, plan: Plan, has_c: bool) -> Epilogue:
        """The epilogue of `schedule` for instruction `p` and `plan`; `has_c`: a C is
        given. C has a term here when it is given, does not join the chain
        (`plan.c_in_chain`, from Schedule.c_in_chain) and beta is not 0 (beta = 0 does
        not read C: BLAS, cuBLAS, torch.addmm). alpha = 0 (either sign) does not read A
        and B: D = beta*C, +0 when beta = 0 or no C is given (reference BLAS xGEMM
        "when alpha is zero then A and B are not referenced"; its alpha = 0 branch sets
        C := beta*C, or zero when beta is zero), so NaN and Inf in A@B do not reach D."""
        ep = acc_format(p)
        out = schedule.out or p.d_fmt
        beta = None
        if has_c and not plan.c_in_chain and schedule.c_beta != 0.0:
            beta = float_bits(schedule.c_beta, ep)
        alpha = float_bits(schedule.alpha, ep)
        reads_ab = schedule.alpha != 0.0
        return Epilogue(alpha, beta, schedule.epilogue, ep, out, schedule.saturates(out), reads_ab)

    def identity(self, acc_fmt: Format) -> bool:
        """Whether D is the accumulator itself: alpha = 1, no C term, no conversion."""
        return (
            self.reads_ab
            and self.alpha == float_bits(1.0, self.ep_fmt)
            and self.beta is None
            and self.out_fmt == acc_fmt
            and not self.saturate
        )


def epilogue(
    acc: BV,
    acc_fmt: Format,
    c: BV | None,
    c_fmt: Format | None,
    ep: Epilogue,
    p: ModelParams,
) -> BV:
    """D = alpha*acc + beta*C in the epilogue format (one FMA, or mul then add), then one
    round-to-nearest conversion to the output format (saturating when `ep.saturate`).
    Without `ep.reads_ab` (alpha = 0) `acc` is not used: D = beta*C, or +0."""
    b = acc.b
    f = ep.ep_fmt
    nan = canonical_nan(f, p)
    alpha_bits = BV.const(b, ep.alpha, f.spec.storage)
    alpha = decode(alpha_bits, f)
    x = decode(acc, acc_fmt)
    a_op = (alpha_bits, alpha, f)
    x_op = (acc, x, acc_fmt)

    def times(k: int, y: BV, fy: Format) -> BV:
        """k * y in f with the GEMM level's NaN (k, then y)."""
        kb = BV.const(b, k, f.spec.storage)
        ku, yu = decode(kb, f), decode(y, fy)
        return gemm_nan(p, [(kb, ku, f), (y, yu, fy)], mul_unpacked(ku, yu, f, RN, nan), f)

    if not ep.reads_ab:
        if ep.beta is not None and c is not None:
            assert c_fmt is not None
            r = times(ep.beta, c, c_fmt)
        else:
            r = _zero(acc, f)
    elif ep.beta is not None and c is not None:
        assert c_fmt is not None
        bc_bits = times(ep.beta, c, c_fmt)
        bc = decode(bc_bits, f)
        if ep.op == EpilogueOp.FMA:
            r = fma_unpacked(alpha, x, bc, f, RN, nan)
            r = gemm_nan(p, [a_op, x_op, (bc_bits, bc, f)], r, f)
        else:
            r = add_partials(bc_bits, f, times(ep.alpha, acc, acc_fmt), f, f, p)
    else:
        r = times(ep.alpha, acc, acc_fmt)
    if ep.out_fmt == f and not ep.saturate:
        return r
    overflow = Overflow.SATURATE if ep.saturate else Overflow.IEEE
    return convert_unpacked(
        decode(r, f), ep.out_fmt, RN, canonical_nan(ep.out_fmt, p), overflow=overflow
    )


def c_format(p: ModelParams, schedule: Schedule, given: Format | None = None) -> Format:
    """The format C is read in where it joins (Schedule.c_in_chain), the one rule every
    runner follows: the instruction's c format in the chain; in the epilogue C's own
    float format when it has one (`given`: the format of a float C array; tf32 is no
    storage format and reads as the output format), else the output format."""
    if schedule.c_in_chain:
        return p.c_fmt
    if given is not None and given != Format.TF32:
        return given
    return schedule.out or p.d_fmt


def c_joins(plan: Plan, s: int, has_c: bool) -> bool:
    """Whether C is acc_0 of split `s`'s chain: a C is given, it joins the chain
    (`plan.c_in_chain`) and `s` is split 0 (unpromoted whenever C joins a chain)."""
    return has_c and plan.c_in_chain and s == 0 and not plan.splits[s].promoted


def _zero(like: BV, fmt: Format) -> BV:
    return BV.const(like.b, 0, fmt.spec.storage)


def run_chain(
    p: ModelParams, a: Sequence[BV], b: Sequence[BV], blocks: Sequence[int], acc: BV
) -> BV:
    """acc_{j+1} = MMA(a block j, b block j, acc_j) over `blocks` (k-block indices)."""
    K = p.K
    for j in blocks:
        acc = mma_step(p, a[j * K : (j + 1) * K], b[j * K : (j + 1) * K], acc)
    return acc


def fold_plan(
    plan: Plan,
    p: ModelParams,
    split: Callable[[int, SplitPlan], T],
    add: Callable[[T, Format, T, Format], T],
) -> tuple[T, Format]:
    """The walk of a plan every runner shares: `split(s, sp)` the partial of each split
    (the chain's d in the instruction's d format, or the fp32 sum of promoted chains),
    then the partials added pairwise along `plan.combine` by `add(x, fx, y, fy)` (in the
    accumulator format); returns the accumulator and its format."""
    af = acc_format(p)
    partials = [(split(s, sp), af if sp.promoted else p.d_fmt) for s, sp in enumerate(plan.splits)]
    if len(partials) == 1:
        return partials[0]

    def reduce(t: Tree) -> tuple[T, Format]:
        if isinstance(t, int):
            return partials[t]
        (x, fx), (y, fy) = reduce(t[0]), reduce(t[1])
        return add(x, fx, y, fy), af

    return reduce(plan.combine)


def accumulate(
    a: Sequence[BV],
    b: Sequence[BV],
    c: BV | None,
    p: ModelParams,
    plan: Plan,
) -> tuple[BV, Format]:
    """The element's accumulator before the epilogue and its format: the chain's d, or
    the fp32 sum of promoted chains and combined splits. `c` enters here only when
    `c_joins` (as acc_0 of split 0's chain, in the instruction's c format)."""
    like = a[0]
    d_fmt = p.d_fmt
    af = acc_format(p)

    def split(s: int, sp: SplitPlan) -> BV:
        if not sp.promoted:
            acc0 = c if c_joins(plan, s, c is not None) else _zero(like, d_fmt)
            return run_chain(p, a, b, sp.chains[0], acc0)
        acc32 = _zero(like, af)
        for blocks in sp.chains:
            d = run_chain(p, a, b, blocks, _zero(like, d_fmt))
            acc32 = promote_add(acc32, d, d_fmt, af, p)
        return acc32

    return fold_plan(plan, p, split, lambda x, fx, y, fy: combine(x, y, fx, fy, af, p))


def element(
    a: Sequence[BV],
    b: Sequence[BV],
    c: BV | None,
    p: ModelParams,
    plan: Plan,
    schedule: Schedule,
    c_fmt: Format | None = None,
) -> BV:
    """One output element d = alpha * sum_k a_k b_k + beta * c as the kernel computes it:
    `a`, `b` the zero-padded row of A and column of B (plan.n_blocks * p.K entries, any
    indexable sequence, read block by block), `c` the element of C or None. `c_fmt`: the
    format of c as given (`c_format`; default: the rule's format of a C of bit patterns)."""
    n = plan.n_blocks * p.K
    if len(a) != n or len(b) != n:
        raise ValueError(f"expected {n} a and b entries, got {len(a)} and {len(b)}")
    ep = Epilogue.of(schedule, p, plan, c is not None)
    if ep.reads_ab:
        acc, acc_fmt = accumulate(a, b, c, p, plan)
    else:  # alpha = 0: A and B are not read
        acc_fmt = acc_format(p)
        acc = _zero(a[0], acc_fmt)
    if ep.identity(acc_fmt):
        return acc
    cf = c_fmt or c_format(p, schedule)
    return epilogue(acc, acc_fmt, c if ep.beta is not None else None, cf, ep, p)
