"""NaNs at the GEMM level follow the instruction's NaN rule (model/nan.py).

x86 (a-b-acc, b-a-acc): the additions of split partials and the epilogue propagate a NaN
operand's payload, made quiet, as the CPU's own instructions do; an invalid operation
gives the x86 indefinite 0xFFC00000. Which of an FMA's factors a_k, b_k comes first is the
GEMM kernel's operand order, so reveal learns the rule from NaN probes (order/nans.py):
the revealed hypotheses of numpy's matmul (OpenBLAS here) and torch's CPU matmul must
reproduce their bits on rows with NaN payloads, whichever rule this machine's library
follows; every engine and interpreter agrees on them.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc

K = 16


def _nan_rows(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random fp32 operands with 1 to 3 quiet or signalling NaNs of random payloads and
    signs in most rows of A and some columns of B, and Inf pairs that cancel."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    au, bu = a.view(np.uint32), b.view(np.uint32)
    for i in range(m):
        for kk in rng.choice(k, size=int(rng.integers(0, 4)), replace=False):
            payload = int(rng.integers(1, 1 << 22)) | int(rng.integers(0, 2)) << 22
            au[i, kk] = int(rng.integers(0, 2)) << 31 | 0x7F800000 | payload
    for j in range(0, n, 5):
        kk = int(rng.integers(0, k))
        bu[kk, j] = 0x7F800000 | int(rng.integers(1, 1 << 22))
    a[1, :2] = [np.inf, np.inf]  # Inf + (-Inf) across chains for columns where b differs
    b[0, ::2], b[1, ::2] = 1.0, -1.0
    return a, b


def _revealed_nan_mismatches(oracle: str, run, swap: bool = False) -> int:
    """Outputs of `oracle` (16 x 16 x K) on `_nan_rows` that its revealed hypotheses get
    wrong (each class on its positions); `swap`: with each hypothesis's x86 NaN rule
    replaced by the other order of the factors (a-b-acc <-> b-a-acc)."""
    from tensorcore_smt.api import resolve
    from tensorcore_smt.gemm.hypothesis import split_gemm_text
    from tensorcore_smt.order.nans import with_nan_rule

    r = tc.reveal(oracle, K, shape=(16, 16))
    assert r.reproduced is True
    labels = np.zeros((16, 16), np.int64)
    for c, cls in enumerate(r.classes):
        for m0, m1, n0, n1 in cls.blocks:
            labels[m0:m1, n0:n1] = c
    bad = 0
    for seed in range(3):
        a, b = _nan_rows(16, K, 16, seed)
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.asarray(run(a, b), np.float32).view(np.uint32)
        assert np.isnan(want.view(np.float32)).sum() > 16
        for c, cls in enumerate(r.classes):
            hyp = cls.hypothesis
            if swap:
                rule = resolve(split_gemm_text(hyp)[0], cls.instr).nan_rule.value
                other = {"a-b-acc": "b-a-acc", "b-a-acc": "a-b-acc"}[rule]
                hyp = with_nan_rule(hyp, other)
            got = np.asarray(tc.matmul(hyp, a, b, instr=cls.instr)).view(np.uint32)
            mask = labels == c
            bad += int((got[mask] != want[mask]).sum())
    return bad


def test_numpy_matmul_nan_payloads_reproduced_by_the_revealed_split_k():
    """Every class of numpy:matmul's outputs (a split-K interleaved class among them at
    this shape on some OpenBLAS kernels) gives np.matmul's bits, NaN payloads included,
    under the NaN rule reveal learnt; the other order of an FMA's factors does not (the
    rows tell the rules apart)."""
    assert _revealed_nan_mismatches("numpy:matmul", np.matmul) == 0
    assert _revealed_nan_mismatches("numpy:matmul", np.matmul, swap=True) > 0


def test_torch_cpu_matmul_nan_payloads_reproduced_by_the_revealed_hypothesis():
    """torch.matmul on the CPU: the revealed hypotheses give its bits on NaN rows, under
    the NaN rule reveal learnt, and not under the other order of the factors."""
    torch = pytest.importorskip("torch")

    def run(a, b):
        return torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()

    assert _revealed_nan_mismatches("torch:cpu", run) == 0
    assert _revealed_nan_mismatches("torch:cpu", run, swap=True) > 0


@pytest.mark.parametrize("rule", ["b-a-acc", "a-b-acc", "canonical"])
def test_nan_rule_learnt_from_a_model_oracle(rule):
    """A model oracle whose FMAs follow `rule`, its hypothesis first written on the plain
    preset (a-b-acc): the NaN probes give the hypothesis that rule (the preset's own left
    unwritten), with a split-K schedule among its others too."""
    from tensorcore_smt.order.core import ClassResult
    from tensorcore_smt.order.nans import learn_nan_rules
    from tensorcore_smt.order.oracles import make_oracle

    orc = make_oracle(f"model:x86-fma[nan_rule={rule}]/serial", "fp32", (8, 8))
    cls = ClassResult(64, [[0, 8, 0, 8]], 0, "x86-fma/serial", "vfmadd231ps")
    cls.others = ["x86-fma/serial[split_k=2,split_tile=1]"]
    assert learn_nan_rules([cls], orc, K, np.zeros((8, 8), np.int64)) > 0
    tag = "" if rule == "a-b-acc" else f"[nan_rule={rule}]"
    assert cls.hypothesis == f"x86-fma{tag}/serial"
    assert cls.others == [f"x86-fma{tag}/serial[split_k=2,split_tile=1]"]


def test_b_a_acc_on_every_interpreter():
    """nan_rule=b-a-acc on one FMA: the first NaN of b, a, c, made quiet (a-b-acc: a, b,
    c); concrete, vector, compiled and symbolic (z3 and the DAG evaluator) interpreters
    give the same bits, for one FMA and for VDPBF16PS's chain of two."""
    import z3

    from tensorcore_smt.api import simulate_one, simulate_params
    from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate
    from tensorcore_smt.bv.to_z3 import to_z3
    from tensorcore_smt.model import dot_add
    from tensorcore_smt.spec.presets import parse_variant

    nans = {"a": 0x7F800111, "b": 0xFF800222, "c": 0x7FC00333}
    for rule, order in (("b-a-acc", "bac"), ("a-b-acc", "abc")):
        p = parse_variant(f"x86-fma[nan_rule={rule}]").params("vfmadd231ps")
        for mask in range(1, 8):
            on = {x for i, x in enumerate("abc") if mask >> i & 1}
            row = {x: nans[x] if x in on else 0x3F800000 for x in "abc"}
            want = nans[next(x for x in order if x in on)] | 0x00400000
            assert simulate_one(p, [row["a"]], [row["b"]], row["c"]) == want, (rule, on)
    rng = np.random.default_rng(5)
    for variant, instr in (
        ("x86-fma[nan_rule=b-a-acc]", "vfmadd231ps"),
        ("x86-avx512bf16[nan_rule=b-a-acc]", "vdpbf16ps"),
    ):
        p = parse_variant(variant).params(instr)
        wa, wc = p.a_fmt.spec.storage, p.c_fmt.spec.storage
        nan_a = (0x7F80 if wa == 16 else 0x7F800000) | rng.integers(1, 64, (64, p.K))
        a = np.where(rng.random((64, p.K)) < 0.5, nan_a, 0x3F80 << (wa - 16))
        b = np.where(rng.random((64, p.K)) < 0.5, nan_a + 64, 0x4000 << (wa - 16))
        c = np.where(rng.random(64) < 0.5, 0x7F800000 | rng.integers(1, 64, 64), 0)
        a, b, c = a.astype(np.uint64), b.astype(np.uint64), c.astype(np.uint64)
        conc = [
            simulate_one(p, [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]))
            for i in range(64)
        ]
        for engine in ("numpy", "compiled"):
            got = simulate_params(p, a, b, c, engine=engine)
            assert [int(x) for x in got] == conc, engine
        sb = SymbolicBackend()
        av = [sb.var(f"a{k}", wa) for k in range(p.K)]
        bv = [sb.var(f"b{k}", wa) for k in range(p.K)]
        d = dot_add(av, bv, sb.var("c", wc), p)
        (expr,), zv = to_z3([d.v])
        for i in range(64):
            env = {f"a{k}": int(a[i, k]) for k in range(p.K)}
            env |= {f"b{k}": int(b[i, k]) for k in range(p.K)} | {"c": int(c[i])}
            assert evaluate(d.v, env) == conc[i]
            subs = [(zv[n], z3.BitVecVal(v, zv[n].size())) for n, v in env.items() if n in zv]
            assert z3.simplify(z3.substitute(expr, *subs)).as_long() == conc[i]


