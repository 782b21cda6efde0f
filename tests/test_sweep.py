"""Random rows at scale (certify/sweep.py): the fp64 pass picks the rows, exact rationals
measure them, and no measured row ever exceeds the composed U; and the pieces of
bench/make_bounds.py that put the sweep and the analytic bound into results/bounds.md."""

from __future__ import annotations

import importlib
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from tensorcore_smt.certify.analytic import gemm_analytic, instruction_analytic
from tensorcore_smt.certify.bound import default_class
from tensorcore_smt.certify.classes import parse_where
from tensorcore_smt.certify.compose import Argument, instruction_bound
from tensorcore_smt.certify.sweep import draw, sweep
from tensorcore_smt.errors import UserError
from tensorcore_smt.spec.presets import parse_variant

NORMAL = default_class() + (parse_where("normal-only"),)
CLASSES = {"default": default_class(), "normal-only": NORMAL}
BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_sweep_measures_its_best_rows_exactly():
    got = sweep("hopper", "m16n8k16.f32.f16.f16.f32", CLASSES, 1 << 15, seed=3, top=32)
    p = parse_variant("hopper").params("m16n8k16.f32.f16.f16.f32")
    d, n = got["default"], got["normal-only"]
    assert 0 < n.in_class < d.in_class <= d.drawn == 1 << 15
    for name, sw in got.items():
        U = instruction_bound(p, CLASSES[name])
        assert isinstance(U, Argument)
        assert isinstance(sw.measure, Fraction) and 0 < sw.measure <= U.upper
        assert sw.remeasured == 32 and sw.inputs is not None
        # the fp64 estimate of the largest row is its exact error to 2^-40
        assert abs(sw.approx - float(sw.measure)) <= float(sw.measure) * 2**-40
    assert d.engine == "compiled"


def test_draw_mixes_subnormal_factors_into_some_rows():
    p = parse_variant("volta").params(None)
    a, b, c = draw(p, 4000, seed=0)
    assert a.shape == (4000, 4) and b.shape == (4000, 4) and c.shape == (4000,)
    sub = ((a >> 10) & 0x1F == 0) & (a & 0x3FF != 0)
    assert sub[2000:].any(axis=1).mean() > 0.02  # mixed half: a quarter of rows, 1 in 10


def test_sweep_refuses_what_it_cannot_decide_in_fp64():
    cons = default_class() + (parse_where("exponent-window:ab=-4:4"),)
    with pytest.raises(UserError, match="exponent-window"):
        sweep("volta", None, {"w": cons}, 100)


def _make_bounds():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("make_bounds")


def test_make_bounds_cells_and_plot(tmp_path):
    mb = _make_bounds()
    a = instruction_analytic(parse_variant("volta").params(None))
    assert mb.analytic_cell(a) == "4.768e-07 (gamma_4(2^-23))"
    assert mb.verdict(a, Fraction(1, 10**7), Fraction(1, 10**7)) == "proved"
    assert mb.verdict(a, Fraction(1, 1000), Fraction(1, 2)).startswith("refuted")
    assert mb.verdict(a, Fraction(1, 10**7), Fraction(1, 2)) == "open"
    assert mb.verdict(a, Fraction(0), None, Fraction(1, 1000)).startswith("refuted by the sample")
    cdna3 = instruction_analytic(parse_variant("cdna3").params(None))
    assert mb.analytic_cell(cdna3) == "n/a" and mb.verdict(cdna3, 1, 1) == "-"
    pts = [
        (K, Fraction(K, 2**30), Fraction(K, 2**28), gemm_analytic("hopper/serial", K).bound, 0)
        for K in (16, 64)
    ]
    assert mb.plot_gemm([("hopper/serial vs exact", pts)], tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch,instr", [("volta", "m8n8k4.f32.f16.f16.f32"), ("hopper", "m16n8k16.f32.f16.f16.f32")]
)
def test_a_million_swept_rows_never_exceed_the_composed_bound(arch, instr):
    p = parse_variant(arch).params(instr)
    got = sweep(arch, instr, CLASSES, 10**6, seed=17)
    for name, sw in got.items():
        U = instruction_bound(p, CLASSES[name]).upper
        assert sw.in_class > 500_000 and sw.remeasured > 0
        assert sw.measure is not None and sw.measure <= U, (name, float(sw.measure), float(U))
