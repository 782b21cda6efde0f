"""Hardware test-vector files: inputs for one instruction and each variant's predicted bits.

A vector is one dot product ``d = c + sum_k a[k] * b[k]`` of an instruction: on the GPU it
sits in row 0 of A, column 0 of B and C[0][0] with every other element zero (Fasi et al.
§III), so D[0][0] is the answer. A file holds the target architecture (a preset name),
the instruction, the variants (hypotheses, e.g. ``volta`` and ``volta[carry_bits=2]``)
and, per vector, the bits each variant predicts.

Formats: JSON (schema ``tcsmt-vectors``, version 1) and CSV (one row per vector under a
``# tcsmt-vectors {...}`` line that holds the header fields as JSON). docs/vectors.md
documents both. Every hex string is the IEEE encoding in that operand's own format
(fp16: 4 digits, fp32 and tf32: 8, fp8: 2). `load` validates everything and reports the
first problem as one line naming the file and the field, e.g.
``v.json: vectors[3].a[2]: 'zz' is not a hex bit pattern``.

`read_rows` is the one reader of input rows (JSONL rows or a vector file) that simulate,
validate and identify's file oracle use. (About 750 lines: the file format, its CSV form
and the row reader are one contract, read and changed together.)
"""

from __future__ import annotations

import builtins
import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from ..api import simulate_one
from ..errors import UserError
from ..formats import Format, format_hex, parse_hex
from ..memory import read_text
from ..model.params import ModelParams
from ..spec.presets import PRESETS, Instruction, parse_variant
from ..version import __version__

SCHEMA = "tcsmt-vectors"
SCHEMA_VERSION = 1
GEMM_SCHEMA = "tcsmt-gemm-vectors"
"""The schema of GEMM vector files (validation.gemm_vectors), told apart in errors."""
CSV_MARK = "# tcsmt-vectors "

_TOP_KEYS = {
    "schema",
    "schema_version",
    "tool_version",
    "arch",
    "instruction",
    "property",
    "variants",
    "formats",
    "K",
    "meta",
    "vectors",
}
T = TypeVar("T")
_VECTOR_KEYS = {"a", "b", "c", "sa", "sb", "metadata", "predicted", "note", "source"}


def vector_rows(obj: dict, keys: set[str]):
    """(where, row) for each entry of a vector file's "vectors" list, each checked to be an
    object with a, b and c and no field outside `keys` (one line naming the place if not);
    shared by the instruction and the GEMM vector files."""
    rows = obj["vectors"]
    if not isinstance(rows, list):
        raise UserError("vectors: expected a list")
    for i, row in enumerate(rows):
        where = f"vectors[{i}]"
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected an object with a, b, c")
        for k in row:
            if k not in keys:
                raise UserError(f"{where}.{k}: unknown field")
        for k in ("a", "b", "c"):
            if k not in row:
                raise UserError(f"{where}.{k}: missing")
        yield where, row


@dataclass
class Vector:
    """One dot product's inputs (bit patterns) and each variant's predicted output bits."""

    a: list[int]
    b: list[int]
    c: int
    predicted: dict[str, int]
    note: str = ""
    source: str = ""
    # block scale factors of a and b (block-scaled instructions only; None: all 1)
    sa: list[int] | None = None
    sb: list[int] | None = None
    # a structured-sparse (mma.sp) instruction's metadata: the position within its group
    # of each of the n_a kept entries of a (model/sparse.py); None for a dense one
    metadata: list[int] | None = None

    def key(self) -> tuple:
        """Identity of the inputs (two vectors with equal keys are the same test)."""
        scales = (tuple(self.sa or ()), tuple(self.sb or ()))
        key = (tuple(self.a), tuple(self.b), self.c) + (scales if self.sa or self.sb else ())
        return key + (("metadata", *self.metadata),) if self.metadata is not None else key


