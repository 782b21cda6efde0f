"""A constraint of an input class as data: its kind, the inputs it restricts, the option
that states it, the format it is stated in, and its two meanings (symbolic.py,
concrete.py) as methods."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..bv.core import BV, Bool
from ..formats import Format
from ..model.params import ModelParams
from . import concrete, symbolic
from .kinds import GLOBAL_KINDS, ZERO_KINDS, ConstraintKind
from .operands import split_name


def output_format(p: ModelParams, out: Format | None = None) -> Format:
    """The format the class-wide constraints (and the normwise measure's floor 2^e_min)
    are stated in: the instruction's d, or for a GEMM schedule whose output format is
    `out`, the one of the two with the larger e_min (the narrower range: below it the
    result's bits are lost whatever the unit does)."""
    if out is None or out.spec.emin < p.d_fmt.spec.emin:
        return p.d_fmt
    return out


@dataclass(frozen=True)
class Constraint:
    """One input restriction. `operands` picks the operand groups it applies to
    (letters of "abc"), or, for FIX, the single input named (`a0`, `b3`, `c`)."""

    kind: ConstraintKind
    operands: str = "abc"
    lo: int | None = None
    hi: int | None = None
    bits: int | None = None
    reason: str = ""
    fmt: Format | None = None  # REPRESENTABLE: the narrower format
    positions: tuple[int, ...] = ()  # UNSELECTED: the k where a_k = +0
    meta_text: str = ""  # UNSELECTED: the metadata as --meta takes it

    @property
    def class_wide(self) -> bool:
        """Whether the constraint is on the inputs together (kinds.GLOBAL_KINDS)."""
        return self.kind in GLOBAL_KINDS

    def applies_to(self, name: str) -> bool:
        """Whether the constraint restricts input `name` (both input sets of a
        non-monotone query alike, except FIX, which names one input)."""
        if self.kind == ConstraintKind.FIX:
            return name == self.operands
        if self.kind in GLOBAL_KINDS or name[:2] in ("sa", "sb"):
            return False  # class-wide; or a block scale factor, which no a/b/c group holds
        group, index, _ = split_name(name)
        if self.kind == ConstraintKind.TERMS:
            return group in "ab" and index >= (self.lo if self.hi is None else self.hi)
        if self.kind == ConstraintKind.ZERO_K:
            return group in "ab" and self.lo <= index < self.hi
        if self.kind == ConstraintKind.UNSELECTED:
            return group == "a" and index in self.positions
        return group in self.operands

    def restricts_group(self, group: str) -> bool:
        """Whether the constraint restricts every input of operand group `group` ("a",
        "b" or "c") as a per-input constraint on its values (not FIX, not the kinds that
        fix some positions at +0, not a class-wide one)."""
        if self.kind in GLOBAL_KINDS or self.kind == ConstraintKind.FIX:
            return False
        if self.kind in (ConstraintKind.TERMS, ConstraintKind.ZERO_K, ConstraintKind.UNSELECTED):
            return False
        return group in self.operands

    def stated_in(self, group: str, p: ModelParams, out: Format | None = None) -> Format:
        """The format the constraint reads its values in: an input's own format for a
        per-input constraint on group `group`; for a class-wide one, the output's: the
        instruction's d, or (a GEMM schedule with an output format `out`) the one of
        the two with the larger e_min (implications.gemm_class)."""
        if self.kind in GLOBAL_KINDS:
            return output_format(p, out)
        return {"a": p.a_fmt, "b": p.b_fmt, "c": p.c_fmt}[group]

    def holds(self, x: BV, fmt: Format) -> Bool:
        """Whether the input `x` (format `fmt`) satisfies this constraint, as a term on
        x's interpreter (symbolic.holds)."""
        return symbolic.holds(self, x, fmt)

    def mask(self, bits: np.ndarray, fmt: Format) -> np.ndarray:
        """Which patterns `bits` of `fmt` satisfy this constraint (concrete.mask)."""
        return concrete.mask(self, bits, fmt)

    def describe(self) -> str:
        """The constraint as the command-line option that sets it."""
        if self.kind == ConstraintKind.FIX:
            return f"--fix {self.operands}={self.bits:#x}"
        if self.kind == ConstraintKind.TERMS:
            return f"--terms {self.lo}"
        if self.kind == ConstraintKind.ZERO_K:
            return f"--zero-k {self.lo}:{self.hi}"
        if self.kind == ConstraintKind.UNSELECTED:
            return f"--meta {self.meta_text}"
        sel = "" if self.operands == "abc" else f"{self.operands}="
        if self.kind == ConstraintKind.EXPONENT_WINDOW:
            return f"--exponent-window {sel}{self.lo}:{self.hi}"
        if self.kind == ConstraintKind.REPRESENTABLE:
            return f"--representable {sel}{self.fmt.spec.name}"
        if self.kind == ConstraintKind.INTEGER:
            return f"--integer {sel}{self.lo}"
        return f"--{self.kind.value}" + (f" {self.operands}" if sel else "")


def fixed_values(constraints: tuple[Constraint, ...], names: list[str]) -> dict[str, int]:
    """The inputs among `names` the class fixes: FIX to its pattern, and +0 where a
    constraint of kinds.ZERO_KINDS leaves products (or a sparse row's entries) out."""
    out: dict[str, int] = {}
    for cn in constraints:
        if cn.kind == ConstraintKind.FIX:
            out[cn.operands] = cn.bits
        elif cn.kind in ZERO_KINDS:
            out.update({n: 0 for n in names if cn.applies_to(n)})
    return out
