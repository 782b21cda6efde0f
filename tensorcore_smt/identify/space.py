"""Hypothesis spaces as data: a preset instruction and, per parameter, the values to consider.

A space file (TOML, in spaces/ installed with the package, or a file the user names) has

- ``name``, ``description`` and ``applies_to``: the algorithms (``fda``, ``sfma``, ...) of
  the preset instructions it is the default space for;
- ``[shared]``: parameters every family varies (output rounding, the flush switches, ...);
- ``[[family]]`` entries: an algorithm family (``name``, ``set``: the overrides that make
  it, e.g. ``{ algorithm = "sequential" }``) and its own ``[family.params]``.

A value list holds literals (``"rne"``, ``"true"``, ``24``) and templates over the preset
instruction's model: ``{F-4}..{F+4}`` (an integer range), ``divisors(K)``, ``{e_zero}``
(the preset's value; ``none`` where it has none). An item that names a value the preset
does not have (``{e_zero-1}`` when e_zero is none) is left out.

A hypothesis is one family and one value per parameter. Spaces multiply to thousands or
millions of hypotheses, so nothing here enumerates the product: `neighbours` gives the
hypotheses one parameter away, `sample` draws one at random, and the search
(`identify.search`) decides parameters one after another.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..model.params import ModelParams, parse_value, unread
from ..smt.library import _eval
from ..spec.datadirs import data_dir
from ..spec.presets import parse_variant
from ..spec.variants import with_overrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_DIR = data_dir("spaces")
_TOP_KEYS = {"name", "description", "applies_to", "shared", "family"}
_FAMILY_KEYS = {"name", "set", "params"}
_FIELDS = {f.name for f in fields(ModelParams)}
_SHAPE = {"a_fmt", "b_fmt", "c_fmt", "d_fmt", "K"}  # what a hypothesis may not change


def value_text(v: Any) -> str:
    """A parameter value as a variant expression writes it (`rz`, `none`, `e8m13`)."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Format):
        return v.spec.name
    if isinstance(v, Enum):
        return str(v.value)
    return str(v)


@dataclass(frozen=True)
class Family:
    """An algorithm family: the overrides that make it and the parameters it varies."""

    name: str
    fixed: tuple[tuple[str, Any], ...]
    dims: tuple[tuple[str, tuple[Any, ...]], ...]


@dataclass(frozen=True)
class Hypothesis:
    """One point of a space: a family and the parameters that differ from the preset
    instruction (sorted by name). Two hypotheses are equal when their overrides are (the
    same model reached from two families is one hypothesis)."""

    family: str = field(compare=False)
    overrides: tuple[tuple[str, Any], ...]

    def value(self, name: str, base: ModelParams) -> Any:
        return dict(self.overrides).get(name, getattr(base, name))

    def expr(self, arch: str) -> str:
        """The hypothesis as a variant expression (`hopper[F=24,carry_bits=3]`) over the
        base variant `arch` (`ARCH` or `ARCH[...]`: its own overrides are kept unless the
        hypothesis sets the same parameter)."""
        return with_overrides(arch, [(k, value_text(v)) for k, v in self.overrides])