def test_split_partials_keep_the_later_partials_nan():
    """x86: chain 1's NaN wins over chain 0's (the later addend before the running sum);
    a GPU preset writes its canonical NaN for the same sum."""
    a = np.ones((1, 4), np.float32)
    b = np.ones((4, 1), np.float32)
    a.view(np.uint32)[0, :2] = [0x7F800111, 0xFF800222]  # k = 0 in chain 0, k = 1 in chain 1
    sched = "serial[split_k=2,split=interleaved,split_tile=1]"
    got = np.asarray(tc.matmul(f"x86-fma/{sched}", a, b)).view(np.uint32)
    assert got[0, 0] == 0xFFC00222
    g = np.ones((1, 16), np.float32)
    g.view(np.uint32)[0, [0, 8]] = [0x7F800111, 0xFF800222]
    gpu = tc.matmul("ampere/serial[split_k=2,split_tile=8]", g, np.ones((16, 1), np.float32))
    assert np.asarray(gpu).view(np.uint32)[0, 0] == 0x7FFFFFFF
    a[0, :2] = [np.inf, -np.inf]
    got = np.asarray(tc.matmul(f"x86-fma/{sched}", a, b)).view(np.uint32)
    assert got[0, 0] == 0xFFC00000


SCHEDS = [
    "serial[split_k=2,split=interleaved,split_tile=1]",
    "serial[split_k=3,split_tile=2,reduce=pairwise,promote=4]",
    "serial[alpha=0.5,beta=2,c_join=epilogue]",
    "serial[epilogue=mul-add,alpha=3,beta=-1,c_join=epilogue,split_k=2,split_tile=1]",
]


