"""identify --gemm on the compiled engine: GemmSpace.run gives the numpy interpreter's
bits (gemm.model.run_rows, element.py one numpy operation at a time) on pool rows of
every kind, whichever engine `CompiledRows` picks, and picks it where it says."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcore_smt.gemm.model import run_rows
from tensorcore_smt.identify import compiled_rows
from tensorcore_smt.identify.compiled_rows import CompiledRows
from tensorcore_smt.identify.gemm import load_gemm_space
from tensorcore_smt.identify.pool import make_pool

pytest.importorskip("llvmlite")

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
K = 256
MANY = 512
"""compiled_rows.MANY_ROWS in these tests (its own value makes numpy's reference slow)."""


@pytest.fixture(autouse=True)
def _many_rows(monkeypatch):
    monkeypatch.setattr(compiled_rows, "MANY_ROWS", MANY)


def _rows(sp, n: int):
    """n pool rows of every kind (general and targeted) widened to the GEMM's K."""
    pool = make_pool(sp.base.p, n, 5)
    reps = -(-K // pool.a.shape[1])
    return np.tile(pool.a, reps)[:, :K], np.tile(pool.b, reps)[:, :K], pool.c


@pytest.mark.parametrize(
    "values",
    [
        {"schedule.split_k": 2, "schedule.promote": 32},
        {"carry_bits": 6, "schedule.promote": 32},
    ],
)
def test_compiled_rows_match_the_numpy_interpreter(values):
    sp = load_gemm_space("hopper", K, FP8)
    h = sp.make(sp.families[0].name, values)
    m = sp.model(h)
    a, b, c = _rows(sp, MANY + 64)
    got = sp.run(h, a, b, c)
    assert sp.compiled.compiled_runs == 1 and sp.compiled.numpy_runs == 0
    want = run_rows(m, a, b, c)
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, want)
    # the specials of the pool are there: the test would miss NaN or Inf rules otherwise
    assert len(np.unique(want)) > len(want) // 4


def test_few_rows_run_on_numpy_until_the_kernel_is_made():
    sp = load_gemm_space("hopper", K, FP8)
    fam = sp.families[0].name
    a, b, c = _rows(sp, MANY + 64)
    h32, h64 = (sp.make(fam, {"schedule.promote": pr}) for pr in (32, 64))
    few = (a[:8], b[:8], c[:8])
    first = sp.run(h32, *few)
    assert sp.compiled.numpy_runs == 1 and sp.compiled.compiled_runs == 0
    sp.run(h32, a, b, c)  # many rows: the instruction's kernel is made
    assert sp.compiled.compiled_runs == 1
    # another schedule of the same instruction, on few rows: the same kernel
    second = sp.run(h64, *few)
    assert sp.compiled.numpy_runs == 1 and sp.compiled.compiled_runs == 2
    np.testing.assert_array_equal(first, run_rows(sp.model(h32), *few))
    np.testing.assert_array_equal(second, run_rows(sp.model(h64), *few))


def test_a_disabled_engine_leaves_every_run_to_numpy():
    sp = load_gemm_space("hopper", K, FP8)
    sp.compiled = CompiledRows(enabled=False)
    h = sp.make(sp.families[0].name, {})
    a, b, c = _rows(sp, MANY)
    np.testing.assert_array_equal(sp.run(h, a, b, c), run_rows(sp.model(h), a, b, c))
    assert sp.compiled.compiled_runs == 0 and sp.compiled.numpy_runs == 1
