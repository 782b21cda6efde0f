"""Variant expressions: a preset with parameter overrides (`volta[carry_bits=2]`), or a
named hypothesis (an alias, archs/aliases.toml), parsed into a Variant that gives the
model of any of the preset's instructions; instruction names as users spell them (full
PTX mnemonics, any N) normalised to the catalogue's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..argtypes import Arg, check
from ..errors import UserError
from ..model.params import ModelParams, Sparsity, Split, check_overrides, parse_value
from .catalogue import PRESETS, Instruction, Preset, TableError, read_tables
from .published import aliases as published_aliases

ALIASES: dict[str, tuple[str, str]] = {
    **published_aliases(),
    **{name: (row["variant"], row["source"]) for name, row in read_tables(None).aliases.items()},
}
"""name -> (variant expression, where the hypothesis comes from): the published models
(archs/published.toml, spec.published) first, then the aliases of archs/aliases.toml."""
if len(ALIASES) != len(published_aliases()) + len(read_tables(None).aliases):
    raise TableError("a name is both a published model and an alias in archs/")

_VARIANT_RE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\[(.*)\])?\s*$")


@dataclass(frozen=True)
class Variant:
    """A preset with parameter overrides, e.g. `volta[carry_bits=2]`."""

    text: str
    preset: Preset
    overrides: tuple[tuple[str, object], ...]

    def instruction(self, instr: str | None) -> Instruction:
        name = instr or self.preset.default_instr
        inst = self.preset.instructions.get(name) or self.preset.instructions.get(
            _normalise_instr(name)
        )
        if inst is None:
            raise UserError(
                f"unknown instruction {name!r} for {self.preset.name}; "
                f"see `tcsmt list archs` ({len(self.preset.instructions)} instructions)"
            )
        return inst

    def params(self, instr: str | None = None) -> ModelParams:
        """The model of `instr` (default: the preset's) under this variant's overrides."""
        p = self.instruction(instr).params
        changes = dict(self.overrides)
        if changes.get("split", Split.NONE) != Split.NONE:
            # a split algorithm reads single-precision inputs (the unit's c format) and
            # feeds the unit its own operand format, unless the variant says otherwise
            changes.setdefault("split_fmt", p.a_fmt)
            changes.setdefault("a_fmt", p.c_fmt)
            changes.setdefault("b_fmt", p.c_fmt)
        if changes.get("d_fmt", p.d_fmt) != p.d_fmt and p.nan_bits is not None:
            # the instruction's NaN pattern belongs to its own d format: another d format
            # takes that format's default NaN unless the variant names one
            changes.setdefault("nan_bits", None)
        try:
            q = p.with_(**changes)
            # a parameter the unit does not read, set to another value than the preset's,
            # would name the preset's own unit as a different hypothesis
            check_overrides(p, q, [k for k, _ in self.overrides], self.preset.name)
        except (TypeError, ValueError) as e:
            raise UserError(
                f"variant {self.text!r} on {self.instruction(instr).name}: {e}"
            ) from None
        if q.split != Split.NONE:
            _check_split(self.text, self.instruction(instr).name, q)
        return q

    def dense_twin(self, instr: str | None) -> str | None:
        """For a structured-sparse instruction, the preset's dense instruction whose
        model under this variant is the sparse one's dense unit (model/sparse.py
        dense_params: what it runs on the kept entries, whatever the metadata), or
        None when the preset has none; questions that hold for every metadata run there."""
        from ..model.sparse import dense_params

        p = self.params(instr)
        if p.sparse == Sparsity.NONE:
            return None
        unit = dense_params(p)
        for name in self.preset.instructions:
            q = self.preset.instructions[name].params
            if q.sparse != Sparsity.NONE or q.K != unit.K:
                continue
            try:
                if self.params(name) == unit:
                    return name
            except UserError:  # an override this instruction does not take
                continue
        return None

    def run_name(self, instr: str | None = None) -> str:
        """The name of the instruction this variant runs, for reports: the catalogue's
        name, followed, when the overrides change what it takes or returns (K, operand,
        scale-factor or output formats), by those changes in variant syntax, e.g.
        `m8n8k4.f32.f16.f16.f32[a_fmt=fp64]` for `volta[a_fmt=fp64]`. A split runs the
        instruction itself on the pieces of its wider inputs (`split_fmt` operands)."""
        inst = self.instruction(instr)
        p, q = inst.params, self.params(inst.name)
        run = {f: getattr(q, f) for f in _SHAPE}
        if q.split != Split.NONE:
            # a split takes wider inputs but runs the unit on split_fmt operands
            run.update(a_fmt=q.split_fmt, b_fmt=q.split_fmt)
        changed = [f"{f}={_spelling(v)}" for f, v in run.items() if getattr(p, f) != v]
        return inst.name + (f"[{','.join(changed)}]" if changed else "")


_SHAPE = ("K", "a_fmt", "b_fmt", "c_fmt", "d_fmt", "scale_fmt")
"""The parameters that make an instruction's signature (what its name spells)."""


