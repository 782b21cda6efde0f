"""Constraints from their text: the options of the property library (`--integer`,
`--exponent-window`, `--representable`, `--fix`) and the certificates' `--where`."""

from __future__ import annotations

import re

from ..errors import UserError
from ..formats import Format, parse_hex
from .constraints import Constraint
from .kinds import ConstraintKind
from .operands import Operand

UNRESOLVED = "?"
"""The operand of a fix constraint parsed before its query exists."""

FLAGS = {
    "normal-only": ConstraintKind.NORMAL_ONLY,
    "nonzero": ConstraintKind.NONZERO,
    "positive": ConstraintKind.POSITIVE,
    "negative": ConstraintKind.NEGATIVE,
    "finite": ConstraintKind.FINITE,
    "no-overflow": ConstraintKind.NO_OVERFLOW,
    "no-underflow": ConstraintKind.NO_UNDERFLOW,
}
"""The `--where` constraints named by a word alone (the first four take operands)."""


def parse_integer(text: str) -> Constraint:
    """`P` or `OPERANDS=P` (e.g. `ab=7`): inputs that are integers of at most P bits."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?(\d+)\s*", text)
    if not m or int(m.group(2)) < 1:
        raise UserError(f"--integer: expected P or OPERANDS=P with P >= 1 bits, got {text!r}")
    return Constraint(ConstraintKind.INTEGER, m.group(1) or "abc", lo=int(m.group(2)))


def parse_window(text: str) -> Constraint:
    """`LO:HI` or `OPERANDS=LO:HI` (e.g. `ab=-15:14`) as an exponent-window constraint."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?(-?\d+):(-?\d+)\s*", text)
    if not m:
        raise UserError(f"--exponent-window: expected LO:HI or OPERANDS=LO:HI, got {text!r}")
    lo, hi = int(m.group(2)), int(m.group(3))
    if lo > hi:
        raise UserError(f"--exponent-window: LO {lo} is above HI {hi}")
    return Constraint(ConstraintKind.EXPONENT_WINDOW, m.group(1) or "abc", lo, hi)


def parse_representable(text: str) -> Constraint:
    """`FMT` or `OPERANDS=FMT` (e.g. `ab=fp16`): inputs that are zero or normal FMT numbers."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?([A-Za-z0-9_]+)\s*", text)
    if not m:
        raise UserError(f"--representable: expected FMT or OPERANDS=FMT, got {text!r}")
    try:
        fmt = Format.parse(m.group(2))
    except ValueError as e:
        raise UserError(f"--representable: {e}") from None
    return Constraint(ConstraintKind.REPRESENTABLE, m.group(1) or "abc", fmt=fmt)


def parse_fix(text: str, q_operands: list[Operand]) -> Constraint:
    """`a0=0x3c00` as a FIX constraint, the hex checked against the input's format."""
    if "=" not in text:
        raise UserError(f"--fix: expected NAME=HEX, got {text!r}")
    name, value = (s.strip() for s in text.split("=", 1))
    ops = {o.name: o for o in q_operands}
    if name not in ops:
        raise UserError(f"--fix {name}: no such input; inputs are {', '.join(ops)}")
    return Constraint(ConstraintKind.FIX, name, bits=parse_hex(value, ops[name].fmt, name))


def parse_where(text: str) -> Constraint:
    """One `--where` constraint: a flag (normal-only, nonzero, positive, negative), or
    KIND:ARG (exponent-window:ab=-4:4, representable:ab=fp16, integer:ab=7, terms:4,
    fix:c=0x3f800000; a fix's operand is UNRESOLVED until its query exists)."""
    kind, _, arg = text.strip().partition(":")
    if kind in FLAGS:
        if arg and kind not in ("normal-only", "nonzero", "positive", "negative"):
            raise UserError(f"--where {text}: {kind} takes no argument")
        ops = arg or "abc"
        if any(ch not in "abc" for ch in ops):
            raise UserError(f"--where {text}: operands are letters of abc")
        return Constraint(FLAGS[kind], ops)
    if kind == "exponent-window":
        return parse_window(arg)
    if kind == "representable":
        return parse_representable(arg)
    if kind == "integer":
        return parse_integer(arg)
    if kind == "terms":
        try:
            n = int(arg)
        except ValueError:
            raise UserError(f"--where {text}: expected terms:N") from None
        if n < 0:
            raise UserError(f"--where {text}: N is negative")
        return Constraint(ConstraintKind.TERMS, "ab", lo=n)
    if kind == "fix":
        # the input's format is known only with the query: resolve_fixes checks the hex
        return Constraint(ConstraintKind.FIX, UNRESOLVED, bits=0, reason=arg)
    known = ", ".join(list(FLAGS) + ["exponent-window", "representable", "integer", "terms", "fix"])
    raise UserError(f"--where {text}: unknown constraint {kind!r}; known: {known}")


def resolve_fixes(
    constraints: tuple[Constraint, ...], operands: list[Operand]
) -> tuple[Constraint, ...]:
    """Fix constraints parsed from text (UNRESOLVED), checked against `operands`."""
    return tuple(
        parse_fix(c.reason, operands)
        if c.kind == ConstraintKind.FIX and c.operands == UNRESOLVED
        else c
        for c in constraints
    )
