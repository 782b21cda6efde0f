"""MMA-Sim (the optional `mmasim` package, Xie et al. 2025's reference simulator) on our bit
patterns: the `mmasim` oracle of `tcsmt validate`, and the bridge the tests and the
benchmark use. Needs the `mmasim` extra (mmasim and torch); imported only on use.

Naming: our preset names map to MMA-Sim's architecture names (`ARCH_NAMES`); an `mma`
instruction is MMA-Sim's `shape_and_type` unchanged; `wgmma.X` is WGMMA('Hopper', X);
`tcgen05.X` is TCGen05MMA('Blackwell', X); `v_mfma_X` is MFMA(arch, X).

Operands travel as torch tensors viewed from integer tensors of the same width; FP6 and
FP4 operands are one per uint8 as MMA-Sim's `decode_uint8_to_fp6_fp4` reads them (FP6 in
bits 5:0, FP4 in bits 5:2), except for the K = 64 block-scaled FP4 forms, whose GST-FDPA
reads two FP4 per uint8 (`unpack_uint8_to_fp4`: element 2j in the high nibble).
A block-scaled `mma` name (`....block_scale.scale_vec::NX....`) is MMA-Sim's
MMABlockScale with `blockS`, S = K / N products per scale factor; the scale factors
travel as float8_e8m0fnu (ue8m0) or float8_e4m3fn (ue4m3) tensors of shape (N, K / S).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..formats import Format
from ..model.params import Algorithm, ModelParams
from .oracle_base import Oracle, OracleError

ARCH_NAMES = {
    "volta": "Volta",
    "turing": "Turing",
    "ampere": "Ampere",
    "ada": "Ada Lovelace",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
    "rtx-blackwell": "RTX Blackwell",
    "cdna1": "CDNA1",
    "cdna2": "CDNA2",
    "cdna3": "CDNA3",
}


def torch_formats() -> dict[Format, tuple[Any, Any, int]]:
    """format -> (numpy int dtype of the same width, torch float dtype to view it as, or
    None for the uint8-coded FP6/FP4, and the left shift MMA-Sim's uint8 coding applies)."""
    import torch

    return {
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


_SCALE_VEC = re.compile(
    r"^(?:tcgen05\.)?(m\d+n\d+k(\d+))\.(kind::\w+)\.block_scale\.scale_vec::(\d)X\.(.*)$"
)


def block_scale_name(name: str) -> str | None:
    """MMA-Sim's shape_and_type for one of our block-scaled mma names (scale_vec::NX
    becomes blockS with S = K / N), or None for any other name."""
    m = _SCALE_VEC.match(name)
    if m is None:
        return None
    shape, k, kind, vec, rest = m.groups()
    return f"{shape}.{kind}.block{int(k) // int(vec)}.{rest}"


def make_op(arch: str, name: str) -> Any:
    """The MMA-Sim operation for one of our (arch, instruction) names, or None when
    MMA-Sim does not have it."""
    from mmasim.amd import MFMA
    from mmasim.nv_ptx import MMA, WGMMA, MMABlockScale, TCGen05MMA, TCGen05MMABlockScale

    mm_arch = ARCH_NAMES.get(arch)
    if mm_arch is None:
        return None
    try:
        scaled = block_scale_name(name)
        if scaled is not None and name.startswith("tcgen05."):
            return TCGen05MMABlockScale(mm_arch, scaled)
        if scaled is not None:
            return MMABlockScale(mm_arch, scaled)
        if name.startswith("wgmma."):
            return WGMMA(mm_arch, name.removeprefix("wgmma."))
        if name.startswith("tcgen05."):
            return TCGen05MMA(mm_arch, name.removeprefix("tcgen05."))
        if name.startswith("v_mfma_"):
            return MFMA(mm_arch, name.removeprefix("v_mfma_"))
        return MMA(mm_arch, name)
    except AssertionError:
        return None


def to_torch(bits: np.ndarray, fmt: Format) -> Any:
    """uint64 patterns of `fmt` as the tensor MMA-Sim expects for that operand type."""
    import torch

    int_dt, float_dt, shift = torch_formats()[fmt]
    w = fmt.spec.storage
    raw = (np.asarray(bits, dtype=np.uint64) << np.uint64(shift)).astype(UNSIGNED[max(w, 8)])
    t = torch.from_numpy(np.ascontiguousarray(raw.view(int_dt)))
    return t if float_dt is None else t.view(float_dt)


def from_torch(d: Any, fmt: Format) -> np.ndarray:
    """MMA-Sim's output tensor as uint64 patterns of `fmt`."""
    import torch

    int_dt = torch_formats()[fmt][0]
    w = fmt.spec.storage
    torch_int = {np.int64: torch.int64, np.int32: torch.int32, np.int16: torch.int16}[int_dt]
    raw = d.contiguous().view(torch_int).numpy()
    return raw.view(UNSIGNED[w]).astype(np.uint64)


def scales_to_torch(bits: np.ndarray, fmt: Format) -> Any:
    """(N, S) uint64 scale-factor patterns as MMA-Sim's ue8m0 / ue4m3 tensors."""
    import torch

    dt = torch.float8_e8m0fnu if fmt == Format.UE8M0 else torch.float8_e4m3fn
    raw = np.ascontiguousarray(np.asarray(bits, dtype=np.uint64).astype(np.uint8))
    return torch.from_numpy(raw).view(dt)


def pack_fp4(bits: np.ndarray) -> Any:
    """(N, K) e2m1 patterns as (N, K/2) uint8, two per byte, element 2j in the high
    nibble (MMA-Sim helper.unpack_uint8_to_fp4)."""
    import torch

    x = np.asarray(bits, dtype=np.uint64).astype(np.uint8)
    packed = (x[:, 0::2] << np.uint8(4)) | x[:, 1::2]
    return torch.from_numpy(np.ascontiguousarray(packed))


def run(
    op: Any,
    p: ModelParams,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    sa: np.ndarray | None = None,
    sb: np.ndarray | None = None,
) -> np.ndarray:
    """MMA-Sim's d for rows (a (N,K), b (N,K), c (N,)) of uint64 patterns; a block-scaled
    instruction takes sa, sb (N, n_scales) too (None: every scale factor 1)."""
    import torch

    if p.scale_fmt is None:
        with torch.no_grad():
            d = op.dpa(to_torch(a, p.a_fmt), to_torch(b, p.b_fmt), to_torch(c, p.c_fmt))
        return from_torch(d, p.d_fmt)
    s = p.scale_fmt.spec
    if sa is None or sb is None:
        sa = sb = np.full((len(c), p.n_scales), s.bias << s.mbits, dtype=np.uint64)
    packed = getattr(op, "packing", 1) == 2
    ta = pack_fp4(a) if packed else to_torch(a, p.a_fmt)
    tb = pack_fp4(b) if packed else to_torch(b, p.b_fmt)
    with torch.no_grad():
        d = op.dpa(
            ta,
            tb,
            to_torch(c, p.c_fmt),
            scales_to_torch(sa, p.scale_fmt),
            scales_to_torch(sb, p.scale_fmt),
        )
    return from_torch(d, p.d_fmt)


AMD_ARCHS = frozenset(("cdna1", "cdna2", "cdna3"))
"""The architectures whose matrix units are MFMA (their NaN payloads are unspecified)."""


def nan_payload_unspecified(p: ModelParams, arch: str | None = None) -> bool:
    """Whether only the NaN class of an output is specified: DMMA (SFMA) and every MFMA
    (any AMD architecture, whatever its algorithm: SFMA, GPS, FDRDA, GFDRDA, CDNA1's
    fused groups) return NaNs whose payload rule is unknown (MMA-Sim §V, "Special cases
    for NaNs"); the NVIDIA fused units' canonical NaNs are compared bit for bit."""
    if arch is not None and arch.split("[")[0].strip() in AMD_ARCHS:
        return True
    return p.algorithm in (Algorithm.SFMA, Algorithm.GPS, Algorithm.FDRDA, Algorithm.GFDRDA)


def is_nan(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """NaN class of IEEE-coded output patterns (fp16/fp32/fp64 outputs)."""
    s = fmt.spec
    e = (bits >> np.uint64(s.mbits)) & np.uint64((1 << s.ebits) - 1)
    m = bits & np.uint64((1 << s.mbits) - 1)
    return (e == np.uint64((1 << s.ebits) - 1)) & (m != 0)


@dataclass
class MmasimOracle(Oracle):
    """MMA-Sim's simulation of the instruction as the oracle (`--oracle mmasim`)."""

    arch: str = ""
    instr: str = ""

    def _answer(self, a, b, c) -> np.ndarray:
        op = make_op(self.arch, self.instr)
        if op is None:
            raise OracleError(f"oracle {self.spec}: MMA-Sim has no {self.arch} {self.instr}")
        return run(op, self.p, a, b, c)


def make_mmasim_oracle(spec: str, p: ModelParams, arch: str, instr: str) -> MmasimOracle:
    """The `mmasim` oracle for an instruction (UserError if MMA-Sim is absent or lacks it)."""
    try:
        import mmasim  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise UserError(
            "oracle 'mmasim' needs MMA-Sim: pip install 'tensorcore-smt[mmasim]'"
        ) from None
    if make_op(arch, instr) is None:
        raise UserError(f"oracle 'mmasim': MMA-Sim does not simulate {arch} {instr}")
    return MmasimOracle(spec, p, arch=arch, instr=instr)


__all__ = [
    "ARCH_NAMES",
    "block_scale_name",
    "MmasimOracle",
    "from_torch",
    "is_nan",
    "make_mmasim_oracle",
    "make_op",
    "nan_payload_unspecified",
    "run",
    "to_torch",
]
