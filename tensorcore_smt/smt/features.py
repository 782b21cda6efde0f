"""The feature matrix: what each architecture does, decided by the library's witnesses.

A feature (FTTN Table IV's columns, plus Valpey et al.'s (2025) carry bits) is a set of candidate
hypotheses, each a variant of the arch preset: extra alignment bits 0..3 are F = 23..26,
fp16-output rounding is one of five modes, and so on. Its value on an architecture is
what survives when every test vector the library produced for that architecture (the
witnesses in results/ARCH/*.vectors.json, pooled per instruction) is run through an
observer: the preset itself by default, or measured outputs from silicon. A candidate
survives when it predicts every observation; the value is the surviving labels.

The same deduction runs on hardware outputs (`observed`), so the matrix built from the
presets is the prediction a GPU run confirms or refutes. FTTN Table IV and MMA-Sim
Table III are kept as data beside it, and every disagreement carries its explanation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..api import simulate_one
from ..errors import UserError
from ..model.params import ModelParams
from ..model.sparse import dense_params
from ..spec.presets import PRESETS, parse_variant
from ..validation.vectors import Vector, VectorFile, load
from .library import expand

Candidates = Callable[[ModelParams], dict[str, str]]


class Reference(Enum):
    """The published tables the matrix is compared with."""

    FTTN = "FTTN"  # Table IV
    VALPEY = "Valpey et al. 2025"  # §4.3
    MMASIM = "MMA-Sim"  # Table III, §IV-C


@dataclass(frozen=True)
class Feature:
    """One column: which property's instruction it is read on and its candidates."""

    key: str
    column: str
    property: str  # the property whose instruction (and witnesses) decide it
    candidates: Candidates  # label -> variant template over {arch}, from the unit's params
    source: str
    least: bool = False  # more than the least survivor is proved to change nothing: show it
    # why the feature is no question on an instruction (None: it is one)
    applies: Callable[[ModelParams], str | None] | None = None


def _around(name: str, value: int, lo: int, hi: int, label=str) -> dict[str, str]:
    return {
        label(v): f"{{arch}}[{name}={v}]" for v in range(max(lo, value - 2), value + 3) if v <= hi
    }