@dataclass
class VectorFile:
    """Test vectors for one instruction of one architecture."""

    arch: str
    instruction: str
    variants: list[str]
    vectors: list[Vector]
    property: str | None = None
    meta: dict = field(default_factory=dict)

    # --- the instruction and its operand formats ----------------------------------

    def instr(self) -> Instruction:
        """The preset instruction (UserError if the arch or instruction is unknown). A
        variant expression or named hypothesis as `arch` stands for its preset."""
        try:
            arch = PRESETS[self.arch] if self.arch in PRESETS else parse_variant(self.arch).preset
        except (UserError, TypeError, AttributeError):
            raise UserError(
                f"arch: unknown architecture {self.arch!r}; known: {', '.join(PRESETS)}"
            ) from None
        try:
            return parse_variant(arch.name).instruction(self.instruction)
        except UserError as e:
            raise UserError(f"instruction: {e}") from None

    @builtins.property  # (the field `property` shadows the builtin in this class body)
    def params(self) -> ModelParams:
        return self.instr().params

    def formats(self) -> dict[str, Format]:
        p = self.params
        return {"a": p.a_fmt, "b": p.b_fmt, "c": p.c_fmt, "d": p.d_fmt}

    def variant_params(self, variant: str) -> ModelParams:
        """The model of this file's instruction under `variant` (UserError if it differs in
        operand formats or K, or the variant does not parse)."""
        v = parse_variant(variant)
        p = v.params(self.instruction)
        base = self.params
        for name in ("a_fmt", "b_fmt", "c_fmt", "d_fmt", "K"):
            if getattr(p, name) != getattr(base, name):
                raise UserError(
                    f"{name.replace('_fmt', '')} differs from the instruction's "
                    f"({_fmt_name(getattr(p, name))} vs {_fmt_name(getattr(base, name))})"
                )
        return p

    # --- validation and serialisation ---------------------------------------------

    def validate(self) -> None:
        """Raise UserError naming the first bad field (path like ``vectors[3].a[2]``)."""
        inst = self.instr()
        if self.arch not in PRESETS:
            self.arch = parse_variant(self.arch).preset.name
        self.instruction = inst.name
        p = inst.params
        if self.property is not None and not isinstance(self.property, str):
            raise UserError("property: expected a string or null")
        if not isinstance(self.meta, dict):
            raise UserError("meta: expected an object")
        seen: set[str] = set()
        for i, v in enumerate(self.variants):
            where = f"variants[{i}]"
            if not isinstance(v, str) or not v.strip():
                raise UserError(f"{where}: expected a variant expression such as 'volta[F=24]'")
            if v in seen:
                raise UserError(f"{where}: {v!r} is listed twice")
            seen.add(v)
            try:
                self.variant_params(v)
            except UserError as e:
                raise UserError(f"{where}: {e}") from None
        for i, vec in enumerate(self.vectors):
            where = f"vectors[{i}]"
            for name, fmt, n in (("a", p.a_fmt, p.n_a), ("b", p.b_fmt, p.K)):
                xs = getattr(vec, name)
                if not isinstance(xs, list | tuple) or len(xs) != n:
                    got = len(xs) if isinstance(xs, list | tuple) else type(xs).__name__
                    raise UserError(f"{where}.{name}: expected {n} entries, got {got}")
                for j, x in enumerate(xs):
                    _check_int(x, fmt, f"{where}.{name}[{j}]")
            _check_int(vec.c, p.c_fmt, f"{where}.c")
            _check_scales(vec, p, where)
            _check_metadata(vec.metadata, p, where)
            if not isinstance(vec.predicted, dict):
                raise UserError(f"{where}.predicted: expected an object")
            for var, d in vec.predicted.items():
                if var not in seen:
                    raise UserError(f"{where}.predicted: {var!r} is not one of the file's variants")
                _check_int(d, p.d_fmt, f"{where}.predicted[{var!r}]")
            for name in ("note", "source"):
                if not isinstance(getattr(vec, name), str):
                    raise UserError(f"{where}.{name}: expected a string")

    def to_json(self) -> dict:
        """The file as a JSON-ready dict (validated first)."""
        self.validate()
        f = self.formats()
        vectors = []
        for vec in self.vectors:
            row: dict[str, Any] = {
                "a": [format_hex(x, f["a"]) for x in vec.a],
                "b": [format_hex(x, f["b"]) for x in vec.b],
                "c": format_hex(vec.c, f["c"]),
                **scale_fields(vec, self.params),
                **({"metadata": list(vec.metadata)} if vec.metadata is not None else {}),
                "predicted": {
                    v: format_hex(vec.predicted[v], f["d"])
                    for v in self.variants
                    if v in vec.predicted
                },
            }
            if vec.note:
                row["note"] = vec.note
            if vec.source:
                row["source"] = vec.source
            vectors.append(row)
        return {
            **self._header(),
            "vectors": vectors,
        }

    def _header(self) -> dict:
        f = self.formats()
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tool_version": __version__,
            "arch": self.arch,
            "instruction": self.instruction,
            "property": self.property,
            "variants": list(self.variants),
            "formats": {k: v.spec.name for k, v in f.items()},
            "K": self.params.K,
            "meta": dict(self.meta),
        }


