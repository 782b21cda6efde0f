"""GEMM vector files: inputs of one output element of D = A·B + C and each GEMM
hypothesis's predicted bits.

A GEMM vector is a row of A (K entries), a column of B (K entries) and c: on the GPU it
sits in row 0 of A, column 0 of B and C[0][0] of an M×N×K product whose other elements
are zero, so D[0][0] is the answer. A file holds the architecture, the instruction the
hypotheses run (`instruction`), K, the hypotheses (`ARCH[...]/SCHEDULE[...]`) and per
vector each hypothesis's prediction.

JSON, schema ``tcsmt-gemm-vectors``, version 1 (docs/gemm-solvers.md):

    {"schema": "tcsmt-gemm-vectors", "schema_version": 1, "tool_version": "...",
     "arch": "hopper", "instruction": "wgmma.m64n8k32.f32.e4m3.e4m3", "K": 256,
     "formats": {"a": "e4m3", "b": "e4m3", "c": "fp32", "d": "fp32"},
     "hypotheses": ["hopper/serial", "hopper/serial[promote=128]"],
     "shape": [64, 64], "property": null, "meta": {},
     "vectors": [{"a": [K hex], "b": [K hex], "c": "0x...",
                  "predicted": {"hopper/serial": "0x...", ...}, "note": "..."}]}

Every hex string is the encoding in that operand's own format. `load` validates everything
and reports the first problem as one line naming the field (``vectors[0].a[3]: ...``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..formats import Format, format_hex, parse_hex
from ..version import __version__
from .vectors import GEMM_SCHEMA, check_formats, json_object, load_file, vector_rows

SCHEMA = GEMM_SCHEMA
SCHEMA_VERSION = 1
DEFAULT_SHAPE = (64, 64)
"""M and N of the product a probe embeds each vector in (row 0 of A, column 0 of B)."""
MAX_SHAPE = 1 << 14

_TOP_KEYS = {
    "schema",
    "schema_version",
    "tool_version",
    "arch",
    "instruction",
    "K",
    "formats",
    "hypotheses",
    "shape",
    "property",
    "meta",
    "vectors",
}
_VECTOR_KEYS = {"a", "b", "c", "predicted", "note"}


@dataclass
class GemmVector:
    """One output element's inputs (bit patterns) and each hypothesis's predicted d."""

    a: list[int]
    b: list[int]
    c: int
    predicted: dict[str, int]
    note: str = ""


@dataclass
class GemmVectorFile:
    """GEMM vectors of one depth K on one instruction."""

    arch: str
    instruction: str
    K: int
    hypotheses: list[str]
    vectors: list[GemmVector]
    shape: tuple[int, int] = DEFAULT_SHAPE
    property: str | None = None
    meta: dict = field(default_factory=dict)

    def models(self):
        """Each hypothesis resolved for the file's K on the file's instruction, or, on an
        architecture without it, on the one libraries run there for the same inputs
        (UserError naming the hypothesis when one does not parse or takes other formats)."""
        from ..gemm.hypothesis import parse_gemm
        from ..gemm.model import resolve_model

        out = []
        for i, h in enumerate(self.hypotheses):
            try:
                instr: str | None = self.instruction
                if out and instr not in parse_gemm(h).variant.preset.instructions:
                    instr = None
                out.append(resolve_model(h, self.K, instr, out[0].p.a_fmt if out else None))
            except UserError as e:
                raise UserError(f"hypotheses[{i}]: {e}") from None
        return out

    def formats(self) -> dict[str, Format]:
        m = self.models()[0]
        return {"a": m.p.a_fmt, "b": m.p.b_fmt, "c": m.c_fmt, "d": m.d_fmt}

    def validate(self) -> None:
        """Raise UserError naming the first bad field."""
        if isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 1:
            raise UserError(f"K: expected a positive integer, got {self.K!r}")
        if not self.hypotheses:
            raise UserError("hypotheses: expected at least one ARCH/SCHEDULE hypothesis")
        if len(set(self.hypotheses)) != len(self.hypotheses):
            raise UserError("hypotheses: a hypothesis is listed twice")
        ms = self.models()
        f0 = (ms[0].p.a_fmt, ms[0].p.b_fmt, ms[0].c_fmt, ms[0].d_fmt)
        for i, m in enumerate(ms):
            if (m.p.a_fmt, m.p.b_fmt, m.c_fmt, m.d_fmt) != f0:
                raise UserError(f"hypotheses[{i}]: its operand formats differ from the first's")
        M, N = self.shape
        for v in (M, N):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SHAPE:
                raise UserError(f"shape: expected [M, N] with 1 <= M, N <= {MAX_SHAPE}")
        fa, fb, fc, fd = f0
        for i, vec in enumerate(self.vectors):
            where = f"vectors[{i}]"
            for name, fmt in (("a", fa), ("b", fb)):
                xs = getattr(vec, name)
                if len(xs) != self.K:
                    raise UserError(f"{where}.{name}: expected {self.K} entries, got {len(xs)}")
                for j, x in enumerate(xs):
                    _check_int(x, fmt, f"{where}.{name}[{j}]")
            _check_int(vec.c, fc, f"{where}.c")
            for h, d in vec.predicted.items():
                if h not in self.hypotheses:
                    raise UserError(f"{where}.predicted: {h!r} is not one of the hypotheses")
                _check_int(d, fd, f"{where}.predicted[{h!r}]")

    def to_json(self) -> dict:
        self.validate()
        f = self.formats()
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tool_version": __version__,
            "arch": self.arch,
            "instruction": self.instruction,
            "K": self.K,
            "formats": {k: v.spec.name for k, v in f.items()},
            "hypotheses": list(self.hypotheses),
            "shape": list(self.shape),
            "property": self.property,
            "meta": dict(self.meta),
            "vectors": [
                {
                    "a": [format_hex(x, f["a"]) for x in v.a],
                    "b": [format_hex(x, f["b"]) for x in v.b],
                    "c": format_hex(v.c, f["c"]),
                    "predicted": {
                        h: format_hex(v.predicted[h], f["d"])
                        for h in self.hypotheses
                        if h in v.predicted
                    },
                    **({"note": v.note} if v.note else {}),
                }
                for v in self.vectors
            ],
        }


def _check_int(x: Any, fmt: Format, where: str) -> None:
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < (1 << fmt.spec.storage):
        raise UserError(f"{where}: {x!r} is not a {fmt.spec.storage}-bit {fmt.spec.name} pattern")


def _hex(obj: Any, fmt: Format, where: str) -> int:
    if not isinstance(obj, str):
        raise UserError(f"{where}: expected a hex string such as {format_hex(0, fmt)!r}")
    try:
        return parse_hex(obj, fmt, where)
    except ValueError as e:
        raise UserError(str(e)) from None


def is_gemm_vector_json(text: str) -> bool:
    """Whether `text` is a GEMM vector file (its schema says so)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("schema") == SCHEMA