def _spelling(value: object) -> str:
    """A parameter value as a variant writes it."""
    if value is None:
        return "none"
    spec = getattr(value, "spec", None)
    return spec.name if spec is not None else str(value)


def _check_split(text: str, instr: str, p: ModelParams) -> None:
    """A split needs inputs wider than the unit's operands and a unit that can be chained."""
    if p.c_fmt != p.d_fmt:
        raise UserError(
            f"{text}: a split chains the unit, so c and d need the same format ({instr})"
        )
    if p.a_fmt.spec.precision <= p.split_fmt.spec.precision:
        raise UserError(
            f"{text}: {instr} takes {p.split_fmt.spec.name} operands and a {p.c_fmt.spec.name} "
            f"addend; splitting needs wider inputs (pick an instruction with fp32 c and d)"
        )


def _normalise_instr(name: str) -> str:
    n = name.strip()
    for prefix in ("mma.sync.aligned.", "mma.sync.", "mma."):
        if n.startswith(prefix):
            n = n[len(prefix) :]
    n = re.sub(r"\.(row|col)", "", n)
    if n.startswith("wgmma.mma_async.sync.aligned."):
        n = "wgmma." + n[len("wgmma.mma_async.sync.aligned.") :]
    m = re.match(r"^(wgmma\.m64n)\d+(k.*)$", n)
    if m:
        n = m.group(1) + "8" + m.group(2)
    m = re.match(r"^(tcgen05\.m(?:64|128)n)\d+(k.*)$", n)
    if m:
        n = ("tcgen05.m128n8" if ".block_scale." in n else "tcgen05.m64n8") + m.group(2)
    if not n.startswith("v_mfma_") and re.match(r"^f(32|64)_\d+x", n):
        n = "v_mfma_" + n
    return n


def with_overrides(text: str, changes: list[tuple[str, str]]) -> str:
    """The variant `text` (`ARCH` or `ARCH[name=value,...]`) with `changes` (names and
    their spelled values) applied: a name `text` already sets takes the new value, the
    others are appended. The one way to write a hypothesis relative to a base variant, so
    that the base's own overrides are never dropped."""
    if not changes:
        return text.strip()
    m = _VARIANT_RE.match(text)
    if not m:
        raise UserError(f"malformed variant {text!r}; expected ARCH or ARCH[param=value,...]")
    items = [i.split("=", 1) for i in (m.group(2) or "").split(",") if i.strip()]
    body = {k.strip(): v.strip() for k, v in items}
    body.update(changes)
    return f"{m.group(1)}[{','.join(f'{k}={v}' for k, v in body.items())}]"


def parse_variant(text: str) -> Variant:
    """Parse `arch` or `arch[name=value,...]` (or a named alias); UserError if bad, or
    if a parameter is given twice. An alias's own overrides may be overridden
    (`matlab-h100-fp8[F=14]`)."""
    check("variant", text, Arg.TEXT)
    t = text.strip()
    if t in ALIASES:
        return parse_variant(ALIASES[t][0])
    m = _VARIANT_RE.match(t)
    if not m:
        raise UserError(f"malformed variant {text!r}; expected ARCH or ARCH[param=value,...]")
    name, body = m.group(1), m.group(2)
    if name in ALIASES:
        base = parse_variant(ALIASES[name][0])
        preset, overrides = base.preset, list(base.overrides)
    elif name in PRESETS:
        preset, overrides = PRESETS[name], []
    else:
        raise UserError(f"unknown architecture {name!r}; known: {', '.join(PRESETS)}")
    if body is not None:
        if not body.strip():
            raise UserError(f"malformed variant {text!r}: empty parameter list")
        given: set[str] = set()
        for item in body.split(","):
            if "=" not in item:
                raise UserError(f"malformed variant {text!r}: {item.strip()!r} is not name=value")
            k, v = (s.strip() for s in item.split("=", 1))
            if k in given:
                raise UserError(f"variant {text!r}: {k} is given twice; give each parameter once")
            given.add(k)
            try:
                overrides.append((k, parse_value(k, v)))
            except ValueError as e:
                raise UserError(f"variant {text!r}: {e}") from None
    return Variant(t, preset, tuple(overrides))