def scale_fields(vec: Vector, p: ModelParams) -> dict[str, list[str]]:
    """The vector's scale factors as hex lists {"sa": [...], "sb": [...]} (empty when it
    has none)."""
    if vec.sa is None or vec.sb is None or p.scale_fmt is None:
        return {}
    fmt = p.scale_fmt
    return {"sa": [format_hex(x, fmt) for x in vec.sa], "sb": [format_hex(x, fmt) for x in vec.sb]}


def _check_scales(vec: Vector, p: ModelParams, where: str) -> None:
    """sa and sb: both or neither, only on a block-scaled instruction, n_scales each."""
    if vec.sa is None and vec.sb is None:
        return
    if p.scale_fmt is None:
        raise UserError(f"{where}.sa: this instruction takes no scale factors")
    for name in ("sa", "sb"):
        xs = getattr(vec, name)
        if not isinstance(xs, list | tuple) or len(xs) != p.n_scales:
            got = len(xs) if isinstance(xs, list | tuple) else type(xs).__name__
            raise UserError(f"{where}.{name}: expected {p.n_scales} entries, got {got}")
        for j, x in enumerate(xs):
            _check_int(x, p.scale_fmt, f"{where}.{name}[{j}]")


def _check_metadata(meta: Any, p: ModelParams, where: str) -> None:
    """A sparse instruction's vectors carry valid metadata, a dense one's none."""
    from ..model.params import Sparsity
    from ..model.sparse import check_metadata

    if p.sparse == Sparsity.NONE:
        if meta is not None:
            raise UserError(f"{where}.metadata: a dense instruction takes no metadata")
        return
    if not isinstance(meta, list | tuple) or any(
        isinstance(x, bool) or not isinstance(x, int) for x in meta
    ):
        raise UserError(
            f"{where}.metadata: a sparse instruction's vector needs its metadata, "
            f"{p.n_a} integers ({p.sparse_keep} of every {p.sparse_group} k)"
        )
    try:
        check_metadata(meta, p)
    except ValueError as e:
        raise UserError(f"{where}.{e}") from None


def _fmt_name(x: Any) -> str:
    return x.spec.name if isinstance(x, Format) else str(x)


def _check_int(x: Any, fmt: Format, where: str) -> None:
    if isinstance(x, bool) or not isinstance(x, int):
        raise UserError(f"{where}: expected an integer bit pattern, got {type(x).__name__}")
    if not 0 <= x < (1 << fmt.spec.storage):
        raise UserError(
            f"{where}: {x:#x} does not fit in {fmt.spec.storage}-bit {fmt.spec.name}"
            if x >= 0
            else f"{where}: negative bit pattern {x}"
        )


# --- JSON ----------------------------------------------------------------------------


def _hex(obj: Any, fmt: Format, where: str) -> int:
    if not isinstance(obj, str):
        raise UserError(
            f"{where}: expected a hex string such as {format_hex(0, fmt)!r}, got {json.dumps(obj)}"
        )
    try:
        return parse_hex(obj, fmt, where)
    except ValueError as e:
        raise UserError(str(e)) from None