def from_json(obj: Any) -> GemmVectorFile:
    """Build and validate a GemmVectorFile from parsed JSON (errors name the field)."""
    if not isinstance(obj, dict):
        raise UserError("not a JSON object (a GEMM vector file is one object)")
    if obj.get("schema") != SCHEMA:
        raise UserError(f"schema: expected {SCHEMA!r}, got {json.dumps(obj.get('schema'))}")
    ver = obj.get("schema_version")
    if isinstance(ver, bool) or not isinstance(ver, int) or ver < 1:
        raise UserError(f"schema_version: expected a positive integer, got {json.dumps(ver)}")
    if ver > SCHEMA_VERSION:
        raise UserError(
            f"schema_version: {ver} is newer than this tcsmt ({__version__}) reads "
            f"(up to {SCHEMA_VERSION}); upgrade tensorcore-smt"
        )
    for k in obj:
        if k not in _TOP_KEYS:
            raise UserError(f"{k}: unknown field (free-form data belongs in 'meta')")
    for k in ("arch", "instruction", "K", "hypotheses", "vectors"):
        if k not in obj:
            raise UserError(f"{k}: missing")
    for k in ("arch", "instruction"):
        if not isinstance(obj[k], str):
            raise UserError(f"{k}: expected a string")
    hyps = obj["hypotheses"]
    if not isinstance(hyps, list) or not all(isinstance(h, str) for h in hyps):
        raise UserError("hypotheses: expected a list of ARCH/SCHEDULE strings")
    shape = obj.get("shape", list(DEFAULT_SHAPE))
    if not isinstance(shape, list) or len(shape) != 2:
        raise UserError("shape: expected [M, N]")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise UserError("meta: expected an object")
    prop = obj.get("property")
    if prop is not None and not isinstance(prop, str):
        raise UserError("property: expected a string or null")
    gf = GemmVectorFile(
        obj["arch"], obj["instruction"], obj["K"], list(hyps), [], tuple(shape), prop, meta
    )
    gf.validate()
    f = gf.formats()
    check_formats(obj, f, "the hypotheses")
    for where, row in vector_rows(obj, _VECTOR_KEYS):
        ab = {}
        for k in ("a", "b"):
            xs = row[k]
            if not isinstance(xs, list) or len(xs) != gf.K:
                got = len(xs) if isinstance(xs, list) else type(xs).__name__
                raise UserError(f"{where}.{k}: expected {gf.K} hex strings, got {got}")
            ab[k] = [_hex(x, f[k], f"{where}.{k}[{j}]") for j, x in enumerate(xs)]
        c = _hex(row["c"], f["c"], f"{where}.c")
        pred_obj = row.get("predicted", {})
        if not isinstance(pred_obj, dict):
            raise UserError(f"{where}.predicted: expected an object {{hypothesis: hex}}")
        pred = {}
        for h, d in pred_obj.items():
            if h not in gf.hypotheses:
                raise UserError(f"{where}.predicted: {h!r} is not one of the hypotheses")
            pred[h] = _hex(d, f["d"], f"{where}.predicted[{h!r}]")
        note = row.get("note", "")
        if not isinstance(note, str):
            raise UserError(f"{where}.note: expected a string")
        gf.vectors.append(GemmVector(ab["a"], ab["b"], c, pred, note))
    return gf


