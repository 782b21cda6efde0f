"""The torch calls a library profile records, as data: which function (`Op`), at which
precision and torch flags (`Precision`), and how each is run on a device.

A `CallClass` is one op at one precision with one setting of torch's reduced-precision
reduction flag (`torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction` and its
bf16 twin; torch's default is True). Operand values are the same matrices A (M x K) and
B (K x N) for every op: the ops differ only in how torch is handed them (B as a row-major
(N, K) weight for `F.linear`, A or B column-major for the transposed calls, a batch of two
for `bmm`), so a recording of any op is read back against the one A @ B.

Sources: torch.nn.functional.linear (y = x W^T + b), torch.addmm (beta*C + alpha*A@B),
torch._scaled_mm (FP8 inputs, per-tensor fp32 scales, `use_fast_accum`; B column-major, K and
N multiples of 16: probe/torch_rules.py), torch.set_float32_matmul_precision ("highest":
full fp32; "high": TF32 allowed on ordinary fp32 operands).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..formats import Format


class Op(str, Enum):
    """How torch is asked for the product."""

    MATMUL = "matmul"  # torch.matmul(A, B)
    LINEAR = "linear"  # F.linear(A, W), W = B^T row-major (N, K)
    LINEAR_BIAS = "linear-bias"  # F.linear(A, W, bias), bias of N elements
    ADDMM = "addmm"  # torch.addmm(C, A, B, beta=BETA, alpha=ALPHA)
    BMM = "bmm"  # torch.bmm over a batch of BMM_BATCH
    MATMUL_AT = "matmul-at"  # torch.matmul(A, B), A column-major (a transposed view)
    MATMUL_BT = "matmul-bt"  # torch.matmul(A, B), B column-major (a transposed view)
    SCALED = "scaled-mm"  # torch._scaled_mm, use_fast_accum=False, bf16 output
    SCALED_FAST = "scaled-mm-fast"  # torch._scaled_mm, use_fast_accum=True, bf16 output


class Precision(str, Enum):
    """The operands' dtype and torch's float32 matmul precision."""

    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"  # float32_matmul_precision "highest" (torch's default)
    TF32 = "tf32"  # float32_matmul_precision "high": ordinary fp32 operands, TF32 allowed
    E4M3 = "e4m3"  # FP8 operands of torch._scaled_mm


OPERAND_FORMAT: dict[Precision, Format] = {
    Precision.FP16: Format.FP16,
    Precision.BF16: Format.BF16,
    Precision.FP32: Format.FP32,
    Precision.TF32: Format.FP32,  # fp32 operands, not rounded to TF32 beforehand
    Precision.E4M3: Format.E4M3,
}
"""The format the operands are drawn in for each precision."""

OUTPUT_FORMAT: dict[Precision, Format] = {
    Precision.FP16: Format.FP16,
    Precision.BF16: Format.BF16,
    Precision.FP32: Format.FP32,
    Precision.TF32: Format.FP32,
    Precision.E4M3: Format.BF16,  # _scaled_mm's out_dtype here
}

TORCH_DTYPE: dict[Format, str] = {
    Format.FP16: "float16",
    Format.BF16: "bfloat16",
    Format.FP32: "float32",
    Format.E4M3: "float8_e4m3fn",
}

FP8_OPS = frozenset((Op.SCALED, Op.SCALED_FAST))
REDUCED_PRECISIONS = frozenset((Precision.FP16, Precision.BF16))
ALPHA = 0.7
BETA = 1.3
"""addmm's scalars: neither is a power of two, so the epilogue's rounding shows."""
BMM_BATCH = 2


@dataclass(frozen=True)
class CallClass:
    """One recorded kind of call: op, precision, and the reduced-precision reduction flag
    (None where the precision has none: fp32, TF32, FP8)."""

    op: Op
    precision: Precision
    reduced: bool | None = None

    def __post_init__(self) -> None:
        fp8 = self.op in FP8_OPS
        if fp8 != (self.precision == Precision.E4M3):
            raise ValueError(f"{self.op.value} does not take {self.precision.value} operands")
        if (self.reduced is None) == (self.precision in REDUCED_PRECISIONS):
            raise ValueError(
                f"{self.precision.value}: the reduced-precision reduction flag "
                + ("is required" if self.reduced is None else "does not apply")
            )

    @property
    def name(self) -> str:
        """`op.precision[.rr0|.rr1]`: the class's name in recordings."""
        tail = "" if self.reduced is None else f".rr{int(self.reduced)}"
        return f"{self.op.value}.{self.precision.value}{tail}"

    @classmethod
    def parse(cls, name: str) -> CallClass:
        """The class a `name` names (ValueError naming what is wrong)."""
        parts = name.split(".")
        if len(parts) not in (2, 3):
            raise ValueError(f"call class {name!r}: expected OP.PRECISION[.rr0|.rr1]")
        try:
            op, prec = Op(parts[0]), Precision(parts[1])
        except ValueError:
            raise ValueError(f"call class {name!r}: unknown op or precision") from None
        reduced = None
        if len(parts) == 3:
            if parts[2] not in ("rr0", "rr1"):
                raise ValueError(f"call class {name!r}: the flag is rr0 or rr1")
            reduced = parts[2] == "rr1"
        return cls(op, prec, reduced)

    @property
    def operand_format(self) -> Format:
        return OPERAND_FORMAT[self.precision]

    @property
    def output_format(self) -> Format:
        return OUTPUT_FORMAT[self.precision]

    @property
    def batch(self) -> int:
        return BMM_BATCH if self.op == Op.BMM else 1

    @property
    def extra(self) -> str | None:
        """The third operand the call reads: 'bias' (N elements), 'c' (M x N) or None."""
        return {Op.LINEAR_BIAS: "bias", Op.ADDMM: "c"}.get(self.op)

    def applies(self, m: int, n: int, k: int) -> bool:
        """Whether torch takes this call at shape M x N x K (FP8: K and N multiples of 16)."""
        if self.op in FP8_OPS:
            return k % 16 == 0 and n % 16 == 0
        return True


