"""The epilogues torch reaches through cuBLAS (F.linear with a bias, torch.addmm with
alpha and beta) as schedule data: the `fma-c` epilogue (the accumulator scaled and
rounded first, beta*C fused into the add) checked against exact rationals on both
engines and by a solver witness, and the decision tables schedules/library/05-epilogue-*
and 06-epilogue-* checked on recorded H200 and H100 calls: the decided recipe reproduces
them bit for bit, and the same recipe with the bias or C joined elsewhere does not.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.formats import Format, Rounding, round_fraction

FFMA = "fma.rn.f32"
RNG = np.random.default_rng(4605)


def _rn32(q: Fraction) -> np.float32:
    bits = round_fraction(q, Format.FP32, Rounding.RNE)
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_fma_c_is_beta_c_fused_onto_the_rounded_scaled_accumulator(engine):
    """epilogue=fma-c: D = RN(beta*C + RN(alpha*acc)), one rounding after the fused
    add, computed here from exact rationals; it differs from fma(alpha, acc, beta*C) on
    some of these elements (so the field changes outputs)."""
    M, N, K = 6, 7, 24
    A = RNG.standard_normal((M, K)).astype(np.float32)
    B = RNG.standard_normal((K, N)).astype(np.float32)
    C = RNG.standard_normal((M, N)).astype(np.float32)
    alpha, beta = 0.7, 1.3
    acc = np.asarray(tc.matmul("hopper/serial", A, B, instr=FFMA, engine=engine))
    got = tc.matmul(
        "hopper/serial[epilogue=fma-c]", A, B, C, alpha=alpha, beta=beta, instr=FFMA, engine=engine
    )
    fma = tc.matmul("hopper/serial", A, B, C, alpha=alpha, beta=beta, instr=FFMA, engine=engine)
    a32, b32 = Fraction(float(np.float32(alpha))), Fraction(float(np.float32(beta)))
    want = np.empty((M, N), np.float32)
    for i in range(M):
        for j in range(N):
            ax = Fraction(float(_rn32(a32 * Fraction(float(acc[i, j])))))
            want[i, j] = _rn32(b32 * Fraction(float(C[i, j])) + ax)
    assert np.asarray(got).view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert (np.asarray(fma).view(np.uint32) != want.view(np.uint32)).any()


def test_fma_c_with_unit_scalars_is_the_plain_epilogue():
    """alpha = beta = 1: RN(C + RN(acc)) = RN(acc + C), the fma epilogue's value."""
    A = RNG.standard_normal((4, 32)).astype(np.float16)
    B = RNG.standard_normal((32, 5)).astype(np.float16)
    C = RNG.standard_normal((1, 5)).astype(np.float16)
    x = tc.matmul("hopper/serial[c_join=epilogue,epilogue=fma-c]", A, B, C)
    y = tc.matmul("hopper/serial[c_join=epilogue]", A, B, C)
    assert np.asarray(x).view(np.uint16).tolist() == np.asarray(y).view(np.uint16).tolist()


