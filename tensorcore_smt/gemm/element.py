"""The arithmetic of one GEMM output element, written once on the BV interface.

Small step functions, each a call into the model (never a second copy of a rule), composed
by a Plan (plan.py). Any interpreter runs them: concrete ints, numpy vectors over many
output elements at once, the symbolic DAG for the solvers, the compiled engine.

- mma_step: one instruction of a chain, the running accumulator as its c (PTX ISA
  "Matrix multiply-accumulate": D = A*B + C) - model.dot_add;
- promote_add: a chain's result added into the fp32 accumulator, IEEE round to nearest
  (cuBLAS FP8 without fast accumulation; DeepSeek-V3 §3.3.2) - model.ieee.add;
- round_operand: an fp32 operand converted to the unit's TF32 operand format (round to
  nearest even or away, PTX cvt.rn/cvt.rna.tf32.f32; or left as is, the unit ignoring the
  low 13 bits) - model.ieee.convert; scaled by alpha first where the kernel applies
  alpha to an operand (scale_operand, Schedule.alpha_on: cuBLAS's fp32 GEMV and small-M
  kernels under torch.addmm) - model.ieee.mul;
- combine: two split-K partials added in fp32 (or in the output type, cuBLASLt's
  reductions in the output type), round to nearest - model.ieee.add; a partial rounded to
  the output type before it joins (round_partial), C added into the first partial
  (join_partial);
- epilogue: D = alpha*acc + beta*C as one fp32 FMA (or mul then add), then one
  round-to-nearest conversion to the output format, FP8 saturating (cuBLASLt
  cublasLtMatmul: "D = alpha*(A*B) + beta*(C)"; torch._scaled_mm: alpha = scale_a*scale_b)
  - model.ieee.fma / mul / add / convert; alpha = 0 is D = beta*C without reading A and
  B (reference BLAS xGEMM), decided once in `Epilogue.of`; C after the rounding to the
  output type (c_join=output: an elementwise add in fp32 of the rounded product and C,
  rounded again).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..errors import UserError
from ..formats import Format, Rounding, Specials, decode, default_nan_bits
from ..model import dot_add
from ..model.ieee import add_unpacked, convert_unpacked, fma_unpacked, mul_unpacked
from ..model.nan import GEMM_PROPAGATES, gemm_nan
from ..model.params import ModelParams
from ..model.rounding import Overflow
from .plan import Plan, SplitPlan, Tree
from .schedule import (
    AlphaOn,
    CJoin,
    EpilogueOp,
    OperandRound,
    ReduceFormat,
    Schedule,
    first_leaf,
)

RN = Rounding.RNE
T = TypeVar("T")


def acc_format(p: ModelParams) -> Format:
    """The format of the promotion accumulator and the split-K combination: fp32
    (cuBLASLt CUBLAS_COMPUTE_32F), fp64 for an fp64 instruction (DGEMM), s32 for an
    integer unit (CUBLAS_COMPUTE_32I: partials and promoted chains added in int32,
    wrapping like the unit's own accumulator)."""
    if p.d_fmt.spec.is_integer:
        return Format.S32
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


def rounds_operands(fmt: Format) -> bool:
    """Whether an operand of `fmt` is an fp32 pattern the unit reads only in part (TF32:
    the 13 low bits of 32 ignored), so that a kernel may round fp32 to it first."""
    s = fmt.spec
    return s.ignored_low > 0 and s.ignored_high == 0 and s.storage == 32


def round_operand(x: BV, fmt: Format, mode: OperandRound) -> BV:
    """The fp32 pattern `x` as the unit's operand in `fmt` (rounds_operands): TRUNCATE
    leaves it (the unit ignores the low bits: truncation toward zero of finite values),
    RNE and RNA round the fp32 value into `fmt` (PTX ISA cvt: cvt.rn.tf32.f32 and
    cvt.rna.tf32.f32; a NaN becomes the format's quiet NaN, an overflow infinity)."""
    if mode == OperandRound.TRUNCATE or not rounds_operands(fmt):
        return x
    rounding = RN if mode == OperandRound.RNE else Rounding.RNA
    return convert_unpacked(decode(x, Format.FP32), fmt, rounding)


def scale_operand(x: BV, fmt: Format, alpha: int, ep_fmt: Format, p: ModelParams) -> BV:
    """An operand scaled by alpha before the products (Schedule.alpha_on): RN(alpha*x)
    in the epilogue format `ep_fmt` (`scale`), x read as `ep_fmt` (an fp32 pattern, also
    when the unit reads it as TF32: the kernel scales the fp32 value first)."""
    return scale(alpha, x, ep_fmt, ep_fmt, p)


def scales_operands(fmt: Format, ep_fmt: Format) -> bool:
    """Whether an operand of `fmt` can be scaled in `ep_fmt` and read back unchanged in
    width: a float of the epilogue format, or a TF32 operand in fp32 storage."""
    if ep_fmt.spec.is_integer:
        return False
    return fmt == ep_fmt or (rounds_operands(fmt) and ep_fmt.spec.storage == 32)


class MappedOperands(Sequence):
    """A row (or column) of operands read through `fn`, entry by entry as a chain reads
    them (slices give lists)."""

    def __init__(self, src: Sequence[BV], fn: Callable[[BV], BV]) -> None:
        self.src, self.fn = src, fn

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.fn(self.src[k])


def rounded_operands(
    src: Sequence[BV],
    fmt: Format,
    mode: OperandRound,
    alpha: int | None = None,
    ep_fmt: Format | None = None,
    p: ModelParams | None = None,
) -> Sequence[BV]:
    """`src` as the unit reads it: scaled by `alpha` first when given (`scale_operand`,
    in `ep_fmt`), then rounded under `mode` (itself when neither applies)."""
    rounds = mode != OperandRound.TRUNCATE and rounds_operands(fmt)
    if alpha is None and not rounds:
        return src
    if alpha is None:
        return MappedOperands(src, lambda x: round_operand(x, fmt, mode))
    assert ep_fmt is not None and p is not None
    return MappedOperands(
        src, lambda x: round_operand(scale_operand(x, fmt, alpha, ep_fmt, p), fmt, mode)
    )


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
    partials), else the indefinite NaN; the other rules the GEMM's canonical NaN. In
    an integer `acc_fmt` (s32): x + y in two's complement, wrapping."""
    if acc_fmt.spec.is_integer:
        w = acc_fmt.spec.storage
        return x.resize(w, signed=fx.spec.signed) + y.resize(w, signed=fy.spec.signed)
    ux, uy = decode(x, fx), decode(y, fy)
    r = add_unpacked(ux, uy, acc_fmt, RN, canonical_nan(acc_fmt, p))
    return gemm_nan(p, [(y, uy, fy), (x, ux, fx)], r, acc_fmt)


