"""Hopper fp16/bf16 `serial` chains against MMA-Sim called with the whole K (MMA-Sim chains
the instruction over K serially, its d fed back as c). Skipped without the `mmasim` extra
(mmasim and torch: pip install -e '.[mmasim]')."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("mmasim")

import tensorcore_smt as tc  # noqa: E402
from tensorcore_smt.validation import mmasim as bridge  # noqa: E402


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["fp16", "bf16"])
def test_serial_chain_equals_mmasim_whole_k(dt):
    rng = np.random.default_rng(31)
    M, N, K = 8, 8, 256
    A = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-10, 10, (M, K))).astype(dt)
    B = rng.standard_normal((K, N)).astype(dt)
    C = rng.standard_normal((M, N)).astype(np.float32)
    info: list = []
    D = tc.matmul("hopper", A, B, C, run_info=info)
    run = info[0]
    op = bridge.make_op("hopper", run.instr)
    assert op is not None, run.instr
    m_idx, n_idx = np.divmod(np.arange(M * N), N)
    a = A.view(np.uint16)[m_idx].astype(np.uint64)
    b = B.view(np.uint16).T[n_idx].astype(np.uint64)
    c = C.view(np.uint32).reshape(-1).astype(np.uint64)
    want = bridge.run(op, run.params, a, b, c)
    assert (D.view(np.uint32).reshape(-1).astype(np.uint64) == want).all()
