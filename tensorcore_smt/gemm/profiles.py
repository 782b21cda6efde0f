"""Library profiles: what a GPU's BLAS library computes for each torch call, as data.

A profile (profiles/<gpu>-<library>-<version>.json, docs/profiles.md) holds, per call
class (torch function, input and output formats, the torch precision flags that matter
for those inputs, operand layout, epilogue), the recipe of every recorded shape (a GEMM
hypothesis `ARCH/SCHEDULE[...]` and its instruction) and a stated rule for the shapes
between (gemm/profile_rule.py). This module is the schema and the loader: a malformed
profile is one UserError line naming the file and the field.

Names: a profile is asked for by its file name (`h100-cublas-13.0`) or by its GPU alone
(`h100`: the newest library version of that GPU's profiles). GPU names are models of a
card (h100, h200, a100), never architecture names (hopper, ampere: the presets), and no
GPU name may be a preset's or an alias's name, so `hopper` stays the architecture.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..formats import Format
from ..spec.datadirs import data_dir
from .hypothesis import GemmHypothesis, parse_gemm

SCHEMA = 1
"""The `format` number of profiles built from GEMM fits (a nearest-shape rule)."""

LIBRARY_SCHEMA = 2
"""The `format` number of library profiles built from library recordings and the decision
tables of schedules/library (gemm/library_profile.py): the tables' rules are copied in,
each recorded shape names the table rule (or default) its recipe came from."""

SCHEMAS = (SCHEMA, LIBRARY_SCHEMA)


class Function(str, Enum):
    """The torch function of a call, as cuBLAS sees it (matmul on 2-D operands and `@`
    are mm; on batches bmm; baddbmm is bmm with an epilogue)."""

    MM = "mm"
    BMM = "bmm"
    ADDMM = "addmm"
    LINEAR = "linear"
    SCALED_MM = "scaled_mm"


class Flag(str, Enum):
    """torch's precision flags that change what cuBLAS runs."""

    TF32 = "tf32"  # torch.backends.cuda.matmul.allow_tf32 ("high" float32 matmul precision)
    FP16_REDUCED = "fp16_reduced"  # ...allow_fp16_reduced_precision_reduction
    BF16_REDUCED = "bf16_reduced"  # ...allow_bf16_reduced_precision_reduction
    FAST_ACCUM = "fast_accum"  # torch._scaled_mm(use_fast_accum=...)


DEFAULT_FLAGS: dict[Flag, bool] = {
    Flag.TF32: False,
    Flag.FP16_REDUCED: True,
    Flag.BF16_REDUCED: True,
    Flag.FAST_ACCUM: False,
}
"""torch's defaults (float32 matmul precision "highest"; reduced-precision reductions
allowed; _scaled_mm without fast accumulation)."""

RELEVANT_FLAGS: dict[str, tuple[Flag, ...]] = {
    "fp32": (Flag.TF32,),
    "fp16": (Flag.FP16_REDUCED,),
    "bf16": (Flag.BF16_REDUCED,),
    "e4m3": (Flag.FAST_ACCUM,),
    "e5m2": (Flag.FAST_ACCUM,),
}
"""The flags that can change the call for inputs of each format; the others are not
part of a call class."""


class Major(str, Enum):
    """How an operand lies in memory: rows contiguous (torch's default) or columns
    (a transposed view, F.linear's weight, _scaled_mm's B)."""

    ROW = "row"
    COL = "col"


class Epilogue(str, Enum):
    """What joins the product after the accumulation."""

    NONE = "none"
    BIAS = "bias"  # a vector broadcast over the rows (F.linear, addmm with a 1-D input)
    C = "c"  # a whole matrix, alpha = beta = 1
    ALPHA_BETA = "alpha_beta"  # alpha or beta not 1


class Source(str, Enum):
    """Where a decision's recipe comes from."""

    RECORDED = "recorded"  # the shape itself was recorded
    RULE = "rule"  # the profile's rule, from the recorded shapes of its class
    DEFAULT = "default"  # no class or no recorded shape applies: the profile's default