def from_json(obj: Any) -> VectorFile:
    """Build and validate a VectorFile from parsed JSON (errors name the field)."""
    if not isinstance(obj, dict):
        raise UserError("not a JSON object (a tcsmt-vectors file is one object)")
    if "schema" not in obj:
        raise UserError(f'schema: missing (expected "schema": "{SCHEMA}")')
    if obj["schema"] == GEMM_SCHEMA:
        raise UserError(
            f"a GEMM vector file ({GEMM_SCHEMA}); this command reads instruction vector files "
            f"({SCHEMA}); GEMM vectors go to `tcsmt probe`"
        )
    if obj["schema"] != SCHEMA:
        raise UserError(f"schema: expected {SCHEMA!r}, got {json.dumps(obj['schema'])}")
    ver = obj.get("schema_version")
    if isinstance(ver, bool) or not isinstance(ver, int):
        raise UserError(f"schema_version: expected an integer, got {json.dumps(ver)}")
    if ver > SCHEMA_VERSION:
        raise UserError(
            f"schema_version: {ver} is newer than this tcsmt ({__version__}) reads "
            f"(up to {SCHEMA_VERSION}); upgrade tensorcore-smt"
        )
    if ver < 1:
        raise UserError(f"schema_version: {ver} is not a valid version")
    for k in obj:
        if k not in _TOP_KEYS:
            raise UserError(f"{k}: unknown field (free-form data belongs in 'meta')")
    for k in ("arch", "instruction", "variants", "vectors"):
        if k not in obj:
            raise UserError(f"{k}: missing")
    for k in ("arch", "instruction"):
        if not isinstance(obj[k], str):
            raise UserError(f"{k}: expected a string, got {json.dumps(obj[k])}")
    if "tool_version" in obj and not isinstance(obj["tool_version"], str):
        raise UserError("tool_version: expected a string")
    prop = obj.get("property")
    if prop is not None and not isinstance(prop, str):
        raise UserError(f"property: expected a string or null, got {json.dumps(prop)}")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise UserError("meta: expected an object")
    variants = obj["variants"]
    if not isinstance(variants, list):
        raise UserError("variants: expected a list of variant expressions")
    for i, v in enumerate(variants):
        if not isinstance(v, str):
            raise UserError(f"variants[{i}]: expected a string, got {json.dumps(v)}")
    vf = VectorFile(obj["arch"], obj["instruction"], list(variants), [], prop, dict(meta))
    vf.validate()  # arch, instruction and variants before the vectors that refer to them
    inst = vf.instr()
    p = inst.params
    fmts = {"a": p.a_fmt, "b": p.b_fmt, "c": p.c_fmt, "d": p.d_fmt}
    check_formats(obj, fmts, inst.name)
    if "K" in obj and obj["K"] != p.K:
        raise UserError(f"K: {inst.name} has K={p.K}, the file says {json.dumps(obj['K'])}")
    listed = set(variants)
    for where, row in vector_rows(obj, _VECTOR_KEYS):
        ab = {}
        for k, n in (("a", p.n_a), ("b", p.K)):
            xs = row[k]
            if not isinstance(xs, list):
                raise UserError(f"{where}.{k}: expected a list of {n} hex strings")
            if len(xs) != n:
                raise UserError(f"{where}.{k}: expected {n} entries, got {len(xs)}")
            ab[k] = [_hex(x, fmts[k], f"{where}.{k}[{j}]") for j, x in enumerate(xs)]
        metadata = row.get("metadata")
        _check_metadata(metadata, p, where)
        c = _hex(row["c"], fmts["c"], f"{where}.c")
        scales = _row_scales(row, p, where)
        pred_obj = row.get("predicted", {})
        if not isinstance(pred_obj, dict):
            raise UserError(f"{where}.predicted: expected an object {{variant: hex}}")
        pred = {}
        for var, d in pred_obj.items():
            if var not in listed:
                raise UserError(f"{where}.predicted: {var!r} is not one of the file's variants")
            pred[var] = _hex(d, fmts["d"], f"{where}.predicted[{var!r}]")
        for k in ("note", "source"):
            if k in row and not isinstance(row[k], str):
                raise UserError(f"{where}.{k}: expected a string")
        vf.vectors.append(
            Vector(
                ab["a"],
                ab["b"],
                c,
                pred,
                row.get("note", ""),
                row.get("source", ""),
                *scales,
                metadata=list(metadata) if metadata is not None else None,
            )
        )
    vf.validate()
    return vf


def _row_scales(row: dict, p: ModelParams, where: str) -> tuple[list[int] | None, ...]:
    """The optional "sa" / "sb" hex lists of a row (both or neither; block-scaled
    instructions only, p.n_scales entries each)."""
    if "sa" not in row and "sb" not in row:
        return (None, None)
    if p.scale_fmt is None:
        raise UserError(f"{where}.sa: this instruction takes no scale factors")
    out = []
    for k in ("sa", "sb"):
        xs = row.get(k)
        if not isinstance(xs, list):
            raise UserError(f"{where}.{k}: expected a list of {p.n_scales} hex strings")
        if len(xs) != p.n_scales:
            raise UserError(f"{where}.{k}: expected {p.n_scales} entries, got {len(xs)}")
        out.append([_hex(x, p.scale_fmt, f"{where}.{k}[{j}]") for j, x in enumerate(xs)])
    return tuple(out)


