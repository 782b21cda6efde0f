"""From a summation tree to a GEMM hypothesis (`ARCH/SCHEDULE[...]`) that computes it.

`plan_tree` is the tree a schedule's plan sums in (gemm/plan.py): each instruction step
one fused add of the running accumulator and the step's k-block products, promoted
chains and split partials added in fp32 as the plan combines them; zero-padded products
past K are dropped. `find` tries the schedules that the schedule fields express (serial,
promotion intervals, split-K layouts and reductions, both k orders) on the oracle's
architecture and instruction, and returns the first whose tree is the one revealed; else
`synthesize` reads the tree as chains (one per split, of a split-K layout) added in a
binary tree, the schedule's `combine=` (a SIMD kernel's lanes added pairwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import UserError
from ..gemm.plan import Plan, SplitPlan, make_plan, padded_k
from ..gemm.schedule import SCHEDULE_RANGES, KOrder, Reduce, Schedule, SplitMode
from .tree import Tree, canonical, deep, leaves, node


@dataclass(frozen=True)
class Found:
    """A hypothesis whose plan sums in the revealed tree; `others`: further schedules
    with the same tree that round otherwise (two products added by an FMA into the first,
    or each rounded and then added), for the check on random inputs to choose from."""

    hypothesis: str  # ARCH/SCHEDULE, as tc.matmul and `tcsmt gemm --arch` take it
    instr: str  # the instruction it runs (tc.matmul's instr=)
    k_block: int
    others: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return (self.hypothesis, *self.others)


def plan_tree(plan: Plan, k: int, group: int | None = None, reverse: bool = False) -> Tree:
    """The summation tree of `plan` over products 0..k-1, each instruction step fusing
    its products `group` at a time (the unit's L; None: all K of the step at once), the
    running accumulator a member of the step's first fused add; `reverse`: each step
    takes its groups from the last to the first (VDPBF16PS: the odd product first)."""
    kb = plan.k_block
    g = group or kb

    def pair(x: tuple[Tree, int] | None, y: tuple[Tree, int] | None):
        """node([x, y]) with each member's smallest leaf carried along (node's own
        `low` walks down a subtree: quadratic over a plan of many chains)."""
        if x is None or y is None:
            return x if y is None else y
        (tx, lx), (ty, ly) = x, y
        return ((tx, ty), lx) if lx < ly else ((ty, tx), ly)

    def chain(blocks: tuple[int, ...], seed=None) -> tuple[Tree, int] | None:
        acc: Tree | None = None if seed is None else seed[0]
        acc_low = 0 if seed is None else seed[1]
        for blk in blocks:
            los = range(blk * kb, (blk + 1) * kb, g)
            for lo in reversed(los) if reverse else los:
                if lo >= k:
                    continue
                if acc is None:
                    acc = node(list(range(lo, min(lo + g, k))))
                    acc_low = lo
                elif g == 1:  # children in the order of their smallest leaf (node's order)
                    acc, acc_low = ((lo, acc), lo) if lo < acc_low else ((acc, lo), acc_low)
                else:
                    terms = range(lo, min(lo + g, k))
                    at = max(0, min(len(terms), acc_low - lo))  # terms below acc_low
                    acc = (*terms[:at], acc, *terms[at:])
                    acc_low = min(acc_low, lo)
        return None if acc is None else (acc, acc_low)

    def split(sp) -> tuple[Tree, int] | None:
        acc = None
        for c in sp.chains:
            acc = pair(acc, chain(c))
        return acc

    seeds = dict(plan.seeds)
    partials = [None if s in seeds else split(sp) for s, sp in enumerate(plan.splits)]

    def combine(t) -> tuple[Tree, int] | None:
        if isinstance(t, int):
            if t in seeds:  # a chain that goes on from a sum of other partials
                return chain(plan.splits[t].chains[0], combine(seeds[t]))
            return partials[t]
        return pair(combine(t[0]), combine(t[1]))

    with deep(k):
        out = combine(plan.combine)
        if plan.wide:  # the tail summed in fp64 in order, then the rest added to it
            tail = None
            for x in partials[len(partials) - plan.wide :]:
                tail = x if tail is None else pair(tail, x)
            out = pair(out, tail)
    if out is None:
        raise UserError(f"the plan sums no product of K={k}")
    return out[0]


def unit_reverse(p) -> bool:
    """Whether an instruction step chains its products from the last to the first (a
    sequential unit of several FMAs in reverse order: VDPBF16PS, the odd pair first)."""
    from ..model.params import Algorithm, Order

    return p.algorithm in (Algorithm.SEQUENTIAL, Algorithm.SFMA) and p.order == Order.REVERSE


def unit_group(p) -> int | None:
    """Products per fused add of an instruction whose steps chain contiguous fused adds
    with the accumulator in the first (FDA with c fused, contiguous groups: L; a
    sequential FMA: 1); None for the others (their order within one step is not a plain
    chain of fused adds: pairwise groups, c added after, interleaved byte pairs). A
    sequential FMA is IEEE's fused multiply-add (SFMA, or one fused product: x86-fma)."""
    from ..model.params import Algorithm, CAddend, GroupMap, Order

    if p.K == 1 and (
        p.algorithm == Algorithm.SFMA or (p.algorithm == Algorithm.SEQUENTIAL and p.fused_products)
    ):
        return 1
    if (
        (
            p.algorithm == Algorithm.SFMA
            or (p.algorithm == Algorithm.SEQUENTIAL and p.fused_products)
        )
        and p.L == 1
        and p.order in (Order.C_FIRST, Order.REVERSE)
    ):
        return 1  # a chain of FMAs through the step's products (unit_reverse: which way)
    if (
        p.algorithm in (Algorithm.FDA, Algorithm.FDRDA)
        and p.c_add == CAddend.FUSED
        and p.group_map == GroupMap.CONTIGUOUS
    ):
        return p.L
    return None


