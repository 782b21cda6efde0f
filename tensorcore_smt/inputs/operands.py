"""The inputs of one output element by name: a0.., b0.., c, and the second input set's
copies a0_2.., c_2 of a non-monotone query (Fasi et al. §III-D5)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..formats import Format

GROUPS = "abc"
"""The operand groups: the entries of A's row, of B's column, and the addend c."""

SECOND = "_2"
"""Suffix of the second input set's operands (goal non-monotone)."""


def split_name(name: str) -> tuple[str, int | None, bool]:
    """`a3_2` -> ("a", 3, True); `c` -> ("c", None, False): operand group, index, and
    whether the operand belongs to the second input set."""
    m = re.fullmatch(r"([abc])(\d*)(_2)?", name)
    if not m:
        raise ValueError(f"not an operand name: {name!r}")
    return m.group(1), int(m.group(2)) if m.group(2) else None, bool(m.group(3))


@dataclass(frozen=True)
class Operand:
    """One declared input: its SMT name (a0.., b0.., c) and format."""

    name: str
    fmt: Format

    @property
    def width(self) -> int:
        return self.fmt.spec.storage
