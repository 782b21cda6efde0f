"""Structured-sparse mma.sp (PTX ISA, "Warp-level matrix multiply-accumulate with sparse
matrix A"): the metadata rule, the interpreters and the compiled engine bit for bit on
every sparse instruction, the PTX definition (A's unselected entries are zeros) against
exact rationals, one-line errors, and what a solver proves about the two hypotheses."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from strategies import random_rows

from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format, int_value, round_fraction, value_of
from tensorcore_smt.model.params import IntClamp, Sparsity
from tensorcore_smt.model.sparse import check_metadata, dense_params, positions
from tensorcore_smt.smt.query import Constraint, ConstraintKind, Goal, make_query
from tensorcore_smt.smt.solve import PORTFOLIO, Limits, Verdict, answer
from tensorcore_smt.solvers.result import Answer
from tensorcore_smt.solvers.runner import available
from tensorcore_smt.spec.presets import PRESETS


def _sparse_models() -> dict:
    out = {}
    for arch, pr in PRESETS.items():
        for name, inst in pr.instructions.items():
            if inst.params.sparse != Sparsity.NONE:
                out.setdefault(inst.params, (arch, name))
    return out


SPARSE = _sparse_models()


def _meta_rows(rng, p, n: int) -> np.ndarray:
    """n random valid metadata rows: `keep` distinct increasing indices per group."""
    groups = p.n_a // p.sparse_keep
    out = np.empty((n, p.n_a), dtype=np.int64)
    for r in range(n):
        for g in range(groups):
            pick = sorted(rng.choice(p.sparse_group, p.sparse_keep, replace=False))
            out[r, g * p.sparse_keep : (g + 1) * p.sparse_keep] = pick
    return out


def _rows(p, n: int, seed: int):
    rng = np.random.default_rng(seed)
    dense = dense_params(p).with_(K=p.K)
    a, b, c = random_rows(rng, dense, n)
    return a[:, : p.n_a], b, c, _meta_rows(rng, p, n)


def _agree(p, n: int, seed: int = 5) -> None:
    a, b, c, meta = _rows(p, n, seed)
    want = api.simulate_params(p, a, b, c, engine="numpy", meta=meta)
    got = api.simulate_params(p, a, b, c, engine="compiled", meta=meta)
    assert np.array_equal(got, want)
    for r in range(0, n, max(1, n // 20)):  # the concrete interpreter on a sample
        one = api.simulate_one(p, a[r].tolist(), b[r].tolist(), int(c[r]), meta=meta[r].tolist())
        assert one == int(want[r])


REPRESENTATIVE = [
    ("ampere", "mma.sp.m16n8k32.f32.f16.f16.f32"),
    ("ampere", "mma.sp::ordered_metadata.m16n8k16.f32.tf32.tf32.f32"),
    ("ada", "mma.sp.m16n8k64.f32.e4m3.e4m3.f32"),
]


@pytest.mark.parametrize(
    "arch,instr",
    [REPRESENTATIVE[0]] + [pytest.param(*r, marks=pytest.mark.slow) for r in REPRESENTATIVE[1:]],
)
def test_representatives_agree_numpy_compiled_concrete(arch, instr):
    for variant in (arch, f"{arch}[sparse=expanded]"):
        _agree(api.resolve(variant, instr), n=400)


@pytest.mark.slow
@pytest.mark.parametrize("p", list(SPARSE), ids=[f"{a}:{n}" for a, n in SPARSE.values()])
def test_every_sparse_instruction_agrees(p):
    _agree(p, n=2000)
    _agree(p.with_(sparse=Sparsity.EXPANDED), n=500)


def test_sparse_forms_of_the_isa():
    """2:4 for f16/bf16/fp8 (k16, k32, k64), 1:2 for tf32; mma.sp and ordered_metadata."""
    names = set(PRESETS["ampere"].instructions)
    assert {
        "mma.sp.m16n8k32.f32.f16.f16.f32",
        "mma.sp::ordered_metadata.m16n8k16.f16.f16.f16.f16",
    } <= names
    p = PRESETS["ampere"].instructions["mma.sp.m16n8k8.f32.tf32.tf32.f32"].params
    assert (p.K, p.n_a, p.sparse_group, p.sparse_keep) == (8, 4, 2, 1)
    p = PRESETS["ada"].instructions["mma.sp.m16n8k64.f32.e4m3.e5m2.f32"].params
    assert (p.K, p.n_a, p.F) == (64, 32, 13)  # Ada's FP8 unit
    assert not any(n.startswith("mma.sp") for n in PRESETS["volta"].instructions)
    # the dense unit of the compressed hypothesis is the dense k/2 instruction's
    dense = PRESETS["ampere"].instructions["m16n8k16.f32.f16.f16.f32"].params
    sp = PRESETS["ampere"].instructions["mma.sp.m16n8k32.f32.f16.f16.f32"].params
    assert dense_params(sp) == dense


def test_against_exact_sums_of_the_selected_products():
    """PTX: D = A B + C with A's unselected entries zero. Small integers make every
    product and sum exact in fp32, so both hypotheses must give the exact value."""
    rng = np.random.default_rng(3)
    for arch, instr in REPRESENTATIVE:
        p = api.resolve(arch, instr)
        n = 50
        a = rng.integers(-3, 4, size=(n, p.n_a))
        b = rng.integers(-3, 4, size=(n, p.K))
        meta = _meta_rows(rng, p, n)
        fa, fb = p.a_fmt, p.b_fmt

        def bits(x, fmt):
            return np.array(
                [[round_fraction(Fraction(int(v)), fmt) for v in row] for row in x],
                dtype=np.uint64,
            )

        ab, bb = bits(a, fa), bits(b, fb)
        c = np.zeros(n, dtype=np.uint64)
        for variant in (arch, f"{arch}[sparse=expanded]"):
            d = api.simulate_params(api.resolve(variant, instr), ab, bb, c, meta=meta)
            for r in range(n):
                pos = positions(meta[r].tolist(), p)
                want = sum(int(a[r, j]) * int(b[r, k]) for j, k in enumerate(pos))
                assert value_of(int(d[r]), p.d_fmt) == want, (variant, r)


INT_SPARSE = [
    ("ampere", "mma.sp.m16n8k32.s32.s8.s8.s32"),
    ("ampere", "mma.sp::ordered_metadata.m16n8k64.satfinite.s32.u8.s8.s32"),
    ("hopper", "mma.sp.m16n8k64.s32.u8.u8.s32"),
    ("ada", "mma.sp.m16n8k32.satfinite.s32.s8.u8.s32"),
]


@pytest.mark.parametrize("arch,instr", INT_SPARSE)
def test_integer_sparse_against_numpy_int64(arch, instr):
    """PTX mma.sp integer: d = c + sum of the selected a_j times b at their positions,
    exact in int64, then wrapped modulo 2^32 or (.satfinite) clamped to the s32 range;
    the rows reach beyond that range, where the two differ. Both hypotheses (compressed,
    expanded) give it at L = K, on numpy, the compiled engine and the concrete
    interpreter."""
    p = api.resolve(arch, instr)
    assert p.sparse == Sparsity.COMPRESSED and 2 * p.n_a == p.K
    a, b, c, meta = _rows(p, 600, 11)
    av = np.vectorize(lambda x: int_value(int(x), p.a_fmt))(a).astype(np.int64)
    bv = np.vectorize(lambda x: int_value(int(x), p.b_fmt))(b).astype(np.int64)
    cv = np.array([int_value(int(x), p.c_fmt) for x in c], dtype=np.int64)
    pos = np.array([positions(m.tolist(), p) for m in meta])
    exact = cv + (av * np.take_along_axis(bv, pos, axis=1)).sum(axis=1)
    clamped = np.clip(exact, -(1 << 31), (1 << 31) - 1)
    assert np.count_nonzero(exact != clamped) >= 5  # overflow rows present
    sat = p.int_clamp == IntClamp.SATFINITE
    want = ((clamped if sat else exact) & 0xFFFFFFFF).astype(np.uint64)
    for variant in (arch, f"{arch}[sparse=expanded]"):
        q = api.resolve(variant, instr)
        assert np.array_equal(api.simulate_params(q, a, b, c, engine="numpy", meta=meta), want)
    _agree(p, n=300)
    assert dense_params(p).K == p.K // 2


@pytest.mark.parametrize(
    "meta,message",
    [
        ([0, 1] * 7, "expected 16 indices"),
        ([0, 4] + [0, 1] * 7, "group 0 selects [0, 4]"),
        ([1, 1] + [0, 1] * 7, "group 0 selects [1, 1]"),
        ([2, 1] + [0, 1] * 7, "increasing"),
    ],
)
def test_invalid_metadata_is_refused(meta, message):
    p = api.resolve("ampere", "mma.sp.m16n8k32.f32.f16.f16.f32")
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_metadata(meta, p)
    with pytest.raises(UserError):
        api.simulate_one(p, [0] * 16, [0] * 32, 0, meta=meta)


def test_cli_metadata_errors_are_one_line():
    a, b = ",".join(["0x3c00"] * 16), ",".join(["0x3c00"] * 32)
    base = ["simulate", "--arch", "ampere", "--instr", "mma.sp.m16n8k32.f32.f16.f16.f32"]
    base += ["--a", a, "--b", b, "--c", "0x0"]
    ok = CliRunner().invoke(main, [*base, "--meta", ",".join(["0", "1"] * 8)])
    assert ok.exit_code == 0 and "d = 0x41800000" in ok.output  # 16 ones
    for meta in (None, "0,1,1,1," + ",".join(["0", "1"] * 6), "0,x", "0,5"):
        args = base + ([] if meta is None else ["--meta", meta])
        r = CliRunner().invoke(main, args)
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1, r.output
    dense = ["simulate", "--arch", "ampere", "--a", ",".join(["0x0"] * 16)]
    dense += ["--b", ",".join(["0x0"] * 16), "--c", "0x0", "--meta", "0"]
    r = CliRunner().invoke(main, dense)
    assert r.exit_code == 2 and "dense instruction" in r.output


SOLVERS = [s for s in ("bitwuzla", "z3", "cvc5") if s in available()]
K16 = "mma.sp.m16n8k16.f32.f16.f16.f32"
K32 = "mma.sp.m16n8k32.f32.f16.f16.f32"


def _ask(instr: str, meta: list[int], finite: bool, goal: Goal = Goal.DIFFER):
    """The compressed and expanded hypotheses of hopper's `instr` asked for `meta`
    through the query every command asks (smt/query.with_meta)."""
    cons = (Constraint(ConstraintKind.FINITE),) if finite else ()
    q = make_query("hopper", "hopper[sparse=expanded]", instr, goal, cons, meta=meta)
    return q, answer(q, Limits(PORTFOLIO if len(SOLVERS) > 1 else SOLVERS[0], 120.0))


@pytest.mark.slow  # about 12 s; the fast suite proves the k16 case through `tcsmt prove`
@pytest.mark.skipif(len(SOLVERS) < 2, reason="needs two SMT solvers")
def test_hopper_k16_cannot_tell_compressed_from_expanded_but_k32_can():
    """Hopper's f16 unit fuses 16 products: the sparse k16 form's 8 selected products are
    one group under either hypothesis, so on finite inputs they agree (two solvers'
    unsat); the k32 form's 16 selected products are one group compressed but two
    expanded, and a witness tells them apart (re-run on the concrete model and through
    the public API with the unit's entries of A and the metadata)."""
    _, o = _ask(K16, [0, 1] * 4, True, Goal.EQUIVALENT)
    assert o.verdict == Verdict.UNSAT
    assert any(r.answer == Answer.UNSAT for r in o.confirmations)  # a second solver agrees
    q, o = _ask(K32, [0, 1] * 8, True)
    assert o.verdict == Verdict.WITNESS and o.witness.outputs[0] != o.witness.outputs[1]
    v = q.vector_fields(o.witness.inputs)
    assert v["metadata"] == [0, 1] * 8 and len(v["a"]) == 16
    assert all(o.witness.inputs[f"a{k}"] == 0 for k in range(2, 32, 4))  # left out: +0
    got = [api.simulate_one(p, v["a"], v["b"], v["c"], meta=v["metadata"]) for p in q.params]
    assert tuple(got) == tuple(o.witness.outputs)


@pytest.mark.skipif(not SOLVERS, reason="needs an SMT solver")
def test_expanded_multiplies_pruned_b_by_zero():
    """With special values allowed, an Inf in B beside a pruned A entry is 0 x Inf = NaN
    under the expanded hypothesis and never read under the compressed one."""
    _, o = _ask(K16, [0, 1] * 4, False)
    assert o.verdict == Verdict.WITNESS
    nan = {value_of(d, Format.FP32) != value_of(d, Format.FP32) for d in o.witness.outputs}
    assert nan == {True, False}