def schedules(k: int, k_block: int, split: bool = True) -> list[Schedule]:
    """The schedules tried, simplest first: serial, then promotion, then (`split`)
    split-K."""
    kp = padded_k(k, k_block)
    widths = [w for w in (k_block * 2**i for i in range(13)) if w < kp]
    out = [Schedule(), Schedule(order=KOrder.DESCENDING)]
    out += [Schedule(promote=p) for p in widths if p <= SCHEDULE_RANGES["promote"].hi]
    if not split:
        return out
    for s_k in range(2, 17):
        for tile in [w for w in widths if w <= SCHEDULE_RANGES["split_tile"].hi]:
            for mode in SplitMode:
                for red in Reduce:
                    out.append(Schedule(split_k=s_k, split=mode, split_tile=tile, reduce=red))
    return out


def find(
    tree: Tree,
    k: int,
    arch: str,
    instr: str | None,
    fmt,
    label: str | None = None,
    as_data: bool = True,
    layouts: bool = True,
) -> Found | None:
    """The simplest schedule on `arch` (instruction `instr`, None: the default for `fmt`)
    whose plan sums in `tree`, or None; the hypothesis is written `label/SCHEDULE`
    (label: the variant text, default `arch`). `layouts`: the schedules of the layout
    fields are tried (and synthesized); `as_data`: where none is found, the tree is read
    as chains given as data (decompose), on a unit of one product a step."""
    from ..api import resolve
    from ..gemm.hypothesis import default_instruction

    name = instr or default_instruction(arch, fmt, fmt)
    group = unit_group(resolve(arch, name))
    rev = unit_reverse(resolve(arch, name))
    if group is None:
        return None
    k_block = resolve(arch, name).K
    want = canonical(tree)
    kp = padded_k(k, k_block)
    found: list[str] = []
    # above K = 4096 split-K layouts are read off the tree (synthesize), not tried one by one
    tried = schedules(k, k_block, split=k <= 4096) if layouts else []
    with deep(k):
        for sched in tried:
            try:
                plan = make_plan(sched, kp, k_block)
            except UserError:
                continue
            if plan_tree(plan, k, group, rev) == want:
                found.append(sched.text())
                break
        for pairs in (False, True) if layouts else ():
            sched = synthesize(want, k, k_block, group, pairs, rev)
            if sched is not None and sched.text() not in found:
                found.append(sched.text())
        if not found and as_data and k_block == 1 and group == 1:  # no order in a step
            found += _decomposed(want, k)
    if not found:
        return None
    texts = [f"{label or arch}/{t}" for t in found]
    return Found(texts[0], name, k_block, tuple(texts[1:]))


def _decomposed(tree: Tree, k: int) -> list[str]:
    """The schedules `decompose` reads off `tree` (products in lanes or in chains, with
    and without an fp64 tail), each checked to sum in `tree`, the fp64 tail first where
    the root has one (the check on random inputs picks the one that rounds as the
    library does)."""
    out: list[str] = []
    for wide in (True, False):
        for lanes in Lanes:
            sched = decompose(tree, k, lanes, wide)
            if sched is None or sched.text() in out:
                continue
            try:
                plan = make_plan(sched, k, 1)
            except UserError:
                continue
            if plan_tree(plan, k, 1) == tree:
                out.append(sched.text())
    return out


