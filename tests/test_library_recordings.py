"""The GPU library recordings kept in results/hardware/<gpu>/library and the tools around
them: the recordings read back (gzip parts), their inputs regenerated bit for bit (a
recorded output that is exact in any order is the regenerated operands' exact product),
the plan they ran is today's extended plan, the fit/held-out split is disjoint, the TF32
probe's raw bits decide round-to-nearest-even, and the decision-table evaluator
(gemm/library_rules.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tensorcore_smt.errors import UserError
from tensorcore_smt.gemm import library_rules as lr
from tensorcore_smt.hardware.library_fit import (
    FIT_SEEDS,
    HELDOUT_SEEDS,
    fit_calls,
    heldout_calls,
    recording,
    recording_dir,
)
from tensorcore_smt.hardware.library_plan import RANDOM_CALLS, extended_plan

GPUS = ("h200", "h100")


@pytest.mark.parametrize("gpu", GPUS)
def test_recordings_are_the_extended_plan(gpu):
    for seed in (*FIT_SEEDS, *HELDOUT_SEEDS):
        rec = recording(gpu, seed)
        env = rec.manifest["environment"]
        assert env["device"].startswith("NVIDIA " + gpu.upper())
        assert rec.manifest["plan"]["name"] == "extended" and rec.manifest["status"] == "done"
        plan = extended_plan(seed)
        probes = [p for part in plan.parts for p in part.probes]
        assert len(rec.calls) == len(probes) == plan.calls
        assert len(plan.parts[-1].probes) == RANDOM_CALLS
        for c, p in zip(rec.calls[::97], probes[::97]):
            assert (c.cls, c.m, c.n, c.k, c.kind, c.seed) == (p.cls, p.m, p.n, p.k, p.kind, p.seed)
            assert c.error is None and c.d is not None


def test_fit_and_heldout_are_disjoint():
    fit = {(c.part, c.seed, c.cls.name) for c in fit_calls("h200")}
    held = {(c.part, c.seed, c.cls.name) for c in heldout_calls("h200")}
    assert fit and held and not fit & held
    assert all(not c.holdout for c in fit_calls("h200"))


def _exact_value(bits: int, fmt: str) -> Fraction:
    import ml_dtypes

    dt = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}[fmt]
    raw = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.uint32}[fmt]
    return Fraction(float(np.array([bits], raw).view(dt)[0]))


def test_k1_outputs_are_the_regenerated_operands_product():
    """At K = 1 every output is one product rounded once: the recorded bits equal the
    product of the regenerated operands rounded to the output format, whatever the
    kernel (an independent check of the input generator against the GPU)."""
    import ml_dtypes

    seen = 0
    for c in recording("h200", 0).part("grid"):
        if c.k != 1 or c.cls.name not in ("matmul.fp16.rr1", "matmul.bf16.rr1"):
            continue
        a, b, _ = c.operands()
        out = {"matmul.fp16.rr1": np.float16, "matmul.bf16.rr1": ml_dtypes.bfloat16}[c.cls.name]
        prod = a.astype(np.float64) @ b.astype(np.float64)  # exact: 22 significant bits
        want = prod.astype(np.float32).astype(out).view(np.uint16)
        assert np.array_equal(want, c.d[0])
        seen += 1
    assert seen >= 4


@pytest.mark.parametrize("gpu", GPUS)
def test_tf32_probe_says_round_to_nearest_even(gpu):
    from tensorcore_smt.gemm.tf32_probe import decide

    extras = recording_dir(gpu, 0).parent / "extras"
    for n in (64,):  # n = 256 says the same (docs/hardware.md); 16x the model's work
        a = np.load(extras / f"tf32_probe_n{n}_a.npy")
        b = np.load(extras / f"tf32_probe_n{n}_b.npy")
        verdict = decide((a, b), n=n)
        assert verdict["agrees_with"] == ["rne"]
        assert verdict["matches"]["truncate"]["a_side"] < n * n


def test_rule_bounds_mods_and_expressions():
    r = lr.Rule(
        "hopper/serial[split_k={clamp(cdiv(k, 1024), 1, 4)}]", {"k_min": 2, "n_mod": [16, 0]}
    )
    assert r.matches(8, 32, 2, None) and not r.matches(8, 32, 1, None)
    assert not r.matches(8, 33, 4096, None)
    assert r.text(8, 32, 4096) == "hopper/serial[split_k=4]"
    assert r.text(8, 32, 1500) == "hopper/serial[split_k=2]"
    assert r.text(8, 32, 99999) == "hopper/serial[split_k=4]"
    assert lr.evaluate("log2(m) + k % 7 - n // 3", {"m": 1024, "n": 10, "k": 20}) == 10 + 6 - 3
    g = lr.Rule("hopper", {}, ("h200",))
    assert g.matches(1, 1, 1, "h200") and not g.matches(1, 1, 1, "h100")


def test_align_bound_is_the_power_of_two_dividing_n_and_k():
    """`align` is gcd(N, K, 8), checked against a brute-force largest power of two."""
    lo, hi = lr.Rule("a", {"align_max": 2}), lr.Rule("a", {"align_min": 4, "align_max": 4})
    for n in range(1, 40):
        for k in (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 1000, 1003):
            g = max(p for p in (1, 2, 4, 8) if n % p == 0 and k % p == 0)
            assert lo.matches(3, n, k, None) == (g <= 2)
            assert hi.matches(3, n, k, None) == (g == 4)
    # A column-major (matmul-at): A's rows hold M elements, so M and N align the call
    assert lr.align_of("matmul-at", 12, 6, 7) == 2 and lr.align_of("matmul", 12, 6, 7) == 1
    assert lr.align_of("linear", 3, 16, 24) == 8 and lr.align_of("matmul-at", 3, 16, 24) == 1


def test_tiles_and_mnk_bounds_against_brute_force():
    """`tiles` is cdiv(M, 128) * cdiv(N, 128) and `mnk` the multiply-adds M*N*K, each
    bound inclusive at both ends, over a grid of shapes (M*N*K beyond 2^40 included)."""
    t = lr.Rule("a", {"tiles_min": 2, "tiles_max": 6})
    w = lr.Rule("a", {"mnk_min": 1000, "mnk_max": 4_500_000_000_000})
    for m in (1, 127, 128, 129, 300, 16384):
        for n in (1, 128, 200, 16384):
            for k in (1, 9, 16384):
                tiles = sum(1 for _ in range(0, m, 128)) * sum(1 for _ in range(0, n, 128))
                assert t.matches(m, n, k, None) == (2 <= tiles <= 6)
                assert w.matches(m, n, k, None) == (1000 <= m * n * k <= 4_500_000_000_000)
    assert not lr.Rule("a", {"mnk_max": 999}).matches(10, 10, 10, None)
    assert lr.Rule("a", {"mnk_max": 1000}).matches(10, 10, 10, None)


def test_expressions_refuse_anything_else():
    for bad in ("__import__('os')", "k ** 2", "m.bit_length()", "open", "k if m else n", "(("):
        with pytest.raises(UserError):
            lr.evaluate(bad, {"m": 1, "n": 1, "k": 1})


def test_tables_fall_through_and_epilogues_extend(tmp_path):
    (tmp_path / "a.toml").write_text(
        'classes = ["matmul.fp16.*"]\n[[rule]]\nwhen = {k_max = 64}\nrecipe = "hopper/serial"\n'
    )
    (tmp_path / "b.toml").write_text(
        'classes = ["matmul.*"]\n[[rule]]\nrecipe = "hopper/serial[split_k={cdiv(k, 4096)}]"\n'
    )
    (tmp_path / "c.toml").write_text(
        'classes = ["addmm.*"]\nkind = "epilogue"\nbase = "matmul"\n'
        '[[rule]]\nfields = "epilogue=mul-add"\n'
    )
    among = lr.tables(str(tmp_path))
    assert lr.decide("matmul.fp16.rr1", 4, 4, 64, None, among)[0] == "hopper/serial"
    assert lr.decide("matmul.fp16.rr1", 4, 4, 8192, None, among)[0] == ("hopper/serial[split_k=2]")
    got = lr.decide("addmm.fp16.rr0", 4, 4, 8192, None, among)
    assert got[0] == "hopper/serial[split_k=2,epilogue=mul-add]" and got[2].name == "c"
    assert lr.decide("linear.fp16.rr1", 4, 4, 8, None, among) is None
    (tmp_path / "d.toml").write_text(
        'classes = ["x"]\n[[rule]]\nwhen = {q_max = 1}\nrecipe = "a"\n'
    )
    with pytest.raises(UserError, match="unknown bound"):
        lr.read_table(tmp_path / "d.toml")


def test_with_fields():
    assert lr.with_fields("hopper", "c_join=output") == "hopper/serial[c_join=output]"
    assert lr.with_fields("hopper/serial", "a=1") == "hopper/serial[a=1]"
    assert lr.with_fields("hopper[x=1]/serial[b=2]", "a=1") == "hopper[x=1]/serial[b=2,a=1]"
    assert lr.with_fields("hopper/serial[b=2]", "") == "hopper/serial[b=2]"