@dataclass(frozen=True)
class CallKey:
    """A call class: everything but the shape that picks a library's kernel."""

    function: Function
    a: str  # input format names (Format spec names: fp16, bf16, fp32, e4m3, ...)
    b: str
    out: str
    flags: tuple[tuple[Flag, bool], ...]  # the relevant flags only, in Flag order
    layout: tuple[Major, Major]
    epilogue: Epilogue

    def flag_dict(self) -> dict[str, bool]:
        return {f.value: v for f, v in self.flags}

    def text(self) -> str:
        flags = ",".join(f"{f.value}={'on' if v else 'off'}" for f, v in self.flags)
        return (
            f"{self.function.value} {self.a}x{self.b}->{self.out} [{flags}] "
            f"{self.layout[0].value},{self.layout[1].value} epilogue={self.epilogue.value}"
        )


def relevant_flags(a: str, flags: dict[Flag, bool]) -> tuple[tuple[Flag, bool], ...]:
    """The flags among `flags` (missing: torch's defaults) that matter for inputs `a`."""
    return tuple((f, bool(flags.get(f, DEFAULT_FLAGS[f]))) for f in RELEVANT_FLAGS.get(a, ()))


def call_key(
    function: Function,
    a: str,
    b: str,
    out: str,
    flags: Mapping[Flag, bool],
    layout: tuple[Major, Major],
    epilogue: Epilogue,
) -> CallKey:
    """The call class of a call (only the flags that matter for inputs `a` kept)."""
    return CallKey(function, a, b, out, relevant_flags(a, dict(flags)), layout, epilogue)


@dataclass(frozen=True)
class Shape:
    """One recorded shape of a class: its recipe and how well it reproduces the
    recordings of that shape (elements kept, elements reproduced bit for bit); `instr`
    its instruction where it differs from the class's, `origin` where the recipe came
    from (a library profile: `TABLE rule I` or `default`)."""

    m: int
    n: int
    k: int
    recipe: str
    recordings: tuple[str, ...]
    elements: int
    reproduced: int
    instr: str | None = None
    origin: str = ""

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def exact(self) -> bool:
        return self.elements > 0 and self.reproduced == self.elements


@dataclass(frozen=True)
class HeldOut:
    """A recorded shape kept out of the profile: the recipe the rule predicts for it,
    the recorded shape it came from, and how well it reproduces the recordings."""

    m: int
    n: int
    k: int
    recipe: str
    came_from: tuple[int, int, int] | None
    recordings: tuple[str, ...]
    elements: int
    reproduced: int

    @property
    def exact(self) -> bool:
        return self.elements > 0 and self.reproduced == self.elements


@dataclass(frozen=True)
class CallClass:
    """One call class of a profile: its key, the instruction its recipes run, the
    recorded shapes and the held-out ones."""

    name: str
    key: CallKey
    instr: str | None
    recording: str  # the recording it was built from (hardware/recordings.py call name)
    shapes: tuple[Shape, ...]
    held_out: tuple[HeldOut, ...]

    def hypothesis(self, recipe: str) -> GemmHypothesis:
        return parse_gemm(recipe, self.instr)


@dataclass(frozen=True)
class Rule:
    """The rule between recorded shapes (gemm/profile_rule.py): weights of the
    log2-distance and the alignment the neighbours must share."""

    k: float
    mn: float
    aspect: float
    align_bytes: int
    text: str


@dataclass(frozen=True)
class Profile:
    """A library profile (see the module docstring)."""

    name: str
    gpu: str
    device: str
    library: dict[str, str]
    arch: str
    default: str
    rule: Rule | None  # None in a library profile (format 2): its tables decide
    classes: tuple[CallClass, ...]
    notes: tuple[str, ...]
    path: Path | None = None
    format: int = SCHEMA
    tables: tuple = ()  # library profiles: gemm/library_rules.Table, in decision order
    tf32_round: str | None = None  # library profiles: how fp32 operands become TF32

    @property
    def is_library(self) -> bool:
        """Whether the profile decides by its tables (format 2), not a nearest shape."""
        return self.format == LIBRARY_SCHEMA

    def find(self, key: CallKey) -> CallClass | None:
        return next((c for c in self.classes if c.key == key), None)

    def by_name(self, name: str) -> CallClass:
        c = next((c for c in self.classes if c.name == name), None)
        if c is None:
            known = ", ".join(c.name for c in self.classes)
            raise UserError(f"profile {self.name} has no call class {name!r}; classes: {known}")
        return c