def round_partial(x: BV, fx: Format, out: Format, saturate: bool, p: ModelParams) -> BV:
    """A split partial rounded to nearest into the output type before it joins the
    combination (a partial stored in an output-type workspace or written to D by an
    in-place split-K), saturating like the epilogue's final conversion (an integer
    partial into an integer output: itself)."""
    if fx.spec.is_integer and out.spec.is_integer:
        return x.resize(out.spec.storage, signed=fx.spec.signed)
    overflow = Overflow.SATURATE if saturate else Overflow.IEEE
    return convert_unpacked(decode(x, fx), out, RN, canonical_nan(out, p), overflow=overflow)


def scale(k: int, y: BV, fy: Format, f: Format, p: ModelParams) -> BV:
    """k * y in `f` (k: bits of f), round to nearest, the GEMM level's NaN (k, then y);
    in an integer `f`, two's-complement multiplication, wrapping."""
    kb = BV.const(y.b, k, f.spec.storage)
    if f.spec.is_integer:
        return y.resize(f.spec.storage, signed=fy.spec.signed) * kb
    ku, yu = decode(kb, f), decode(y, fy)
    return gemm_nan(
        p, [(kb, ku, f), (y, yu, fy)], mul_unpacked(ku, yu, f, RN, canonical_nan(f, p)), f
    )