def load_file(path: str | Path, parse: Callable[[str], T]) -> T:
    """`parse` of a file's text; errors (unreadable file, bad content) are one UserError
    line that names the file. Shared by the instruction and the GEMM vector files."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    text = read_text(path)  # within the machine's memory, text only
    try:
        return parse(text)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None


def check_formats(obj: dict, fmts: dict[str, Format], who: str) -> None:
    """The file's optional "formats" object against the operand formats `who` (an
    instruction, or the hypotheses) takes; UserError (one line) on a mismatch."""
    if "formats" not in obj:
        return
    given = obj["formats"]
    if not isinstance(given, dict):
        raise UserError("formats: expected an object with keys a, b, c, d")
    for k, v in given.items():
        if k not in fmts:
            raise UserError(f"formats.{k}: unknown operand (expected a, b, c, d)")
        if v != fmts[k].spec.name:
            raise UserError(
                f"formats.{k}: {who} takes {fmts[k].spec.name}, the file says {json.dumps(v)}"
            )


def json_object(text: str) -> Any:
    """The JSON value of `text`, or one UserError line giving the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def load(path: str | Path) -> VectorFile:
    """Read and validate a vector file (JSON, or CSV when the name ends in .csv)."""
    csv_format = is_csv(path)
    return load_file(path, lambda text: loads(text, csv_format=csv_format))


def loads(text: str, csv_format: bool = False) -> VectorFile:
    """Parse and validate the text of a vector file (errors name the field, not the file)."""
    if csv_format:
        return from_csv(text)
    return from_json(json_object(text))


def dumps(vf: VectorFile, path: str | Path) -> str:
    """The text `save` writes to `path`: JSON, or CSV when the path ends in .csv."""
    if is_csv(path):
        return to_csv(vf)
    return json.dumps(vf.to_json(), indent=2) + "\n"


def save(vf: VectorFile, path: str | Path) -> None:
    """Write `vf` as JSON, or as CSV when the path ends in .csv (validated first)."""
    Path(path).write_text(dumps(vf, path))


# --- CSV -----------------------------------------------------------------------------


def _csv_columns(K: int, variants: list[str]) -> list[str]:
    return (
        ["index"]
        + [f"a[{i}]" for i in range(K)]
        + [f"b[{i}]" for i in range(K)]
        + ["c"]
        + [f"d[{v}]" for v in variants]
        + ["note", "source"]
    )


def json_only(scales: bool, metadata: bool) -> str | None:
    """Why vectors with scale factors or sparsity metadata cannot be written as CSV
    (None: they can), so that a command refuses a CSV --out before any work."""
    if scales:
        return "CSV has no columns for scale factors (sa, sb); write JSON instead"
    if metadata:
        return "CSV has no columns for sparsity metadata; write JSON instead"
    return None


def is_csv(path: str | Path) -> bool:
    """Whether a vector file path is read and written as CSV (by its extension)."""
    return Path(path).suffix.lower() == ".csv"


def to_csv(vf: VectorFile) -> str:
    """CSV text: a ``# tcsmt-vectors {header JSON}`` line, column names, one row per vector.

    Columns: index, a[0..K-1], b[0..K-1], c, d[<variant>] per variant (empty: no
    prediction), note, source. Scale factors have no columns: a file whose vectors carry
    them is JSON only."""
    obj = vf.to_json()
    why = json_only(
        any("sa" in row for row in obj["vectors"]), any("metadata" in row for row in obj["vectors"])
    )
    if why:
        raise UserError(why)
    header = {k: v for k, v in obj.items() if k != "vectors"}
    out = io.StringIO()
    out.write(CSV_MARK + json.dumps(header) + "\n")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(_csv_columns(header["K"], vf.variants))
    for i, row in enumerate(obj["vectors"]):
        w.writerow(
            [i, *row["a"], *row["b"], row["c"]]
            + [row["predicted"].get(v, "") for v in vf.variants]
            + [row.get("note", ""), row.get("source", "")]
        )
    return out.getvalue()


