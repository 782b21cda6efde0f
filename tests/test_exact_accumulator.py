"""The ideal accumulator (`align=exact`) of the fused units, on its two paths.

With at most two terms that can be nonzero, a fused group sums them with the two-addend
adder of the IEEE operations (output precision plus guard, round and sticky bits) instead
of the full exact register of hundreds of bits. The concrete interpreter sees zero
operands as constants and takes that path; the vector interpreter's operands are data, so
it always takes the full register. They must give the same bits for every rounding mode,
on rows where one, two or three terms are nonzero, with zeros of either sign.
"""

from __future__ import annotations

import numpy as np
import pytest
from strategies import ROW_KINDS, distinct_models, model_id, random_rows

from tensorcore_smt.api import simulate_one, simulate_params
from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate
from tensorcore_smt.formats import Rounding
from tensorcore_smt.model import dot_add
from tensorcore_smt.model.params import Algorithm, Split
from tensorcore_smt.model.terms import AlignMode


def _ideal(p):
    """The model with an ideal accumulator (its F and carry bits no longer matter)."""
    return p.with_(align=AlignMode.EXACT, carry_bits=None, F=24, rounding=Rounding.RNE)


def _fused_models():
    """One fused model per distinct ideal-accumulator model."""
    seen = {}
    for m in distinct_models():
        if m[0].algorithm == Algorithm.FDA and m[0].split == Split.NONE:
            seen.setdefault(_ideal(m[0]), m)
    return list(seen.values())


FUSED = _fused_models()
FUSED_IDS = [model_id(m) for m in FUSED]


def _sparse_rows(p, seed: int, n: int, live: int):
    """Random rows in which only `live` of the K + 1 terms (c and the products) may be
    nonzero; the others get a zero operand of random sign."""
    rng = np.random.default_rng(seed)
    parts = [random_rows(rng, p, n, [kind]) for kind in ROW_KINDS]
    a = np.concatenate([x[0] for x in parts])
    b = np.concatenate([x[1] for x in parts])
    c = np.concatenate([x[2] for x in parts])
    sa, sc = p.a_fmt.spec, p.c_fmt.spec
    for i in range(len(c)):
        keep = set(rng.choice(p.K + 1, size=min(live, p.K + 1), replace=False).tolist())
        if 0 not in keep:
            c[i] = int(rng.integers(0, 2)) << (sc.storage - 1)
        for k in range(p.K):
            if k + 1 not in keep:
                a[i, k] = (int(rng.integers(0, 2)) << (sa.storage - 1)) if sa.signed else 0
    return a, b, c


@pytest.mark.parametrize("entry", FUSED, ids=FUSED_IDS)
def test_two_term_adder_matches_the_exact_register(entry):
    for mode in Rounding:
        _check_paths(entry, mode)


def _check_paths(entry, mode: Rounding) -> None:
    p0, _ = entry
    p = _ideal(p0).with_(rounding=mode)
    seed = 300 + FUSED_IDS.index(model_id(entry)) * 7 + list(Rounding).index(mode)
    for live in (1, 2, 3):
        a, b, c = _sparse_rows(p, seed + 1000 * live, 2, live)
        vec = simulate_params(p, a, b, c)
        for i in range(len(c)):
            want = int(vec[i])
            got = simulate_one(p, [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]))
            assert got == want, (
                f"{model_id(entry)} {mode.name} live={live}: concrete {got:#x} != vector "
                f"{want:#x} for a={[hex(int(x)) for x in a[i]]} "
                f"b={[hex(int(x)) for x in b[i]]} c={int(c[i]):#x}"
            )


@pytest.mark.parametrize("mode", [Rounding.RZ, Rounding.RNE], ids=lambda m: m.name)
def test_symbolic_query_with_one_free_product_takes_the_small_adder(mode):
    """The DAG of `--terms 1`-style inputs (products 1..K-1 fixed to zero) holds no wide
    register, and evaluates to the vector interpreter's bits (full register)."""
    p0 = next(m[0] for m in FUSED if m[1][0][0] == "volta")
    p = p0.with_(align=AlignMode.EXACT, carry_bits=None, rounding=mode)
    sb = SymbolicBackend()
    wa, wb, wc = (f.spec.storage for f in (p.a_fmt, p.b_fmt, p.c_fmt))
    zero_a, zero_b = BV.const(sb, 0, wa), BV.const(sb, 0, wb)
    av = [sb.var("a0", wa)] + [zero_a] * (p.K - 1)
    bv = [sb.var("b0", wb)] + [zero_b] * (p.K - 1)
    d = dot_add(av, bv, sb.var("c", wc), p)
    widest = max(t.width for t in _nodes(d.v))
    assert widest <= 64, f"a {widest}-bit node: the exact register was built"

    a, b, c = _sparse_rows(p, 77, 25, 2)
    a[:, 1:] = 0
    b[:, 1:] = 0
    vec = simulate_params(p, a, b, c)
    for i in range(len(c)):
        env = {"a0": int(a[i, 0]), "b0": int(b[i, 0]), "c": int(c[i])}
        got, want = evaluate(d.v, env), int(vec[i])
        assert got == want, f"{env}: DAG {got:#x} != vector {want:#x}"


def _nodes(root):
    seen, stack, out = set(), [root], []
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        out.append(t)
        stack.extend(t.args)
    return out