PROFILE_NAME = re.compile(r"^(?P<gpu>[a-z0-9]+)-(?P<lib>[a-z]+)-(?P<ver>[0-9][0-9.]*)$")
"""<gpu>-<library>-<version>, the file name of a profile."""


class _Reader:
    """Field access with one-line errors naming the file and the field's path."""

    def __init__(self, where: str):
        self.where = where
        self.seen: set[tuple[str, str | None]] = set()  # recipes already checked

    def fail(self, path: str, what: str) -> UserError:
        return UserError(f"profile {self.where}: {path}: {what}")

    def get(self, obj: Any, key: str, path: str, kind: type | tuple, optional=False) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(path, f"expected an object, got {type(obj).__name__}")
        if key not in obj:
            if optional:
                return None
            raise self.fail(f"{path}.{key}" if path else key, "missing")
        v = obj[key]
        if v is None and optional:
            return None
        ok = isinstance(v, kind) and not (isinstance(v, bool) and bool not in _tuple(kind))
        if not ok:
            names = "/".join(t.__name__ for t in _tuple(kind))
            raise self.fail(f"{path}.{key}" if path else key, f"expected {names}, got {v!r}")
        return v

    def count(self, obj: Any, key: str, path: str, least: int = 0) -> int:
        v = self.get(obj, key, path, int)
        if v < least:
            raise self.fail(f"{path}.{key}", f"expected an integer >= {least}, got {v}")
        return v

    def enum(self, cls: type[Enum], v: Any, path: str) -> Any:
        try:
            return cls(v)
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise self.fail(path, f"{v!r} is not one of {allowed}") from None


def _tuple(kind: type | tuple) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def _format_name(r: _Reader, v: Any, path: str) -> str:
    try:
        return Format.parse(v).spec.name
    except (ValueError, AttributeError, TypeError):
        raise r.fail(path, f"{v!r} is not a format name") from None


def _key(r: _Reader, c: dict, path: str) -> CallKey:
    fn = r.enum(Function, r.get(c, "function", path, str), f"{path}.function")
    a = _format_name(r, r.get(c, "a", path, str), f"{path}.a")
    b = _format_name(r, r.get(c, "b", path, str), f"{path}.b")
    out = _format_name(r, r.get(c, "out", path, str), f"{path}.out")
    flags_in = r.get(c, "flags", path, dict)
    flags: dict[Flag, bool] = {}
    for name, v in flags_in.items():
        f = r.enum(Flag, name, f"{path}.flags")
        if not isinstance(v, bool):
            raise r.fail(f"{path}.flags.{name}", f"expected true or false, got {v!r}")
        flags[f] = v
    want = set(RELEVANT_FLAGS.get(a, ()))
    if set(flags) != want:
        names = ", ".join(sorted(f.value for f in want)) or "none"
        raise r.fail(f"{path}.flags", f"{a} inputs take exactly these flags: {names}")
    lay = r.get(c, "layout", path, str).split(",")
    if len(lay) != 2:
        raise r.fail(f"{path}.layout", f"expected 'A,B' majors (row or col), got {lay!r}")
    layout = tuple(r.enum(Major, x.strip(), f"{path}.layout") for x in lay)
    epi = r.enum(Epilogue, r.get(c, "epilogue", path, str), f"{path}.epilogue")
    return CallKey(fn, a, b, out, relevant_flags(a, flags), layout, epi)


