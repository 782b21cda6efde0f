"""The audit of certified answers (bench/audit.py): every certificate the package states
(composed U of instructions and GEMM schedules, the argued exactness bound B, the
monotonicity and no-clamp arguments, overflow rows) against what tc.simulate /
tc.matmul attain over the certificate's class on small formats, each case a
(variant, class, certificate) triple.

The fast run covers a few variants of every certificate and a Hypothesis search over
the parameter space (shrinking to the smallest variant that breaks a certificate); the
slow run (`make test-slow`, `make audit`) covers more than 10^3 cases. The families once
unsound (chained integer sums, GEMM bounds with `out`, cdna3's F2, and those the audit
found: flushed c, flushed chained accumulators, chained directed roundings overflowing,
round-down with carry bits) are each tested on their own below, plainly: every
certificate sound, or refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import audit  # noqa: E402

from tensorcore_smt.api import resolve  # noqa: E402
from tensorcore_smt.errors import UserError  # noqa: E402


def _new_unsound(cases):
    """Unsound answers, and certificates that raised, outside the families the audit
    names (audit.KNOWN, audit.FOUND)."""
    return [c for c in cases if c.status in (audit.UNSOUND, audit.ERROR) and not c.known]


def _fail_text(cases) -> str:
    return "\n".join(c.describe() for c in cases[:5])


def test_fast_audit():
    """Every certificate kind over a few variants: no unsound answer outside the known
    families, and every kind covers cases."""
    rep = audit.audit("fast", seed=0)
    print(rep.summary())
    bad = _new_unsound(rep.cases)
    assert not bad, _fail_text(bad)
    covered = {c.cert for c in rep.cases if c.status in (audit.SOUND, audit.UNSOUND)}
    assert {"U", "U-gemm", "B", "monotone", "no-clamp"} <= covered
    assert rep.covered >= 50


def test_error_free_sum_is_exact():
    """The float64 sums the audit measures with are exact on dyadic terms (the verdict
    is then re-measured with Fractions; this keeps the pre-filter from missing rows)."""
    import numpy as np

    terms = [np.array([2.0**100]), np.array([1.0]), np.array([-(2.0**100)]), np.array([2.0**-60])]
    assert audit.exact_sum(terms)[0] == 1.0 + 2.0**-60


def test_audit_finds_a_planted_bound():
    """The audit's own check: a U below what rows attain is reported unsound (the error
    of hopper's FP8 unit is far above 2^-30)."""
    from fractions import Fraction

    from tensorcore_smt.certify import compose

    text, instr = "hopper[K=2]", "wgmma.m64n8k32.f32.e4m3.e4m3"
    p = resolve(text, instr)
    real = compose.instruction_bound

    def planted(p, cons):
        got = real(p, cons)
        return compose.Argument(Fraction(1, 2**30), got.lines) if hasattr(got, "upper") else got

    compose.instruction_bound = planted
    try:
        cases = audit.audit_instruction_U(text, instr, p, 1500, 0)
    finally:
        compose.instruction_bound = real
    assert any(c.status == audit.UNSOUND and c.witness for c in cases)


@st.composite
def variants(draw):
    """A point of the audit's parameter space (audit.SPACE) on one of its base
    instructions, as the model accepts it (shrinks towards the instruction itself)."""
    arch, instr, tiny_ok = draw(st.sampled_from(audit.BASES))
    instr = audit._instr_name(arch, instr)
    base = resolve(arch, instr)
    choice = {k: draw(st.sampled_from(v)) for k, v in audit.SPACE.items()}
    if choice["K"] is None or base.K > 4:
        choice["K"] = choice["K"] or min(base.K, 4)
    if tiny_ok and choice["ab"] is None:
        choice["ab"] = "e2m1"
    text = audit.variant_text(arch, choice, base, tiny_ok)
    try:
        p = resolve(text, instr)
    except UserError:
        from hypothesis import reject

        reject()
    if p.a_fmt.spec.storage > 8 or p.b_fmt.spec.storage > 8:
        from hypothesis import reject

        reject()
    return text, instr, p


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(variants())
def test_composed_bound_over_the_space(v):
    """The composed U of any variant of the space holds over every class (a failure
    shrinks to the smallest variant that breaks it)."""
    text, instr, p = v
    cases = audit.audit_instruction_U(text, instr, p, 1500, 0, audit.known_family(p))
    bad = _new_unsound(cases)
    assert not bad, _fail_text(bad)


# --- the families once unsound, each on its own ----------------------------------------


def test_gemm_bound_with_out():
    """hopper/serial[out=fp16] at K = 8, over the class the bound states (M within
    fp16's range, narrowed where the conversion could overflow): no column exceeds U
    (issue 42, item 2: a = b = 448 gave d = inf under U = 0.016)."""
    text, instr = "hopper[K=4]/serial[out=fp16]", "wgmma.m64n8k32.f32.e4m3.e4m3"
    p = resolve("hopper[K=4]", instr)
    case = audit.audit_gemm_U(text, instr, 8, p, [], 60, 0)
    assert case.status != audit.UNSOUND, case.describe()


def test_chained_integer_sums():
    """hopper[K=4,L=2,F=5] (chained groups) on 2-bit integer slices: every |c| <= B
    exact, a running sum past 2^(F+1) included (issue 42, item 1)."""
    text, instr = "hopper[K=4,L=2,F=5]", "wgmma.m64n8k32.f32.e4m3.e4m3"
    p = resolve(text, instr)
    case = audit.audit_integer_B(text, instr, p, 2, 20000, 0)
    assert case.status != audit.UNSOUND, case.describe()