def test_solver_witness_fma_against_fma_c():
    """The solvers find an input where the two epilogues differ, re-checked on the
    emulator (tests/test_gemm_solvers.py witness_for)."""
    from test_gemm_solvers import witness_for

    o = witness_for(
        "hopper/serial[alpha=0.7,beta=1.3]",
        "hopper/serial[alpha=0.7,beta=1.3,epilogue=fma-c]",
        2,
        FFMA,
    )
    assert o.witness.reproduces


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
@pytest.mark.parametrize("side", ["a", "b"])
def test_alpha_on_an_operand_scales_it_before_the_ffma_chain(engine, side):
    """alpha_on=a (b): each element of A (B) is RN(alpha*x) in fp32 first, the FFMA
    chain sums those products from +0, one rounding each, and the epilogue adds beta*C
    with alpha = 1 (fma(1, acc, RN(beta*C)); with epilogue=fma-c fma(beta, C, acc)):
    computed here from exact rationals. It differs from alpha in the epilogue on some of
    these elements, so the field changes outputs."""
    M, N, K = 5, 6, 19
    A = RNG.standard_normal((M, K)).astype(np.float32)
    B = RNG.standard_normal((K, N)).astype(np.float32)
    C = RNG.standard_normal((M, N)).astype(np.float32)
    alpha, beta = 0.7, 1.3
    a32, b32 = Fraction(float(np.float32(alpha))), Fraction(float(np.float32(beta)))
    run = dict(alpha=alpha, beta=beta, instr=FFMA, engine=engine)
    for op in ("fma", "fma-c"):
        got = tc.matmul(f"hopper/serial[alpha_on={side},epilogue={op}]", A, B, C, **run)
        want = np.empty((M, N), np.float32)
        for i in range(M):
            for j in range(N):
                acc = Fraction(0)
                for k in range(K):
                    x, y = Fraction(float(A[i, k])), Fraction(float(B[k, j]))
                    if side == "a":
                        x = Fraction(float(_rn32(a32 * x)))
                    else:
                        y = Fraction(float(_rn32(a32 * y)))
                    acc = Fraction(float(_rn32(acc + x * y)))
                c = Fraction(float(C[i, j]))
                if op == "fma":
                    want[i, j] = _rn32(acc + Fraction(float(_rn32(b32 * c))))
                else:
                    want[i, j] = _rn32(b32 * c + acc)
        assert np.asarray(got).view(np.uint32).tolist() == want.view(np.uint32).tolist()
    usual = tc.matmul("hopper/serial", A, B, C, **run)
    assert (np.asarray(usual).view(np.uint32) != np.asarray(got).view(np.uint32)).any()


def test_alpha_on_an_fp16_operand_is_refused():
    """An fp16 operand cannot hold RN_fp32(alpha*x): one UserError naming the field."""
    A = np.ones((2, 16), np.float16)
    with pytest.raises(tc.UserError, match="alpha_on=a: the operand is fp16"):
        tc.matmul("hopper/serial[alpha_on=a]", A, A.T.copy(), alpha=0.5)


# --- recorded calls -------------------------------------------------------------------


def _call(gpu: str, seed: int, cls: str, shape: tuple[int, int, int], kind: str, part="ops"):
    from tensorcore_smt.hardware.library_fit import recording

    for c in recording(gpu, seed).calls:
        if (c.cls.name, (c.m, c.n, c.k), c.kind.value, c.part) == (cls, shape, kind, part):
            return c
    raise AssertionError(f"no recorded {cls} {shape} {kind} call")


def _epilogue_on(acc: np.ndarray, extra: np.ndarray, fields: str, **scalars) -> np.ndarray:
    """The epilogue `fields` applied to a recorded fp32 accumulator: acc @ I (each sum
    has one nonzero product, exact in the FFMA chain) with C = extra."""
    eye = np.eye(acc.shape[1], dtype=np.float32)
    d = tc.matmul(f"hopper/serial[{fields}]", acc, eye, extra, instr=FFMA, **scalars)
    return np.asarray(d).view(np.uint32)


# The kernel cuBLASLt's heuristic names for torch.matmul at each shape (the sweep and the
# recorded fields): contiguous split-K with a separate reduction, interleaved sliced-K, or
# one kernel summing each output; with the epilogue the recordings show.
ADDMM_CASES = [
    ("fp32", (100, 100, 3000), "hopper/serial[split_k=33,split_tile=92]", "fma-c", "fma"),
    ("fp32", (64, 64, 16384), "hopper/serial[split_k=128]", "fma-c", "fma"),
    ("fp32", (64, 64, 64), "hopper/serial", "fma", "fma-c"),
    ("fp32", (333, 777, 1000), "hopper/serial[split_k=5,split=interleaved]", "fma", "fma-c"),
    ("tf32", (64, 64, 64), "hopper/serial[split_k=24]", "fma-c", "fma"),
    ("tf32", (333, 777, 1000), "hopper/serial[split_k=6]", "fma-c", "fma"),
]


