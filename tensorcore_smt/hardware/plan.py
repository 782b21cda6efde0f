"""What the hardware campaign covers: the instructions every property is probed on, and
the competing hypotheses whose agreement with the silicon the validation also counts."""

from __future__ import annotations

import re

from ..errors import UserError
from ..spec.presets import parse_variant

PROBED: dict[str, tuple[str, ...]] = {
    # The instructions every property is probed on: each operand type and output type of
    # the legacy mma.sync path and of the warpgroup (wgmma) path.
    "hopper": (
        "m16n8k16.f32.f16.f16.f32",
        "m16n8k16.f16.f16.f16.f16",
        "m16n8k16.f32.bf16.bf16.f32",
        "m16n8k8.f32.tf32.tf32.f32",
        "m16n8k32.f32.e4m3.e4m3.f32",
        "m16n8k32.f16.e4m3.e4m3.f16",
        "m16n8k32.f32.e5m2.e5m2.f32",
        "wgmma.m64n8k16.f32.f16.f16",
        "wgmma.m64n8k16.f16.f16.f16",
        "wgmma.m64n8k16.f32.bf16.bf16",
        "wgmma.m64n8k8.f32.tf32.tf32",
        "wgmma.m64n8k32.f32.e4m3.e4m3",
        "wgmma.m64n8k32.f16.e4m3.e4m3",
    ),
}

FDA_INPUTS = r"\.(f16|bf16|tf32|e4m3|e5m2)\."
"""The instructions of the fused dot-product unit (not DMMA's f64 FMA chain)."""

INT_SATFINITE = r"\.satfinite\.s32\."
"""The integer instructions with `.satfinite`."""

INT_WRAP = r"^(wgmma\.)?m\d+n\d+k\d+\.s32\.[su][48]\."
"""The integer multiply forms without `.satfinite` (s32 wraps)."""

ALTERNATIVES: dict[str, tuple[tuple[str, str], ...]] = {
    # Competing hypotheses whose agreement with the silicon the validation also counts
    # (a mismatch of the preset is then explained, or not, by a named belief), each with
    # the instructions it is a belief about (a regular expression on the name).
    "hopper": (
        ("matlab-h100-fp8", r"\.f32\.e[45]m[23]\."),
        ("matlab-h100-fp8-f16", r"\.f16\.e[45]m[23]\."),
        ("hopper[F=24]", FDA_INPUTS),
        ("hopper[F=26]", FDA_INPUTS),
        ("hopper[e_zero=none]", FDA_INPUTS),
        ("hopper[product_exponent=normalized]", FDA_INPUTS),
        # integer forms: wrap-around against saturation, and the clamp applied to every
        # partial sum (L=1) rather than once to the exact sum (model/integer.py)
        ("hopper[int_clamp=wrap]", INT_SATFINITE),
        ("hopper[L=1]", INT_SATFINITE),
        ("hopper[int_clamp=satfinite]", INT_WRAP),
    ),
}

MISMATCHES_KEPT = 500
"""Mismatching rows saved per instruction in its mismatch file (all are counted)."""


def alternatives(arch: str, instr: str) -> list[str]:
    """The named alternatives that are a belief about `instr` and a different model of it
    than the preset's own."""
    return [
        v
        for v, about in ALTERNATIVES.get(arch, ())
        if re.search(about, instr) and _differs(v, instr)
    ]


def _differs(variant: str, instr: str) -> bool:
    try:
        v = parse_variant(variant)
        return v.params(instr) != v.preset.instructions[instr].params
    except (UserError, KeyError, ValueError):
        return False


__all__ = [
    "ALTERNATIVES",
    "FDA_INPUTS",
    "INT_SATFINITE",
    "INT_WRAP",
    "MISMATCHES_KEPT",
    "PROBED",
    "alternatives",
]