def join_partial(
    x: BV, fx: Format, c: BV, c_fmt: Format, beta: int, acc_fmt: Format, p: ModelParams
) -> BV:
    """C joined to the partial that starts the split-K combination (c_join=partial): x +
    beta*C in `acc_fmt`, round to nearest (beta*C first rounded to acc_fmt unless beta
    = 1, where it is C itself)."""
    if beta == scalar_bits(1.0, acc_fmt, "beta"):
        return add_partials(x, fx, c, c_fmt, acc_fmt, p)
    return add_partials(x, fx, scale(beta, c, c_fmt, acc_fmt, p), acc_fmt, acc_fmt, p)


def epilogue_format(p: ModelParams, out: Format) -> Format:
    """The format of the epilogue's scalars and arithmetic: `acc_format` (fp32, fp64 for
    an fp64 GEMM), or s32 for an integer unit writing s32 - cuBLASLt's integer GEMM
    (CUBLAS_COMPUTE_32I with scale type CUDA_R_32I, A and B int8, C and D int32: alpha
    and beta are int32; NVIDIA cuBLAS documentation, cublasLtMatmul's table of
    supported data types). Its float scale type (CUDA_R_32F) belongs to int8 outputs."""
    if p.d_fmt.spec.is_integer and out.spec.is_integer:
        return Format.S32
    return Format.FP64 if p.d_fmt == Format.FP64 else Format.FP32


def scalar_bits(value: float, fmt: Format, what: str) -> int:
    """An epilogue scalar (alpha, beta) as bits of `fmt`: a float rounded to nearest
    (`float_bits`), or an s32 scalar in two's complement; UserError naming the scalar
    when an s32 epilogue is given a value that is not an int32."""
    if not fmt.spec.is_integer:
        return float_bits(value, fmt)
    lo, hi = fmt.spec.int_range
    if not (float(value).is_integer() and lo <= value <= hi):
        shown = int(value) if float(value).is_integer() else value
        raise UserError(
            f"{what}={shown}: an integer GEMM's epilogue takes int32 {what} (cuBLASLt "
            "CUBLAS_COMPUTE_32I, scale type CUDA_R_32I); give an integer in "
            f"{lo}..{hi}, or scale the s32 result afterwards"
        )
    return int(value) & ((1 << fmt.spec.storage) - 1)


