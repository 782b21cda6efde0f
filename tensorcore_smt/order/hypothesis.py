"""From a summation tree to a GEMM hypothesis (`ARCH/SCHEDULE[...]`) that computes it.

`plan_tree` is the tree a schedule's plan sums in (gemm/plan.py): each instruction step
one fused add of the running accumulator and the step's k-block products, promoted
chains and split partials added in fp32 as the plan combines them; zero-padded products
past K are dropped. `find` tries the schedules that the schedule fields express (serial,
promotion intervals, split-K layouts and reductions, both k orders) on the oracle's
architecture and instruction, and returns the first whose tree is the one revealed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..gemm.plan import Plan, make_plan, padded_k
from ..gemm.schedule import KOrder, Reduce, Schedule, SplitMode
from .tree import Tree, canonical, deep, node


@dataclass(frozen=True)
class Found:
    """A hypothesis whose plan sums in the revealed tree."""

    hypothesis: str  # ARCH/SCHEDULE, as tc.matmul and `tcsmt gemm --arch` take it
    instr: str  # the instruction it runs (tc.matmul's instr=)
    k_block: int


def plan_tree(plan: Plan, k: int, group: int | None = None) -> Tree:
    """The summation tree of `plan` over products 0..k-1, each instruction step fusing
    its products `group` at a time (the unit's L; None: all K of the step at once), the
    running accumulator a member of the step's first fused add."""
    kb = plan.k_block
    g = group or kb

    def chain(blocks: tuple[int, ...]) -> Tree | None:
        acc: Tree | None = None
        for blk in blocks:
            for lo in range(blk * kb, (blk + 1) * kb, g):
                terms = [e for e in range(lo, lo + g) if e < k]
                parts = ([acc] if acc is not None else []) + terms
                acc = node(parts) if parts else None
        return acc

    def split(sp) -> Tree | None:
        acc: Tree | None = None
        for c in sp.chains:
            r = chain(c)
            acc = r if acc is None else (acc if r is None else node([acc, r]))
        return acc

    partials = [split(sp) for sp in plan.splits]

    def combine(t) -> Tree | None:
        if isinstance(t, int):
            return partials[t]
        left, right = combine(t[0]), combine(t[1])
        if left is None or right is None:
            return left if right is None else right
        return node([left, right])

    with deep(k):
        out = combine(plan.combine)
    if out is None:
        raise UserError(f"the plan sums no product of K={k}")
    return out


def unit_group(p) -> int | None:
    """Products per fused add of an instruction whose steps chain contiguous fused adds
    with the accumulator in the first (FDA with c fused, contiguous groups: L; a
    sequential FMA: 1); None for the others (their order within one step is not a plain
    chain of fused adds: pairwise groups, c added after, interleaved byte pairs)."""
    from ..model.params import Algorithm, CAddend, GroupMap

    if p.algorithm == Algorithm.SFMA and p.K == 1:
        return 1
    if (
        p.algorithm == Algorithm.FDA
        and p.c_add == CAddend.FUSED
        and p.group_map == GroupMap.CONTIGUOUS
    ):
        return p.L
    return None


def schedules(k: int, k_block: int) -> list[Schedule]:
    """The schedules tried, simplest first: serial, then promotion, then split-K."""
    kp = padded_k(k, k_block)
    widths = [w for w in (k_block * 2**i for i in range(13)) if w < kp]
    out = [Schedule(), Schedule(order=KOrder.DESCENDING)]
    out += [Schedule(promote=p) for p in widths]
    for s_k in range(2, 17):
        for tile in widths:
            for mode in SplitMode:
                for red in Reduce:
                    out.append(Schedule(split_k=s_k, split=mode, split_tile=tile, reduce=red))
    return out


def find(
    tree: Tree, k: int, arch: str, instr: str | None, fmt, label: str | None = None
) -> Found | None:
    """The simplest schedule on `arch` (instruction `instr`, None: the default for `fmt`)
    whose plan sums in `tree`, or None; the hypothesis is written `label/SCHEDULE`
    (label: the variant text, default `arch`)."""
    from ..api import resolve
    from ..gemm.hypothesis import default_instruction

    name = instr or default_instruction(arch, fmt, fmt)
    group = unit_group(resolve(arch, name))
    if group is None:
        return None
    k_block = resolve(arch, name).K
    want = canonical(tree)
    kp = padded_k(k, k_block)
    with deep(k):
        for sched in schedules(k, k_block):
            try:
                plan = make_plan(sched, kp, k_block)
            except UserError:
                continue
            if plan_tree(plan, k, group) == want:
                return Found(f"{label or arch}/{sched.text()}", name, k_block)
    return None
