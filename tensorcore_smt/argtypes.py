"""The types the public API's arguments take, checked in one place.

Every entry of the API (tc.bound, tc.reveal, tc.matmul, tc.emulate, tc.simulate_stream,
...) calls `check` on its arguments before any work: a value of the wrong type, or a
number outside its range (nan, a negative time budget), is a UserError naming the
argument and what it takes, never an AttributeError or TypeError from deep inside.
Values of the right type are judged further by the code that reads them (a variant
expression parsed, an instruction looked up).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from enum import Enum
from fractions import Fraction
from typing import Any

from .errors import UserError


class Arg(Enum):
    """What an argument takes (`RULES` says how each is checked and named)."""

    TEXT = "text"  # a str
    INTEGER = "integer"  # an int (numpy integers too), not a bool
    BOOL = "bool"
    POSITIVE = "positive"  # a real number > 0, finite (int, float, Fraction, numpy)
    RATIONAL = "rational"  # a real number, finite; or a str Fraction reads ("1/16")
    SHAPE = "shape"  # (M, N): two positive integers
    INTEGERS = "integers"  # a list or tuple of ints
    LIST = "list"  # a list (filled in by the callee)
    MAPPING = "mapping"  # a dict


def _integer(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _rational(v: Any) -> bool:
    if isinstance(v, str):
        try:
            Fraction(v.strip())
        except (ValueError, ZeroDivisionError):
            return False
        return True
    return _real(v) and math.isfinite(v)


RULES: dict[Arg, tuple[Callable[[Any], bool], str]] = {
    Arg.TEXT: (lambda v: isinstance(v, str), "a string"),
    Arg.INTEGER: (_integer, "an integer"),
    Arg.BOOL: (lambda v: isinstance(v, bool), "True or False"),
    Arg.POSITIVE: (lambda v: _real(v) and math.isfinite(v) and v > 0, "a finite number > 0"),
    Arg.RATIONAL: (_rational, "a finite number or a string p/q"),
    Arg.SHAPE: (
        lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(_integer(x) for x in v),
        "a pair of integers (M, N)",
    ),
    Arg.INTEGERS: (
        lambda v: isinstance(v, (tuple, list)) and all(_integer(x) for x in v),
        "a list of integers",
    ),
    Arg.LIST: (lambda v: isinstance(v, list), "a list"),
    Arg.MAPPING: (lambda v: isinstance(v, dict), "a dict"),
}
"""How each kind of argument is checked, and its description in the message."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check(name: str, value: Any, kind: Arg, *, optional: bool = False, also: str = "") -> None:
    """UserError naming `name` unless `value` is of `kind` (None passes when `optional`;
    `also` names further types the caller reads, for the message)."""
    if value is None and optional:
        return
    ok, what = RULES[kind]
    if not ok(value):
        takes = what + (f" or {also}" if also else "") + (" or None" if optional else "")
        raise UserError(f"{name}: expected {takes}, got {_shown(value)} ({type(value).__name__})")


def check_type(
    name: str, value: Any, types: tuple[type, ...], what: str, *, optional: bool = False
) -> None:
    """UserError naming `name` unless `value` is an instance of one of `types` (`what`
    describes them; None passes when `optional`)."""
    if value is None and optional:
        return
    if not isinstance(value, types):
        takes = what + (" or None" if optional else "")
        raise UserError(f"{name}: expected {takes}, got {_shown(value)} ({type(value).__name__})")


def check_items(name: str, value: Any, cls: type, what: str) -> None:
    """UserError naming `name` unless `value` is a list or tuple of `cls` instances."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, cls) for x in value):
        raise UserError(
            f"{name}: expected a list or tuple of {what}, got {_shown(value)} "
            f"({type(value).__name__})"
        )


def check_all(func: str, specs: list[tuple[str, Any, Arg, bool]]) -> None:
    """`check` each (name, value, kind, optional) of a call to `func` (the message names
    the function and the argument)."""
    for name, value, kind, optional in specs:
        try:
            check(name, value, kind, optional=optional)
        except UserError as e:
            raise UserError(f"{func}: {e}") from None