@pytest.mark.parametrize("prec,shape,base,right,wrong", ADDMM_CASES)
def test_addmm_epilogue_on_the_recorded_matmul_accumulator(prec, shape, base, right, wrong):
    """torch.addmm(C, A, B, beta=1.3, alpha=0.7) on the H200 equals the epilogue applied
    to torch.matmul's recorded fp32 output for the same inputs (the accumulator itself,
    whatever the kernel's order), and not the other FMA; the epilogue table picks that
    epilogue over a base recipe of the kernel's kind."""
    from tensorcore_smt.gemm.library_rules import Rule, Table, decide, tables

    stand_in = Table("base", ("matmul.*",), "", (Rule(base),))
    pool = [t for t in tables() if t.base is not None] + [stand_in]
    decided = decide(f"addmm.{prec}", *shape, "h200", pool)
    assert decided is not None and decided[0].endswith(f"epilogue={right}]")
    kw = {"alpha": 0.7, "beta": 1.3}
    for kind in ("normal", "cancel"):
        mm = _call("h200", 0, f"matmul.{prec}", shape, kind)
        am = _call("h200", 0, f"addmm.{prec}", shape, kind)
        acc = mm.d[0].view(np.float32)
        _, _, C = am.operands()
        want = am.d[0].view(np.uint32)
        got = _epilogue_on(acc, C, f"epilogue={right}", **kw)
        assert got.tolist() == want.tolist()
        assert (_epilogue_on(acc, C, f"epilogue={wrong}", **kw) != want).any()


def test_base_split_reads_the_base_kernel_and_refuses_unknown_values(tmp_path):
    """BaseSplit.of names a recipe's split-K family (split_k named, even 1; its layout);
    a table with another base_split value is refused in one line naming the allowed."""
    from tensorcore_smt.errors import UserError
    from tensorcore_smt.gemm.library_rules import BaseSplit, read_table

    assert BaseSplit.of("hopper") == BaseSplit.NONE
    assert BaseSplit.of("hopper/serial[operand_round=rne]") == BaseSplit.NONE
    assert BaseSplit.of("hopper/serial[split_k=1,split_tile=4]") == BaseSplit.CONTIGUOUS
    assert BaseSplit.of("hopper/serial[split_k=5,split=interleaved]") == BaseSplit.INTERLEAVED
    p = tmp_path / "t.toml"
    p.write_text(
        'kind = "epilogue"\nbase = "matmul"\n[[rule]]\nbase_split = "tiled"\nfields = ""\n'
    )
    with pytest.raises(UserError, match="base_split = 'tiled'; allowed: none, contiguous"):
        read_table(p)


def test_linear_bias_joins_the_recorded_linear_output_in_the_epilogue():
    """F.linear(x, W, b) with TF32 at 96x2048x2048 on the H200 equals RN(acc + b) for
    the recorded F.linear(x, W) output acc (c_join=epilogue on the accumulator)."""
    for kind in ("normal", "wide", "cancel"):
        lin = _call("h200", 0, "linear.tf32", (96, 2048, 2048), kind)
        lb = _call("h200", 0, "linear-bias.tf32", (96, 2048, 2048), kind)
        _, _, bias = lb.operands()
        bias = np.broadcast_to(bias, lb.d[0].shape).astype(np.float32)
        got = _epilogue_on(lin.d[0].view(np.float32), bias, "c_join=epilogue")
        assert got.tolist() == lb.d[0].view(np.uint32).tolist()


@pytest.mark.parametrize(
    "cls,shape,kind,part",
    [
        ("linear-bias.bf16.rr0", (64, 64, 64), "cancel", "ops"),
        ("linear-bias.bf16.rr0", (26, 13, 10), "cancel", "random"),
    ],
)
def test_linear_bias_recorded_calls_and_the_wrong_joins(cls, shape, kind, part):
    """The decided recipe (bias in the epilogue) reproduces the recorded call bit for
    bit; the bias as the chain's (or first partial's) first accumulator or added after
    the output rounding does not."""
    from tensorcore_smt.gemm.library_rules import decide
    from tensorcore_smt.hardware.library_fit import mismatches

    c = _call("h200", 0, cls, shape, kind, part)
    recipe = decide(cls, *shape, "h200")
    assert recipe is not None and "c_join=epilogue" in recipe[0]
    assert mismatches(c, recipe[0]) == 0
    # over a split-K base the bias cannot be the chain's first accumulator: the first
    # partial is (c_join=partial)
    first = "partial" if "split_k=" in recipe[0] else "chain"
    for join in (first, "output"):
        assert mismatches(c, recipe[0].replace("c_join=epilogue", f"c_join={join}")) > 0


