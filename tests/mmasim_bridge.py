"""Run MMA-Sim (the optional `mmasim` package, seed 002's reference simulator) on our bit
patterns, for the cross-checks in test_mmasim.py and the slow runs of
test_interpreters.py. Import this module only after `mmasim` and `torch` imported.

Naming: our preset names map to MMA-Sim's architecture names (`ARCH_NAMES`); an `mma`
instruction is MMA-Sim's `shape_and_type` unchanged; `wgmma.X` is WGMMA('Hopper', X);
`tcgen05.X` is TCGen05MMA('Blackwell', X); `v_mfma_X` is MFMA(arch, X).

Operands travel as torch tensors viewed from integer tensors of the same width; FP6 and
FP4 operands are one per uint8 as MMA-Sim's `decode_uint8_to_fp6_fp4` reads them (FP6 in
bits 5:0, FP4 in bits 5:2).
"""

from __future__ import annotations

import numpy as np
import torch

from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import Algorithm, ModelParams

ARCH_NAMES = {
    "volta": "Volta",
    "turing": "Turing",
    "ampere": "Ampere",
    "ada": "Ada Lovelace",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
    "rtx-blackwell": "RTX Blackwell",
    "cdna2": "CDNA2",
    "cdna3": "CDNA3",
}

# format -> (numpy int dtype of the same width, torch float dtype to view it as, or None
# for the uint8-coded FP6/FP4, and the left shift MMA-Sim's uint8 coding applies)
_TORCH = {
    Format.FP64: (np.int64, torch.float64, 0),
    Format.FP32: (np.int32, torch.float32, 0),
    Format.TF32: (np.int32, torch.float32, 0),
    Format.FP16: (np.int16, torch.float16, 0),
    Format.BF16: (np.int16, torch.bfloat16, 0),
    Format.E4M3: (np.uint8, torch.float8_e4m3fn, 0),
    Format.E5M2: (np.uint8, torch.float8_e5m2, 0),
    Format.E4M3FNUZ: (np.uint8, torch.float8_e4m3fnuz, 0),
    Format.E5M2FNUZ: (np.uint8, torch.float8_e5m2fnuz, 0),
    Format.E3M2: (np.uint8, None, 0),
    Format.E2M3: (np.uint8, None, 0),
    Format.E2M1: (np.uint8, None, 2),
}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def make_op(arch: str, name: str):
    """The MMA-Sim operation for one of our (arch, instruction) names, or None when
    MMA-Sim does not have it."""
    from mmasim.amd import MFMA
    from mmasim.nv_ptx import MMA, WGMMA, TCGen05MMA

    mm_arch = ARCH_NAMES.get(arch)
    if mm_arch is None:
        return None
    try:
        if name.startswith("wgmma."):
            return WGMMA(mm_arch, name.removeprefix("wgmma."))
        if name.startswith("tcgen05."):
            return TCGen05MMA(mm_arch, name.removeprefix("tcgen05."))
        if name.startswith("v_mfma_"):
            return MFMA(mm_arch, name.removeprefix("v_mfma_"))
        return MMA(mm_arch, name)
    except AssertionError:
        return None


def to_torch(bits: np.ndarray, fmt: Format) -> torch.Tensor:
    """uint64 patterns of `fmt` as the tensor MMA-Sim expects for that operand type."""
    int_dt, float_dt, shift = _TORCH[fmt]
    w = fmt.spec.storage
    raw = (np.asarray(bits, dtype=np.uint64) << np.uint64(shift)).astype(_UNSIGNED[max(w, 8)])
    t = torch.from_numpy(np.ascontiguousarray(raw.view(int_dt)))
    return t if float_dt is None else t.view(float_dt)


def from_torch(d: torch.Tensor, fmt: Format) -> np.ndarray:
    """MMA-Sim's output tensor as uint64 patterns of `fmt`."""
    int_dt = _TORCH[fmt][0]
    w = fmt.spec.storage
    torch_int = {np.int64: torch.int64, np.int32: torch.int32, np.int16: torch.int16}[int_dt]
    raw = d.contiguous().view(torch_int).numpy()
    return raw.view(_UNSIGNED[w]).astype(np.uint64)


def run(op, p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """MMA-Sim's d for rows (a (N,K), b (N,K), c (N,)) of uint64 patterns."""
    with torch.no_grad():
        d = op.dpa(to_torch(a, p.a_fmt), to_torch(b, p.b_fmt), to_torch(c, p.c_fmt))
    return from_torch(d, p.d_fmt)


def nan_payload_unspecified(p: ModelParams) -> bool:
    """Whether only the NaN class of an output is specified: DMMA (SFMA) and every MFMA
    (SFMA, GPS, FDRDA, GFDRDA) return NaNs whose payload rule is unknown (MMA-Sim §V,
    "Special cases for NaNs"); the NVIDIA fused units' canonical NaNs are compared bit
    for bit."""
    return p.algorithm in (Algorithm.SFMA, Algorithm.GPS, Algorithm.FDRDA, Algorithm.GFDRDA)


def is_nan(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """NaN class of IEEE-coded output patterns (fp16/fp32/fp64 outputs)."""
    s = fmt.spec
    e = (bits >> np.uint64(s.mbits)) & np.uint64((1 << s.ebits) - 1)
    m = bits & np.uint64((1 << s.mbits) - 1)
    return (e == np.uint64((1 << s.ebits) - 1)) & (m != 0)


def mismatches(p: ModelParams, ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Row mask where the outputs disagree: bit for bit, except that two NaNs agree when
    the NaN payload is unspecified for this model."""
    diff = ours != theirs
    if nan_payload_unspecified(p):
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
    from tensorcore_smt.presets import PRESETS

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
