"""The two meanings of every constraint kind agree: the term of inputs/symbolic.py (what
the solvers are asked, evaluated by z3 and by the vector interpreter) and the numpy mask
of inputs/concrete.py (what the samplers and the audit keep), on the same bit patterns.

Small formats are enumerated; wider ones are read on their edge patterns and random ones.
The class-wide kinds are read on rows of an instruction with an fp16 output, whose
exact magnitudes reach both its overflow and its underflow range."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
import z3

from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.symbolic import SymbolicBackend
from tensorcore_smt.bv.to_z3 import to_z3
from tensorcore_smt.bv.vector import VECTOR
from tensorcore_smt.certify.sample import in_class
from tensorcore_smt.formats import Format, Specials, max_finite_bits, round_fraction
from tensorcore_smt.inputs import concrete, symbolic
from tensorcore_smt.inputs.constraints import Constraint, output_format
from tensorcore_smt.inputs.kinds import GLOBAL_KINDS, ConstraintKind
from tensorcore_smt.inputs.parse import parse_where
from tensorcore_smt.smt.query import Goal, make_query, recheck

K = ConstraintKind
FLOATS = [f for f in Format if f.spec.specials != Specials.INTEGER]
INTEGERS = [Format.S8, Format.U8, Format.S4, Format.U4]
TARGETS = [Format.FP16, Format.BF16, Format.E4M3, Format.E5M2, Format.E2M1, Format.UE4M3]

PER_INPUT = [
    Constraint(K.POSITIVE),
    Constraint(K.NEGATIVE),
    Constraint(K.FINITE),
    Constraint(K.NORMAL_ONLY),
    Constraint(K.NONZERO),
    Constraint(K.EXPONENT_WINDOW, lo=-3, hi=2),
    Constraint(K.EXPONENT_WINDOW, lo=-20, hi=-10),
    Constraint(K.FIX, "a0", bits=1),
    Constraint(K.TERMS, "ab", lo=0),
    Constraint(K.ZERO_K, "ab", lo=0, hi=1),
    Constraint(K.UNSELECTED, "a", positions=(0,)),
    Constraint(K.INTEGER, lo=1),
    Constraint(K.INTEGER, lo=4),
    *[Constraint(K.REPRESENTABLE, fmt=t) for t in TARGETS],
]


def test_every_kind_is_read_here():
    """A new kind must be given both meanings and a row in this test."""
    read = {c.kind for c in PER_INPUT} | GLOBAL_KINDS
    assert read == set(ConstraintKind)


def _patterns(fmt: Format, rng: random.Random, n: int = 3000) -> np.ndarray:
    """Every pattern of a format of at most 16 bits; else its edge patterns (zeros,
    subnormals, the normal range's ends, specials, TF32's ignored bits) and random ones."""
    w = fmt.spec.storage
    if w <= 16:
        return np.arange(1 << w, dtype=np.uint64)
    s = fmt.spec
    edges = set()
    for sign in (0, 1):
        top = sign << (w - 1)
        for e in (0, 1, 2, (1 << s.ebits) - 2, (1 << s.ebits) - 1):
            for m in (0, 1, 2, (1 << s.mbits) - 1, 1 << (s.mbits - 1)):
                edges.add(top | (((e << s.mbits) | m) << s.ignored_low))
                edges.add(top | (((e << s.mbits) | m) << s.ignored_low) | 1)
        for e in range(s.bias - 24, s.bias + 24):  # around 1: windows, integers
            edges.add(top | ((e << s.mbits) << s.ignored_low))
            edges.add(top | (((e << s.mbits) | (rng.getrandbits(s.mbits))) << s.ignored_low))
    edges |= {rng.getrandbits(w) for _ in range(n)}
    return np.array(sorted(edges), dtype=np.uint64)


def _z3_values(term, name: str, w: int, values) -> list[bool]:
    (expr,), variables = to_z3([term.v])
    out = []
    for v in values:
        if name in variables:
            e = z3.substitute(expr, (variables[name], z3.BitVecVal(int(v), w)))
        else:
            e = expr
        out.append(z3.is_true(z3.simplify(e)))
    return out


def _vector(cn: Constraint, bits: np.ndarray, fmt: Format) -> np.ndarray:
    w = fmt.spec.storage
    x = BV(VECTOR, VECTOR.lanes(bits, w), w)
    return np.broadcast_to(np.asarray(symbolic.holds(cn, x, fmt).v, dtype=bool), bits.shape)


def _z3_sample(mask: np.ndarray, rng: random.Random, n: int = 12) -> list[int]:
    """Up to n indices where the mask holds and n where it does not."""
    idx = []
    for want in (True, False):
        where = np.flatnonzero(mask == want)
        idx += [int(i) for i in rng.sample(list(where), min(n, len(where)))]
    return idx


@pytest.mark.parametrize("fmt", FLOATS + INTEGERS, ids=lambda f: f.spec.name)
def test_per_input_kinds_agree(fmt):
    rng = random.Random(fmt.spec.storage * 7 + fmt.spec.mbits)
    bits = _patterns(fmt, rng)
    w = fmt.spec.storage
    s = SymbolicBackend()
    x = s.var("x", w)
    for cn in PER_INPUT:
        if cn.kind == K.FIX:
            cn = Constraint(K.FIX, "a0", bits=int(bits[len(bits) // 3]))
        want = concrete.mask(cn, bits, fmt)
        got = _vector(cn, bits, fmt)
        bad = np.flatnonzero(want != got)
        assert not len(bad), (
            f"{cn.describe()} on {fmt.spec.name}: the concrete mask and the term differ at "
            f"{[hex(int(b)) for b in bits[bad[:8]]]} (mask {want[bad[:8]].tolist()})"
        )
        idx = _z3_sample(want, rng)
        z = _z3_values(cn.holds(x, fmt), "x", w, bits[idx])
        assert z == want[idx].tolist(), f"{cn.describe()} on {fmt.spec.name}: z3 differs"


def _value_bits(fmt: Format, rng: random.Random, lo: int, hi: int) -> int:
    """A random finite value of `fmt` with its exponent in [lo, hi] (or zero)."""
    if rng.random() < 0.1:
        return 0
    m = Fraction(rng.getrandbits(12) | (1 << 12), 1 << 12)
    v = m * Fraction(2) ** rng.randint(lo, hi) * rng.choice((1, -1))
    return round_fraction(v, fmt)


@pytest.mark.parametrize("kind", sorted(GLOBAL_KINDS, key=lambda k: k.value))
def test_class_wide_kinds_agree(kind):
    """no-overflow and no-underflow on rows of finite inputs: the term (vector and z3)
    equals the mask computed with exact integers."""
    q = make_query("ampere", "ampere", "m16n8k16.f16.f16.f16.f16", Goal.DIFFER, (Constraint(kind),))
    p = q.p
    rng = random.Random(5)
    rows = []
    for i in range(400):
        lo, hi = [(-24, -16), (-16, -6), (-4, 4), (4, 9), (6, 15)][i % 5]
        n = rng.choice((1, 2, p.K))
        a = [_value_bits(p.a_fmt, rng, lo, hi) if k < n else 0 for k in range(p.K)]
        b = [_value_bits(p.b_fmt, rng, lo, hi) if k < n else 0 for k in range(p.K)]
        c = _value_bits(p.c_fmt, rng, lo, hi)
        rows.append((a, b, c))
    # the edges: d's largest finite value, and its smallest normal
    top = max_finite_bits(p.d_fmt)
    rows.append(([0] * p.K, [0] * p.K, top))
    rows.append(([0] * p.K, [0] * p.K, 0x0400))
    rows.append(([0] * p.K, [0] * p.K, 0x03FF))
    cols_a = [np.array([r[0][k] for r in rows], dtype=np.uint64) for k in range(p.K)]
    cols_b = [np.array([r[1][k] for r in rows], dtype=np.uint64) for k in range(p.K)]
    cols_c = np.array([r[2] for r in rows], dtype=np.uint64)
    cn = Constraint(kind)
    want = concrete.class_mask(cn, cols_a, cols_b, cols_c, p)
    assert want.any() and not want.all(), "the rows reach both sides of the constraint"

    def vec(col, f):
        return BV(VECTOR, VECTOR.lanes(col, f.spec.storage), f.spec.storage)

    got = symbolic.class_holds(
        cn,
        [vec(x, p.a_fmt) for x in cols_a],
        [vec(x, p.b_fmt) for x in cols_b],
        vec(cols_c, p.c_fmt),
        p,
    )
    got = np.broadcast_to(np.asarray(got.v, dtype=bool), want.shape)
    assert (got == want).all(), np.flatnonzero(got != want)[:8]
    # the query's own formula, re-checked on the concrete interpreter, reads the class alike
    for i in _z3_sample(want, rng, 4):
        a, b, c = rows[i]
        model = {f"a{k}": a[k] for k in range(p.K)} | {f"b{k}": b[k] for k in range(p.K)}
        model["c"] = c
        assert recheck(q, model).constraint_ok == want[i]


def test_class_wide_z3_on_rows():
    """The class-wide term on the symbolic interpreter, evaluated by z3 on a few rows."""
    q = make_query(
        "ampere", "ampere", "m16n8k16.f16.f16.f16.f16", Goal.DIFFER, (Constraint(K.NO_OVERFLOW),)
    )
    p = q.p
    s = SymbolicBackend()
    a = [s.var(f"a{k}", 16) for k in range(p.K)]
    b = [s.var(f"b{k}", 16) for k in range(p.K)]
    c = s.var("c", 16)
    (expr,), variables = to_z3([symbolic.class_holds(Constraint(K.NO_OVERFLOW), a, b, c, p).v])
    big, one = 0x5BFF, 0x3C00  # 255.9, 1.0
    cases = [
        ([big] * p.K, [big] * p.K, 0),  # 16 * 65000 > 65504
        ([one] * p.K, [one] * p.K, one),
        ([0] * p.K, [0] * p.K, max_finite_bits(Format.FP16)),
    ]
    for av, bv, cv in cases:
        subs = [(variables[f"a{k}"], z3.BitVecVal(av[k], 16)) for k in range(p.K)]
        subs += [(variables[f"b{k}"], z3.BitVecVal(bv[k], 16)) for k in range(p.K)]
        subs.append((variables["c"], z3.BitVecVal(cv, 16)))
        got = z3.is_true(z3.simplify(z3.substitute(expr, *subs)))
        cols = [np.array([x], dtype=np.uint64) for x in av]
        colsb = [np.array([x], dtype=np.uint64) for x in bv]
        want = concrete.class_mask(
            Constraint(K.NO_OVERFLOW), cols, colsb, np.array([cv], dtype=np.uint64), p
        )
        assert got == bool(want[0])


def test_sampler_keeps_the_rows_the_query_accepts():
    """certify/sample.in_class (the concrete meaning) keeps exactly the rows whose
    re-check by the query's own formula satisfies its constraint."""
    cons = tuple(parse_where(t) for t in ("normal-only:c", "positive:a", "exponent-window:b=-3:3"))
    q = make_query("ampere", "ampere", "m16n8k16.f16.f16.f16.f16", Goal.DIFFER, cons)
    rng = random.Random(1)
    rows = [{o.name: rng.getrandbits(16) for o in q.operands} for _ in range(60)]
    for r in rows[::2]:  # half of them in the class, mostly
        for o in q.operands:
            r[o.name] = _value_bits(Format.FP16, rng, -3, 3) & 0x7FFF
    kept = in_class(q, rows)
    assert kept.any() and not kept.all()
    assert kept.tolist() == [recheck(q, r).constraint_ok for r in rows]


def test_class_wide_constraints_are_stated_in_the_output_format():
    q = make_query("ampere", "ampere", "m16n8k16.f32.f16.f16.f32", Goal.DIFFER)
    p = q.p
    cn = Constraint(K.NO_UNDERFLOW)
    assert cn.stated_in("c", p) == p.d_fmt == output_format(p)
    assert output_format(p, Format.FP16) == Format.FP16  # the narrower range
    assert output_format(p, Format.FP64) == Format.FP32
    assert Constraint(K.NORMAL_ONLY, "c").stated_in("c", p) == p.c_fmt