def _recipe(r: _Reader, v: Any, instr: str | None, path: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise r.fail(path, f"expected a GEMM hypothesis ARCH/SCHEDULE[...], got {v!r}")
    if (v, instr) in r.seen:
        return v
    try:
        parse_gemm(v, instr)
    except UserError as e:
        raise r.fail(path, str(e)) from None
    r.seen.add((v, instr))
    return v


def _dims(r: _Reader, s: dict, path: str) -> tuple[int, int, int]:
    return tuple(r.count(s, d, path, 1) for d in ("m", "n", "k"))  # type: ignore[return-value]


def _counts(r: _Reader, s: dict, path: str) -> tuple[tuple[str, ...], int, int]:
    recs = r.get(s, "recordings", path, list)
    if not all(isinstance(x, str) for x in recs):
        raise r.fail(f"{path}.recordings", "expected a list of recording names")
    el = r.count(s, "elements", path)
    rep = r.count(s, "reproduced", path)
    if rep > el:
        raise r.fail(f"{path}.reproduced", f"{rep} is more than the {el} elements")
    return tuple(recs), el, rep


def _class(r: _Reader, c: dict, path: str) -> CallClass:
    name = r.get(c, "name", path, str)
    key = _key(r, c, path)
    instr = r.get(c, "instr", path, str, optional=True)
    recording = r.get(c, "recording", path, str)
    shapes, seen = [], set()
    for i, s in enumerate(r.get(c, "shapes", path, list)):
        p = f"{path}.shapes[{i}]"
        mnk = _dims(r, s, p)
        if mnk in seen:
            raise r.fail(p, f"shape {mnk} is listed twice")
        seen.add(mnk)
        s_instr = r.get(s, "instr", p, str, optional=True)
        recipe = _recipe(r, r.get(s, "recipe", p, str), s_instr or instr, f"{p}.recipe")
        origin = r.get(s, "origin", p, str, optional=True) or ""
        shapes.append(Shape(*mnk, recipe, *_counts(r, s, p), s_instr, origin))
    held = []
    for i, s in enumerate(r.get(c, "held_out", path, list)):
        p = f"{path}.held_out[{i}]"
        mnk = _dims(r, s, p)
        if mnk in seen:
            raise r.fail(p, f"shape {mnk} is both recorded and held out")
        recipe = _recipe(r, r.get(s, "recipe", p, str), instr, f"{p}.recipe")
        src = r.get(s, "from", p, list, optional=True)
        if src is not None and (len(src) != 3 or not all(isinstance(x, int) for x in src)):
            raise r.fail(f"{p}.from", f"expected [M, N, K], got {src!r}")
        held.append(HeldOut(*mnk, recipe, tuple(src) if src else None, *_counts(r, s, p)))
    return CallClass(name, key, instr, recording, tuple(shapes), tuple(held))


def _rule(r: _Reader, doc: dict) -> Rule:
    rule = r.get(doc, "rule", "", dict)
    w = r.get(rule, "weights", "rule", dict)
    vals = []
    for k in ("k", "mn", "aspect"):
        v = r.get(w, k, "rule.weights", (int, float))
        if v < 0:
            raise r.fail(f"rule.weights.{k}", f"expected a weight >= 0, got {v}")
        vals.append(float(v))
    align = r.count(rule, "align_bytes", "rule", 1)
    return Rule(*vals, align, r.get(rule, "text", "rule", str))


def parse_profile(doc: Any, where: str, path: Path | None = None) -> Profile:
    """A Profile from its JSON document; UserError (one line) for anything malformed."""
    r = _Reader(where)
    fmt = r.get(doc, "format", "", int)
    if fmt not in SCHEMAS:
        raise r.fail(
            "format", f"this version reads formats {SCHEMA} and {LIBRARY_SCHEMA}, got {fmt}"
        )
    name = r.get(doc, "name", "", str)
    m = PROFILE_NAME.match(name)
    if not m:
        raise r.fail("name", f"{name!r} is not <gpu>-<library>-<version> (e.g. h100-cublas-13.0)")
    gpu = r.get(doc, "gpu", "", str)
    if gpu != m["gpu"]:
        raise r.fail("gpu", f"{gpu!r} differs from the name's GPU {m['gpu']!r}")
    library = r.get(doc, "library", "", dict)
    arch = r.get(doc, "arch", "", str)
    default = r.get(doc, "default", "", str)
    try:
        parse_gemm(default)
    except UserError as e:
        raise r.fail("default", str(e)) from None
    classes, keys = [], {}
    for i, c in enumerate(r.get(doc, "classes", "", list)):
        cc = _class(r, c, f"classes[{i}]")
        if cc.key in keys:
            raise r.fail(f"classes[{i}]", f"same call class as {keys[cc.key]!r}")
        keys[cc.key] = cc.name
        classes.append(cc)
    notes = r.get(doc, "notes", "", list, optional=True) or []
    tables: tuple = ()
    rule = None
    tf32_round = None
    if fmt == LIBRARY_SCHEMA:
        from .library_rules import table_from_doc

        tables = tuple(
            table_from_doc(t, f"profile {where}: tables[{i}]")
            for i, t in enumerate(r.get(doc, "tables", "", list))
        )
        tf32_round = r.get(doc, "tf32_round", "", str, optional=True)
        if tf32_round is not None:
            from .schedule import OperandRound

            tf32_round = r.enum(OperandRound, tf32_round, "tf32_round").value
    else:
        rule = _rule(r, doc)
    return Profile(
        name,
        gpu,
        r.get(doc, "device", "", str),
        {str(k): str(v) for k, v in library.items()},
        arch,
        default,
        rule,
        tuple(classes),
        tuple(str(n) for n in notes),
        path,
        fmt,
        tables,
        tf32_round,
    )


def profiles_dir() -> Path:
    """The shipped profiles/ folder."""
    return data_dir("profiles")


def profile_names() -> list[str]:
    """The names of the shipped profiles, sorted."""
    d = profiles_dir()
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def _version(name: str) -> tuple[int, ...]:
    m = PROFILE_NAME.match(name)
    return tuple(int(x) for x in m["ver"].split(".") if x) if m else ()


def profile_file(name: str) -> Path | None:
    """The file a profile name or a GPU name resolves to (a GPU: its newest version),
    or a path to a .json file; None when nothing does."""
    if name.endswith(".json"):
        p = Path(name)
        return p if p.is_file() else None
    names = profile_names()
    if name in names:
        return profiles_dir() / f"{name}.json"
    mine = [n for n in names if PROFILE_NAME.match(n) and PROFILE_NAME.match(n)["gpu"] == name]
    if mine:
        return profiles_dir() / f"{max(mine, key=_version)}.json"
    return None


@cache
def _load_cached(path: Path, mtime: float) -> Profile:
    return load_file(path)


def load_file(path: Path) -> Profile:
    """Read and check one profile file."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise UserError(f"profile {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise UserError(f"profile {path}: not JSON ({e})") from None
    return parse_profile(doc, str(path), Path(path))


def find_profile(name: Any) -> Profile | None:
    """The profile `name` names (file name, GPU name or a .json path), else None."""
    if not isinstance(name, str) or not name.strip():
        return None
    p = profile_file(name.strip())
    if p is None:
        return None
    return _load_cached(p.resolve(), p.stat().st_mtime)


def load_profile(name: str) -> Profile:
    """The profile `name` names; UserError naming the profiles there are."""
    prof = find_profile(name)
    if prof is None:
        known = ", ".join(profile_names()) or "none"
        raise UserError(f"no profile {name!r}; profiles: {known} (or a path to a .json file)")
    return prof


__all__ = [
    "CallClass",
    "CallKey",
    "DEFAULT_FLAGS",
    "Epilogue",
    "Flag",
    "Function",
    "HeldOut",
    "LIBRARY_SCHEMA",
    "Major",
    "Profile",
    "RELEVANT_FLAGS",
    "Rule",
    "Shape",
    "Source",
    "find_profile",
    "load_file",
    "load_profile",
    "parse_profile",
    "profile_file",
    "profile_names",
    "profiles_dir",
]
