"""Which NaN an operation returns when an operand is NaN: the unit's NaN rule (NanRule),
written once for the instruction's arithmetic (sequential.py) and for the additions and
the epilogue the GEMM level builds around it (gemm/element.py)."""

from __future__ import annotations

from ..bv.core import BV
from ..formats import Format, Unpacked
from .params import ModelParams, NanRule

Operand = tuple[BV, Unpacked, Format]


def first_nan(operands: list[Operand], otherwise: BV, out: Format) -> BV:
    """The first NaN operand, made quiet, in `out`'s encoding; else `otherwise`. An
    operand keeps its payload: in `out`'s format, or in a narrower one with `out`'s sign
    and exponent fields (bf16 in fp32), whose bits move up by the mantissa bits `out` has
    more (make_fp32 of the Intel SDM's VDPBF16PS)."""
    o = out.spec
    quiet = 1 << (o.mbits - 1)
    r = otherwise
    for bits, u, fmt in reversed(operands):
        s = fmt.spec
        if fmt != out and s.ignored_low:
            raise ValueError(
                f"a NaN rule that propagates operands needs them in {o.name} or a format "
                f"with its exponent field, not {s.name}"
            )
        if fmt == out:
            wide = bits
        elif s.ebits == o.ebits and s.mbits <= o.mbits:
            wide = bits.zext(o.storage - s.storage) << (o.mbits - s.mbits)
        else:  # another exponent field (fp32 in fp64, fp64 in fp32): the sign and the
            # payload's leading bits kept (x86 CVTSS2SD and CVTSD2SS; IEEE 754 6.2.3)
            pay = bits.extract(s.mbits - 1, 0)
            if o.mbits >= s.mbits:
                pay = pay.zext(o.mbits - s.mbits) << (o.mbits - s.mbits)
            else:
                pay = pay.extract(s.mbits - 1, s.mbits - o.mbits)
            top = BV.const(bits.b, (1 << o.ebits) - 1, o.ebits)
            wide = bits.extract(s.storage - 1, s.storage - 1).concat(top).concat(pay)
        r = u.is_nan.ite(wide | BV.const(bits.b, quiet, o.storage), r)
    return r


GEMM_PROPAGATES = frozenset({NanRule.A_B_ACC, NanRule.B_A_ACC})
"""The NaN rules the GEMM level's own operations follow too. x86 (a-b-acc, b-a-acc, which
differ only in the order of an FMA's two factors): every fp32
addition and FMA of a CPU library is an SSE/AVX instruction with the SDM's NaN
priorities, so its additions of partials propagate a NaN operand as its FMAs do. The GPU
rules (canonical, b-acc-a) are those of the matrix instruction only: the GEMM level's
additions and epilogue write the canonical NaN (gemm/element.canonical_nan)."""


def gemm_nan(p: ModelParams, operands: list[Operand], otherwise: BV, out: Format) -> BV:
    """The result of one GEMM-level operation of instruction `p` (an addition of
    partials, the epilogue's multiply or FMA) given its result `otherwise` with the
    GEMM's NaN: under a rule in GEMM_PROPAGATES the first NaN of `operands`, listed in
    the rule's priority (a, b, then the running sum: for an addition acc + t, t before
    acc), made quiet; else `otherwise`."""
    if p.nan_rule not in GEMM_PROPAGATES:
        return otherwise
    return first_nan(operands, otherwise, out)
