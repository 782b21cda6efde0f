"""Value ranges (tensorcore_smt.bv.ranges) are sound, and folding with them keeps the
symbolic DAG equal to the concrete interpreter.

Soundness is checked exhaustively on 4-bit values: for every pair of intervals drawn
from the values, every concrete result of an operation lies in the range the transfer
function returns, and a comparison the ranges decide has that answer on every pair.
"""

from __future__ import annotations

import itertools
import random

import pytest

from tensorcore_smt.bv import ranges as R
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate

W = 4
TOP = (1 << W) - 1


def _signed(v: int, w: int = W) -> int:
    return v - (1 << w) if v >> (w - 1) else v


def _range_of(values: list[int], w: int = W) -> R.Range:
    s = [_signed(v, w) for v in values]
    return R.make(w, (min(values), max(values)), (min(s), max(s)))


def _contains(r: R.Range, v: int) -> bool:
    return r.ulo <= v <= r.uhi and r.slo <= _signed(v, r.w) <= r.shi


def _value_sets(rng: random.Random, n: int) -> list[list[int]]:
    """Sets of values: unsigned intervals, signed intervals and scattered sets."""
    out = [[v] for v in range(1 << W)]
    for _ in range(n):
        lo, hi = sorted(rng.sample(range(1 << W), 2))
        out.append(list(range(lo, hi + 1)))
        slo, shi = sorted(rng.sample(range(-(1 << (W - 1)), 1 << (W - 1)), 2))
        out.append([v & TOP for v in range(slo, shi + 1)])
        out.append(rng.sample(range(1 << W), rng.randint(2, 5)))
    return out