def loads(text: str) -> GemmVectorFile:
    """Parse and validate the text of a GEMM vector file."""
    return from_json(json_object(text))


def load(path: str | Path) -> GemmVectorFile:
    """Read and validate a GEMM vector file (errors name the file and the field)."""
    return load_file(path, loads)


def dumps(gf: GemmVectorFile) -> str:
    """The JSON text of a GEMM vector file (validated first)."""
    return json.dumps(gf.to_json(), indent=2) + "\n"


def save(gf: GemmVectorFile, path: str | Path) -> None:
    Path(path).write_text(dumps(gf))


def predict(gf: GemmVectorFile, *, only_missing: bool = False) -> GemmVectorFile:
    """A copy with every hypothesis's prediction computed by the GEMM element code on
    the numpy interpreter (`only_missing` keeps the predictions already there)."""
    from ..gemm.model import run_rows

    gf.validate()
    out = [replace(v, predicted=dict(v.predicted) if only_missing else {}) for v in gf.vectors]
    if out:
        a = np.asarray([v.a for v in gf.vectors], dtype=np.uint64)
        b = np.asarray([v.b for v in gf.vectors], dtype=np.uint64)
        c = np.asarray([v.c for v in gf.vectors], dtype=np.uint64)
        for h, m in zip(gf.hypotheses, gf.models()):
            if only_missing and all(h in v.predicted for v in out):
                continue
            d = run_rows(m, a, b, c)
            for v, x in zip(out, d):
                v.predicted.setdefault(h, int(x))
    return replace(gf, hypotheses=list(gf.hypotheses), vectors=out, meta=dict(gf.meta))