def float_bits(value: float, fmt: Format) -> int:
    """A Python float rounded to nearest into `fmt` by the model's conversion (the
    epilogue's fp32 scalars alpha and beta); UserError for an integer format, whose
    scalars are int32 (`scalar_bits`), never rounded floats such as per-tensor scales."""
    if fmt.spec.is_integer:
        raise UserError(
            f"an integer GEMM's scalars are int32 (cuBLASLt CUBLAS_COMPUTE_32I): {value:g} "
            "as a float scale (scale_a, scale_b) is not taken; give alpha as an integer"
        )
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
    c_after: bool = False  # C added after the rounding to the output type (c_join=output)
    partial_beta: int | None = None  # beta of a C joined to the first partial
    scale_a: int | None = None  # alpha applied to A's elements first (alpha_on=a)
    scale_b: int | None = None  # alpha applied to B's elements first (alpha_on=b)

    @staticmethod
    def of(schedule: Schedule, p: ModelParams, plan: Plan, has_c: bool) -> Epilogue:
        """The epilogue of `schedule` for instruction `p` and `plan`; `has_c`: a C is
        given. C has a term here when it is given, does not join the chain
        (`plan.c_in_chain`, from Schedule.c_in_chain) and beta is not 0 (beta = 0 does
        not read C: BLAS, cuBLAS, torch.addmm). alpha = 0 (either sign) does not read A
        and B: D = beta*C, +0 when beta = 0 or no C is given (reference BLAS xGEMM
        "when alpha is zero then A and B are not referenced"; its alpha = 0 branch sets
        C := beta*C, or zero when beta is zero), so NaN and Inf in A@B do not reach D."""
        out = schedule.out or p.d_fmt
        ep = epilogue_format(p, out)
        beta = partial_beta = None
        if has_c and schedule.c_beta != 0.0:
            if plan.c_in_partial:
                partial_beta = scalar_bits(schedule.c_beta, ep, "beta")
            elif not plan.c_in_chain:
                beta = scalar_bits(schedule.c_beta, ep, "beta")
        alpha = scalar_bits(schedule.alpha, ep, "alpha")
        reads_ab = schedule.alpha != 0.0
        scaled = {}
        if schedule.alpha_on != AlphaOn.EPILOGUE:
            fmt = p.a_fmt if schedule.alpha_on == AlphaOn.A else p.b_fmt
            if not scales_operands(fmt, ep):
                raise UserError(
                    f"alpha_on={schedule.alpha_on.value}: the operand is {fmt.spec.name}, "
                    f"not scaled in the {ep.spec.name} epilogue format; allowed with "
                    f"{fmt.spec.name} operands: alpha_on=epilogue"
                )
            scaled = {f"scale_{schedule.alpha_on.value}": alpha}
            alpha = scalar_bits(1.0, ep, "alpha")
        return Epilogue(
            alpha,
            beta,
            schedule.epilogue,
            ep,
            out,
            schedule.saturates(out),
            reads_ab,
            c_after=schedule.c_at == CJoin.OUTPUT,
            partial_beta=partial_beta,
            **scaled,
        )

    def identity(self, acc_fmt: Format) -> bool:
        """Whether D is the accumulator itself: alpha = 1, no C term, no conversion."""
        return (
            self.reads_ab
            and self.alpha == scalar_bits(1.0, self.ep_fmt, "alpha")
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
    """D = alpha*acc + beta*C in the epilogue format (`ep.op`: fma(alpha, acc, beta*C),
    mul then add, or fma(beta, C, alpha*acc)), then one round-to-nearest conversion to
    the output format (saturating when `ep.saturate`).
    Without `ep.reads_ab` (alpha = 0) `acc` is not used: D = beta*C, or +0. With
    `ep.c_after` (c_join=output) C joins after that rounding: D = RN_out(RN_fp32(
    RN_out(alpha*acc) + beta*C)), an elementwise add in fp32 of two tensors. An s32
    epilogue (`epilogue_format`): `integer_epilogue`."""
    if ep.ep_fmt.spec.is_integer:
        return integer_epilogue(acc, c, c_fmt, ep)
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
        return scale(k, y, fy, f, p)

    overflow = Overflow.SATURATE if ep.saturate else Overflow.IEEE

    def to_out(r: BV) -> BV:
        if ep.out_fmt == f and not ep.saturate:
            return r
        return convert_unpacked(
            decode(r, f), ep.out_fmt, RN, canonical_nan(ep.out_fmt, p), overflow=overflow
        )

    if ep.c_after and ep.reads_ab and ep.beta is not None and c is not None:
        assert c_fmt is not None
        d = to_out(times(ep.alpha, acc, acc_fmt))
        return to_out(add_partials(d, ep.out_fmt, times(ep.beta, c, c_fmt), f, f, p))
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
        elif ep.op == EpilogueOp.FMA_C:
            ax_bits = times(ep.alpha, acc, acc_fmt)
            ax = decode(ax_bits, f)
            beta_bits = BV.const(b, ep.beta, f.spec.storage)
            beta, cu = decode(beta_bits, f), decode(c, c_fmt)
            r = fma_unpacked(beta, cu, ax, f, RN, nan)
            r = gemm_nan(p, [(beta_bits, beta, f), (c, cu, c_fmt), (ax_bits, ax, f)], r, f)
        else:
            r = add_partials(bc_bits, f, times(ep.alpha, acc, acc_fmt), f, f, p)
    else:
        r = times(ep.alpha, acc, acc_fmt)
    return to_out(r)


def integer_epilogue(acc: BV, c: BV | None, c_fmt: Format | None, ep: Epilogue) -> BV:
    """D = alpha*acc + beta*C in two's-complement int32 arithmetic (each product and the
    sum kept modulo 2^32, as int32 multiplies and adds on the GPU do): the s32 epilogue
    of cuBLASLt's integer GEMM (`epilogue_format`). alpha = 0 does not read acc; C of a
    narrower integer format is widened by its sign."""
    w = ep.ep_fmt.spec.storage
    r = acc * BV.const(acc.b, ep.alpha, w) if ep.reads_ab else _zero(acc, ep.ep_fmt)
    if ep.beta is not None and c is not None:
        cw = c.resize(w, signed=c_fmt is None or c_fmt.spec.signed)
        r = r + cw * BV.const(acc.b, ep.beta, w)
    return r


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
    split: Callable[[int, SplitPlan, T | None], T],
    add: Callable[[T, Format, T, Format, Format], T],
    out_fmt: Format | None = None,
    to_out: Callable[[T, Format], T] | None = None,
    join_c: Callable[[T, Format], T] | None = None,
    zero: Callable[[Format], T] | None = None,
) -> tuple[T, Format]:
    """The walk of a plan every runner shares: `split(s, sp, acc0)` the partial of each
    split (the chain's d in the instruction's d format, or the fp32 sum of promoted
    chains), its chain started from `acc0` where the plan seeds it (plan.seeds: the sum
    of other partials, in the d format) and from +0 or C where acc0 is None;
    `join_c(x, fx)` (when C joins the first partial, plan.c_in_partial, and is read)
    adds C into the partial that starts the combination, in the accumulator format;
    `to_out(x, fx)` rounds the partials of `plan.rounded` to `out_fmt`; then the
    partials are added pairwise along `plan.combine` by `add(x, fx, y, fy, rf)`, each sum
    rounded to `rf` (plan.reduce_fmt): the accumulator format, or `out_fmt` (OUT), or the
    accumulator format and then `out_fmt` by `to_out` (ACC_OUT). With plan.wide, the last
    wide partials are summed in fp64 from `zero(FP64)`, in order, the combination added
    to that sum in fp64, and the result rounded to the accumulator format (an addition of
    `zero(af)`, exact but for that rounding). Returns the accumulator and its format."""
    af = acc_format(p)
    seeds = dict(plan.seeds)
    if (seeds or plan.wide) and p.d_fmt != af:
        raise UserError(
            f"seeds= and wide= run chains that go on from an {af.spec.name} sum; this "
            f"instruction writes {p.d_fmt.spec.name}; allowed: an instruction whose d is "
            f"{af.spec.name}"
        )
    partials: list = [
        None if s in seeds else (split(s, sp, None), af if sp.promoted else p.d_fmt)
        for s, sp in enumerate(plan.splits)
    ]
    if plan.c_in_partial and join_c is not None:
        f = first_leaf(plan.combine)
        partials[f] = (join_c(*partials[f]), af)
    if plan.rounded:
        if to_out is None or out_fmt is None:
            raise ValueError("fold_plan: a plan that rounds partials needs out_fmt and to_out")
        for s in sorted(plan.rounded):
            partials[s] = (to_out(*partials[s]), out_fmt)
    if len(partials) == 1:
        return partials[0]
    if plan.reduce_fmt != ReduceFormat.ACC and (out_fmt is None or to_out is None):
        raise ValueError("fold_plan: a reduction in the output type needs out_fmt and to_out")
    rf = out_fmt if plan.reduce_fmt == ReduceFormat.OUT else af

    def reduce(t: Tree) -> tuple[T, Format]:
        if isinstance(t, int):
            if partials[t] is None:  # a seeded chain: its seed first
                x, _ = reduce(seeds[t])
                partials[t] = (split(t, plan.splits[t], x), p.d_fmt)
            return partials[t]
        (x, fx), (y, fy) = reduce(t[0]), reduce(t[1])
        if plan.reduce_fmt == ReduceFormat.ACC_OUT:
            return to_out(add(x, fx, y, fy, af), af), out_fmt
        return add(x, fx, y, fy, rf), rf

    top = reduce(plan.combine)
    if not plan.wide:
        return top
    if zero is None:
        raise ValueError("fold_plan: a plan with wide partials needs zero")
    wf = Format.FP64
    acc = zero(wf)
    for s in range(len(partials) - plan.wide, len(partials)):
        acc = add(acc, wf, *partials[s], wf)
    acc = add(acc, wf, *top, wf)
    return add(acc, wf, zero(af), af, af), af


