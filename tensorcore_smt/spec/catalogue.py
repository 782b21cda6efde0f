"""The architecture catalogue: instruction tables (archs/*.toml) built into presets.

The tables are data (docs/presets.md describes their format): `archs.toml` lists the
architectures with their facts and the instruction families each runs; `nvidia.toml` and
`amd.toml` hold the families (instruction names, unit, model template, parameters) and
shared quirks; `models.toml` the model templates and the ISA type names; `aliases.toml`
the named hypotheses (read by spec.variants). One loop builds
every instruction of every architecture by the same rules, in this order:

 1. the family's names, with `{var}` placeholders expanded over `each` (first key outermost);
 2. K, a, b, c, d (and a scale-factor format) read off the name by its syntax (`ptx`:
    shape then d.a.b[.c][.scale], c = d when absent; `amd`: v_mfma_D_MxNxK<types>,
    v_wmma_..., v_dotN_...), the type names from the family's `types` table (default:
    the one named like the syntax);
 3. the model's parameters merged, later levels winning: the template, the
    architecture's facts the template names in `from_arch` (those of the `like`
    architecture under a quirk that says so), the family, the shared quirk an
    architecture `use`s, the architecture's own quirk; at every level a `d.<format>`
    table applies to instructions whose d has that format;
 4. derived values: `L_bytes` -> L = L_bytes / container bytes of a; `groups` -> L = K /
    groups; L = "K" -> K; L and G capped at K; carry_bits = "derived" -> the least the
    bound on the terms needs (model.fda.least_carry_bits).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

from ..formats import Format
from ..model.fda import least_carry_bits
from ..model.params import ModelParams, parse_value
from .datadirs import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLES_DIR = data_dir("archs")


@dataclass(frozen=True)
class Instruction:
    """One matrix instruction of one architecture and the model that computes it."""

    name: str
    kind: str  # mma | wgmma | tcgen05 | mfma | wmma | fma | dot
    params: ModelParams
    sm: int | None = None
    note: str = ""
    unit: str = ""  # the hardware unit that runs it (instructions with one unit share it)
    source: str = ""  # the document its form and arithmetic come from (the family's `source`)

    @property
    def K(self) -> int:
        return self.params.K


@dataclass(frozen=True)
class Preset:
    """An architecture: its facts and its instructions (the first is the default)."""

    name: str
    vendor: str
    sm: int | None
    F: int
    L_bytes: int
    e_zero_fp32: int | None
    e_zero_fp16: int | None
    description: str
    default_instr: str
    instructions: dict[str, Instruction] = field(default_factory=dict)


class TableError(ValueError):
    """The instruction tables are inconsistent (a bug in archs/*.toml, not user input)."""


KINDS = ("mma", "wgmma", "tcgen05", "mfma", "wmma", "fma", "dot")
"""Instruction kinds: PTX mma.sync, wgmma.mma_async, tcgen05.mma, the scalar fma of the
CUDA cores; AMD v_mfma and v_wmma; a SIMD dot product, one lane (x86 VDPBF16PS, AMD
v_dot2)."""
VENDORS = ("nvidia", "amd", "x86")
"""GPU vendors, and `x86` for instructions of the x86 ISA (Intel and AMD CPUs)."""

_FAMILY_META = {"kind", "syntax", "types", "unit", "note", "model", "names", "each", "source"}
_QUIRK_META = {"unit", "note", "like", "use"}
_DERIVED = {"L_bytes", "groups"}
_ARCH_KEYS = {
    "name",
    "vendor",
    "sm",
    "F",
    "L_bytes",
    "e_zero",
    "description",
    "default",
    "families",
    "quirks",
}
_PARAMS = {f.name for f in fields(ModelParams)}


@dataclass(frozen=True)
class Tables:
    """The raw tables of archs/: architectures in order, families, quirks, templates."""

    archs: list[dict]
    families: dict[str, dict]
    quirks: dict[str, dict]
    models: dict[str, dict]
    types: dict[str, dict[str, str]]
    container_bytes: dict[str, int]
    aliases: dict[str, dict[str, str]]

    def arch(self, name: str) -> dict:
        """The architecture table called `name`."""
        for a in self.archs:
            if a["name"] == name:
                return a
        raise TableError(f"no architecture {name!r} in the tables")

    def check(self) -> None:
        """Every family names a known kind, syntax, model and unit; every quirk an
        architecture uses or imitates exists (TableError naming the first that does not)."""
        for fid, fam in self.families.items():
            for key, known in (
                ("kind", KINDS),
                ("syntax", tuple(_SYNTAX)),
                ("model", tuple(self.models)),
            ):
                if fam.get(key) not in known:
                    raise TableError(
                        f"family {fid}: {key} = {fam.get(key)!r}; known: {', '.join(known)}"
                    )
            if fam.get("types", fam.get("syntax")) not in self.types:
                raise TableError(f"family {fid}: no type table {fam.get('types')!r}")
            if not fam.get("unit") or not fam.get("names"):
                raise TableError(f"family {fid}: needs a unit and names")
        for a in self.archs:
            if a.get("vendor") not in VENDORS:
                raise TableError(f"arch {a.get('name')}: vendor must be one of {VENDORS}")
            for fid, quirk in a.get("quirks", {}).items():
                if fid not in a["families"]:
                    raise TableError(f"arch {a['name']}: a quirk for {fid}, which it does not run")
                if "use" in quirk and quirk["use"] not in self.quirks:
                    raise TableError(f"arch {a['name']}: unknown quirk {quirk['use']!r}")
                if "like" in quirk:
                    self.arch(quirk["like"])


_SHARED_SECTIONS = {"types"}
"""Sections several files may extend name by name ([types.ptx] in models.toml and in
integer.toml), each name still defined once."""


def load_tables(directory: Path | None = None) -> Tables:
    """Read every *.toml of the tables folder (archs/) into one Tables."""
    folder = directory or TABLES_DIR
    merged: dict[str, Any] = {}
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for key, value in data.items():
            if key == "arch":
                merged.setdefault("arch", []).extend(value)
                continue
            section = merged.setdefault(key, {})
            for name in value:
                if key in _SHARED_SECTIONS and name in section:
                    for leaf in value[name]:
                        if leaf in section[name]:
                            raise TableError(f"{path.name}: {key}.{name}.{leaf} is defined twice")
                    section[name] = {**section[name], **value[name]}
                    continue
                if name in section:
                    raise TableError(f"{path.name}: [{key}.{name}] is defined twice")
                section[name] = value[name]
    return Tables(
        archs=merged.get("arch", []),
        families=merged.get("family", {}),
        quirks=merged.get("quirk", {}),
        models=merged.get("model", {}),
        types=merged.get("types", {}),
        container_bytes=merged.get("container_bytes", {}),
        aliases=merged.get("alias", {}),
    )


# --- instruction names ------------------------------------------------------------------


def expand_names(family: dict) -> list[dict[str, Any]]:
    """The family's names with `each` expanded: one {"name": ..., var: value} per form."""
    each = family.get("each", {})
    out = []
    for pattern in family["names"]:
        for values in itertools.product(*each.values()):
            env = dict(zip(each, values))
            out.append({"name": pattern.format(**env), **env})
    return out


@dataclass(frozen=True)
class Signature:
    """What an instruction name says: products per output and the operand formats."""

    K: int
    a: Format
    b: Format
    c: Format
    d: Format
    scale: Format | None = None


def _ptx_signature(name: str, types: dict[str, str]) -> Signature:
    """PTX names: [wgmma.|tcgen05.]mMnNkK[.kind::X][.block_scale.scale_vec::V].d.a.b[.c][.s]
    (PTX ISA, mma / wgmma.mma_async / tcgen05.mma type qualifiers); the scalar
    fma.RND.TYPE (PTX ISA, floating-point fma: d = a*b + c) is one product, K = 1, with
    a, b, c and d all of TYPE."""
    parts = name.split(".")
    if parts[0] == "fma":
        if len(parts) != 3 or parts[2] not in types:
            raise TableError(f"{name}: not a PTX fma.RND.TYPE name")
        t = Format.parse(types[parts[2]])
        return Signature(1, t, t, t, t)
    shape = next(p for p in parts if re.fullmatch(r"m\d+n\d+k\d+", p))
    K = int(shape.rsplit("k", 1)[1])
    fmts = [Format.parse(types[p]) for p in parts[parts.index(shape) + 1 :] if p in types]
    scales = [f for f in fmts if f in (Format.UE8M0, Format.UE4M3)]
    ops = [f for f in fmts if f not in scales]
    d, a, b = ops[:3]
    c = ops[3] if len(ops) > 3 else d
    return Signature(K, a, b, c, d, scales[0] if scales else None)


def _amd_signature(name: str, types: dict[str, str]) -> Signature:
    """AMD names, c = d: v_mfma_D_MxNxK<a>[_Nb][_a][_b][_1k] (CDNA1-3 ISA spellings);
    v_mfma_scale_D_MxNxK_f8f6f4_A_B (CDNA4 ISA: the A and B formats that the cbsz and
    blgp fields select, appended in the ISA's type names; E8M0 block scales, one per 32
    products); v_wmma_D_MxNxK_A[_B] (RDNA3/RDNA4 ISA); v_wmma_i32_MxNxK_iuN_A_B[_clamp]
    (RDNA3/RDNA4 ISA: iuN's signedness, set by the NEG bits, spelled as the operand
    types A and B; _clamp the CLAMP bit); v_dotN_D_A[_B] (N products)."""
    dot = re.fullmatch(r"v_dot(\d+)_([a-z0-9]+)_([a-z0-9]+)(?:_([a-z0-9]+))?", name)
    if dot is not None:
        d, a = Format.parse(types[dot.group(2)]), Format.parse(types[dot.group(3)])
        b = Format.parse(types[dot.group(4)]) if dot.group(4) else a
        return Signature(int(dot.group(1)), a, b, d, d)
    scaled = name.startswith("v_mfma_scale_")
    body = name
    for prefix in ("v_mfma_scale_", "v_mfma_", "v_wmma_"):
        body = body.removeprefix(prefix)
    parts = body.removesuffix("_1k").split("_")
    m = re.match(r"(\d+)x(\d+)x(\d+)([a-z0-9]*)$", parts[1])
    if m is None or body == name:
        raise TableError(f"{name}: not an MFMA, WMMA or dot name")
    names = ([m.group(4)] if m.group(4) else []) + [
        t for t in parts[2:] if not re.fullmatch(r"\d+b|f8f6f4|iu\d+|clamp", t)
    ]
    a, b, d = (Format.parse(types[t]) for t in (names[0], names[-1], parts[0]))
    scale = Format.parse(types["e8m0"]) if scaled else None
    return Signature(int(m.group(3)), a, b, d, d, scale)


def _x86_signature(name: str, types: dict[str, str]) -> Signature:
    """x86 mnemonics, one lane: vdp<a>ps (Intel SDM, VDPBF16PS: a pair of <a> products
    added to a packed-single accumulator, so K = 2, c = d = fp32) and vfmadd<form><t>
    (VFMADD231PS: one product added to the accumulator, K = 1, all operands <t>)."""
    f = re.fullmatch(r"vfmadd(132|213|231)([a-z0-9]+)", name)
    if f is not None and f.group(2) in types:
        t = Format.parse(types[f.group(2)])
        return Signature(1, t, t, t, t)
    m = re.fullmatch(r"vdp([a-z0-9]+?)(ps)", name)
    if m is None or m.group(1) not in types:
        raise TableError(f"{name}: not an x86 vdp<type>ps name")
    a, d = Format.parse(types[m.group(1)]), Format.parse(types[m.group(2)])
    return Signature(2, a, a, d, d)


_SYNTAX = {"ptx": _ptx_signature, "amd": _amd_signature, "x86": _x86_signature}


# --- parameters ---------------------------------------------------------------------------


def _level(table: dict, meta: set[str], d: Format) -> dict[str, Any]:
    """A level's parameters for an instruction with d format `d`: its plain keys, then its
    `d.<format>` table."""
    out = {k: v for k, v in table.items() if k not in meta and k != "d"}
    out.update(table.get("d", {}).get(d.spec.name, {}))
    return out


def _arch_facts(arch: dict, names: list[str], d: Format) -> dict[str, Any]:
    """The architecture facts a template takes (`from_arch`); e_zero is chosen by d."""
    out = {}
    for n in names:
        v = arch[n]
        out[n] = v[d.spec.name] if isinstance(v, dict) else v
    return out


def _derive(raw: dict[str, Any], sig: Signature, tables: Tables) -> dict[str, Any]:
    """Rule 4 of the module docstring: L from bytes or groups, sizes capped at K."""
    if "L_bytes" in raw:
        raw["L"] = raw.pop("L_bytes") // tables.container_bytes[sig.a.spec.name]
    if "groups" in raw:
        raw["L"] = sig.K // raw.pop("groups")
    if raw.get("L") == "K":
        raw["L"] = sig.K
    for n in ("L", "G"):
        if n in raw:
            raw[n] = min(raw[n], sig.K)
    return raw


def _model_params(raw: dict[str, Any], sig: Signature) -> ModelParams:
    """ModelParams from merged table values (checked by the parameter parser)."""
    derived_carry = raw.pop("carry_bits", None) == "derived"
    unknown = set(raw) - _PARAMS
    if unknown:
        raise TableError(f"unknown model parameters {sorted(unknown)}")
    kw: dict[str, Any] = {
        k: parse_value(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in raw.items()
    }
    kw.update(a_fmt=sig.a, b_fmt=sig.b, c_fmt=sig.c, d_fmt=sig.d, K=sig.K)
    if sig.scale is not None:
        kw["scale_fmt"] = sig.scale
    p = ModelParams(**kw)
    return p.with_(carry_bits=least_carry_bits(p)) if derived_carry else p


def build_instruction(
    arch: dict, family_id: str, form: dict[str, Any], tables: Tables
) -> Instruction:
    """One instruction of `arch` from `family_id`: rules 2-4 of the module docstring."""
    family = tables.families[family_id]
    quirk = dict(arch.get("quirks", {}).get(family_id, {}))
    shared = tables.quirks[quirk["use"]] if "use" in quirk else {}
    types = tables.types[family.get("types", family["syntax"])]
    sig = _SYNTAX[family["syntax"]](form["name"], types)
    template = tables.models[family["model"]]
    facts_of = tables.arch(quirk.get("like", arch["name"]))
    raw: dict[str, Any] = _level(template, {"from_arch"}, sig.d)
    raw.update(_arch_facts(facts_of, template.get("from_arch", []), sig.d))
    raw.update(_level(family, _FAMILY_META, sig.d))
    raw.update(_level(shared, _QUIRK_META, sig.d))
    raw.update(_level(quirk, _QUIRK_META, sig.d))
    try:
        params = _model_params(_derive(raw, sig, tables), sig)
    except (KeyError, TypeError, ValueError) as e:
        raise TableError(f"{arch['name']} {form['name']} ({family_id}): {e}") from e
    return Instruction(
        name=form["name"],
        kind=family["kind"],
        params=params,
        sm=arch.get("sm"),
        note=quirk.get("note") or shared.get("note") or family.get("note", ""),
        unit=quirk.get("unit") or shared.get("unit") or family["unit"],
        source=family.get("source", ""),
    )


def build_preset(arch: dict, tables: Tables) -> Preset:
    """An architecture's preset: its facts and every instruction of its families."""
    unknown = set(arch) - _ARCH_KEYS
    if unknown:
        raise TableError(f"arch {arch.get('name')}: unknown keys {sorted(unknown)}")
    instructions: dict[str, Instruction] = {}
    for family_id in arch["families"]:
        if family_id not in tables.families:
            raise TableError(f"arch {arch['name']}: unknown family {family_id!r}")
        for form in expand_names(tables.families[family_id]):
            if form["name"] in instructions:
                raise TableError(f"arch {arch['name']}: {form['name']} listed twice")
            instructions[form["name"]] = build_instruction(arch, family_id, form, tables)
    if arch["default"] not in instructions:
        raise TableError(f"arch {arch['name']}: default {arch['default']!r} is no instruction")
    e_zero = arch.get("e_zero", {})
    return Preset(
        name=arch["name"],
        vendor=arch["vendor"],
        sm=arch.get("sm"),
        F=arch["F"],
        L_bytes=arch["L_bytes"],
        e_zero_fp32=e_zero.get("fp32"),
        e_zero_fp16=e_zero.get("fp16"),
        description=arch["description"],
        default_instr=arch["default"],
        instructions=instructions,
    )


@cache
def build_presets(directory: Path | None = None) -> dict[str, Preset]:
    """Every architecture of the tables, in their order."""
    tables = load_tables(directory)
    tables.check()
    return {a["name"]: build_preset(a, tables) for a in tables.archs}


@cache
def read_tables(directory: Path | None = None) -> Tables:
    """`load_tables`, read once (callers pass the folder or None, positionally)."""
    return load_tables(directory)


@cache
def checked_tables(directory: Path | None = None) -> Tables:
    """The tables, read and checked once."""
    tables = read_tables(directory)
    tables.check()
    return tables


@cache
def build_one(name: str, directory: Path | None = None) -> Preset:
    """One architecture's preset (KeyError for a name the tables do not hold); what
    `build_presets` holds under that name, built alone."""
    tables = checked_tables(directory)
    for a in tables.archs:
        if a["name"] == name:
            return build_preset(a, tables)
    raise KeyError(name)


class LazyPresets(Mapping[str, Preset]):
    """The presets of the installed tables, each built when first read: importing the
    package (or the command line for `--help`) builds no catalogue, and a command that
    names one architecture builds only that one (`build_one`); every later read is a
    dict lookup."""

    def _names(self) -> list[str]:
        return [a["name"] for a in checked_tables(None).archs]

    def __getitem__(self, name: str) -> Preset:
        if name not in self._names():
            raise KeyError(name)
        return build_one(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(dict(self.items()))


PRESETS: Mapping[str, Preset] = LazyPresets()


def summary_table(presets: dict[str, Preset] | None = None) -> str:
    """The architecture table of docs/presets.md (and the README), generated from the
    catalogue: per architecture its instructions by unit and the fused units' F, L and
    carry bits (tests/test_presets.py checks the docs against it)."""
    rows = [
        "| arch | device | instructions | units | fused groups (F / L / carry bits) |",
        "|---|---|---|---|---|",
    ]
    for name, pr in (presets or PRESETS).items():
        units: dict[str, int] = {}
        fused: dict[tuple, None] = {}
        for inst in pr.instructions.values():
            units[inst.unit] = units.get(inst.unit, 0) + 1
            p = inst.params
            if p.carry_bits is not None:
                fused[(p.F, p.L, p.carry_bits)] = None
        device = pr.description.split(":", 1)[0]
        by_unit = ", ".join(f"{u} {n}" for u, n in units.items())
        fda = ", ".join(f"{F}/{L}/{k}" for F, L, k in sorted(fused)) or "-"
        rows.append(f"| {name} | {device} | {len(pr.instructions)} | {by_unit} | {fda} |")
    return "\n".join(rows) + "\n"