def _instruction(arch: str, fmt) -> str:
    """The default GEMM instruction of `arch` for inputs `fmt`."""
    from ..gemm.hypothesis import default_instruction

    return default_instruction(arch, fmt, fmt)


class _NoSchedule(Exception):
    pass


def synthesize(
    tree: Tree, k: int, k_block: int, group: int, pairs: bool = False, reverse: bool = False
) -> Schedule | None:
    """A split-K schedule whose plan sums in `tree` (canonical), read off the tree: its
    largest subtrees that are one chain of k-blocks (as `plan_tree` runs a chain) are the
    splits, the binary tree above them is `combine=`; the layout (interleaved or
    contiguous k-tiles) is the one whose splits own those chains. `pairs`: a node of two
    single products is two splits of one product each (both rounded, then added) rather
    than a chain (the second fused into the first): the tree alone does not tell which.
    None when the tree is
    not of that form (a node above the chains adds more than two members, a chain is not
    a run of whole k-blocks, more splits than the schedule allows, no layout fits)."""
    kp = padded_k(k, k_block)
    n_blocks = kp // k_block
    chains: list[tuple[int, ...]] = []

    def chain_of(t: Tree) -> tuple[int, ...] | None:
        if pairs and k_block == 1 and not isinstance(t, int) and all(isinstance(x, int) for x in t):
            return None
        ls = sorted(leaves(t))
        blocks = sorted({x // k_block for x in ls})
        whole = [e for b in blocks for e in range(b * k_block, (b + 1) * k_block) if e < k]
        if ls != whole:
            return None
        one = Plan(k_block, n_blocks, (SplitPlan((tuple(blocks),), False),), 0, False)
        return tuple(blocks) if plan_tree(one, k, group, reverse) == t else None

    def walk(t: Tree):
        c = chain_of(t)
        if c is not None:
            chains.append(c)
            return len(chains) - 1
        if isinstance(t, int) or len(t) != 2 or len(chains) > SCHEDULE_RANGES["split_k"].hi:
            raise _NoSchedule
        return (walk(t[0]), walk(t[1]))

    with deep(k):
        try:
            top = walk(tree)
        except _NoSchedule:
            return None
        S = len(chains)
        if S < 2 or S > SCHEDULE_RANGES["split_k"].hi:
            return None
        rank = {c: s for s, c in enumerate(sorted(range(S), key=lambda c: chains[c][0]))}

        def renumber(t):
            return rank[t] if isinstance(t, int) else (renumber(t[0]), renumber(t[1]))

        combine = renumber(top)
        first = chains[min(range(S), key=lambda c: chains[c][0])]
        run = next((i for i in range(1, len(first)) if first[i] != first[0] + i), len(first))
        for mode in (SplitMode.INTERLEAVED, SplitMode.CONTIGUOUS):
            for tile in sorted({run, len(first)}):
                try:
                    sched = Schedule(
                        split_k=S, split=mode, split_tile=tile * k_block, combine=combine
                    )
                    plan = make_plan(sched, kp, k_block)
                except UserError:
                    continue
                if plan_tree(plan, k, group, reverse) == tree:
                    return sched
        return _in_kblocks(
            [chains[c] for c in sorted(rank, key=rank.get)],
            combine,
            k,
            k_block,
            group,
            tree,
            reverse,
        )


def _in_kblocks(
    chains: list[tuple[int, ...]],
    combine,
    k: int,
    k_block: int,
    group: int,
    tree: Tree,
    reverse: bool = False,
) -> Schedule | None:
    """The schedule with `kblocks=` whose plan sums in `tree`: `chains` (in the order of
    their first k-block, numbered so in `combine`) fall into consecutive runs of k-blocks
    that no chain crosses (OpenBLAS's GEMM_Q blocks of K), the same number of chains in
    each, laid out in each run by one split layout; None when they do not."""
    kp = padded_k(k, k_block)
    pieces: list[list[tuple[int, ...]]] = []
    top = -1
    for c in chains:
        if pieces and min(c) <= top:
            pieces[-1].append(c)
        else:
            pieces.append([c])
        top = max(top, max(c))
    S = len(pieces[0])
    if len(pieces) < 2 or any(len(p) != S for p in pieces):
        return None
    starts = [min(min(c) for c in p) for p in pieces] + [kp // k_block]
    sizes = tuple((b - a) * k_block for a, b in zip(starts, starts[1:]))
    first = pieces[0][0]
    run = next((i for i in range(1, len(first)) if first[i] != first[0] + i), len(first))
    layouts = (
        [{}]
        if S == 1
        else [
            {"split_k": S, "split": mode, "split_tile": tile * k_block}
            for mode in (SplitMode.INTERLEAVED, SplitMode.CONTIGUOUS)
            for tile in sorted({run, len(first)})
        ]
    )
    for fields in layouts:
        try:
            sched = Schedule(kblocks=sizes, combine=combine, **fields)
            plan = make_plan(sched, kp, k_block)
        except UserError:
            continue
        if plan_tree(plan, k, group, reverse) == tree:
            return sched
    return None


class Lanes(Enum):
    """How `decompose` reads a node where a product joins: the tree alone does not tell
    a chain's fused step from an addition of two one-product lanes."""

    CHAINS = "chains"  # a product joining a chain or another product is fused into it
    PAIRS = "pairs"  # a node of two products adds two lanes (each rounded), the rest fused
    ROUNDED = "rounded"  # every product its own lane, rounded, then added


def decompose(
    tree: Tree, k: int, lanes: Lanes = Lanes.CHAINS, wide: bool = False
) -> Schedule | None:
    """A schedule with `chains=` (and `seeds=`, `combine=`) whose plan sums in `tree`
    (canonical) on a unit of one product a step: every node with a product among its
    members continues a chain (a chain over other partials' sum, a seeded one, where the
    other member is a sum of two partials), every node of two sums adds partials; `lanes`
    says which nodes with products are lanes added instead (Lanes); `wide`: the
    root's child over the last k indices, a chain, is read as a scalar tail summed in
    fp64 (`wide=`; OpenBLAS sdot's `dot += y[i] * x[i]` in a C double). None when the
    tree has a fused add of more than two members, a chain index would exceed the
    schedule's range, or (`wide`) the root has no such tail."""
    chains: list[list[int]] = []
    seeds: dict[int, object] = {}
    tail: list[int] = []
    top = tree
    if wide:
        if isinstance(tree, int) or len(tree) != 2:
            return None
        last = tree[1]
        ls = sorted(leaves(last))
        if ls != list(range(k - len(ls), k)) or not _leaf_chain(last, tail):
            return None
        top = tree[0]

    def walk(t: Tree):
        """(the sum's expression over chain indices, the chain `t` ends, or None)."""
        if isinstance(t, int):
            chains.append([t])
            return len(chains) - 1, len(chains) - 1
        if len(t) != 2:
            raise _NoSchedule
        x, y = t
        if isinstance(x, int) and isinstance(y, int):
            if lanes != Lanes.CHAINS:
                chains.extend(([x], [y]))
                return (len(chains) - 2, len(chains) - 1), None
            chains.append([x, y])
            return len(chains) - 1, len(chains) - 1
        if isinstance(x, int) or isinstance(y, int):
            leaf, sub = (x, y) if isinstance(x, int) else (y, x)
            expr, open_ = walk(sub)
            if lanes == Lanes.ROUNDED:
                chains.append([leaf])
                return (expr, len(chains) - 1), None
            if open_ is not None:
                chains[open_].append(leaf)
                return expr, open_
            chains.append([leaf])
            seeds[len(chains) - 1] = expr
            return len(chains) - 1, len(chains) - 1
        return (walk(x)[0], walk(y)[0]), None

    with deep(k):
        try:
            expr, _ = walk(top)
        except _NoSchedule:
            return None
    chains += [[x] for x in tail]
    if len(chains) > SCHEDULE_RANGES["split_k"].hi:
        return None
    try:
        return Schedule(
            chains=tuple(tuple(c) for c in chains),
            combine=expr,
            seeds=tuple(sorted(seeds.items())) or None,
            wide=len(tail) or None,
        )
    except UserError:
        return None


def _leaf_chain(t: Tree, out: list[int]) -> bool:
    """Whether `t` is a chain of single products (((k0 k1) k2) ...), its leaves in
    order appended to `out`."""
    got: list[int] = []
    while not isinstance(t, int):
        if len(t) != 2:
            return False
        x, y = t
        if isinstance(x, int) and not isinstance(y, int):
            x, y = y, x
        if not isinstance(y, int):
            return False
        got.append(y)
        t = x
    got.append(t)
    if len(got) == 2:
        got.sort()
    out.extend(reversed(got) if len(got) > 2 else got)
    return True
