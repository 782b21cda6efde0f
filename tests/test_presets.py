"""The architecture catalogue built from the tables in archs/: every preset's every
instruction as recorded (tests/data/presets_catalogue.json, a snapshot that only changes
with a deliberate change of the tables), the docs' architecture table generated from it,
and the builder's checks on the tables."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from enum import Enum
from pathlib import Path

import pytest

from tensorcore_smt.formats import Format
from tensorcore_smt.model.params import ModelParams
from tensorcore_smt.spec.catalogue import (
    TABLES_DIR,
    TableError,
    build_presets,
    summary_table,
)
from tensorcore_smt.spec.presets import ALIASES, PRESETS

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).parent / "data" / "presets_catalogue.json"


def _value(v: object) -> object:
    if isinstance(v, Format):
        return v.spec.name
    if isinstance(v, Enum):
        return v.value
    return v


_DEFAULTS = {
    f.name: _value(f.default)
    for f in dataclasses.fields(ModelParams)
    if f.default is not dataclasses.MISSING
}


def catalogue_json() -> dict:
    """Every fact of every preset and alias as JSON values; an instruction's parameters
    as those that differ from ModelParams' defaults (recorded under "defaults")."""
    archs = {}
    for name, pr in PRESETS.items():
        facts = {f.name: getattr(pr, f.name) for f in dataclasses.fields(pr)}
        instructions = {}
        for k, i in pr.instructions.items():
            params = {f: _value(v) for f, v in dataclasses.asdict(i.params).items()}
            params = {f: v for f, v in params.items() if f not in _DEFAULTS or _DEFAULTS[f] != v}
            instructions[k] = {"kind": i.kind, "sm": i.sm, "unit": i.unit, "note": i.note, **params}
        facts["instructions"] = instructions
        archs[name] = facts
    return {
        "defaults": _DEFAULTS,
        "archs": archs,
        "aliases": {k: list(v) for k, v in ALIASES.items()},
    }


def snapshot_text() -> str:
    """catalogue_json() as the snapshot file: one line per instruction, for readable diffs."""
    cat = catalogue_json()
    lines = ["{", f' "defaults": {json.dumps(cat["defaults"])},', ' "archs": {']
    for n, (arch, facts) in enumerate(cat["archs"].items()):
        lines.append(f"  {json.dumps(arch)}: {{")
        for k, v in facts.items():
            if k != "instructions":
                lines.append(f"   {json.dumps(k)}: {json.dumps(v)},")
        lines.append('   "instructions": {')
        rows = list(facts["instructions"].items())
        for j, (name, inst) in enumerate(rows):
            comma = "," if j < len(rows) - 1 else ""
            lines.append(f"    {json.dumps(name)}: {json.dumps(inst)}{comma}")
        lines.append("   }")
        lines.append("  }" + ("," if n < len(cat["archs"]) - 1 else ""))
    lines.append(" },")
    lines.append(f' "aliases": {json.dumps(cat["aliases"], indent=2)}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def test_catalogue_matches_the_snapshot():
    """Order of architectures and instructions included. After a deliberate change of the
    tables, regenerate the snapshot with `python -c 'import tests.test_presets as t;
    print(t.snapshot_text(), end="")' > tests/data/presets_catalogue.json`."""
    want = json.loads(SNAPSHOT.read_text())
    got = json.loads(snapshot_text())
    assert got["defaults"] == want["defaults"]
    assert list(got["archs"]) == list(want["archs"])
    for arch, facts in want["archs"].items():
        g = got["archs"][arch]
        assert list(g["instructions"]) == list(facts["instructions"]), arch
        for name, inst in facts["instructions"].items():
            assert g["instructions"][name] == inst, f"{arch} {name}"
        assert {k: v for k, v in g.items() if k != "instructions"} == {
            k: v for k, v in facts.items() if k != "instructions"
        }
    assert got["aliases"] == want["aliases"]


def test_docs_architecture_table_is_generated_from_the_tables():
    docs = (ROOT / "docs" / "presets.md").read_text()
    table = summary_table()
    assert table in docs, "docs/presets.md's architecture table is stale; it should be:\n" + table


def test_every_family_is_run_by_some_architecture():
    from tensorcore_smt.spec.catalogue import load_tables

    tables = load_tables()
    used = {f for a in tables.archs for f in a["families"]}
    assert set(tables.families) == used
    used_quirks = {
        q["use"] for a in tables.archs for q in a.get("quirks", {}).values() if "use" in q
    }
    assert set(tables.quirks) == used_quirks


def _copy_tables(tmp_path: Path) -> Path:
    folder = tmp_path / "archs"
    shutil.copytree(TABLES_DIR, folder)
    return folder


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'families = ["mma-sm70", "ffma"]',
            'families = ["mma-sm70", "mma-sm71"]',
            "unknown family",
        ),
        ('families = ["mma-sm70", "ffma"]', 'families = ["mma-sm70", "mma-sm70"]', "listed twice"),
        (
            'default = "m8n8k4.f32.f16.f16.f32"\nfamilies = ["mma-sm70", "ffma"]',
            'default = "m8n8k8.f32.f16.f16.f32"\nfamilies = ["mma-sm70", "ffma"]',
            "is no instruction",
        ),
        (
            'families = ["mma-sm70", "ffma"]',
            'families = ["mma-sm70", "ffma"]\nfoo = 1',
            "unknown keys",
        ),
    ],
)
def test_bad_arch_tables_are_refused(tmp_path, old, new, message):
    folder = _copy_tables(tmp_path)
    path = folder / "archs.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(TableError, match=message):
        build_presets(folder)


def test_bad_family_parameters_are_refused(tmp_path):
    folder = _copy_tables(tmp_path)
    path = folder / "nvidia.toml"
    text = path.read_text()
    path.write_text(text.replace('F = 13\nd.fp32 = { rounding_fmt = "e8m13" }', "F = 99", 1))
    with pytest.raises(TableError, match="F=99 is out of range"):
        build_presets(folder)
    path.write_text(text.replace("scale_block = 16", "scale_blok = 16", 1))
    with pytest.raises(TableError, match="unknown model parameters"):
        build_presets(folder)


@pytest.mark.parametrize(
    "file, old, new, message",
    [
        ("nvidia.toml", 'kind = "wgmma"', 'kind = "wgmm"', "kind = 'wgmm'"),
        ("amd.toml", 'model = "gps"', 'model = "gsp"', "model = 'gsp'"),
        ("archs.toml", '{ use = "hmma-fp8" }', '{ use = "hmma-fp9" }', "unknown quirk"),
        ("archs.toml", '{ like = "volta" }', '{ like = "vlota" }', "no architecture 'vlota'"),
        ("archs.toml", 'vendor = "amd"', 'vendor = "AMD"', "vendor must be one of"),
    ],
)
def test_bad_family_and_quirk_references_are_refused(tmp_path, file, old, new, message):
    folder = _copy_tables(tmp_path)
    path = folder / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(TableError, match=re.escape(message)):
        build_presets(folder)


def test_a_preset_built_alone_is_the_catalogue_s_own():
    """PRESETS builds only the architecture read (build_one); it equals the preset of
    the whole catalogue, and names it does not hold are KeyErrors without a build."""
    from tensorcore_smt.spec.catalogue import PRESETS, build_one

    whole = build_presets()
    assert list(PRESETS) == list(whole)
    for name, preset in whole.items():
        assert build_one(name) == preset and PRESETS[name] == preset
    assert "no-such-arch" not in PRESETS
    with pytest.raises(KeyError):
        PRESETS["no-such-arch"]