def accumulate(
    a: Sequence[BV],
    b: Sequence[BV],
    c: BV | None,
    p: ModelParams,
    plan: Plan,
    ep: Epilogue | None = None,
    c_fmt: Format | None = None,
    chains: Callable[[Sequence[int]], BV] | None = None,
) -> tuple[BV, Format]:
    """The element's accumulator before the epilogue and its format: the chain's d, or
    the sum of promoted chains and combined splits (fp32, or the output type of `ep`
    when the plan reduces in it). `c` enters here when `c_joins` (as acc_0 of split 0's
    chain, in the instruction's c format) or when the plan adds it to the first partial
    (`ep.partial_beta` set; C in `c_fmt`). Operands are read as the unit reads them
    (plan.operand_round). `chains(blocks)`: the d of a chain started from +0 over
    `blocks`, run by the caller (`run_chain` on the same operands, several chains at
    once as lanes of one run); None: run here."""
    like = a[0]
    d_fmt = p.d_fmt
    af = acc_format(p)
    sa, sb, ef = (ep.scale_a, ep.scale_b, ep.ep_fmt) if ep is not None else (None, None, None)
    a = rounded_operands(a, p.a_fmt, plan.operand_round, sa, ef, p)
    b = rounded_operands(b, p.b_fmt, plan.operand_round, sb, ef, p)

    def from_zero(blocks: Sequence[int]) -> BV:
        if chains is not None:
            return chains(blocks)
        return run_chain(p, a, b, blocks, _zero(like, d_fmt))

    def split(s: int, sp: SplitPlan, seed: BV | None) -> BV:
        if not sp.promoted:
            if seed is None and not c_joins(plan, s, c is not None):
                return from_zero(sp.chains[0])
            acc0 = c if c_joins(plan, s, c is not None) else _zero(like, d_fmt)
            return run_chain(p, a, b, sp.chains[0], acc0 if seed is None else seed)
        acc32 = _zero(like, af)
        for blocks in sp.chains:
            d = from_zero(blocks)
            acc32 = promote_add(acc32, d, d_fmt, af, p)
        return acc32

    out_fmt = to_out = join_c = None
    if ep is not None:
        out_fmt = ep.out_fmt
        sat = ep.saturate

        def to_out(x: BV, fx: Format) -> BV:
            return round_partial(x, fx, ep.out_fmt, sat, p)

        pb = ep.partial_beta
        if c is not None and pb is not None:
            cf = c_fmt or p.d_fmt

            def join_c(x: BV, fx: Format) -> BV:
                return join_partial(x, fx, c, cf, pb, af, p)

    return fold_plan(
        plan,
        p,
        split,
        lambda x, fx, y, fy, rf: combine(x, y, fx, fy, rf, p),
        out_fmt,
        to_out,
        join_c,
        lambda f: _zero(like, f),
    )


