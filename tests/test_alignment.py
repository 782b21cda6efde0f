"""The exact alignment-loss bound of a fused group (certify/alignment.py) and the
witnesses built from its worst configurations (certify/aligned_rows.py): Dinkelbach's
iteration against brute force, witnesses re-run on the concrete model and measured with
exact rationals, rows in the subnormal regime never above the composed U, and the
default class (subnormal inputs admitted) closed to the resolution."""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.certify.aligned_rows import aligned_rows
from tensorcore_smt.certify.alignment import Entry, Slot, candidate, worst_at
from tensorcore_smt.certify.bound import default_class, make_bound_query
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import instruction_bound
from tensorcore_smt.certify.sample import best_of
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, round_fraction, value_of
from tensorcore_smt.inputs.implications import class_normal
from tensorcore_smt.model.measure import Measure, exact_value, measure_value
from tensorcore_smt.smt.query import fixed_inputs

NORMAL = default_class() + (parse_where("normal-only"),)

PRESETS = [
    ("volta", "m8n8k4.f32.f16.f16.f32"),
    ("hopper", "m16n8k16.f32.f16.f16.f32"),
    ("hopper", "m16n8k16.f32.bf16.bf16.f32"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
]


def _brute(slots: list[Slot], E: int, F: int) -> Fraction:
    """max (sum l) / (sum t) over every choice of N (or zero) per term, a leader at E."""
    grid = E - F
    options = []
    for s in slots:
        opts = [(0, 0, False)]
        for x in s.entries:
            if x.e > E:
                continue
            for n in range(x.lo, x.hi + 1):
                k = grid - x.lsb
                loss = (n % (1 << k)) * Fraction(2) ** x.lsb if k > 0 else Fraction(0)
                opts.append((loss, n * Fraction(2) ** x.lsb, x.e == E))
        options += [opts] * s.count
    best = Fraction(0)
    for combo in itertools.product(*options):
        if not any(lead for _, _, lead in combo):
            continue
        num = sum(c[0] for c in combo)
        den = sum(c[1] for c in combo)
        best = max(best, num / den)
    return best


def test_dinkelbach_finds_the_brute_force_maximum():
    rng = random.Random(4)
    for _ in range(25):
        slots = []
        for count in (1, 2):
            entries = []
            for e in rng.sample(range(-3, 4), 3):
                lo = rng.randint(1, 9)
                entries.append(Entry(e, e - 3, lo, lo + rng.randint(0, 6)))
            slots.append(Slot(tuple(sorted(entries)), count))
        F = rng.randint(1, 4)
        for E in range(-3, 4):
            w = worst_at(slots, E, F, 0, 0)
            if w is None:
                continue
            assert w.ratio == _brute(slots, E, F), (slots, E, F)


def test_candidate_is_the_best_term_of_an_entry():
    x = Entry(0, -6, 5, 40)
    for grid in range(-7, 1):
        n, loss, t = candidate(x, grid)
        k = grid - x.lsb
        for lam in (Fraction(0), Fraction(1, 7), Fraction(1, 2)):
            best = max(((m % (1 << k)) if k > 0 else 0) - lam * m for m in range(5, 41))
            assert loss - lam * t == best or (k <= 0 and loss == 0)


def _measure(arch: str, instr: str, row: dict[str, int]) -> Fraction:
    """The normwise error of one row through tc.simulate, with exact rationals."""
    p = tc.spec.presets.parse_variant(arch).params(instr)
    a = np.array([[row[f"a{k}"] for k in range(p.K)]], dtype=np.uint64)
    b = np.array([[row[f"b{k}"] for k in range(p.K)]], dtype=np.uint64)
    c = np.array([row["c"]], dtype=np.uint64)
    d = int(tc.simulate(arch, instr, a, b, c)[0])
    e, den = exact_value(
        [row[f"a{k}"] for k in range(p.K)],
        [row[f"b{k}"] for k in range(p.K)],
        row["c"],
        (p.a_fmt, p.b_fmt, p.c_fmt),
    )
    return measure_value(value_of(d, p.d_fmt), e, den, Measure.NORMWISE, p.d_fmt)


def test_volta_drops_c_below_a_product_of_two_subnormals():
    # a0 = b0 = 2^-24 (the smallest subnormal): the unnormalised product is aligned at
    # 2^-28, so the grid is 2^-51 and c = 2^-51 - 2^-75 is lost whole: 1/9 of the sum
    row = {f"a{k}": 0 for k in range(4)} | {f"b{k}": 0 for k in range(4)}
    row |= {
        "a0": 0x0001,
        "b0": 0x0001,
        "c": round_fraction(Fraction(2**24 - 1, 2**75), Format.FP32),
    }
    got = _measure("volta", "m8n8k4.f32.f16.f16.f32", row)
    assert got == Fraction(2**24 - 1, 2**24 - 1 + 2**27)
    U = instruction_bound(tc.spec.presets.parse_variant("volta").params(None), default_class())
    assert got <= U.upper <= got * (1 + Fraction(1, 2**20))


BF16 = PRESETS[2]
FAST = [c if c != BF16 else pytest.param(*c, marks=pytest.mark.slow) for c in PRESETS]


@pytest.mark.parametrize("arch,instr", FAST[:4], ids=lambda x: str(x))
@pytest.mark.parametrize("cls", ["default", "normal"])
def test_aligned_witnesses_reproduce_and_meet_the_bound(arch, instr, cls):
    cons = default_class() if cls == "default" else NORMAL
    q = make_bound_query(arch, None, instr, Measure.NORMWISE, cons)
    U = instruction_bound(q.p, cons).upper
    rows = aligned_rows(q, fixed_inputs(q), class_normal(q.p, q.constraints))
    best = best_of(q, rows)
    assert best is not None and best.measure <= U
    # re-run through the public simulate and measured again: the same exact figure
    assert _measure(arch, instr, best.inputs) == best.measure
    if cls == "default" or "wgmma" in instr:
        # (the normal-only fp16/bf16 worst case is reached by extremal.argument_rows)
        assert U <= best.measure * Fraction(17, 16)


def _tiny_row(p, rng: random.Random) -> dict[str, int]:
    """A row in the subnormal regime: a near the bottom of its format (often subnormal),
    b placing the product's exponent just above the lowest the class keeps (M >= 2^-126),
    c near the grid below the largest product."""
    sa, sb = p.a_fmt.spec, p.b_fmt.spec
    low = max(sa.emin + sb.emin, p.d_fmt.spec.emin + 6)
    row = {}
    for k in range(p.K):
        if rng.random() < 0.2:
            row[f"a{k}"] = row[f"b{k}"] = 0
            continue
        ea = sa.emin + rng.randint(-sa.mbits, 3)
        eb = max(sb.emin, min(sb.emax, low + rng.randint(0, 6) - max(ea, sa.emin)))
        for name, fmt, e in ((f"a{k}", p.a_fmt, ea), (f"b{k}", p.b_fmt, eb)):
            m = fmt.spec.mbits
            v = Fraction(rng.getrandbits(m + 1) | 1, 1 << m) * Fraction(2) ** e
            row[name] = round_fraction(-v if rng.random() < 0.2 else v, fmt)
    e = low - p.F + rng.randint(-4, 8)
    cv = Fraction(rng.getrandbits(24) | (1 << 23), 1 << 23) * Fraction(2) ** e
    row["c"] = round_fraction(cv, p.c_fmt) if rng.random() < 0.9 else 0
    return row


@pytest.mark.parametrize("arch,instr", FAST, ids=lambda x: str(x))
def test_rows_in_the_subnormal_regime_never_exceed_the_bound(arch, instr):
    # random rows of the regime, and mutants of the bound's own worst configurations
    # (one significand bit, exponent or sign changed, up to three times): the rows
    # closest to the bound, where an unsound step would show first
    from tensorcore_smt.certify.extremal import _mutate

    q = make_bound_query(arch, None, instr, Measure.NORMWISE, default_class())
    U = instruction_bound(q.p, default_class()).upper
    rng = random.Random(9)
    rows = [_tiny_row(q.p, rng) for _ in range(300)]
    seeds = aligned_rows(q, {}, class_normal(q.p, q.constraints))
    for _ in range(300):
        row = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            row = _mutate(row, q, rng, {})
        rows.append(row)
    best = best_of(q, rows)
    assert best is not None and 0 < best.measure <= U
    assert best.measure > U / 4  # the mutants stay near the worst case


@pytest.mark.parametrize("arch", ["volta", pytest.param("hopper", marks=pytest.mark.slow)])
def test_default_class_closes_from_the_cli(arch):
    r = CliRunner().invoke(main, ["bound", arch, "--timeout", "60", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    lo, hi = Fraction(out["lower"]), Fraction(out["upper"])
    assert out["status"] == "closed" and hi <= lo * Fraction(17, 16)
    w = out["witness"]
    p = tc.spec.presets.parse_variant(arch).params(None)
    row = {f"a{k}": int(x, 16) for k, x in enumerate(w["a"])}
    row |= {f"b{k}": int(x, 16) for k, x in enumerate(w["b"])}
    row["c"] = int(w["c"], 16)
    assert _measure(arch, None, row) == lo
    # the witness is the subnormal one: a normal-only analysis predicts 2^-20 at most
    assert lo > Fraction(1, 64) and p.K in (4, 16)


@pytest.mark.slow
def test_an_open_interval_keeps_a_witness_that_reproduces():
    # Ampere tf32 (two chained groups) stays open: the interval is reported as such,
    # and its witness still reproduces its L through tc.simulate with exact arithmetic
    from tensorcore_smt.certify.bound import bound

    instr = "m16n8k8.f32.tf32.tf32.f32"
    cert = bound("ampere", instr=instr, timeout=4, sample_rows=100, check_class=False)
    assert cert.upper is not None and cert.witness is not None
    assert 0 < cert.lower <= cert.upper
    assert _measure("ampere", instr, cert.witness) == cert.lower