def test_cdna3_small_f2():
    """cdna3[F2=12] with tiny operands: the composed U holds on every class (the model
    shifted by a negative amount before, issue 42, item 4)."""
    text, instr = "cdna3[K=1,F2=12,a_fmt=e4m3,b_fmt=e4m3]", "v_mfma_f32_32x32x8_f16"
    p = resolve(text, instr)
    cases = audit.audit_instruction_U(text, instr, p, 3000, 0)
    assert not [c for c in cases if c.status == audit.UNSOUND], _fail_text(cases)


def test_found_flushed_c():
    """hopper[K=1,flush_inputs=true] with fp16 c and d: flush_c reads a subnormal c as 0
    (c = 0x83ff, a = 2^-6, b = -2^-6 gave a normwise error of 0.1998 over normal-only:ab
    against U = 2^-10), so the argument asks c to be normal too: normal-only:ab is
    refused in one line, and the U over normal-only holds."""
    from tensorcore_smt.certify.bound import default_class
    from tensorcore_smt.certify.classes import parse_where
    from tensorcore_smt.certify.compose import Refusal, instruction_bound

    text = "hopper[K=1,flush_inputs=true,c_fmt=fp16,d_fmt=fp16,rounding_fmt=none]"
    instr = "wgmma.m64n8k32.f32.e4m3.e4m3"
    p = resolve(text, instr)
    why = instruction_bound(p, default_class() + (parse_where("normal-only:ab"),))
    assert isinstance(why, Refusal) and "normal-only:abc" in why.reason
    cases = audit.audit_instruction_U(text, instr, p, 3000, 0)
    assert not [c for c in cases if c.status == audit.UNSOUND], _fail_text(cases)
    assert any(c.status == audit.SOUND for c in cases), _fail_text(cases)


def test_found_flushed_chain():
    """ada[K=2,L=1,...,flush_inputs=true] with fp16 c and d over normal-only:abc:
    a = (0x84, 0), b = (0x9c, 0), c = 0x8401: group 0 gives a subnormal fp16, flushed as
    group 1's c, d = 0 (normwise error 0.985 against U = 0.0144 before): every chained
    group now pays the flushed accumulator, below 2^e_min(d), as an absolute part."""
    text = "ada[K=2,L=1,F=8,carry_bits=1,flush_inputs=true,c_fmt=fp16,d_fmt=fp16,rounding_fmt=none]"
    instr = "m16n8k16.f32.e5m2.e5m2.f32"
    p = resolve(text, instr)
    cases = audit.audit_instruction_U(text, instr, p, 6000, 0)
    assert not [c for c in cases if c.status == audit.UNSOUND], _fail_text(cases)


def test_found_directed_rounding_overflow():
    """ada[K=2,L=1,align=exact,rounding=rtp] with e5m2 c and d: a = b = (0x01, 0x01),
    c = 0x7a (49152): each group rounds up by an ulp, 57344 then Inf, while the exact
    result is finite (U = 0.5625 before): a chained rounding toward +/-inf now meets the
    overflow precondition as one to nearest does (the default class is refused)."""
    text = "ada[K=2,L=1,align=exact,rounding=rtp,c_fmt=e5m2,d_fmt=e5m2]"
    instr = "m16n8k16.f16.e4m3.e4m3.f16"
    p = resolve(text, instr)
    cases = audit.audit_instruction_U(text, instr, p, 6000, 0)
    assert not [c for c in cases if c.status == audit.UNSOUND], _fail_text(cases)


def test_found_round_down_carry_raises():
    """hopper[K=1,align=round-down] (carry bits set): instruction_bound refuses in one
    line (it raised least_carry_bits' ValueError before)."""
    from tensorcore_smt.certify.bound import default_class
    from tensorcore_smt.certify.compose import Refusal, instruction_bound

    text, instr = "hopper[K=1,align=round-down]", "wgmma.m64n8k32.f32.e4m3.e4m3"
    p = resolve(text, instr)
    assert p.carry_bits is not None
    why = instruction_bound(p, default_class())
    assert isinstance(why, Refusal) and "round-down" in why.reason and "\n" not in why.reason
    cases = audit.audit_instruction_U(text, instr, p, 1500, 0)
    assert not [c for c in cases if c.status == audit.ERROR], _fail_text(cases)


def test_found_round_down_carry_cli():
    """`tcsmt bound` on it states the refusal as one argument line and goes on with the
    solvers: exit 0 (closed) or 3 (budget ended), never an internal error."""
    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    args = ["bound", "hopper[K=1,align=round-down]", "--instr", "wgmma.m64n8k32.f32.e4m3.e4m3"]
    r = CliRunner().invoke(main, args + ["--timeout", "2"])
    assert r.exit_code in (0, 3), r.output
    assert "internal error" not in r.output and "Traceback" not in r.output
    refusals = [x for x in r.output.splitlines() if "no composed bound" in x]
    assert len(refusals) == 1 and "round-down alignment" in refusals[0], r.output


# --- the wide run ----------------------------------------------------------------------------


@pytest.mark.slow
def test_wide_audit():
    """More than 10^3 (variant, class, certificate) cases: none unsound outside the
    known families (printed with their counts)."""
    rep = audit.audit("wide", seed=0)
    print(rep.summary())
    print(f"covered {rep.covered} cases, {len(rep.unsound())} unsound")
    assert rep.covered >= 1000
    bad = _new_unsound(rep.cases)
    assert not bad, _fail_text(bad)