def test_linear_bias_at_llm_shapes_runs_one_chain_where_linear_splits():
    """F.linear(x, W, b) fp16 at 32x4096x4096 on the H200: one chain with the bias in
    the epilogue (04-epilogue-linear-llm) reproduces the recorded call; the split-K that
    cuBLASLt's heuristic names for F.linear at that shape (recorded with the call), with
    the same bias join, does not."""
    from tensorcore_smt.gemm.library_rules import decide
    from tensorcore_smt.hardware.library_fit import mismatches

    shape = (32, 4096, 4096)
    recipe, _, table, _ = decide("linear-bias.fp16.rr0", *shape, "h200")
    assert table.name == "04-epilogue-linear-llm" and recipe == "hopper/serial[c_join=epilogue]"
    c = _call("h200", 1, "linear-bias.fp16.rr0", shape, "normal", part="llm")
    assert c.cublaslt is not None and c.cublaslt["splitk_num"] == 2
    assert mismatches(c, recipe) == 0
    assert mismatches(c, "hopper/serial[split_k=2,split_tile=64,c_join=epilogue]") > 0


def test_profile_data_keeps_the_base_kernel_condition():
    """A table written as profile data and read back decides as the table does: the
    base_split condition of the addmm fp32 rules survives (library_profile)."""
    from tensorcore_smt.gemm.library_profile import table_doc, table_from_doc
    from tensorcore_smt.gemm.library_rules import Rule, Table, decide, tables

    t = next(t for t in tables() if t.name == "06-epilogue-addmm-fp32")
    back = table_from_doc(table_doc(t), "test")
    assert [r.base_split for r in back.rules] == [r.base_split for r in t.rules]
    assert [r.base_fields for r in back.rules] == [r.base_fields for r in t.rules]
    for base in (
        "hopper/serial[split_k=4]",
        "hopper/serial[split_k=4,split=interleaved]",
        "hopper/serial[split_k=2,split_tile=1]",
    ):
        stand_in = Table("base", ("matmul.*",), "", (Rule(base),))
        assert (
            decide("addmm.fp32", 64, 64, 512, "h200", [t, stand_in])[0]
            == decide("addmm.fp32", 64, 64, 512, "h200", [back, stand_in])[0]
        )


# torch.addmm on cuBLAS's CUDA-core kernels that scale one operand by alpha first: the
# small-M kernel (two halves of K; four ranges above K = 128) at M >= 2, the long-output
# dot product at N = 1.
ALPHA_FIRST = [
    (2, ("addmm.fp32", (2, 28, 43), "cancel", "holdout"), "alpha_on=a"),
    (2, ("addmm.fp32", (2, 2079, 11), "normal", "random"), "alpha_on=a"),
    (0, ("addmm.fp32", (16, 1467, 212), "normal", "random"), "alpha_on=a"),
    pytest.param(
        0,
        ("addmm.fp32", (4096, 1, 4096), "normal", "ops"),
        "alpha_on=b",
        marks=pytest.mark.slow,  # 25 s: three runs of the 16 x 8 k-block order at K = 4096
    ),
]


@pytest.mark.parametrize("seed,call,field", ALPHA_FIRST)
def test_addmm_small_m_and_gemv_kernels_scale_an_operand_first(seed, call, field):
    """The recipe the tables decide for these recorded H200 addmm calls scales A (B)
    by alpha before the products and reproduces them bit for bit; the same base with
    alpha in the epilogue (either FMA form) does not."""
    from tensorcore_smt.gemm.library_rules import decide
    from tensorcore_smt.hardware.library_fit import mismatches

    cls, shape, kind, part = call
    c = _call("h200", seed, cls, shape, kind, part)
    recipe = decide(cls, *shape, "h200")
    assert recipe is not None and field in recipe[0]
    assert mismatches(c, recipe[0]) == 0
    for op in ("fma", "fma-c"):
        plain = recipe[0].replace(f"{field},", "").replace("epilogue=fma-c", f"epilogue={op}")
        assert "alpha_on" not in plain
        assert mismatches(c, plain) > 0