def element(
    a: Sequence[BV],
    b: Sequence[BV],
    c: BV | None,
    p: ModelParams,
    plan: Plan,
    schedule: Schedule,
    c_fmt: Format | None = None,
    chains: Callable[[Sequence[int]], BV] | None = None,
) -> BV:
    """One output element d = alpha * sum_k a_k b_k + beta * c as the kernel computes it:
    `a`, `b` the zero-padded row of A and column of B (plan.n_blocks * p.K entries, any
    indexable sequence, read block by block), `c` the element of C or None. `c_fmt`: the
    format of c as given (`c_format`; default: the rule's format of a C of bit patterns).
    `chains`: chains from +0 run by the caller (`accumulate`)."""
    n = plan.n_blocks * p.K
    if len(a) != n or len(b) != n:
        raise ValueError(f"expected {n} a and b entries, got {len(a)} and {len(b)}")
    ep = Epilogue.of(schedule, p, plan, c is not None)
    cf = c_fmt or c_format(p, schedule)
    if ep.reads_ab:
        acc, acc_fmt = accumulate(a, b, c, p, plan, ep, cf, chains)
    else:  # alpha = 0: A and B are not read
        acc_fmt = acc_format(p)
        acc = _zero(a[0], acc_fmt)
    if ep.identity(acc_fmt):
        return acc
    return epilogue(acc, acc_fmt, c if ep.beta is not None else None, cf, ep, p)