def from_csv(text: str) -> VectorFile:
    """Parse the CSV form (see `to_csv`) and validate it like JSON."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(CSV_MARK):
        raise UserError(f"line 1: expected the header line '{CSV_MARK}{{...}}'")
    try:
        header = json.loads(lines[0][len(CSV_MARK) :])
    except json.JSONDecodeError as e:
        raise UserError(f"line 1: header is not valid JSON ({e.msg})") from None
    if not isinstance(header, dict):
        raise UserError("line 1: header is not a JSON object")
    if "vectors" in header:
        raise UserError("line 1: vectors: belong in the rows, not the header")
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:]) + "\n")))
    if not rows:
        raise UserError("line 2: missing the column names")
    cols = rows[0]
    try:
        k = cols.index("c")
    except ValueError:
        raise UserError("line 2: no column 'c'") from None
    K = (k - 1) // 2
    variants = []
    for name in cols[k + 1 :]:
        if name.startswith("d[") and name.endswith("]"):
            variants.append(name[2:-1])
        elif name not in ("note", "source"):
            raise UserError(f"line 2: unexpected column {name!r}")
    expected = _csv_columns(K, variants)
    if [c for c in cols if c not in ("note", "source")] != [
        c for c in expected if c not in ("note", "source")
    ]:
        raise UserError(
            f"line 2: columns must be {', '.join(expected[:3])}, …, c, d[<variant>]…, note, source"
        )
    if "variants" in header and header["variants"] != variants:
        raise UserError("line 1: variants: the header and the d[...] columns disagree")
    vectors = []
    for n, row in enumerate(rows[1:], 3):
        if not row:
            continue
        if len(row) != len(cols):
            raise UserError(f"line {n}: expected {len(cols)} columns, got {len(row)}")
        cell = dict(zip(cols, row))
        vec: dict[str, Any] = {
            "a": [cell[f"a[{i}]"] for i in range(K)],
            "b": [cell[f"b[{i}]"] for i in range(K)],
            "c": cell["c"],
            "predicted": {v: cell[f"d[{v}]"] for v in variants if cell[f"d[{v}]"].strip()},
        }
        for extra in ("note", "source"):
            if cell.get(extra):
                vec[extra] = cell[extra]
        vectors.append(vec)
    return from_json({**header, "variants": variants, "vectors": vectors})


# --- operations on files -------------------------------------------------------------


def merge(files: list[VectorFile]) -> VectorFile:
    """One file from several of the same arch and instruction: the union of the variants,
    each distinct input once, predictions merged (conflicting predictions are an error)."""
    if not files:
        raise UserError("merge: no files")
    first = files[0]
    first.validate()
    variants: list[str] = []
    by_key: dict[tuple, Vector] = {}
    props = []
    meta: dict = {}
    for n, vf in enumerate(files):
        vf.validate()
        if (vf.arch, vf.instruction) != (first.arch, first.instruction):
            raise UserError(
                f"files[{n}]: cannot merge {vf.arch} {vf.instruction} into "
                f"{first.arch} {first.instruction} (arch and instruction must match)"
            )
        for v in vf.variants:
            if v not in variants:
                variants.append(v)
        if vf.property and vf.property not in props:
            props.append(vf.property)
        for k, v in vf.meta.items():
            meta.setdefault(k, v)
        d_fmt = vf.params.d_fmt
        for vec in vf.vectors:
            have = by_key.get(vec.key())
            if have is None:
                by_key[vec.key()] = replace(
                    vec, a=list(vec.a), b=list(vec.b), predicted=dict(vec.predicted)
                )
                continue
            for var, d in vec.predicted.items():
                if var in have.predicted and have.predicted[var] != d:
                    idx = list(by_key).index(vec.key())
                    raise UserError(
                        f"files[{n}]: vector {idx} (c={format_hex(vec.c, vf.params.c_fmt)}) "
                        f"predicts {format_hex(d, d_fmt)} for {var}, another file "
                        f"{format_hex(have.predicted[var], d_fmt)}"
                    )
                have.predicted[var] = d
            for name in ("note", "source"):
                new, old = getattr(vec, name), getattr(have, name)
                if new and new not in old.split("; "):
                    setattr(have, name, f"{old}; {new}" if old else new)
    if len(props) > 1:
        meta["properties"] = props
    return VectorFile(
        first.arch,
        first.instruction,
        variants,
        list(by_key.values()),
        props[0] if len(props) == 1 else None,
        meta,
    )


def predict(vf: VectorFile, *, only_missing: bool = False) -> VectorFile:
    """A copy of `vf` with every variant's prediction for every vector computed by the
    concrete (reference) interpreter; `only_missing` keeps predictions already there."""
    vf.validate()
    models = {v: vf.variant_params(v) for v in vf.variants}
    out = []
    for vec in vf.vectors:
        pred = dict(vec.predicted) if only_missing else {}
        for v, p in models.items():
            if v not in pred:
                pred[v] = simulate_one(
                    p, list(vec.a), list(vec.b), vec.c, vec.sa, vec.sb, meta=vec.metadata
                )
        out.append(replace(vec, a=list(vec.a), b=list(vec.b), predicted=pred))
    return replace(vf, variants=list(vf.variants), vectors=out, meta=dict(vf.meta))


def stale_predictions(vf: VectorFile) -> list[tuple[int, str, int, int]]:
    """(vector index, variant, stored bits, model bits) for every stored prediction the
    model of this tcsmt does not reproduce."""
    fresh = predict(vf)
    out = []
    for i, (old, new) in enumerate(zip(vf.vectors, fresh.vectors)):
        for v, d in old.predicted.items():
            if new.predicted[v] != d:
                out.append((i, v, d, new.predicted[v]))
    return out


def parse_scales(obj: dict, p: ModelParams) -> tuple[list[int] | None, list[int] | None]:
    """The optional `"sa"`, `"sb"` hex lists of a JSONL row (block-scaled instructions:
    p.n_scales scale factors of a and of b); ValueError naming the field if malformed."""
    if "sa" not in obj and "sb" not in obj:
        return None, None
    if p.scale_fmt is None:
        raise ValueError("sa, sb: this instruction takes no scale factors")
    out = []
    for k in ("sa", "sb"):
        xs = obj.get(k)
        if not isinstance(xs, list) or len(xs) != p.n_scales:
            raise ValueError(f"{k}: expected a list of {p.n_scales} hex strings")
        out.append([parse_hex(str(x), p.scale_fmt, f"{k}[{i}]") for i, x in enumerate(xs)])
    return out[0], out[1]


def parse_row(line: str, p: ModelParams) -> tuple[list[int], list[int], int, dict]:
    """One JSONL row `{"a": [K hex], "b": [K hex], "c": hex, ...}` for the model `p`:
    (a, b, c, the row object). ValueError naming the field if the row is malformed
    (optional `"sa"`, `"sb"` are read by `parse_scales`). A structured-sparse form's a
    holds its n_a kept entries, placed by the row's `metadata`, as in a vector file."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise ValueError("row is not a JSON object")
    for key in ("a", "b", "c"):
        if key not in obj:
            raise ValueError(f"missing field {key!r}")
    if not isinstance(obj["a"], list) or not isinstance(obj["b"], list):
        raise ValueError("a and b must be lists of hex strings")
    if len(obj["a"]) != p.n_a or len(obj["b"]) != p.K:
        need = (
            f"{p.K}"
            if p.n_a == p.K
            else f"{p.n_a} (the kept entries, placed by `metadata`) and {p.K}"
        )
        raise ValueError(f"a and b need {need} entries, got {len(obj['a'])} and {len(obj['b'])}")
    a = [parse_hex(str(x), p.a_fmt, f"a[{i}]") for i, x in enumerate(obj["a"])]
    b = [parse_hex(str(x), p.b_fmt, f"b[{i}]") for i, x in enumerate(obj["b"])]
    c = parse_hex(str(obj["c"]), p.c_fmt, "c")
    return a, b, c, obj