@pytest.mark.parametrize("sched", SCHEDS)
def test_engines_agree_on_nan_payloads(sched):
    """The numpy interpreter and the compiled runner give the same bits on NaN payload
    operands and C, for split-K, promotion and the epilogue on x86-fma."""
    a, b = _nan_rows(6, K, 9, 7)
    c = np.random.default_rng(3).standard_normal((6, 9)).astype(np.float32)
    c.view(np.uint32)[::2, ::3] = 0x7F800333
    want = tc.matmul(f"x86-fma/{sched}", a, b, c, engine="numpy")
    got = tc.matmul(f"x86-fma/{sched}", a, b, c, engine="compiled")
    w, g = np.asarray(want).view(np.uint32), np.asarray(got).view(np.uint32)
    assert (w == g).all()
    payloads = w[np.isnan(w.view(np.float32))] & 0x3FFFFF
    assert len({int(x) for x in payloads}) > 2  # payloads, not one canonical NaN


def test_split_order_is_not_merged_where_nans_keep_their_payload():
    """Two promoted splits added d_1 + d_0 equal one promoted chain d_0, d_1 under a
    canonical NaN, not under x86's rule (the later addend's NaN wins): the order matters."""
    from tensorcore_smt.gemm.plan import equivalent_plan, make_plan
    from tensorcore_smt.gemm.schedule import parse_schedule

    text = "serial[split_k=2,split_tile=8,promote=8,combine=1+0]"
    plan = make_plan(parse_schedule(text), 16, 1)
    assert equivalent_plan(plan).splits != plan.splits
    assert equivalent_plan(plan, nan_payloads=True) == plan
    a = np.ones((1, 16), np.float32)
    a.view(np.uint32)[0, [0, 8]] = [0x7F800111, 0x7F800222]
    b = np.ones((16, 1), np.float32)
    got = np.asarray(tc.matmul(f"x86-fma/{text}", a, b))
    one = np.asarray(tc.matmul("x86-fma/serial[promote=8]", a, b))
    assert got.view(np.uint32)[0, 0] == 0x7FC00111 and one.view(np.uint32)[0, 0] == 0x7FC00222