def classes(ops: tuple[Op, ...], precisions: tuple[Precision, ...]) -> list[CallClass]:
    """Every class of these ops at these precisions (fp16/bf16 with both flag settings),
    skipping pairs torch has no call for."""
    out = []
    for op in ops:
        for p in precisions:
            if (op in FP8_OPS) != (p == Precision.E4M3):
                continue
            flags = (True, False) if p in REDUCED_PRECISIONS else (None,)
            out += [CallClass(op, p, r) for r in flags]
    return out


@contextmanager
def call_flags(cls: CallClass) -> Iterator[None]:
    """torch's global matmul flags set for a call of `cls` (set_flags) inside the block,
    and put back as they were after it, so that a recorded or re-run call leaves the
    caller's torch as it found it."""
    import torch

    m = torch.backends.cuda.matmul
    before = (
        torch.get_float32_matmul_precision(),
        m.allow_tf32,
        m.allow_fp16_reduced_precision_reduction,
        m.allow_bf16_reduced_precision_reduction,
    )
    set_flags(cls)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before[0])
        m.allow_tf32 = before[1]
        m.allow_fp16_reduced_precision_reduction = before[2]
        m.allow_bf16_reduced_precision_reduction = before[3]


def set_flags(cls: CallClass) -> None:
    """torch's global matmul flags for a call of `cls` (TF32 on only for TF32; the
    reduced-precision reduction flag of the class, torch's default True otherwise)."""
    import torch

    tf32 = cls.precision == Precision.TF32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    red = True if cls.reduced is None else cls.reduced
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = red
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = red


def run(cls: CallClass, A: Any, B: Any, extra: Any = None) -> Any:
    """The call's output for operands A (batch, M, K), B (batch, K, N) (torch tensors of
    the operand format; batch 1 unless bmm) and `extra` (bias or C); flags set first.
    Returns D as (batch, M, N)."""

    with call_flags(cls):
        return _call(cls, A, B, extra)


def _call(cls: CallClass, A: Any, B: Any, extra: Any) -> Any:
    import torch
    import torch.nn.functional as F

    a, b = A[0], B[0]
    op = cls.op
    if op == Op.MATMUL:
        d = torch.matmul(a, b)
    elif op == Op.LINEAR:
        d = F.linear(a, b.t().contiguous())
    elif op == Op.LINEAR_BIAS:
        d = F.linear(a, b.t().contiguous(), extra)
    elif op == Op.ADDMM:
        d = torch.addmm(extra, a, b, beta=BETA, alpha=ALPHA)
    elif op == Op.BMM:
        return torch.bmm(A, B)
    elif op == Op.MATMUL_AT:
        d = torch.matmul(a.t().contiguous().t(), b)
    elif op == Op.MATMUL_BT:
        d = torch.matmul(a, b.t().contiguous().t())
    else:
        one = torch.tensor(1.0, device=a.device)
        d = torch._scaled_mm(
            a,
            b.t().contiguous().t(),
            scale_a=one,
            scale_b=one,
            out_dtype=torch.bfloat16,
            use_fast_accum=op == Op.SCALED_FAST,
        )
    return d.unsqueeze(0)


__all__ = [
    "ALPHA",
    "BETA",
    "BMM_BATCH",
    "CallClass",
    "Op",
    "Precision",
    "call_flags",
    "classes",
    "run",
    "set_flags",
]
