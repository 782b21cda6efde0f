"""Run MMA-Sim (the optional `mmasim` package, Xie et al. 2025's reference simulator) on our bit
patterns, for the cross-checks in test_mmasim.py and the slow runs of
test_interpreters.py. Import this module only after `mmasim` and `torch` imported.

The names and the operand coding are tensorcore_smt.validation.mmasim's (see its docstring); this
module adds what only the tests need: NaN-class comparison where payloads are unspecified,
and the rows on which MMA-Sim's answer is an artifact of its float implementation.
"""

from __future__ import annotations

import numpy as np
import torch

from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import Algorithm, ModelParams

# The bridge itself (names, operand coding, running an operation) is the package's, which
# the `mmasim` oracle of `tcsmt validate` and the benchmark use too.
from tensorcore_smt.validation.mmasim import (  # noqa: F401
    ARCH_NAMES,
    from_torch,
    is_nan,
    make_op,
    nan_payload_unspecified,
    run,
    to_torch,
)


def mismatches(
    p: ModelParams, ours: np.ndarray, theirs: np.ndarray, arch: str | None = None
) -> np.ndarray:
    """Row mask where the outputs disagree: bit for bit, except that two NaNs agree when
    the NaN payload is unspecified for this model (of `arch`)."""
    diff = ours != theirs
    if nan_payload_unspecified(p, arch):
        both_nan = is_nan(ours, p.d_fmt) & is_nan(theirs, p.d_fmt)
        diff &= ~both_nan
    return diff


def _nonfinite(bits: np.ndarray, fmt: Format) -> np.ndarray:
    from tensorcore_smt.bv.core import BV
    from tensorcore_smt.bv.vector import VECTOR
    from tensorcore_smt.formats import decode

    u = decode(BV(VECTOR, np.asarray(bits, dtype=np.uint64), fmt.spec.storage), fmt)
    return np.broadcast_to(np.logical_or(u.is_nan.v, u.is_inf.v), np.shape(bits))


def not_comparable(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Rows on which MMA-Sim's answer is an artifact of its float implementation rather
    than a statement about the hardware, so they are not compared.

    GFDRDA (CDNA3 fp8): MMA-Sim reads the exponent of c with frexp, which gives 0 for Inf
    and NaN, and then drops c when that exponent is below e_max - 25 (MMA-Sim §IV-H, step
    8). A non-finite c (given, or the NaN an earlier group of a chain produced) thus
    vanishes whenever the products are large; the hardware's exponent field of Inf/NaN is
    all ones and never that small. Our model propagates the NaN/Inf (FDA step 1 rules)."""
    skip = np.zeros(len(c), dtype=bool)
    if p.algorithm != Algorithm.GFDRDA:
        return skip
    skip |= _nonfinite(c, p.c_fmt)
    groups = p.groups()
    for lo, hi in groups[:-1]:  # a NaN in an earlier group makes the chained c NaN
        skip |= _nonfinite(a[:, lo:hi], p.a_fmt).any(axis=1)
        skip |= _nonfinite(b[:, lo:hi], p.b_fmt).any(axis=1)
    return skip


def compare_chunk(arch: str, name: str, seed: int, n: int) -> dict:
    """Vector interpreter vs MMA-Sim on `n` mixture rows (a worker of the slow run)."""
    from strategies import random_rows

    from tensorcore_smt.api import simulate_params
    from tensorcore_smt.spec.presets import PRESETS

    torch.set_num_threads(1)
    p = PRESETS[arch].instructions[name].params
    op = make_op(arch, name)
    a, b, c = random_rows(np.random.default_rng(seed), p, n)
    ours = simulate_params(p, a, b, c)
    theirs = run(op, p, a, b, c)
    skip = not_comparable(p, a, b, c)
    bad = mismatches(p, ours, theirs) & ~skip
    examples = [
        {
            "a": [hex(int(x)) for x in a[i]],
            "b": [hex(int(x)) for x in b[i]],
            "c": hex(int(c[i])),
            "ours": hex(int(ours[i])),
            "mmasim": hex(int(theirs[i])),
        }
        for i in np.nonzero(bad)[0][:3]
    ]
    return {"compared": int((~skip).sum()), "mismatches": int(bad.sum()), "examples": examples}