@dataclass
class Space:
    """A space bound to one preset instruction: its families and their value lists."""

    name: str
    description: str
    arch: str
    instr: str
    base: ModelParams
    families: list[Family]
    shared: tuple[tuple[str, tuple[Any, ...]], ...]
    path: Path | None = None
    _params: dict = field(default_factory=dict, repr=False)
    variant: str = ""  # the base variant as given (`ARCH[...]`); "" : the preset `arch`
    # families the file names that cannot run on this instruction's operands, with why
    left_out: tuple[tuple[str, str], ...] = ()

    reclimb_seeds = True
    """Whether every search of `identify` climbs from every family's seed (else only the
    first, and the one after a confirmation round refuted a class; a search whose starts
    reach no survivor climbs from the seeds anyway)."""

    def expr(self, h: Hypothesis) -> str:
        """`h` as a variant expression over the space's base variant (its overrides are
        relative to that base, not to the preset)."""
        return h.expr(self.variant or self.arch)

    # --- hypotheses ----------------------------------------------------------------

    def family(self, name: str) -> Family:
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(name)

    def dims(self, family: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """The parameters a family varies, with their values (its own, then shared)."""
        return self.family(family).dims + self.shared

    def make(self, family: str, values: dict[str, Any]) -> Hypothesis:
        """The canonical hypothesis of `family` with `values` (parameters that cannot act
        keep the preset's value, parameters equal to the preset's are dropped)."""
        merged = dict(self.family(family).fixed)
        merged.update(values)
        # whether a switch can act is decided by the other parameters (a switch that
        # cannot act may not even be valid with them: unpack=fp16 of bf16 operands)
        core = self.base.with_(**{k: v for k, v in merged.items() if k not in _INERT})
        for name in list(merged):
            if inert(name, core):
                merged[name] = getattr(self.base, name)
        over = tuple(sorted((k, v) for k, v in merged.items() if getattr(self.base, k) != v))
        return Hypothesis(family, over)

    def seed(self, family: str) -> Hypothesis:
        """The family's starting point: the preset with the family's own overrides."""
        return self.make(family, {})

    def preset(self) -> Hypothesis:
        """The preset itself, as a hypothesis of the first family it belongs to."""
        return self.classify(Hypothesis(self.families[0].name, ()))

    def classify(self, h: Hypothesis) -> Hypothesis:
        """`h` under the family whose fixed overrides it carries (its canonical form)."""
        vals = dict(h.overrides)
        for f in self.families:
            if all(vals.get(k, getattr(self.base, k)) == v for k, v in f.fixed):
                return self.make(f.name, {k: v for k, v in vals.items() if k not in dict(f.fixed)})
        return h

    def params(self, h: Hypothesis) -> ModelParams:
        p = self._params.get(h)
        if p is None:
            p = self._params[h] = self.base.with_(**dict(h.overrides))
        return p

    def run(self, h: Hypothesis, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """d bits of `h` on rows of bit patterns (the vector interpreter)."""
        from ..api import simulate_params

        return simulate_params(self.params(h), a, b, c)

    def same_model(self, a: Hypothesis, b: Hypothesis) -> bool:
        """Whether `a` and `b` are one model written two ways (equal by construction,
        no solver needed)."""
        return self.params(a) == self.params(b)

    def instruction_only(self, a: Hypothesis, b: Hypothesis) -> bool:
        """Whether the question between `a` and `b` is asked on the instruction in place
        of this space's own (`reduced_query`); never in instruction spaces."""
        return False

    def reduced_query(self, a: Hypothesis, b: Hypothesis, c_zero: bool = False):
        """A smaller question that decides `query(a, b)` (`c_zero`: one whose witnesses
        only count), or None (instruction spaces: the query is already the
        instruction's)."""
        return None

    def lift_witness(self, a: Hypothesis, b: Hypothesis, inputs: dict[str, int]):
        """A row of this space's inputs separating `a` and `b`, made from a witness of
        `reduced_query(a, b)`; None when none is found."""
        return None

    def stated_argument(self, a: Hypothesis, b: Hypothesis):
        """A stated argument that `a` and `b` are equal, to be checked on its extreme
        rows before it is used (`identify.gemm_arguments.GemmArgument`), or None (none
        in instruction spaces: smt/arguments.py answers there, inside the solver layer)."""
        return None

    def structured_rows(self, hyps: list[Hypothesis], seed: int = 0):
        """Candidate rows built from the structure of the hypotheses' models, for
        survivors that random rows cannot split (`identify.pool.Rows`), or None where the
        space has no such construction (instruction spaces: the solvers answer)."""
        return None

    def query(self, a: Hypothesis, b: Hypothesis):
        """The solver question "do `a` and `b` ever differ?" on this space's unit."""
        from ..smt.query import Goal, make_query

        return make_query(self.expr(a), self.expr(b), self.instr, Goal.DIFFER)

    def neighbours(self, h: Hypothesis) -> list[Hypothesis]:
        """Every hypothesis of the space one parameter away from `h`, and the seeds of the
        other families carrying `h`'s shared parameters."""
        out: list[Hypothesis] = []
        seen = {h}
        fam = self.family(h.family)
        cur = {k: v for k, v in h.overrides if k not in dict(fam.fixed)}
        for name, values in self.dims(h.family):
            for v in values:
                if v == cur.get(name, getattr(self.base, name)):
                    continue
                n = self.make(h.family, {**cur, name: v})
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        shared = {k: v for k, v in cur.items() if k in dict(self.shared)}
        for f in self.families:
            if f.name != h.family:
                n = self.make(f.name, shared)
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        return out

    def sample(self, rng: np.random.Generator, family: str | None = None) -> Hypothesis:
        """A hypothesis drawn uniformly per parameter (family uniformly unless given)."""
        fam = family or self.families[int(rng.integers(len(self.families)))].name
        vals = {name: values[int(rng.integers(len(values)))] for name, values in self.dims(fam)}
        return self.make(fam, vals)

    def size(self) -> int:
        """How many hypotheses the space holds (before parameters that cannot act merge)."""
        total = 0
        for f in self.families:
            n = 1
            for _, values in self.dims(f.name):
                n *= len(values)
            total += n
        return total

    def differences(self, h: Hypothesis, other: Hypothesis) -> list[tuple[str, Any, Any]]:
        """(parameter, value in h, value in other) for every parameter that differs."""
        names = sorted({k for k, _ in h.overrides} | {k for k, _ in other.overrides})
        out = []
        for k in names:
            a, b = h.value(k, self.base), other.value(k, self.base)
            if a != b:
                out.append((k, a, b))
        return out


def inert(name: str, p: ModelParams) -> bool:
    """Whether parameter `name` cannot change any output of the model `p` (so a space
    keeps it at the preset's value instead of holding two copies of one model): a switch
    below that cannot act, or a parameter `p`'s family does not read (model.params.unread,
    which a variant setting it is refused by)."""
    rule = _INERT.get(name)
    return bool(rule and rule(p)) or unread(p, name) is not None


_INERT = {
    "flush_products": lambda p: p.no_rounded("products") is not None,
    "flush_sums": lambda p: p.no_rounded("sums") is not None,
    "tf32": lambda p: Format.TF32 not in (p.a_fmt, p.b_fmt),
    "carry_overflow": lambda p: p.carry_bits is None,
    "flush_sign": lambda p: not p.flush_inputs,
    # one fused group takes every product at once, in any order
    "group_map": lambda p: min(p.L, p.K) == p.K,
    # unpacking 16-bit operands to fp16 is a no-op (fp16) or impossible (bf16)
    "unpack": lambda p: min(p.a_fmt.spec.storage, p.b_fmt.spec.storage) >= 16,
}


# --- loading -------------------------------------------------------------------------


def _env(arch: str, p: ModelParams) -> dict[str, Any]:
    env: dict[str, Any] = {"arch": arch}
    for f in fields(ModelParams):
        v = getattr(p, f.name)
        env[f.name] = v if isinstance(v, int) and not isinstance(v, bool) else value_text(v)
    return env


def _expand(text: str, env: dict) -> str | None:
    """`{expr}` substitutions; None when an expression needs a value the preset lacks."""
    try:
        return re.sub(r"\{([^{}]+)\}", lambda m: str(_eval(m.group(1), env)), text)
    except TypeError:
        return None


def _values(where: str, name: str, items: Any, env: dict) -> tuple[Any, ...]:
    if name not in _FIELDS:
        raise UserError(f"{where}: unknown model parameter {name!r}")
    if name in _SHAPE:
        raise UserError(f"{where}: {name} is the instruction's shape, not a hypothesis")
    if not isinstance(items, list) or not items:
        raise UserError(f"{where}: expected a non-empty list of values")
    out: list[Any] = []
    for item in items:
        texts: list[str] = []
        if isinstance(item, bool):
            texts = ["true" if item else "false"]
        elif isinstance(item, int):
            texts = [str(item)]
        elif isinstance(item, str):
            m = re.fullmatch(r"\s*divisors\((.+)\)\s*", item)
            t = _expand(item, env) if not m else None
            if m:
                n = _eval(m.group(1), env)
                if not isinstance(n, int) or n < 1:
                    raise UserError(f"{where}: divisors({m.group(1)}) is not of a positive integer")
                texts = [str(d) for d in range(1, n + 1) if n % d == 0]
            elif t is None:
                continue
            elif ".." in t:
                lo_t, hi_t = t.split("..", 1)
                try:
                    lo, hi = int(lo_t), int(hi_t)
                except ValueError:
                    raise UserError(f"{where}: {item!r} is not an integer range LO..HI") from None
                texts = [str(i) for i in range(lo, hi + 1)]
            else:
                texts = [t]
        else:
            raise UserError(f"{where}: {item!r} is not a value (string, integer or boolean)")
        for t in texts:
            try:
                v = parse_value(name, t)
            except ValueError as e:
                raise UserError(f"{where}: {e}") from None
            if v not in out:
                out.append(v)
    return tuple(out)


def _table(where: str, obj: Any, env: dict) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(obj, dict):
        raise UserError(f"{where}: expected a table of parameter = [values]")
    return tuple((k, _values(f"{where}.{k}", k, v, env)) for k, v in obj.items())


def load_space(path: Path, arch: str, instr: str | None = None) -> Space:
    """Read a space file and bind it to `arch`'s instruction `instr` (UserError if bad)."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such space file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML ({e})") from None
    variant = parse_variant(arch)
    inst = variant.instruction(instr)
    base = variant.params(inst.name)
    env = _env(variant.preset.name, base)
    where = str(path)
    for k in raw:
        if k not in _TOP_KEYS:
            raise UserError(f"{where}: {k}: unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    if not isinstance(raw.get("name"), str):
        raise UserError(f"{where}: name: missing (a string)")
    fams = raw.get("family")
    if not isinstance(fams, list) or not fams:
        raise UserError(f"{where}: family: expected at least one [[family]] entry")
    shared = _table(f"{where}: shared", raw.get("shared", {}), env)
    families = []
    for i, f in enumerate(fams):
        fw = f"{where}: family[{i}]"
        if not isinstance(f, dict):
            raise UserError(f"{fw}: expected a table")
        for k in f:
            if k not in _FAMILY_KEYS:
                raise UserError(f"{fw}.{k}: unknown key (known: name, set, params)")
        if not isinstance(f.get("name"), str):
            raise UserError(f"{fw}.name: missing (a string)")
        fixed = []
        for k, v in (f.get("set") or {}).items():
            vals = _values(f"{fw}.set.{k}", k, [v], env)
            fixed.append((k, vals[0]))
        dims = _table(f"{fw}.params", f.get("params", {}), env)
        families.append(Family(f["name"], tuple(fixed), dims))
    names = [f.name for f in families]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: family names must be distinct ({', '.join(names)})")
    space = Space(
        raw["name"],
        " ".join(str(raw.get("description", "")).split()),
        variant.preset.name,
        inst.name,
        base,
        families,
        shared,
        path,
        variant=variant.text,
    )
    # a family whose units cannot run on this instruction's operands (e.g. a unit that
    # returns fp32 on an instruction with an fp16 d) is left out of the space for this
    # instruction, with the reason; the family of the preset itself must run
    kept, left = [], []
    for fam in families:
        try:
            space.params(space.seed(fam.name))
            kept.append(fam)
        except (TypeError, ValueError) as e:
            left.append((fam.name, str(e)))
    if not kept:
        name, why = left[0]
        raise UserError(f"{where}: family {name}: {why}")
    space.families, space.left_out = kept, tuple(left)
    try:
        space.preset()
    except (TypeError, ValueError, UserError, LookupError) as e:
        raise UserError(f"{where}: no family of the space holds the preset: {e}") from None
    return space


def builtin_spaces() -> dict[str, Path]:
    """The spaces installed with the package, by name (file stem)."""
    if not BUILTIN_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def default_space_path(arch: str, instr: str | None = None) -> Path:
    """The built-in space whose `applies_to` names the instruction's algorithm."""
    variant = parse_variant(arch)
    alg = variant.params(variant.instruction(instr).name).algorithm.value
    for path in builtin_spaces().values():
        try:
            raw = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if alg in raw.get("applies_to", []):
            return path
    raise UserError(f"no built-in hypothesis space for algorithm {alg!r}; give --space FILE")


def resolve_space(arch: str, instr: str | None, space: str | None) -> Space:
    """`--space` as given (a file, or a built-in space's name), else the default one."""
    if space is None:
        path = default_space_path(arch, instr)
    else:
        path = builtin_spaces().get(space) or Path(space)
    return load_space(path, arch, instr)
