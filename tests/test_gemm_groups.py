"""The chain kernel's groups of runs (gemm_ir `group`, compiled.GROUP): runs of the same
columns of B on other rows of A share each k-block of B. The kernel must give every
output the bits of its own row and column whatever the index arrays say: checked
against the numpy interpreter's GEMM on index arrays that form whole groups, groups
broken inside a run (one lane on another row or column), runs of one, and calls that
cut groups at their edges, for the fp64 formulation and the general kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.gemm import compiled

M, K, N = 12, 64, 600
RNG = np.random.default_rng(45)


def _kernel(fp64: bool):
    p = tc.resolve("hopper", "wgmma.m64n8k16.f32.bf16.bf16")
    A = RNG.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    B = RNG.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    want = tc.matmul("hopper", A, B, engine="numpy").view(np.uint32)
    t = compiled._Tables(p, A.view(np.uint16).T, B.view(np.uint16))
    fn = (compiled._float_chain_fn if fp64 else compiled._chain_fn)(p, *t.bits)
    chain = (np.arange(K // p.K, dtype=np.int64), np.array([K // p.K], dtype=np.int64))

    def run(ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        ia = np.ascontiguousarray(ia, dtype=np.int64)
        ib = np.ascontiguousarray(ib, dtype=np.int64)
        return t.run(fn, chain, ia, ib, np.zeros(len(ia), dtype=np.uint64))

    return run, want


def _grid() -> tuple[np.ndarray, np.ndarray]:
    ia, ib = np.divmod(np.arange(M * N, dtype=np.int64), N)
    return ia, ib


@pytest.mark.parametrize("fp64", [True, False])
def test_groups_of_runs_give_each_output_its_own_bits(fp64):
    run, want = _kernel(fp64)
    ia, ib = _grid()
    order = compiled.panel_order(ia, ib)
    assert order is not None
    cases = {"row-major": (ia, ib), "panel order": (ia[order], ib[order])}
    pa, pb = ia[order].copy(), ib[order].copy()
    # the second run of the first group: one lane on another row, one on another column
    pa[compiled.RUN + 17] = (pa[compiled.RUN + 17] + 5) % M
    pb[3 * compiled.RUN + 40] = (pb[3 * compiled.RUN + 40] + 1) % N
    cases["broken groups"] = (pa, pb)
    perm = RNG.permutation(M * N)
    cases["shuffled"] = (ia[perm], ib[perm])
    for name, (a, b) in cases.items():
        got = run(a, b)
        assert got.tolist() == want[a, b].astype(np.uint64).tolist(), name
    # calls that start and end inside groups and runs
    a, b = ia[order], ib[order]
    for lo, hi in [(0, 700), (700, 2100), (2100, 2101), (2101, M * N)]:
        got = run(a[lo:hi], b[lo:hi])
        assert got.tolist() == want[a[lo:hi], b[lo:hi]].astype(np.uint64).tolist(), (lo, hi)


def test_panel_order_is_column_panels_then_rows():
    ia, ib = _grid()
    order = compiled.panel_order(ia, ib)
    a, b = ia[order], ib[order]
    assert sorted(zip(a.tolist(), b.tolist())) == sorted(zip(ia.tolist(), ib.tolist()))
    R = compiled.RUN
    # the first panel: every row's first RUN columns, row after row
    assert a[: M * R].tolist() == np.repeat(np.arange(M), R).tolist()
    assert b[: M * R].tolist() == np.tile(np.arange(R), M).tolist()
    assert compiled.panel_order(ia[:N], ib[:N]) is None  # one row: as it is
