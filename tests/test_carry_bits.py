"""Carry bits derived from the bound on the terms (model.fda.least_carry_bits): the
papers' values where they give them, one bit fewer wraps and one more changes nothing on
every FDA instruction of every preset (concretely on the input with every term at its
largest, and with a solver: a witness for k-1, a proof for k+1)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt.api import simulate_one
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, value_of
from tensorcore_smt.model.fda import least_carry_bits
from tensorcore_smt.model.params import CAddend, ModelParams, Sparsity
from tensorcore_smt.spec.presets import PRESETS


def _questions() -> dict[ModelParams, tuple[str, str]]:
    """One (arch, instruction) per distinct FDA model with carry bits: the property asks
    the same question of instructions with the same parameters."""
    out: dict[ModelParams, tuple[str, str]] = {}
    for arch, pr in PRESETS.items():
        for name, inst in pr.instructions.items():
            # sparse forms run a dense unit of these (test_sparse.py)
            if inst.params.carry_bits is not None and inst.params.sparse == Sparsity.NONE:
                out.setdefault(inst.params, (arch, name))
    return out


QUESTIONS = _questions()
IDS = [f"{a}:{n}".replace("::", "-") for a, n in QUESTIONS.values()]


def _params(arch: str, instr: str) -> ModelParams:
    return PRESETS[arch].instructions[instr].params


def test_the_papers_carry_bits_and_the_fp8_bound():
    """Valpey et al. 2025 §4.3: 3 carry bits for Volta's 5 terms, 4 for Ampere's 9; fp8 products
    are below 3.52 units, so 33 terms of Hopper's FP8 wgmma fit in 5 (not ceil(log2 33))."""
    assert _params("volta", "m8n8k4.f32.f16.f16.f32").carry_bits == 3
    assert _params("ampere", "m16n8k8.f32.f16.f16.f32").carry_bits == 4
    assert _params("hopper", "m16n8k16.f32.f16.f16.f32").carry_bits == 5
    wgmma = _params("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3")
    assert (wgmma.L, wgmma.carry_bits) == (32, 5)
    # 32 fp16 products would need the sixth: 32 (2 - 2^-10)^2 + 2 > 2^7
    assert least_carry_bits(wgmma.with_(a_fmt=Format.FP16, b_fmt=Format.FP16)) == 6
    # the FP8 mma.sync of Hopper: two HMMA groups of 16 (8 for k16), c added after
    assert _params("hopper", "m16n8k32.f32.e4m3.e4m3.f32").carry_bits == 4
    assert _params("hopper", "m16n8k16.f32.e4m3.e4m3.f32").carry_bits == 3
    for arch in PRESETS:
        for inst in PRESETS[arch].instructions.values():
            if inst.params.carry_bits is not None:
                assert inst.params.carry_bits == least_carry_bits(inst.params)


def _largest(fmt: Format) -> int:
    """Bits of (2 - 2^-m) * 2^0: the largest significand at exponent 0."""
    s = fmt.spec
    bits = ((s.bias << s.mbits) | ((1 << s.mbits) - 1)) << s.ignored_low
    assert value_of(bits, fmt) == 2 - 2**-s.mbits
    return bits


def _extreme_input(p: ModelParams) -> tuple[list[int], list[int], int]:
    """Every term of one group at its largest with one sign and one exponent: the products
    of the first group and c, or (c added after the chain) the products of the last
    group on c = +0, which reach the bound on their own in every preset."""
    after = p.c_add == CAddend.AFTER
    lo, hi = p.groups()[-1 if after else 0]
    group = set(p.k_order()[lo:hi])
    a = [_largest(p.a_fmt) if k in group else 0 for k in range(p.K)]
    b = [_largest(p.b_fmt) if k in group else 0 for k in range(p.K)]
    return a, b, 0 if after else _largest(p.c_fmt)


@pytest.mark.parametrize("p", list(QUESTIONS), ids=IDS)
def test_one_carry_bit_fewer_wraps_and_one_more_changes_nothing(p):
    a, b, c = _extreme_input(p)
    k = p.carry_bits
    out = {n: simulate_one(p.with_(carry_bits=n), a, b, c) for n in (k - 1, k, k + 1, None)}
    assert out[k] == out[k + 1] == out[None]  # no register overflows: the exact sum
    assert out[k - 1] != out[k]  # one bit fewer loses the carry out


def _find(arch: str, instr: str, timeout: int) -> dict:
    r = CliRunner().invoke(
        main,
        [
            "find",
            "--property",
            "carry-bits",
            "--arch",
            arch,
            "--instr",
            instr,
            "--solver",
            "bitwuzla",
            "--no-confirm",
            "--timeout",
            str(timeout),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    return {q["id"]: q for q in json.loads(r.output)["queries"]}


def _check_property(arch: str, instr: str, timeout: int) -> None:
    """A witness for k-1 on the instruction; a proof for k+1 on it, or on chained groups
    on one group with any c (equal groups make equal chains: every group of a preset's
    chain takes its c in the format of the first group's, c_fmt = d_fmt)."""
    p = _params(arch, instr)
    qs = _find(arch, instr, timeout)
    k = p.carry_bits
    assert qs["k-minus-1"]["answer"] == "sat" and qs["k-minus-1"]["witness"]["reproduces"]
    assert qs["k-minus-1"]["variants"] == [arch, f"{arch}[carry_bits={k - 1}]"]
    if len(p.groups()) == 1:
        assert qs["k-plus-1"]["answer"] == "unsat" and "k-plus-1-group" not in qs
        assert qs["k-plus-1"]["variants"] == [arch, f"{arch}[carry_bits={k + 1}]"]
    else:
        assert p.c_fmt == p.d_fmt
        assert qs["k-plus-1-group"]["answer"] == "unsat" and "k-plus-1" not in qs
        group = f"{arch}[K={p.L},c_add=fused"
        assert qs["k-plus-1-group"]["variants"] == [f"{group}]", f"{group},carry_bits={k + 1}]"]


@pytest.mark.slow
def test_carry_bits_property_on_an_fp8_unit_whose_carry_bits_changed():
    """Hopper's FP8 mma.sync k16, two chained HMMA groups of 8 products from +0 (c added
    after): 8 products below 3.52 units and the first group's result need 3 carry bits,
    not ceil(log2 9) = 4; the proof is asked of one group. (The volta and ampere presets:
    tests/test_properties.py; every other instruction: the slow test below.)"""
    _check_property("hopper", "m16n8k16.f32.e4m3.e4m3.f32", timeout=300)


FAST = {("hopper", "m16n8k16.f32.e4m3.e4m3.f32")}
SLOW = [(a, n) for a, n in QUESTIONS.values() if (a, n) not in FAST]


@pytest.mark.slow
@pytest.mark.parametrize("arch, instr", SLOW, ids=[f"{a}:{n}".replace("::", "-") for a, n in SLOW])
def test_carry_bits_property_on_every_fda_instruction(arch, instr):
    """A witness for k-1 and a proof for k+1 with bitwuzla, each query within 60 s on the
    one-group FP8 k32 forms (wgmma, tcgen05, sm_120 mma); the witness on a chain of
    groups (the whole instruction) may take longer."""
    p = _params(arch, instr)
    fp8_k32 = p.K == 32 and p.a_fmt.spec.storage <= 8 and len(p.groups()) == 1
    _check_property(arch, instr, timeout=60 if fp8_k32 else 900)