FEATURES: tuple[Feature, ...] = (
    Feature(
        "subnormals_in",
        "subnormals in",
        "subnormals",
        lambda p: {"yes": "{arch}[flush_inputs=false]", "no": "{arch}[flush_inputs=true]"},
        "Fasi et al. §III-B; FTTN Table IV",
    ),
    Feature(
        "subnormals_out",
        "subnormals out",
        "subnormals",
        lambda p: {"yes": "{arch}[flush_outputs=false]", "no": "{arch}[flush_outputs=true]"},
        "FTTN Table IV",
    ),
    Feature(
        "extra_bits",
        "extra alignment bits (F - 23)",
        "alignment-bits",
        lambda p: _around("F", p.F, 20, 64, lambda f: str(f - 23)),
        "FTTN Table IV (extra bits); MMA-Sim Table III (F)",
    ),
    Feature(
        "rounding",
        "accumulator rounding",
        "rounding-accumulator",
        lambda p: {
            "truncate": "{arch}[align=truncate,rounding=rz]",
            "RZ": "{arch}[align=exact,rounding=rz]",
            "RNE": "{arch}[align=exact,rounding=rne]",
            "RTP": "{arch}[align=exact,rounding=rtp]",
            "RTN": "{arch}[align=exact,rounding=rtn]",
        },
        "FTTN Table IV; Valpey et al. 2025 §4.2",
    ),
    Feature(
        "width",
        "block-FMA width",
        "block-width",
        # wider than K cannot be observed on a K-term instruction
        lambda p: {str(w): f"{{arch}}[L={w}]" for w in (p.L // 2, p.L, 2 * p.L) if 1 <= w <= p.K},
        "FTTN Table IV (FMA unit width)",
    ),
    Feature(
        "carry_bits",
        "carry bits",
        "carry-bits",
        lambda p: _around("carry_bits", p.carry_bits or 0, 1, 8),
        "Valpey et al. 2025 §4.3",
        least=True,  # the carry-bits property proves k + 1 bits change nothing
    ),
    Feature(
        "fp16_out",
        "fp16-output rounding",
        "rounding-final",
        lambda p: {
            m.upper(): f"{{arch}}[rounding={m}]" for m in ("rne", "rz", "rtp", "rtn", "rna")
        },
        "FTTN Table IV (last column); Valpey et al. 2025 §4.2",
    ),
)

INT_FEATURES: tuple[Feature, ...] = (
    Feature(
        "int_overflow",
        "s32 on overflow",
        "integer-overflow",
        lambda p: {"wrap": "{arch}[int_clamp=wrap]", "clamp": "{arch}[int_clamp=satfinite]"},
        "PTX ISA, mma integer type (.satfinite); AMD CDNA ISA V_MFMA_I32_*I8",
    ),
    Feature(
        "int_partial",
        "clamped sums (.satfinite)",
        "integer-overflow",
        lambda p: {"final": f"{{arch}}[L={p.K}]", "every product": "{arch}[L=1]"},
        "PTX ISA, mma integer type (silent on partial sums): a hypothesis",
        applies=lambda p: None if p.int_clamp.value == "satfinite" else "the unit wraps",
    ),
)
"""The integer units' features, read on the instruction the property integer-overflow
chose (its .satfinite form where the architecture has one)."""

_BY_KEY = {f.key: f for f in FEATURES + INT_FEATURES}

# FTTN Table IV, FP16 rows (V100, A100, H100, MI250X; the MI100 row is checked against the
# cdna1 preset in tests/test_cdna1.py).
# "N.A." where FTTN could not measure.
FTTN_FP16: dict[str, dict[str, str]] = {
    "volta": {
        "subnormals_in": "yes",
        "subnormals_out": "yes",
        "extra_bits": "0",
        "rounding": "truncate",
        "width": "N.A.",
        "fp16_out": "RNE",
    },
    "ampere": {
        "subnormals_in": "yes",
        "subnormals_out": "yes",
        "extra_bits": "1",
        "rounding": "truncate",
        "width": "8",
        "fp16_out": "RNE",
    },
    "hopper": {
        "subnormals_in": "yes",
        "subnormals_out": "yes",
        "extra_bits": ">=2",
        "rounding": "truncate",
        "width": ">=16",
        "fp16_out": "RNE",
    },
    "cdna2": {
        "subnormals_in": "no",
        "subnormals_out": "no",
        "extra_bits": "3",
        "rounding": "RNE",
        "width": "1",
        "fp16_out": "RNE",
    },
}

# Valpey et al. 2025 §4.3: the 5-term unit needs 3 carry bits (hardware-confirmed on Volta and
# Turing); the 9-term unit "should likewise require 4" (not found there: 6 h timeout).
VALPEY: dict[str, dict[str, str]] = {
    "volta": {"carry_bits": "3"},
    "turing": {"carry_bits": "3"},
    "ampere": {"carry_bits": "4"},
}

# MMA-Sim Table III (F of the fp16 HMMA/HGMMA forms) and §IV-C (fused group sizes:
# CoFDA for HMMA.16816 on Ampere/Ada = two groups of 8; one group of 16 from Hopper on).
MMASIM: dict[str, dict[str, str]] = {
    "volta": {"extra_bits": "0", "width": "4"},
    "turing": {"extra_bits": "1", "width": "4"},
    "ampere": {"extra_bits": "1", "width": "8"},
    "ada": {"extra_bits": "1", "width": "8"},
    "hopper": {"extra_bits": "2", "width": "16"},
    "blackwell": {"extra_bits": "2", "width": "16"},
    "rtx-blackwell": {"extra_bits": "2", "width": "16"},
}

# Why a reference and the deduced value differ: (arch, feature, reference) -> text.
EXPLAINED: dict[tuple[str, str, Reference], str] = {
    ("volta", "width", Reference.FTTN): (
        "FTTN could not measure the width on V100 (no extra bit, so its half-ulp probe "
        "vanishes in every block); the 4-term unit is Valpey et al.'s (2025) and MMA-Sim's"
    ),
    ("turing", "extra_bits", Reference.MMASIM): (
        "MMA-Sim Table III gives HMMA.884 on Turing F=24; Valpey et al. 2025 §4 found Turing's 884 "
        "unit identical to Volta's (F=23) on hardware. The preset follows Valpey et al. 2025; "
        "MMA-Sim's reading is the named hypothesis mmasim1-turing, and the "
        "alignment-bits vectors tell the two apart on a Turing GPU"
    ),
    ("hopper", "extra_bits", Reference.FTTN): (
        "FTTN tested only for 'more than 2' extra bits on H100 (its footnote 6); 2 is "
        "consistent with that and with MMA-Sim's F=25"
    ),
    ("hopper", "width", Reference.FTTN): (
        "FTTN reports 'at least 16' without testing further (footnote 6); 16 is MMA-Sim's "
        "single fused group for HMMA.16816 on Hopper"
    ),
    ("cdna2", "extra_bits", Reference.FTTN): (
        "CDNA2 fp16 is modelled as IEEE fp32 additions (MMA-Sim §IV-B GPS), which round "
        "correctly: FTTN's 3 extra bits are the guard, round and sticky bits of such an "
        "adder; there is no truncating alignment window F to ask about"
    ),
    ("cdna2", "rounding", Reference.FTTN): (
        "RNE is the rounding of each GPS addition (MMA-Sim §IV-B); the accumulator-rounding "
        "property asks about a truncating alignment window, which GPS does not have"
    ),
    ("cdna2", "width", Reference.FTTN): (
        "GPS rounds after every pairwise addition, so no block is fused: FTTN's width 1; "
        "the block-width property asks about fused groups, which GPS does not have"
    ),
    ("cdna2", "fp16_out", Reference.FTTN): (
        "the modelled CDNA2 fp16 instructions all write fp32 (there is no fp16-output "
        "MFMA form in the preset), so the fp16-output rounding cannot be asked"
    ),
}


@dataclass
class Cell:
    """One feature on one architecture."""

    value: str  # surviving labels joined by " or ", "none of ..." or "—"
    instruction: str = ""
    survivors: list[str] = field(default_factory=list)
    candidates: dict[str, str] = field(default_factory=dict)
    vectors: int = 0
    why: str = ""  # when no value: why


SPARSE_DIR = "sparse"
"""results/ARCH/SPARSE_DIR/: the property library's witnesses on a sparse form (make
results: bench/make_results.py --sparse), deduced into the matrix's sparse rows."""

SPARSE_FEATURES: tuple[Feature, ...] = (
    Feature(
        "sparse_unit",
        "dense unit (model/sparse.py)",
        "carry-bits",
        lambda p: {
            "compressed": "{arch}[sparse=compressed]",
            "expanded": "{arch}[sparse=expanded]",
        },
        "PTX ISA mma.sp (the two readings: docs/model.md)",
    ),
)
"""Columns of the sparse rows only: which dense unit a sparse form is."""


def _files(base: Path) -> list[VectorFile]:
    return [load(f) for f in sorted(base.glob("*.vectors.json"))]


def _instruction(base: Path, prop: str) -> str | None:
    f = base / f"{prop}.json"
    if not f.exists():
        return None
    return json.loads(f.read_text()).get("instruction")


Observer = Callable[[str, str, Vector], int | None]


def _run(p: ModelParams, vec: Vector) -> int:
    """d of the unit `p` on one test vector (with its metadata, for a sparse form)."""
    return simulate_one(p, vec.a, vec.b, vec.c, meta=vec.metadata)


def preset_observer(arch: str, instr: str, vec: Vector) -> int:
    """The arch preset's output: the stand-in for silicon."""
    return _run(parse_variant(arch).params(instr), vec)


def deduce(
    arch: str,
    results: Path = Path("results"),
    observe: Observer = preset_observer,
    folder: str = "",
) -> dict[str, Cell]:
    """Every feature's value on `arch` from the vectors under `results` (`folder`
    SPARSE_DIR: the sparse form's, with its own columns)."""
    base = results / arch / folder
    files = _files(base)
    cells: dict[str, Cell] = {}
    extra = SPARSE_FEATURES if folder == SPARSE_DIR else ()
    for feat in FEATURES + INT_FEATURES + extra:
        instr = _instruction(base, feat.property)
        if instr is None:
            summary = results / ("sparse.json" if folder == SPARSE_DIR else "summary.json")
            why = ""
            if summary.exists():
                row = json.loads(summary.read_text()).get(arch, {}).get(feat.property, {})
                why = row.get("not_applicable", "")
            cells[feat.key] = Cell("—", why=why or f"no {feat.property} results")
            continue
        p = dense_params(PRESETS[arch].instructions[instr].params)  # the unit that runs
        why = feat.applies(p) if feat.applies is not None else None
        if why:
            cells[feat.key] = Cell("—", instr, why=why)
            continue
        cands = {k: expand(t, {"arch": arch}) for k, t in feat.candidates(p).items()}
        try:
            models = {k: parse_variant(v).params(instr) for k, v in cands.items()}
        except UserError as e:
            cells[feat.key] = Cell("—", instr, why=str(e))
            continue
        vecs = [v for f in files if f.instruction == instr for v in f.vectors]
        alive = dict(models)
        used = 0
        for vec in vecs:
            seen = observe(arch, instr, vec)
            if seen is None:
                continue
            used += 1
            for k in list(alive):
                if _run(alive[k], vec) != seen:
                    del alive[k]
        survivors = list(alive)
        if not survivors:
            value = "none of " + ", ".join(cands)
        elif feat.least:
            value = " or ".join(_least(list(cands), survivors))
        else:
            value = " or ".join(survivors)
        cells[feat.key] = Cell(value, instr, survivors, cands, used)
    return cells


def _least(order: list[str], survivors: list[str]) -> list[str]:
    """What a `least` feature shows (candidates in increasing order): the first survivor
    above the largest refuted candidate (more is proved to change nothing), with every
    smaller survivor the vectors could not refute beside it; all survivors when none
    was refuted."""
    refuted = [i for i, c in enumerate(order) if c not in survivors]
    if not refuted:
        return survivors
    above = next((c for c in order[refuted[-1] + 1 :] if c in survivors), None)
    below = [c for c in survivors if order.index(c) < refuted[-1]]
    return below + ([above] if above is not None else [])


def _agrees(ref: str, cell: Cell, least: bool) -> bool:
    if least:
        return cell.value == ref
    if ref.startswith(">="):
        lo = int(ref[2:])
        return bool(cell.survivors) and all(s.isdigit() and int(s) >= lo for s in cell.survivors)
    return cell.survivors == [ref]


@dataclass
class Comparison:
    arch: str
    feature: str
    reference: Reference
    theirs: str
    ours: str
    agrees: bool
    explanation: str


def compare(matrix: dict[str, dict[str, Cell]]) -> list[Comparison]:
    """Every reference figure beside the deduced value; disagreements with their reason."""
    out = []
    tables = (
        (Reference.FTTN, FTTN_FP16),
        (Reference.VALPEY, VALPEY),
        (Reference.MMASIM, MMASIM),
    )
    for ref_name, table in tables:
        for arch, row in table.items():
            if arch not in matrix:
                continue
            for key, theirs in row.items():
                cell = matrix[arch][key]
                ok = _agrees(theirs, cell, _BY_KEY[key].least)
                out.append(
                    Comparison(
                        arch,
                        key,
                        ref_name,
                        theirs,
                        cell.value,
                        ok,
                        "" if ok else EXPLAINED.get((arch, key, ref_name), ""),
                    )
                )
    return out


def _cells_json(matrix: dict[str, dict[str, Cell]]) -> dict:
    return {
        arch: {
            k: {
                "value": c.value,
                "instruction": c.instruction,
                "survivors": c.survivors,
                "candidates": c.candidates,
                "vectors": c.vectors,
                "why": c.why,
            }
            for k, c in cells.items()
        }
        for arch, cells in matrix.items()
    }


def to_json(matrix: dict[str, dict[str, Cell]], sparse: dict | None = None) -> dict:
    """The matrix (and its sparse rows, build_sparse) with the reference comparison."""
    out = {
        "features": [
            {"key": f.key, "column": f.column, "property": f.property, "source": f.source}
            for f in FEATURES + INT_FEATURES + SPARSE_FEATURES
        ],
        "matrix": _cells_json(matrix),
        "references": [c.__dict__ | {"reference": c.reference.value} for c in compare(matrix)],
    }
    if sparse:
        out["sparse"] = _cells_json(sparse)
    return out


def to_markdown(
    matrix: dict[str, dict[str, Cell]], observer: str = "the presets", sparse: dict | None = None
) -> str:
    """results/features.md: the matrix, the integer units, the sparse forms (`sparse`,
    build_sparse) and the comparison with the papers."""
    cols = [f.column for f in FEATURES]
    lines = [
        "# Feature matrix",
        "",
        f"Each cell is what survives when every test vector in results/ARCH/ is run through "
        f"{observer}: the candidates of a feature are variants of the preset (e.g. extra "
        "alignment bits F - 23 for F within 2 of the preset's), and a candidate survives when it predicts "
        "every observed output. Cells are read on the instruction each property chose "
        "(features.json): fp16 inputs, except CDNA2's subnormal columns, read on bf16 "
        "(its fp16 GPS cannot produce a subnormal once inputs are flushed; FTTN gives "
        "MI250X bf16 the same answer as fp16). `—`: no property of the library asks "
        "it on that architecture (reason in features.json). Regenerate with `make results`.",
        "",
        "| arch | " + " | ".join(cols) + " |",
        "| --- | " + " | ".join("---" for _ in cols) + " |",
    ]
    for arch, cells in matrix.items():
        lines.append(f"| {arch} | " + " | ".join(cells[f.key].value for f in FEATURES) + " |")
    lines += _integer_rows(matrix)
    lines += _sparse_rows(sparse or {})
    comps = compare(matrix)
    lines += [
        "",
        "## Beside FTTN Table IV (FP16 rows), Valpey et al. 2025 and MMA-Sim Table III",
        "",
        "FTTN: V100 = volta, A100 = ampere, H100 = hopper, MI250X = cdna2 (MI100 = cdna1: "
        "tests/test_cdna1.py). Valpey et al. 2025 §4.3: carry bits. MMA-Sim: F of the fp16 HMMA forms "
        "as extra bits F - 23, and the fused group sizes (§IV-C).",
        "",
        "| arch | feature | reference | theirs | ours | agree | why they differ |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {f.key: f.column for f in FEATURES}
    for c in comps:
        mark = "yes" if c.agrees else "**no**"
        lines.append(
            f"| {c.arch} | {names[c.feature]} | {c.reference.value} | {c.theirs} | {c.ours} | "
            f"{mark} | {c.explanation} |"
        )
    return "\n".join(lines) + "\n"


def _integer_rows(matrix: dict[str, dict[str, Cell]]) -> list[str]:
    """The integer units' table: one row per architecture with integer instructions."""
    from ..model.integer import chain_bound, term_range

    rows = []
    for arch, cells in matrix.items():
        cell = cells.get("int_overflow")
        if cell is None or not cell.instruction:
            continue
        p = PRESETS[arch].instructions[cell.instruction].params
        K = chain_bound(*term_range(p))
        vals = " | ".join(cells[f.key].value for f in INT_FEATURES)
        rows.append(f"| {arch} | {cell.instruction} | {vals} | {K} |")
    if not rows:
        return []
    return [
        "",
        "## Integer units",
        "",
        "Read on the instruction the property integer-overflow chose (the .satfinite form "
        "where there is one): what the s32 accumulator does on overflow, and, under "
        ".satfinite, whether only the final sum is clamped (the presets) or the sum after "
        "every product (a hypothesis: the PTX ISA does not say); both survive a witness "
        "set that cannot tell them apart. Overflow-free K: the longest chain of the "
        "instruction from C = 0 that cannot leave the s32 range (model/integer.py; "
        "`tcsmt exact ARCH --instr INSTR`).",
        "",
        "| arch | instruction | "
        + " | ".join(f.column for f in INT_FEATURES)
        + " | overflow-free K |",
        "| --- | --- | " + " | ".join("---" for _ in INT_FEATURES) + " | --- |",
        *rows,
    ]


def build(results: Path = Path("results"), archs: list[str] | None = None) -> dict:
    """The matrix for `archs` (default: every preset) from the vectors under `results`."""
    return {a: deduce(a, results) for a in (archs or list(PRESETS))}


def build_sparse(results: Path = Path("results")) -> dict:
    """The sparse rows: every preset with witnesses under results/ARCH/SPARSE_DIR."""
    return {
        a: deduce(a, results, folder=SPARSE_DIR)
        for a in PRESETS
        if (results / a / SPARSE_DIR).is_dir()
    }


def _sparse_rows(sparse: dict[str, dict[str, Cell]]) -> list[str]:
    """The sparse forms' table: the matrix's columns read on each preset's sparse form
    (its dense unit), and which dense unit it is."""
    if not sparse:
        return []
    cols = FEATURES + SPARSE_FEATURES
    rows = []
    for arch, cells in sparse.items():
        instr = next((c.instruction for c in cells.values() if c.instruction), "")
        rows.append(f"| {arch} | {instr} | " + " | ".join(cells[f.key].value for f in cols) + " |")
    return [
        "",
        "## Sparse forms (mma.sp)",
        "",
        "The same deduction on the witnesses the library found on each preset's sparse form "
        "(results/ARCH/sparse/, `make results`), every group of the metadata keeping "
        "positions 0 and 1: the candidates are variants of the dense unit the preset says "
        "the form runs (the 16 kept products), and the last column asks which dense unit "
        "that is, compressed (the presets, confirmed on an H100) or expanded (K products, "
        "+0 where A is pruned).",
        "",
        "| arch | instruction | " + " | ".join(f.column for f in cols) + " |",
        "| --- | --- | " + " | ".join("---" for _ in cols) + " |",
        *rows,
    ]