def test_with_fields_replaces_a_field_the_recipe_names():
    """An epilogue rule's fields take the place of the base recipe's fields of the same
    name (the bias path's own split over F.linear's), others are appended."""
    from tensorcore_smt.gemm.library_rules import with_fields

    got = with_fields("hopper/serial[split_k=2,split_tile=32]", "split_tile=16,c_join=epilogue")
    assert got == "hopper/serial[split_k=2,split_tile=16,c_join=epilogue]"
    assert with_fields("hopper", "c_join=epilogue") == "hopper/serial[c_join=epilogue]"
    tc.matmul(got, np.ones((2, 64), np.float32), np.ones((64, 2), np.float32), instr=FFMA)


def test_base_fields_match_the_named_fields_of_the_base_recipe(tmp_path):
    """An epilogue rule with base_fields applies where the base recipe names each field
    with that value; a malformed value is one UserError naming the key."""
    from tensorcore_smt.errors import UserError
    from tensorcore_smt.gemm.library_rules import Rule, read_table

    r = Rule("c_join=epilogue", base_fields="split=interleaved,split_tile=1")
    assert r.matches(9, 1, 64, None, "hopper/serial[split_k=16,split=interleaved,split_tile=1]")
    assert not r.matches(9, 1, 64, None, "hopper/serial[split_k=16,split_tile=1]")
    assert not r.matches(9, 1, 64, None, "hopper")
    p = tmp_path / "t.toml"
    p.write_text(
        'kind = "epilogue"\nbase = "matmul"\n[[rule]]\nbase_fields = "tile"\nfields = ""\n'
    )
    with pytest.raises(UserError, match="base_fields = 'tile'"):
        read_table(p)


# torch.addmm at TF32 over one TF32 chain: the epilogue FMA follows the kernel cuBLASLt's
# heuristic names for the shape (06-epilogue-addmm-tf32, a tree over the matmul.tf32
# sweep): algo 23 (a separate reduction, even at one split) fma-c, algo 63 fma.
TF32_ONE_CHAIN = [
    (("addmm.tf32", (1646, 130, 14), "normal", "random"), "fma-c", "fma"),
    (("addmm.tf32", (683, 453, 3), "cancel", "random"), "fma-c", "fma"),
    (("addmm.tf32", (385, 378, 13), "normal", "random"), "fma", "fma-c"),
    (("addmm.tf32", (2, 149, 23), "wide", "holdout"), "fma", "fma-c"),
]


@pytest.mark.parametrize("call,right,wrong", TF32_ONE_CHAIN)
def test_addmm_tf32_epilogue_follows_the_heuristic_kernel(call, right, wrong):
    """Held-out H200 calls (seed 2) whose kernel is one TF32 chain (a stand-in base
    table, whatever the TF32 tables decide): the epilogue the table decides reproduces
    them bit for bit, the other FMA form on the same chain does not."""
    from tensorcore_smt.gemm.library_rules import Rule, Table, decide, tables
    from tensorcore_smt.hardware.library_fit import mismatches

    cls, shape, kind, part = call
    c = _call("h200", 2, cls, shape, kind, part)
    stand_in = Table("base", ("matmul.*",), "", (Rule("hopper/serial[operand_round=rne]"),))
    pool = [t for t in tables() if t.base is not None] + [stand_in]
    recipe = decide(cls, *shape, "h200", pool)
    assert recipe is not None and recipe[0].endswith(f"epilogue={right}]")
    assert mismatches(c, recipe[0]) == 0
    assert mismatches(c, recipe[0].replace(f"epilogue={right}", f"epilogue={wrong}")) > 0


@pytest.mark.slow
def test_addmm_tf32_table_is_what_the_generator_writes(tmp_path):
    """schedules/library/06-epilogue-addmm-tf32.toml is epilogue_tree's output (11 s)."""
    from tensorcore_smt.hardware.epilogue_tree import TABLE, write_table
    from tensorcore_smt.spec.datadirs import data_dir

    write_table(tmp_path, ["h200", "h100"])
    stored = data_dir("schedules") / "library" / f"{TABLE}.toml"
    assert (tmp_path / f"{TABLE}.toml").read_text() == stored.read_text()


# F.linear with a bias on fp32 operands: cuBLASLt's bias epilogue runs its own kernel;
# the recorded-shape tables (hardware/bias_shapes.py) name it at the fit shapes.
BIAS_SHAPES = [
    ("linear-bias.fp32", (64, 64, 64), "cancel", "05-bias-fp32"),
    ("linear-bias.fp32", (64, 64, 64), "normal", "05-bias-fp32"),
]


