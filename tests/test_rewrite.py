"""The symbolic interpreter's local rewrites (bv/rewrite.py) keep every node's semantics.

Each rule is built once with the rewrites and once without, in one backend, and bitwuzla
proves the two terms equal for every input; the test also checks that the rule fired
(the two terms differ as nodes). Whole instruction DAGs: smaller with the rewrites,
equal on rows rich in special values (concrete evaluation), and, in the slow suite,
proved equal by bitwuzla for Volta's m8n8k4.
"""

from __future__ import annotations

import bitwuzla as bz
import pytest

from tensorcore_smt import parse_variant
from tensorcore_smt.bv.core import BV, Bool
from tensorcore_smt.bv.dag import post_order
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, Term, evaluate
from tensorcore_smt.model import dot_add
from tensorcore_smt.validation.rows import random_rows


def _unsat(assertion: Term) -> bool:
    """Whether bitwuzla finds `assertion` unsatisfiable."""
    tm = bz.TermManager()
    parser = bz.Parser(tm, bz.Options())
    parser.parse(to_smtlib([assertion]), True, False)
    return parser.bitwuzla().check_sat() == bz.Result.UNSAT


def _both(build):
    """`build(s)` (a BV or Bool) without the rewrites, then with them, in one backend."""
    s = SymbolicBackend(rewrite=False)
    plain = build(s)
    s.rewrite = True
    return s, plain, build(s)


def _prove_same(s: SymbolicBackend, plain, rewritten) -> None:
    assert plain.v is not rewritten.v, "the rule did not fire"
    if isinstance(plain, Bool):
        differ = s.bxor(plain.v, rewritten.v)
    else:
        differ = s.bnot(s.eq(plain.v, rewritten.v, plain.w))
    assert _unsat(differ)


def _zext_of(s, name, w, n):
    return s.var(name, w).zext(n)


RULES = {
    "eq of zext, constant fits": lambda s: _zext_of(s, "x", 5, 11).eq(3),
    "eq of concat": lambda s: s.var("h", 3).concat(s.var("l", 5)).eq(0x45),
    "eq of ite with constant arms": lambda s: (
        s.var("e", 5).eq(0).ite(BV.const(s, 0, 1), BV.const(s, 1, 1)).eq(0)
    ),
    "eq of ite, neither arm": lambda s: (
        s.var("e", 5).eq(0).ite(BV.const(s, 2, 4), BV.const(s, 6, 4)).eq(4)
    ),
    "product zero without wrap": lambda s: (s.var("a", 11).zext(11) * s.var("b", 11).zext(11)).eq(
        0
    ),
    "zero test implies not NaN": lambda s: (
        (s.var("e", 5).eq(0))
        & (s.var("m", 10).eq(0))
        & ~((s.var("e", 5).eq(31)) & ~(s.var("m", 10).eq(0)))
    ),
    "contradicting conjuncts": lambda s: (s.var("e", 5).eq(0)) & (s.var("e", 5).eq(31)),
    "literal and its negation": lambda s: (s.var("x", 4).eq(1)) & ~(s.var("x", 4).eq(1)),
    "and absorbs a conjunct": lambda s: (
        (s.var("p", 3).eq(1)) & ((s.var("p", 3).eq(1)) & (s.var("q", 3).eq(2)))
    ),
    "and absorbs a disjunction": lambda s: (
        (s.var("p", 3).eq(1)) & ((s.var("p", 3).eq(1)) | (s.var("q", 3).eq(2)))
    ),
    "or absorbs a disjunct": lambda s: (
        (s.var("p", 3).eq(1)) | ((s.var("p", 3).eq(1)) | (s.var("q", 3).eq(2)))
    ),
    "or absorbs a conjunction": lambda s: (
        (s.var("p", 3).eq(1)) | ((s.var("p", 3).eq(1)) & (s.var("q", 3).eq(2)))
    ),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_rule_fires_and_is_an_identity(rule):
    s, plain, rewritten = _both(RULES[rule])
    _prove_same(s, plain, rewritten)


def test_product_that_may_wrap_is_not_rewritten():
    """(= (bvmul x y) 0) with factors whose product can wrap stays as it is: a wrapped
    product is zero although no factor is (0x100 * 0x100 in 16 bits)."""
    s, plain, rewritten = _both(lambda s: (s.var("a", 16) * s.var("b", 16)).eq(0))
    assert plain.v is rewritten.v


def _instruction(s: SymbolicBackend, p) -> BV:
    a = [s.var(f"a{k}", p.a_fmt.spec.storage) for k in range(p.K)]
    b = [s.var(f"b{k}", p.b_fmt.spec.storage) for k in range(p.K)]
    return dot_add(a, b, s.var("c", p.c_fmt.spec.storage), p)


def _ops(t: Term) -> int:
    return sum(u.op not in ("const", "bconst", "var", "bvar") for u in post_order([t]))


@pytest.mark.parametrize(
    "arch,instr",
    [("volta", "m8n8k4.f32.f16.f16.f32"), ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3")],
)
def test_instruction_dag_is_smaller_and_computes_the_same(arch, instr):
    p = parse_variant(arch).params(instr)
    plain = _instruction(SymbolicBackend(rewrite=False), p)
    lean = _instruction(SymbolicBackend(), p)
    assert _ops(lean.v) < 0.95 * _ops(plain.v)
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 150, 5)
    for i in range(len(c)):
        env = {f"a{k}": int(a[i, k]) for k in range(p.K)}
        env |= {f"b{k}": int(b[i, k]) for k in range(p.K)}
        env["c"] = int(c[i])
        assert evaluate(plain.v, env) == evaluate(lean.v, env)


@pytest.mark.slow
def test_volta_instruction_dags_proved_equal():
    """bitwuzla proves the m8n8k4 DAG with the rewrites equal to the one without, for
    every input (about 75 s)."""
    p = parse_variant("volta").params("m8n8k4.f32.f16.f16.f32")
    s, plain, lean = _both(lambda s: _instruction(s, p))
    _prove_same(s, plain, lean)
