"""The probe that decides how a library turns fp32 operands into TF32 (schedule field
`operand_round`), its inputs and the model's prediction for each answer.

An fp32 value has 23 fraction bits, a TF32 operand 10: the 13 low bits go. The three
answers a kernel can give, and what each does to the 13 low bits `r` of a finite value
(the 10 kept bits ending in `lsb`):

- truncate: the unit reads the fp32 pattern and ignores r (PTX ISA: the .tf32 operand of
  mma is a .b32 register whose low 13 bits are not used): always toward zero;
- rne: rounded to nearest, ties to even (PTX cvt.rn.tf32.f32): up when r > 0x1000, or
  r = 0x1000 and lsb = 1;
- rna: rounded to nearest, ties away from zero (PTX cvt.rna.tf32.f32, the conversion of
  the Ampere-era PTX): up when r >= 0x1000.

So a value with r = 0x1000 and an even lsb tells rne from rna, one with r = 0x1000 and an
odd lsb or r > 0x1000 tells truncate from both, and r < 0x1000 checks that nothing rounds
up. A fourth answer, no TF32 at all (a full-fp32 kernel), keeps every value. Each
class is written with both signs and a spread of exponents.

`probe_inputs` gives V (n x n fp32) and the identity I; a library asked for V @ I and
I @ V with TF32 allowed (torch.set_float32_matmul_precision("high")) returns each value
of V as its conversion turns it into TF32 (one product a nonzero term of each output:
exact in any order), for the A side and the B side. `predictions` computes those outputs
with the model for each answer (tensorcore_smt.matmul, `operand_round`), and `decide`
names the answers an observation agrees with. `python -m tensorcore_smt.gemm.tf32_probe`
runs it on torch's CUDA device and prints the verdict as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from .schedule import OperandRound

FULL_FP32 = "full-fp32"
"""The answer 'no TF32': the kernel multiplies in full fp32 (FFMA)."""

CLASSES = {
    "tie-even": 0x1000,  # exactly half, kept lsb even: rne down, rna up, truncate down
    "tie-odd": 0x1000,  # exactly half, kept lsb odd: rne up, rna up, truncate down
    "above": 0x1001,  # just above half: rne and rna up, truncate down
    "below": 0x0FFF,  # just below half: all down
}


def probe_values(n: int = 64, seed: int = 0) -> np.ndarray:
    """An n x n fp32 matrix whose entries cycle through CLASSES, both signs, exponents
    from 2^-20 to 2^20 and random kept fraction bits (lsb set by the class)."""
    rng = np.random.default_rng(seed)
    kinds = list(CLASSES)
    out = np.empty(n * n, dtype=np.uint32)
    for i in range(n * n):
        kind = kinds[i % len(kinds)]
        sign = (i // len(kinds)) % 2
        exp = 127 + int(rng.integers(-20, 21))
        kept = int(rng.integers(0, 1 << 10)) & ~1
        if kind == "tie-odd":
            kept |= 1
        frac = (kept << 13) | CLASSES[kind]
        out[i] = (sign << 31) | (exp << 23) | frac
    return out.view(np.float32).reshape(n, n)


def probe_inputs(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(V, I): the probe values and the n x n fp32 identity."""
    return probe_values(n, seed), np.eye(n, dtype=np.float32)


Prediction = tuple[np.ndarray, np.ndarray]
"""The bits (uint32) of V @ I and of I @ V."""


def predictions(arch: str = "hopper", n: int = 64, seed: int = 0) -> dict[str, Prediction]:
    """The model's V @ I and I @ V for each answer: every OperandRound value (its
    name) on the architecture's TF32 instruction, and FULL_FP32 on its full-fp32 one."""
    from .emulate import matmul
    from .hypothesis import full_fp32_instruction

    V, eye = probe_inputs(n, seed)
    out: dict[str, Prediction] = {}
    for mode in OperandRound:
        hyp = f"{arch}/serial[operand_round={mode.value}]"
        out[mode.value] = (_bits(matmul(hyp, V, eye)), _bits(matmul(hyp, eye, V)))
    instr = full_fp32_instruction(arch)
    out[FULL_FP32] = (
        _bits(matmul(arch, V, eye, instr=instr)),
        _bits(matmul(arch, eye, V, instr=instr)),
    )
    return out


def _bits(x: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def decide(observed: Prediction, arch: str = "hopper", n: int = 64, seed: int = 0) -> dict:
    """For each answer, how many outputs of V @ I (A side) and I @ V (B side) the
    observation matches, and the answers it matches on every output."""
    table = {}
    for name, (pa, pb) in predictions(arch, n, seed).items():
        table[name] = {
            "a_side": int((pa == observed[0]).sum()),
            "b_side": int((pb == observed[1]).sum()),
        }
    whole = n * n
    agree = [k for k, v in table.items() if v["a_side"] == whole and v["b_side"] == whole]
    return {"outputs": whole, "matches": table, "agrees_with": agree}


def run_torch(device: str = "cuda", n: int = 64, seed: int = 0) -> Prediction:
    """V @ I and I @ V on torch's `device` with TF32 allowed (float32 matmul precision
    "high"), the previous precision restored."""
    import torch

    V, eye = probe_inputs(n, seed)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        tv, ti = torch.from_numpy(V).to(device), torch.from_numpy(eye).to(device)
        d1, d2 = (tv @ ti).cpu().numpy(), (ti @ tv).cpu().numpy()
    finally:
        torch.set_float32_matmul_precision(before)
    return _bits(d1), _bits(d2)


def main(argv: list[str]) -> int:
    """`python -m tensorcore_smt.gemm.tf32_probe [DEVICE]`: the verdict as JSON."""
    import torch

    device = argv[0] if argv else "cuda"
    verdict = decide(run_torch(device))
    verdict["device"] = torch.cuda.get_device_name() if device.startswith("cuda") else device
    verdict["torch"] = torch.__version__
    print(json.dumps(verdict, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover - needs a GPU
    sys.exit(main(sys.argv[1:]))