@pytest.mark.parametrize("cls,shape,kind,table", BIAS_SHAPES)
def test_linear_bias_fp32_runs_its_own_kernel_at_recorded_shapes(cls, shape, kind, table):
    """Held-out H200 calls (seed 2) at a fit shape: the recorded-shape table's recipe
    reproduces them bit for bit; F.linear's own recipe with the bias in the epilogue
    (what 05-epilogue-linear would decide) does not."""
    from tensorcore_smt.gemm.library_rules import decide, tables, with_fields
    from tensorcore_smt.hardware.library_fit import mismatches

    c = _call("h200", 2, cls, shape, kind)
    recipe, instr, t, _ = decide(cls, *shape, "h200")
    assert t.name == table and "c_join=epilogue" in recipe
    assert mismatches(c, recipe, instr or "default") == 0
    others = [u for u in tables() if not u.name.startswith("05-bias")]
    linear, linstr, _, _ = decide("linear.fp32", *shape, "h200", others)
    assert mismatches(c, with_fields(linear, "c_join=epilogue"), linstr or "default") > 0


def test_bias_shape_candidates_include_eight_wide_ranges():
    """The bias path's contiguous splits have ranges of 8-wide multiples where F.linear's
    have 4-wide ones (64 x 64 x 64: four ranges of 16): the candidates hold both."""
    from tensorcore_smt.hardware.bias_shapes import fp32_candidates

    cands = fp32_candidates({"algo_id": 20, "splitk_num": 132}, 64)
    assert "hopper/serial[split_k=4,split_tile=16]" in cands
    assert "hopper/serial[split_k=16,split_tile=4]" in cands
    assert cands[-1] != cands[0] and len(cands) == len(set(cands))


