"""The symbolic DAG of one instruction: the model run on the symbolic interpreter.

This is the DAG the solvers get for a dot product (with `clz` one node, KernelBackend),
with every operand a free variable: a0..a{K-1}, b0..b{K-1}, c and, for a block-scaled unit (PTX `.block_scale`),
the scale factors sa0.., sb0... The compiled engine lowers it; nothing here computes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bv import ranges as R
from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..bv.symbolic import SymbolicBackend, Term
from ..model import dot_add
from ..model.params import ModelParams


class KernelBackend(SymbolicBackend):
    """The symbolic interpreter for DAGs that are compiled, never printed for a solver:
    a count of leading zeros is one `clz` node (lowered to LLVM's `llvm.ctlz`, one
    instruction on CPUs with LZCNT and AVX-512 CD), where the solvers' DAG spells out the
    bisection of bv/core.py. Both count w for a zero; tests/test_engine_clz.py checks
    the lowering against the concrete interpreter on every value of small widths."""

    def clz(self, x: Term, w: int) -> Term:
        if x.is_const:
            return self.const(CONCRETE.clz(x.value, w), w)
        return self.mk("clz", (x,), w)

    def _range_of(self, op: str, args: tuple, w: int, params: tuple) -> R.Range:
        if op == "clz":  # 0 .. w
            return R.intersect(R.full(w), (0, w), None)
        return super()._range_of(op, args, w, params)


@dataclass(frozen=True)
class Operand:
    """One input array of a kernel: `count` variables of `width` bits per row."""

    name: str
    width: int
    count: int  # columns per row; 0 marks a 1-D array (one value per row)


@dataclass(frozen=True)
class InstrDag:
    """The result term of one dot product and the operands its variables come from."""

    root: Term
    operands: tuple[Operand, ...]  # a, b, c[, sa, sb] in kernel argument order
    width: int  # bits of d
    nodes: int  # distinct DAG nodes built


def operands(p: ModelParams) -> tuple[Operand, ...]:
    """The input arrays of an instruction's kernel, in argument order: a, b, c[, sa, sb]."""
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    ops = [Operand("a", wa, p.K), Operand("b", wb, p.K), Operand("c", wc, 0)]
    if p.scale_fmt is not None:
        ws = p.scale_fmt.spec.storage
        ops += [Operand("sa", ws, p.n_scales), Operand("sb", ws, p.n_scales)]
    return tuple(ops)


def instruction_dag(p: ModelParams) -> InstrDag:
    """d = dot_add(a, b, c, p) with symbolic operands (and symbolic scale factors when
    the unit takes them)."""
    s = KernelBackend()
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    a = [s.var(f"a{k}", wa) for k in range(p.K)]
    b = [s.var(f"b{k}", wb) for k in range(p.K)]
    c = s.var("c", wc)
    sa = sb = None
    if p.scale_fmt is not None:
        ws = p.scale_fmt.spec.storage
        sa = [s.var(f"sa{i}", ws) for i in range(p.n_scales)]
        sb = [s.var(f"sb{i}", ws) for i in range(p.n_scales)]
    d: BV = dot_add(a, b, c, p, sa, sb)
    return InstrDag(d.v, operands(p), d.w, s.node_count())


def variable_slot(name: str) -> tuple[str, int]:
    """The operand and column a variable name stands for: "a3" -> ("a", 3), "c" -> ("c", 0)."""
    stem = name.rstrip("0123456789")
    idx = name[len(stem) :]
    return stem, int(idx) if idx else 0