def is_vector_json(text: str) -> bool:
    """Whether `text` is one JSON object shaped like a vector file (not a JSONL row)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and ("schema" in obj or "vectors" in obj)


# --- the one row reader: JSONL rows or a vector file -----------------------------------


@dataclass
class InputRow:
    """One input row read by `read_rows`: the operands' bit patterns, the row as JSON
    (JSONL: as written; a vector file's vector: a, b, c in hex, its scale factors and
    note), where it is in its file, and the outputs recorded with it (JSONL: `d` when
    asked for; a vector file: its distinct predictions)."""

    a: list[int]
    b: list[int]
    c: int
    sa: list[int] | None
    sb: list[int] | None
    obj: dict
    where: str  # "PATH:LINE" (JSONL, CSV) or "PATH vectors[i]" (JSON vector file)
    d: list[int] = field(default_factory=list)
    metadata: list[int] | None = None  # a structured-sparse form's (its vectors' field)


@dataclass
class RowsRead:
    """What `read_rows` read: the rows, and with `partial=True` the first bad JSONL line's
    one-line error (the rows are those before it)."""

    rows: list[InputRow]
    error: str | None = None

    def arrays(self, p: ModelParams):
        """(a (n, n_a), b (n, K), c (n,)) uint64 arrays of the rows."""
        import numpy as np

        n = len(self.rows)
        a = np.array([r.a for r in self.rows], dtype=np.uint64).reshape(n, p.n_a)
        b = np.array([r.b for r in self.rows], dtype=np.uint64).reshape(n, p.K)
        c = np.array([r.c for r in self.rows], dtype=np.uint64).reshape(n)
        return a, b, c


def read_rows(
    path: str | Path, p: ModelParams, *, outputs: bool = False, partial: bool = False
) -> RowsRead:
    """Input rows for the instruction of `p` from JSONL rows (`{"a": [K hex], "b": [K
    hex], "c": hex}`, optional `sa`, `sb`, `note`, and `d` when `outputs`) or a vector
    file (JSON, or CSV when the name ends in .csv; its instruction must take `p`'s
    operands, and its output format too when `outputs`). Every error is one UserError
    line naming the file and its own line (JSONL, CSV) or vector. `outputs`: each row
    must carry exactly one recorded d (JSONL field `d`; one distinct prediction per
    vector). `partial`: a bad JSONL line ends the reading and is returned as `error`
    with the rows before it, and no rows is no error."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    text = read_text(path)  # within the machine's memory, text only
    is_csv = path.suffix.lower() == ".csv"
    if is_csv or is_vector_json(text):
        out = RowsRead(_vector_file_rows(path, text, is_csv, p, outputs))
    else:
        out = RowsRead([])
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.rows.append(_jsonl_row(line, p, outputs, f"{path}:{lineno}"))
            except ValueError as e:  # json.JSONDecodeError is a ValueError
                if not partial:
                    raise UserError(f"{path}:{lineno}: {e}") from None
                out.error = f"{path}:{lineno}: {e}"
                break
    if not out.rows and not partial:
        raise UserError(f"{path}: no rows")
    return out