@pytest.mark.parametrize(
    "seed,shape,kind,part",
    [(1, (374, 2, 10), "cancel", "holdout"), (2, (131, 2, 226), "cancel", "random")],
)
def test_linear_bias_fp32_splits_in_eight_wide_ranges_between_recorded_shapes(
    seed, shape, kind, part
):
    """Held-out H200 calls at unrecorded shapes where F.linear runs split-K: the bias
    path's five ranges of 8*ceil(K/40) (05-epilogue-linear-fp32) reproduce them; F.linear's
    own split with the bias in the epilogue does not."""
    from tensorcore_smt.gemm.library_rules import decide, tables, with_fields
    from tensorcore_smt.hardware.library_fit import mismatches

    c = _call("h200", seed, "linear-bias.fp32", shape, kind, part)
    recipe, instr, t, _ = decide("linear-bias.fp32", *shape, "h200")
    q = 8 * -(-shape[2] // 40)
    assert t.name == "05-epilogue-linear-fp32" and f"split_tile={q}," in recipe
    assert mismatches(c, recipe, instr) == 0
    base = [u for u in tables() if u.base is None]
    linear, _, _, _ = decide("linear.fp32", *shape, "h200", base)
    assert "split_k=" in linear
    assert mismatches(c, with_fields(linear, "c_join=epilogue"), instr) > 0


TF32_SPLIT = "hopper/serial[operand_round=rne,split_k=8,split_range=4,residue_tile=16]"


@pytest.mark.parametrize("shape,kind", [((13, 126, 997), "wide"), ((8, 52, 756), "normal")])
def test_linear_bias_tf32_runs_one_chain_where_linear_splits(shape, kind):
    """Held-out H200 calls (seed 2) at unrecorded shapes: over an F.linear recipe that
    splits K (a TF32 split-K kernel as a stand-in base), the epilogue tables decide one
    TF32 chain with the bias in the epilogue (05-epilogue-linear-tf32), which reproduces
    the calls; the split with the bias in the epilogue does not."""
    from tensorcore_smt.gemm.library_rules import Rule, Table, decide, tables, with_fields
    from tensorcore_smt.hardware.library_fit import mismatches

    c = _call("h200", 2, "linear-bias.tf32", shape, kind, "random")
    stand_in = Table("base", ("linear.*",), "", (Rule(TF32_SPLIT),))
    pool = [t for t in tables() if t.base is not None] + [stand_in]
    recipe, instr, t, _ = decide("linear-bias.tf32", *shape, "h200", pool)
    assert t.name == "05-epilogue-linear-tf32" and "split_k=1," in recipe
    assert mismatches(c, recipe, instr or "default") == 0
    assert mismatches(c, with_fields(TF32_SPLIT, "c_join=epilogue")) > 0


@pytest.mark.parametrize("shape,kind,part", [((4, 8, 16175), "cancel", "random")])
def test_linear_bias_fp16_rr0_adds_the_bias_after_the_split_reduction(shape, kind, part):
    """Held-out H200 calls (seed 2), fp16 rr0, on the 128-wide element-range split-K
    kernel at a small output: the bias added after the fp16 rounding (c_join=output,
    05-epilogue-linear-rr0) reproduces them; the same base with the bias in the epilogue
    does not."""
    from tensorcore_smt.gemm.library_rules import decide
    from tensorcore_smt.hardware.library_fit import mismatches

    c = _call("h200", 2, "linear-bias.fp16.rr0", shape, kind, part)
    recipe, instr, t, _ = decide("linear-bias.fp16.rr0", *shape, "h200")
    assert t.name == "05-epilogue-linear-rr0" and "c_join=output" in recipe
    assert mismatches(c, recipe, instr or "default") == 0
    inside = recipe.replace("c_join=output", "c_join=epilogue")
    assert mismatches(c, inside, instr or "default") > 0


# F.linear with a bias on bf16 operands with reduced-precision reductions allowed: at
# recorded shapes the bias path reduces its split-K partials in place in bf16, the bias
# added to the first partial (hardware/bias_shapes.py, 03-bias-half-*).
INPLACE = [((333, 777, 1000), "normal", "ops"), ((6838, 7, 2864), "normal", "unaligned")]


@pytest.mark.parametrize("shape,kind,part", INPLACE)
def test_linear_bias_bf16_rr1_reduces_in_place_with_the_bias_on_the_first_partial(
    shape, kind, part
):
    """Held-out H200 calls (seed 2) at fit shapes: the recorded-shape table's in-place
    reduction (partials added in bf16, the bias joining the first partial in fp32 before
    its rounding) reproduces them bit for bit; the same split with the bias in the
    epilogue does not, nor does F.linear's recipe with the bias in the epilogue."""
    from tensorcore_smt.gemm.library_rules import decide, tables
    from tensorcore_smt.hardware.library_fit import mismatches

    cls = "linear-bias.bf16.rr1"
    c = _call("h200", 2, cls, shape, kind, part)
    recipe, instr, t, _ = decide(cls, *shape, "h200")
    assert t.name == "03-bias-half-bf16-rr1"
    assert "reduce_fmt=out,round_partials=first,c_join=partial" in recipe
    assert mismatches(c, recipe, instr or "default") == 0
    in_epilogue = recipe.replace("c_join=partial", "c_join=epilogue")
    assert mismatches(c, in_epilogue) > 0
    others = [u for u in tables() if not u.name.startswith("03-bias-half")]
    linear, _, _, _ = decide(cls, *shape, "h200", others)
    assert mismatches(c, linear) > 0


def test_half_bias_candidates_cut_k_once_per_range_width():
    """The fp16/bf16 candidates: the heuristic's order and split count first, then each
    split count whose 8-aligned element ranges differ (K = 1000: 3 and 4 splits cut K
    differently, 62 and 63 the same), each with the three reductions."""
    from tensorcore_smt.hardware.bias_shapes import HALF_JOINS, half_candidates

    fields = {"algo_id": 24, "stages_id": 0, "splitk_num": 12}
    cands = half_candidates(fields, 1000)
    assert cands[0] == "hopper[K=8,L=8,carry_bits=4]/serial[c_join=epilogue,residue_tile=32]"
    assert "split_k=12," in cands[1]
    assert len(cands) == len(set(cands))
    for join in HALF_JOINS:
        assert any(f"split_k=3,split_range=8,{join}," in r for r in cands)
    ranges = {r for r in cands if r.startswith("hopper[") and HALF_JOINS[0] in r}
    assert sum("split_k=62," in r or "split_k=63," in r for r in ranges) == 1
