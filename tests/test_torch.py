"""The vector interpreter on torch tensors against numpy's, bit for bit (`make test-torch`).

Every instruction of every preset runs on random rows of the documented mix
(tensorcore_smt.validation.rows) through `simulate_params(..., device="cpu")` (torch) and through the
numpy interpreter; the outputs must be identical. With a CUDA device, the same on "cuda".
Needs the `torch` extra; marked `torch`, so `make test` leaves it out.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tensorcore_smt.api import simulate_params  # noqa: E402
from tensorcore_smt.spec.presets import PRESETS  # noqa: E402
from tensorcore_smt.validation.rows import random_rows  # noqa: E402

pytestmark = pytest.mark.torch

ROWS = 2000
# sparse instructions (mma.sp) take metadata: test_sparse.py runs their dense units
ALL = [
    (arch, name)
    for arch, pr in PRESETS.items()
    for name in pr.instructions
    if not name.startswith("mma.sp")
]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arch,name", ALL, ids=[f"{a}-{n}" for a, n in ALL])
def test_torch_matches_numpy(arch: str, name: str, device: str) -> None:
    p = PRESETS[arch].instructions[name].params
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, ROWS, seed=11)
    want = simulate_params(p, a, b, c)
    got = simulate_params(p, a, b, c, device=device)
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, f"{arch} {name} on {device}: {len(bad)} rows differ, first {bad[:5]}"
