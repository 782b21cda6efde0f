"""GEMM hypotheses as the solvers and the learning loop use them: resolved for one K and
one instruction, run on rows of bit patterns with the vector interpreter, and re-run
through the emulator. The arithmetic is `tensorcore_smt.gemm.element` (one algorithm for
every interpreter); this module only resolves hypotheses and moves bits in and out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..bv.chunks import run_rows_on
from ..bv.core import BV
from ..bv.vector import VECTOR
from ..errors import UserError
from ..formats import Format
from ..model.params import ModelParams


@dataclass(frozen=True)
class GemmModel:
    """One GEMM hypothesis resolved for a K: the instruction's model, the schedule, the
    plan of one output element, and the formats of c and d."""

    text: str
    variant: str  # the instruction-level part, `ARCH[...]`
    instruction: str
    p: ModelParams
    schedule: object  # gemm.schedule.Schedule
    plan: object  # gemm.plan.Plan
    K: int  # the GEMM's K as asked
    K_padded: int  # zero-padded to a multiple of the instruction's K (plan.k_layout)
    c_fmt: Format
    d_fmt: Format

    def run(self, a: list[BV], b: list[BV], c: BV) -> BV:
        """The output element on the interpreter of the inputs (K entries of a and b;
        the padding to the instruction's K, at the end or where plan.gap and plan.gaps
        say, is +0 constants)."""
        from .element import element
        from .plan import k_positions

        if self.K_padded > self.K:
            be = c.b
            pa = [BV.const(be, 0, self.p.a_fmt.spec.storage)] * self.K_padded
            pb = [BV.const(be, 0, self.p.b_fmt.spec.storage)] * self.K_padded
            plan = self.plan
            for k, at in enumerate(k_positions(self.K, plan.gap, plan.gaps).tolist()):  # type: ignore[attr-defined]
                pa[at], pb[at] = a[k], b[k]
            a, b = pa, pb
        return element(a, b, c, self.p, self.plan, self.schedule)


def resolve_model(
    text: str, K: int, instr: str | None = None, fmt: Format | None = None
) -> GemmModel:
    """`ARCH[...]/SCHEDULE[...]` for a depth-K GEMM on `instr` (default: the instruction
    libraries use on that architecture for inputs in `fmt`, else in the default input
    format; an instruction-level text gets `serial`)."""
    from .element import c_format
    from .hypothesis import parse_gemm
    from .plan import plan_for

    h = parse_gemm(text, instr)
    inst = h.instruction(fmt)
    h = parse_gemm(text, inst.name)
    p = h.params()
    plan = plan_for(h.schedule, K, p.K)
    Kp = plan.n_blocks * p.K
    out = h.schedule.out or p.d_fmt
    # C is acc_0 of the chain in the instruction's c format, else it joins the epilogue
    # in the output format (gemm.element.element's c_fmt default)
    c_fmt = c_format(p, h.schedule)
    return GemmModel(
        h.describe(), h.variant.text, inst.name, p, h.schedule, plan, K, Kp, c_fmt, out
    )


def chain_blocks(plan) -> list[tuple[int, ...]]:
    """The k-blocks of every non-empty chain of a plan, in the order the chain takes them."""
    return [c for s in plan.splits for c in s.chains if c]


def run_rows(m: GemmModel, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The output element of `m` for each row (a: (N, K), b: (N, K), c: (N,) bit
    patterns) on the numpy interpreter; d bits as uint64."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    c = np.asarray(c, dtype=np.uint64)
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] != m.K or c.shape != (a.shape[0],):
        raise UserError(
            f"rows must be a, b of shape (N, {m.K}) and c of shape (N,); got {a.shape}, "
            f"{b.shape}, {c.shape}"
        )
    wa, wb, wc = m.p.a_fmt.spec.storage, m.p.b_fmt.spec.storage, m.c_fmt.spec.storage
    out = np.empty(len(c), dtype=np.uint64)
    return run_rows_on(VECTOR, m.run, [(a, wa), (b, wb), (c, wc)], out, ROWS_PER_PASS)


ROWS_PER_PASS = 4096
"""Rows per vector pass of `run_rows` (a GEMM element is many instruction steps)."""


def emulate_rows(models, a, b, c) -> list[list[int]]:
    """Each model's output for each row through the emulator's `matmul` (a 1×K row of A
    by a K×1 column of B, plus c): the path a user calls, checked against the solver's."""
    from ..intake import from_bits, operand_bits
    from ..spec.presets import parse_variant
    from .emulate import matmul

    out = []
    for m in models:
        if parse_variant(m.variant).params(m.instruction) != m.p:
            raise ValueError(
                f"GemmModel {m.text!r}: its variant {m.variant!r} names another model than "
                "it holds; the emulator would run a different hypothesis"
            )
        ds = []
        for ra, rb, rc in zip(a, b, c):
            A = from_bits(np.asarray([ra], dtype=np.uint64), m.p.a_fmt)
            B = from_bits(np.asarray(rb, dtype=np.uint64).reshape(-1, 1), m.p.b_fmt)
            C = from_bits(np.asarray([[rc]], dtype=np.uint64), m.c_fmt)
            D = matmul(m.variant, A, B, C, schedule=m.schedule, instr=m.instruction)
            ds.append(int(np.asarray(operand_bits(D, m.d_fmt, "D")).reshape(-1)[0]))
        out.append(ds)
    return out
