"""Published models of matrix units as named hypotheses (archs/published.toml).

Each hypothesis is a preset with the values a publication states, read in the
publication's own notions (a significand width, a group of terms, a zero exponent) and
mapped to model parameters by one table (`NOTIONS`), plus the parameters its structure
implies; everything else is the preset's. The hypotheses are aliases like those of
archs/aliases.toml (spec.variants reads both), so `tcsmt diff hawkeye-hopper-fp8 hopper
--instr wgmma.m64n8k32.f32.e4m3.e4m3` works as for any variant. docs/published.md says
what each source states and how it maps.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path

from ..model.params import parse_value
from .datadirs import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PUBLISHED_TOML: Path = data_dir("archs") / "published.toml"
"""The table of publications and their hypotheses."""


class Read(Enum):
    """How a source's values were taken."""

    TEXT = "text"  # from the publication's own text
    CODE = "code"  # from the code it publishes
    SUMMARY = "summary"  # as the project's issue 44 summarises them; the text not read here


@dataclass(frozen=True)
class Source:
    """One publication."""

    key: str
    cite: str  # authors and year, as reports print it
    authors: str
    title: str
    where: str
    read: Read


def _minus_one(n: object) -> int:
    return int(n) - 1  # type: ignore[call-overload]


NOTIONS: dict[str, tuple[str, Callable[[object], object]]] = {
    "significand_bits": ("F", _minus_one),
    "group_terms": ("L", _minus_one),
    "zero_exponent": ("e_zero", int),  # type: ignore[dict-item]
    "subnormals_normalised": (
        "product_exponent",
        lambda b: "normalized" if b else "unnormalized",
    ),
    "output_rounding": ("rounding", str),
}
"""A source notion -> (the model parameter it sets, its value from the source's). The
aligned significand counts its leading bit (F does not); a group of n terms is n - 1
products and c; a zero exponent is the exponent a zero term brings to the maximum
exponent (e_zero), so no term aligns below e_zero - F; subnormals not normalised means a
product's exponent is its operands' exponents summed, each floored at its format's
emin (product_exponent = unnormalized), as for every product of this model."""


@dataclass(frozen=True)
class Hypothesis:
    """One published model of one unit: the preset it varies, the instructions it speaks
    of, the values its source states and the parameters they set."""

    name: str
    source: Source
    base: str
    instructions: tuple[str, ...]
    where: str
    stated: tuple[tuple[str, object], ...]  # in the source's notions, as the table gives them
    implied: tuple[tuple[str, object], ...]

    @property
    def parameters(self) -> tuple[tuple[str, object], ...]:
        """The model parameters the stated and implied values set, in table order."""
        out: dict[str, object] = {}
        for notion, value in self.stated:
            param, convert = NOTIONS.get(notion, (notion, lambda v: v))
            out[param] = convert(value)
        for param, value in self.implied:
            if param in out:
                raise ValueError(f"{param} is both stated and implied")
            out[param] = value
        return tuple(out.items())

    @property
    def variant(self) -> str:
        """The variant expression: the base preset with the parameters set."""
        body = ",".join(f"{k}={spell(v)}" for k, v in self.parameters)
        return f"{self.base}[{body}]" if body else self.base

    @property
    def summary(self) -> str:
        """Where the hypothesis comes from, in one line (as `tcsmt list archs` shows it)."""
        how = {
            Read.TEXT: "",
            Read.CODE: "",
            Read.SUMMARY: " (values as issue 44 summarises them; source text not read here)",
        }[self.source.read]
        return f"{self.source.cite}, {self.where}{how}"


def spell(value: object) -> str:
    """A parameter value as a variant expression writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@cache
def load(path: Path = PUBLISHED_TOML) -> tuple[dict[str, Source], dict[str, Hypothesis]]:
    """The sources and hypotheses of the table (ValueError naming a malformed entry; each
    parameter value checked by the parameter's own parser)."""
    data = tomllib.loads(path.read_text())
    sources = {
        key: Source(key, s["cite"], s["authors"], s["title"], s["where"], Read(s["read"]))
        for key, s in data.get("source", {}).items()
    }
    hyps: dict[str, Hypothesis] = {}
    for name, h in data.get("published", {}).items():
        if h["source"] not in sources:
            raise ValueError(f"published.{name}: unknown source {h['source']!r}")
        hyp = Hypothesis(
            name,
            sources[h["source"]],
            h["base"],
            tuple(h["instructions"]),
            h["where"],
            tuple(h.get("stated", {}).items()),
            tuple(h.get("implied", {}).items()),
        )
        try:
            for param, value in hyp.parameters:
                parse_value(param, spell(value))  # ValueError: an unknown name or value
        except ValueError as e:
            raise ValueError(f"published.{name}: {e}") from None
        hyps[name] = hyp
    return sources, hyps


def sources() -> dict[str, Source]:
    """Every publication of the table, by key."""
    return load()[0]


def hypotheses() -> dict[str, Hypothesis]:
    """Every published hypothesis, by name."""
    return load()[1]


def aliases() -> dict[str, tuple[str, str]]:
    """name -> (variant expression, where it comes from), as spec.variants.ALIASES holds
    the aliases of archs/aliases.toml."""
    return {n: (h.variant, h.summary) for n, h in hypotheses().items()}


def own_instructions(name: str) -> tuple[str | None, ...]:
    """The instructions a named hypothesis speaks of: a published one's own (it may set
    parameters that only those instructions' units read, e.g. GDFS's G), any other
    alias's preset default (None)."""
    h = hypotheses().get(name)
    return h.instructions if h is not None else (None,)