BINARY = {
    "add": (R.add, CONCRETE.add),
    "sub": (R.sub, CONCRETE.sub),
    "mul": (R.mul, CONCRETE.mul),
    "and": (R.and_, CONCRETE.and_),
    "or": (R.or_, CONCRETE.or_),
    "xor": (R.xor, CONCRETE.xor),
    "shl": (R.shl, CONCRETE.shl),
    "lshr": (R.lshr, CONCRETE.lshr),
    "ashr": (R.ashr, CONCRETE.ashr),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ranges_contain_every_result(op):
    rng = random.Random(op)
    sets = _value_sets(rng, 12)
    fr, fc = BINARY[op]
    for xs, ys in itertools.product(rng.sample(sets, 40), rng.sample(sets, 40)):
        r = fr(_range_of(xs), _range_of(ys))
        for x, y in itertools.product(xs, ys):
            assert _contains(r, fc(x, y, W)), (op, xs, ys, r)


def test_unary_and_structural_ranges_contain_every_result():
    rng = random.Random(1)
    for xs in _value_sets(rng, 30):
        r = _range_of(xs)
        for x in xs:
            assert _contains(R.not_(r), CONCRETE.not_(x, W))
            assert _contains(R.zext(r, 3), x)
            assert _contains(R.sext(r, 3), CONCRETE.sext(x, 3, W))
            for hi, lo in [(3, 0), (2, 0), (3, 1), (2, 1), (1, 1), (3, 3)]:
                assert _contains(R.extract(r, hi, lo), CONCRETE.extract(x, hi, lo, W))
        for ys in rng.sample(_value_sets(rng, 3), 5):
            ry = _range_of(ys)
            h = R.hull(r, ry)
            for v in xs + ys:
                assert _contains(h, v)
            for x, y in itertools.product(xs, ys):
                assert _contains(R.concat(r, ry), CONCRETE.concat(x, y, W, W))


@pytest.mark.parametrize("op", ["ult", "slt", "eq"])
def test_decided_comparisons_hold_on_every_pair(op):
    rng = random.Random(op)
    sets = _value_sets(rng, 12)
    decide = {"ult": R.ult, "slt": R.slt, "eq": R.eq}[op]
    concrete = {"ult": CONCRETE.ult, "slt": CONCRETE.slt, "eq": CONCRETE.eq}[op]
    decided = 0
    for xs, ys in itertools.product(rng.sample(sets, 40), rng.sample(sets, 40)):
        d = decide(_range_of(xs), _range_of(ys))
        if d is None:
            continue
        decided += 1
        for x, y in itertools.product(xs, ys):
            assert concrete(x, y, W) == d, (op, xs, ys)
    assert decided > 50  # the check is not vacuous


def test_wrapping_operations_give_the_full_range():
    r = R.add(R.exact(TOP, W), R.exact(1, W))
    assert _contains(r, 0)
    big = _range_of(list(range(8, 16)))
    assert R.mul(big, big).ulo == 0 and R.mul(big, big).uhi == TOP


def _random_dag(backend, leaf, rng: random.Random, w: int, n: int) -> list[BV]:
    """A random expression over inputs x and y (`leaf` makes them), with the shapes the
    model builds: clamps (min/max by constants), absolute values, shifts, extracts."""
    pool = [leaf("x"), leaf("y"), BV.const(backend, rng.randrange(1 << w), w)]
    for _ in range(n):
        x, y = rng.choice(pool), rng.choice(pool)
        k = rng.choice(
            [rng.randrange(1 << w), 0, 1, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1]
        )
        k2 = k + rng.choice([-1, 0, 1])
        pick = rng.randrange(17)
        if pick == 0:
            v = x + y
        elif pick == 1:
            v = x - y
        elif pick == 2:
            v = x.smax(k).smax(k)
        elif pick == 3:
            v = x.umin(k).umin(k)
        elif pick == 4:
            v = x.abs()
        elif pick == 5:
            v = x.lshr(rng.randrange(w)) if rng.random() < 0.5 else x.lshr(y)
        elif pick == 6:
            v = x << rng.randrange(w)
        elif pick == 7:
            v = x.extract(w - 2, 0).zext(1)
        elif pick == 8:
            v = x.slt(y).ite(x, y)
        elif pick == 9:
            v = x.eq(k).ite(x + 1, x)
        elif pick == 10:
            half = w // 2
            v = x.extract(half - 1, 0).zext(w - half) * y.extract(half - 1, 0).zext(w - half)
        elif pick == 11:
            v = x.clz()
        elif pick == 12:  # comparisons on the far side of a clamp or an absolute value
            v = x.abs().slt(k2).ite(x, y)
        elif pick == 13:
            v = x.smax(k).slt(k2).ite(x, y)
        elif pick == 14:
            v = x.umin(k).ult(k2).ite(x, y)
        elif pick == 15:
            v = x.slt(y).ite(x, y).slt(x).ite(x + 1, y)
        else:
            v = x.smin(k).sle(k2).ite(y, x.abs().ult(k2).ite(x, y))
        pool.append(v)
    return pool[3:]


def test_folded_dags_evaluate_as_the_concrete_interpreter():
    """Range folding never changes a value: random DAGs built on the symbolic backend
    (where folding happens) evaluate, on every assignment of two 5-bit inputs, to what
    the concrete interpreter computes from the same expression."""
    w = 4
    for seed in range(25):
        s = SymbolicBackend()
        outs = _random_dag(s, lambda nm, s=s: s.var(nm, w), random.Random(seed), w, 40)
        for xv, yv in itertools.product(range(1 << w), repeat=2):
            env = {"x": xv, "y": yv}
            ref = _random_dag(
                CONCRETE, lambda nm, e=env: BV.const(CONCRETE, e[nm], w), random.Random(seed), w, 40
            )
            got = [evaluate(o.v, env) for o in outs]
            assert got == [int(r.v) for r in ref], (seed, xv, yv)


CLAMPS = {
    "smax": lambda v, k: v.smax(k),
    "smin": lambda v, k: v.smin(k),
    "umin": lambda v, k: v.umin(k),
    "abs": lambda v, k: v.abs(),
    "abs-wide": lambda v, k: v.sext(1).abs(),  # never the minimum: the bounds narrow
    "abs-shifted": lambda v, k: (v.sext(1) + k).abs(),
    "neg-abs": lambda v, k: (-v.sext(1)).abs(),
}
TESTS = {
    "slt": lambda m, k: m.slt(k),
    "ult": lambda m, k: m.ult(k),
    "sle": lambda m, k: m.sle(k),
    "eq": lambda m, k: m.eq(k),
}


@pytest.mark.parametrize("clamp", sorted(CLAMPS))
def test_path_narrowed_bounds_decide_only_true_comparisons(clamp):
    """The bounds an if-then-else gets from its own condition (min, max, absolute value)
    fold a later comparison only when it has that answer for every input: every 4-bit
    v, clamp constant k1 and comparison constant k2, folded or not, against concrete."""
    folded = 0
    for k1, k2 in itertools.product(range(1 << W), repeat=2):
        for name, test in TESTS.items():
            s = SymbolicBackend()
            v = s.var("v", W)
            r = test(CLAMPS[clamp](v, k1), k2)
            folded += r.v.op == "bconst"
            for x in range(1 << W):
                want = test(CLAMPS[clamp](BV.const(CONCRETE, x, W), k1), k2).v
                assert evaluate(r.v, {"v": x}) == want, (clamp, name, k1, k2, x)
    assert folded > 0  # the bounds do decide some of them


def test_range_folding_shrinks_a_clamp_chain():
    """max(max(e, k), k) and min(min(d, k), k) leave one clamp each, and a comparison the
    bounds decide disappears."""
    s = SymbolicBackend()
    e = s.var("e", 16)
    m = e.smax(-19).smax(-19).smax(-19)
    assert m.v is e.smax(-19).v
    d = (m - e).umin(26).umin(26)
    assert d.v is (m - e).umin(26).v
    assert m.slt(-19).v.op == "bconst"  # max(e, -19) < -19 is false on every input
    assert not m.slt(-19).v.value
