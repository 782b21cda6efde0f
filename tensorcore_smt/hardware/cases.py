"""Public cases run on the GPU: inputs that others reported for an H100, run through the
instruction on the local GPU (the cuda oracle) and compared with the presets' predictions.

- MATLAB-TC issue #2: wgmma m64n256k16.f32.bf16.bf16 with scale-d = 0 (D = A·B) on the
  bf16 vectors given there. An output element of wgmma is one dot product of depth 16
  whatever N, so the m64n8k16 form computes the same element; c = +0 stands for
  scale-d = 0 (equal except for the sign of an exact zero, which these inputs do not
  give).
- DeepGEMM issue #37: A = B = 0 and C = 0x40403017 through FP8 mma.sync m16n8k32 and
  FP8 wgmma: does c pass through unchanged, or does the unit's E8M13 accumulator cut it?
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError

MATLAB_TC_2_A = "9b23 17c3 1b6a 999d 9a2c 9b05 1aab 9af3 9a4d 1a7c 9a42 19dc 99d3 1ac5 9b36 1ab9"
MATLAB_TC_2_B = "1884 1923 1af9 9b09 9b52 9a4a 1afe 9a82 9ac9 9b75 9abc 18ed 9acf 9a50 9b4a 1b0f"


@dataclass(frozen=True)
class Case:
    """One public case: the instruction, the inputs (bit patterns) and the models whose
    predictions are compared with the GPU's answer."""

    name: str
    source: str
    arch: str
    instr: str
    a: tuple[int, ...]
    b: tuple[int, ...]
    c: int
    models: tuple[str, ...] = field(default_factory=tuple)


def _hex(s: str) -> tuple[int, ...]:
    return tuple(int(x, 16) for x in s.split())


CASES: tuple[Case, ...] = (
    Case(
        "matlab-tc-2",
        "MATLAB-TC issue #2 (H100 wgmma m64n256k16.f32.bf16.bf16, scale-d = 0)",
        "hopper",
        "wgmma.m64n8k16.f32.bf16.bf16",
        _hex(MATLAB_TC_2_A),
        _hex(MATLAB_TC_2_B),
        0,
        ("hopper", "hopper[F=24]", "hopper[F=26]"),
    ),
    Case(
        "matlab-tc-2-mma",
        "MATLAB-TC issue #2's inputs through mma.sync m16n8k16.f32.bf16.bf16.f32",
        "hopper",
        "m16n8k16.f32.bf16.bf16.f32",
        _hex(MATLAB_TC_2_A),
        _hex(MATLAB_TC_2_B),
        0,
        ("hopper", "hopper[F=24]", "hopper[F=26]", "ampere"),
    ),
    Case(
        "deepgemm-37-mma",
        "DeepGEMM issue #37 (A = B = 0, C = 0x40403017), FP8 mma.sync",
        "hopper",
        "m16n8k32.f32.e4m3.e4m3.f32",
        (0,) * 32,
        (0,) * 32,
        0x40403017,
        ("hopper", "matlab-h100-fp8"),
    ),
    Case(
        "deepgemm-37-wgmma",
        "DeepGEMM issue #37 (A = B = 0, C = 0x40403017), FP8 wgmma",
        "hopper",
        "wgmma.m64n8k32.f32.e4m3.e4m3",
        (0,) * 32,
        (0,) * 32,
        0x40403017,
        ("hopper", "hopper[F=24]", "matlab-h100-fp8"),
    ),
)


def predictions(case: Case) -> dict[str, str]:
    """Each model's d for the case, as hex ('error: ...' where a model has no such form)."""
    from ..api import simulate

    out = {}
    a = np.array([case.a], dtype=np.uint64)
    b = np.array([case.b], dtype=np.uint64)
    c = np.array([case.c], dtype=np.uint64)
    for model in case.models:
        try:
            out[model] = f"0x{int(simulate(model, case.instr, a, b, c)[0]):08x}"
        except UserError as e:
            out[model] = f"error: {e}"
    return out


def run_cases(out: Path, cases: tuple[Case, ...] = CASES) -> list[dict]:
    """Every case on the local GPU (cuda oracle) beside the models' predictions; writes
    out/cases.json and returns its rows."""
    from ..identify.oracle import make_oracle
    from ..spec.presets import parse_variant

    rows = []
    work = Path(tempfile.gettempdir()) / "tcsmt-runners"
    for case in cases:
        row: dict = {"case": case.name, "source": case.source, "instr": case.instr}
        row["a"] = " ".join(f"{x:02x}" for x in case.a)
        row["b"] = " ".join(f"{x:02x}" for x in case.b)
        row["c"] = f"0x{case.c:08x}"
        row["predicted"] = predictions(case)
        try:
            p = parse_variant(case.arch).params(case.instr)
            orc = make_oracle(f"cuda:{work}", p, case.arch, case.instr)
            d = orc.ask(
                np.array([case.a], np.uint64),
                np.array([case.b], np.uint64),
                np.array([case.c], np.uint64),
            )
            row["gpu"] = f"0x{int(d[0]):08x}"
            row["agree"] = sorted(m for m, v in row["predicted"].items() if v == row["gpu"])
        except UserError as e:
            row["error"] = str(e)
        print(f"case {json.dumps(row)}", flush=True)
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


__all__ = ["CASES", "Case", "predictions", "run_cases"]