def _jsonl_row(line: str, p: ModelParams, outputs: bool, where: str) -> InputRow:
    a, b, c, obj = parse_row(line, p)
    sa, sb = parse_scales(obj, p)
    if not isinstance(obj.get("note", ""), str):
        raise ValueError("note: expected a string")
    d = []
    if outputs:
        if "d" not in obj:
            raise ValueError("missing field 'd' (the recorded output)")
        d = [parse_hex(str(obj["d"]), p.d_fmt, "d")]
    metadata = obj.get("metadata")
    try:
        _check_metadata(metadata, p, "row")
    except UserError as e:
        raise ValueError(str(e).removeprefix("row.")) from None
    return InputRow(a, b, c, sa, sb, obj, where, d, metadata)


def _vector_file_rows(
    path: Path, text: str, is_csv: bool, p: ModelParams, outputs: bool
) -> list[InputRow]:
    try:
        vf = loads(text, csv_format=is_csv)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    q = vf.params
    mine = (q.K, q.a_fmt, q.b_fmt, q.c_fmt) + ((q.d_fmt,) if outputs else ())
    if mine != (p.K, p.a_fmt, p.b_fmt, p.c_fmt) + ((p.d_fmt,) if outputs else ()):
        what = "operands or output" if outputs else "operands"
        raise UserError(
            f"{path}: its instruction {vf.instruction} takes other {what} than the one "
            f"run; pass --instr {vf.instruction}"
        )
    rows = []
    for i, v in enumerate(vf.vectors):
        # CSV: line 1 is the header, line 2 the column names
        where = f"{path}:{i + 3}" if is_csv else f"{path} vectors[{i}]"
        d = sorted(set(v.predicted.values()))
        if outputs and len(d) != 1:
            raise UserError(
                f"{where}: expected one recorded d (the observed output), got {len(d)} "
                "distinct predictions"
            )
        obj = {
            "a": [format_hex(x, p.a_fmt) for x in v.a],
            "b": [format_hex(x, p.b_fmt) for x in v.b],
            "c": format_hex(v.c, p.c_fmt),
            **scale_fields(v, p),
        }
        if v.note:
            obj["note"] = v.note
        rows.append(InputRow(list(v.a), list(v.b), v.c, v.sa, v.sb, obj, where, d, v.metadata))
    return rows
