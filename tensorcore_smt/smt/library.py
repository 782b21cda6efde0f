"""The property library: declarative questions about matrix-unit arithmetic.

A property file (TOML, one per property, in properties/, installed with the package, or
a directory the user names) holds the question in words, where it comes from, which instructions
it applies to, and one or more queries: two variant templates over the arch preset
(`{arch}` vs `{arch}[carry_bits={carry_bits-1}]`), a goal, input constraints each with
the reason it keeps the question meaningful, and the answer the question expects.

`[when]` conditions (a parameter's allowed values; `has`, `min_K`, `rounds`: the unit
rounds intermediate products or sums, and `groups`: "single" for one fused group, "multi"
for chained ones) choose the instruction; a query's own `when` says
on which instructions that query is a real question: elsewhere it is not asked, and
`skipped` says why. `[prefer]` (same keys) orders the instructions that qualify.

A property about GEMM hypotheses says `level = "gemm"`, the depth `k` of the product and
`inputs`, the input format whose library instruction it asks about (schedules/
instructions.toml: `e4m3` is Hopper's FP8 wgmma); its variants are `ARCH[...]/SCHEDULE[...]`
templates (`{arch}/fast-accum` vs `{arch}/cublas-fp8`) and its `zero-k` constraints
fix k-blocks inside chains to +0, each with the reason the question stays complete.

Goal `non-monotone` takes one variant `x` (no `y`) and `grow`, the operand groups that
grow from the first input set u to the second u_2 (`"c"`, `"abc"`). `expect` is either
an answer or a table `{ sat = {conditions}, unsat = {conditions} }` in the syntax of
`[when]`, tested in order on the X variant's parameters: the first answer whose
conditions hold is expected; when none holds, either answer is informative.
"""

from __future__ import annotations

import ast
import operator
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from pathlib import Path

from ..errors import UserError
from ..formats import Format
from ..model.measure import Measure
from ..model.params import ModelParams, Sparsity
from ..model.sparse import dense_params
from ..solvers.result import Answer
from ..spec.datadirs import data_dir
from ..spec.presets import PRESETS, Instruction, Preset, parse_variant
from .query import Constraint, ConstraintKind, Goal, Query, make_query

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_DIR = data_dir("properties")


class GroupPreference(Enum):
    """Which instructions a property prefers when several satisfy its conditions."""

    ANY = ""  # the preset's default first
    SINGLE = "single"  # one fused group (K <= L): a smaller query asks the same question
    MULTI = "multi"  # chained groups (K > L): needed to observe 2L


@dataclass(frozen=True)
class QuerySpec:
    """One query of a property, before it is bound to an architecture."""

    id: str
    goal: Goal
    x: str
    y: str | None  # None for the one-variant goal non-monotone
    constraints: tuple[dict, ...] = ()
    expect: Answer | None = None  # None: either answer is informative
    meaning: dict = field(default_factory=dict)  # answer -> one-line conclusion
    timeout: float | None = None
    grow: str = ""  # non-monotone: operand groups that grow from u to u_2
    # (answer, conditions) pairs: expect the first answer whose conditions X meets
    expect_if: tuple[tuple[Answer, dict], ...] = ()
    when: dict = field(default_factory=dict)  # conditions for this query to be asked
    measure: Measure | None = None  # goal error-exceeds: the measure (y "exact" or a variant)
    threshold: Fraction | None = None  # goal error-exceeds: "measure > threshold"

    def expectation(self, px: ModelParams) -> Answer | None:
        """The expected answer for a query whose variant X has parameters `px`."""
        if not self.expect_if:
            return self.expect
        for ans, cond in self.expect_if:
            if _mismatch(cond, px) is None:
                return ans
        return None


@dataclass(frozen=True)
class GemmLevel:
    """A property about GEMM hypotheses: the depth K of the product and the input
    format whose library instruction is asked about (None: the preset's default)."""

    k: int
    inputs: Format | None = None


@dataclass(frozen=True)
class Property:
    """A question about the hardware, asked as one or more queries."""

    name: str
    question: str
    source: str
    when: dict
    prefer_groups: GroupPreference
    queries: tuple[QuerySpec, ...]
    predict: tuple[str, ...] = ()
    path: Path | None = None
    prefer: dict = field(default_factory=dict)  # conditions of the instructions tried first
    gemm: GemmLevel | None = None  # a question about GEMM hypotheses (ARCH/SCHEDULE)

    def instruction_for(self, preset: Preset) -> Instruction:
        """The instruction this property asks about on `preset` (UserError if none)."""
        why = self.not_applicable(preset)
        if why:
            raise UserError(why)
        return self._pick(preset)[0]

    def not_applicable(self, preset: Preset) -> str | None:
        """Why the property does not apply to `preset` (None when it does)."""
        inst, reasons = self._pick(preset)
        if inst is not None:
            return None
        return f"property {self.name!r} does not apply to {preset.name}: " + "; ".join(
            sorted(set(reasons))[:3]
        )

    def not_applicable_to(self, inst: Instruction) -> str | None:
        """Why the property asks nothing of the instruction `inst` named for it (None:
        it asks something): its conditions, judged on the dense unit the instruction
        runs (model/sparse.dense_params), or no query that applies."""
        unit = dense_params(inst.params)
        why = _mismatch(self.when, unit)
        if why is None and not any(_mismatch(q.when, unit) is None for q in self.queries):
            why = "no query applies"
        return why

    def _pick(self, preset: Preset) -> tuple[Instruction | None, list[str]]:
        if self.gemm is not None:
            return self._pick_gemm(preset)
        # a sparse instruction (mma.sp) is asked about only when named (--instr, --meta)
        order = [preset.instructions[preset.default_instr]] + [
            i
            for n, i in preset.instructions.items()
            if n != preset.default_instr and i.params.sparse == Sparsity.NONE
        ]
        if self.prefer_groups == GroupPreference.SINGLE:
            order.sort(key=lambda i: len(i.params.groups()) > 1)
        elif self.prefer_groups == GroupPreference.MULTI:
            order.sort(key=lambda i: len(i.params.groups()) == 1)
        if self.prefer:
            order.sort(key=lambda i: _mismatch(self.prefer, i.params) is not None)
        reasons: list[str] = []
        for inst in order:
            r = _mismatch(self.when, inst.params)
            if r is None:
                whys = [_mismatch(q.when, inst.params) for q in self.queries]
                if any(w is None for w in whys):
                    return inst, reasons
                r = "no query applies: " + "; ".join(sorted(set(map(str, whys))))
            reasons.append(r)
        return None, reasons

    def _pick_gemm(self, preset: Preset) -> tuple[Instruction | None, list[str]]:
        """The instruction GEMM libraries run on `preset` for the property's inputs."""
        from ..gemm.hypothesis import default_instruction

        fmt = self.gemm.inputs
        try:
            name = default_instruction(preset.name, fmt, fmt) if fmt else preset.default_instr
        except UserError as e:
            return None, [str(e)]
        inst = preset.instructions[name]
        r = _mismatch(self.when, inst.params)
        if r is None and not any(_mismatch(q.when, inst.params) is None for q in self.queries):
            r = "no query applies"
        return (inst, []) if r is None else (None, [f"{name}: {r}"])

    def skipped(self, arch: str, instr: str | None = None) -> list[tuple[str, str]]:
        """(query id, why) of the queries `bind` leaves out on this instruction."""
        preset = PRESETS[arch]
        inst = preset.instructions[instr] if instr else self.instruction_for(preset)
        out = []
        for spec in self.queries:
            why = _not_asked(spec, arch, inst)
            if why is not None:
                out.append((spec.id, why))
        return out

    def bind(
        self, arch: str, instr: str | None = None, meta: Sequence[int] | None = None
    ) -> list[tuple[QuerySpec, Query]]:
        """The property's queries on one architecture (and instruction). A sparse
        instruction is asked for the metadata `meta` (smt/query.with_meta); its
        conditions are those of the dense unit it runs (model/sparse.dense_params)."""
        if arch not in PRESETS:
            raise UserError(f"unknown architecture {arch!r}; known: {', '.join(PRESETS)}")
        preset = PRESETS[arch]
        if instr:
            inst = preset.instructions.get(instr)
            if inst is None:
                raise UserError(f"unknown instruction {instr!r} for {arch}")
            r = self.not_applicable_to(inst)
            if r:
                raise UserError(f"property {self.name!r} does not apply to {instr}: {r}")
        else:
            inst = self.instruction_for(preset)
        if self.gemm is not None and meta is not None:
            raise UserError("--meta applies to a sparse (mma.sp) instruction, not a GEMM")
        env = _template_env(arch, inst.params)
        out = []
        for spec in self.queries:
            if _not_asked(spec, arch, inst) is not None:
                continue  # not a question on this instruction: see `skipped`
            x = expand(spec.x, env)
            y = expand(spec.y, env) if spec.y is not None else None
            cons = tuple(_constraint(c, env) for c in spec.constraints)
            if self.gemm is not None:
                from .gemm_query import make_gemm_query

                q = make_gemm_query(
                    x, y, self.gemm.k, inst.name, spec.goal, cons, f"{self.name}-{spec.id}-{arch}"
                )
            else:
                q = make_query(
                    x,
                    y,
                    inst.name,
                    spec.goal,
                    cons,
                    name=f"{self.name}-{spec.id}-{arch}",
                    grows=spec.grow or None,
                    measure=spec.measure,
                    threshold=spec.threshold,
                    meta=meta,
                )
            bound = QuerySpec(
                spec.id,
                spec.goal,
                x,
                y,
                spec.constraints,
                spec.expectation(dense_params(q.p)),
                {k: expand(v, env) for k, v in spec.meaning.items()},
                spec.timeout,
                spec.grow,
                when=spec.when,
                measure=spec.measure,
                threshold=spec.threshold,
            )
            out.append((bound, q))
        return out

    def predicted_variants(self, arch: str, instr: str) -> list[str]:
        env = _template_env(arch, PRESETS[arch].instructions[instr].params)
        return [expand(t, env) for t in self.predict]


def _not_asked(spec: QuerySpec, arch: str, inst: Instruction) -> str | None:
    """Why query `spec` is no question on `inst` (None: it is one): its conditions, judged
    on the dense unit the instruction runs, or, on a sparse form, variants of another K
    (whose operands the metadata does not describe: the dense form asks that question)."""
    why = _mismatch(spec.when, dense_params(inst.params))
    if why is not None or inst.params.sparse == Sparsity.NONE:
        return why
    env = _template_env(arch, inst.params)
    for t in (spec.x, spec.y):
        if t is None:
            continue
        K = parse_variant(expand(t, env)).params(inst.name).K
        if K != inst.params.K:
            return f"a variant of K={K}; the sparse form has K={inst.params.K} (ask a dense form)"
    return None


def _mismatch(when: dict, p: ModelParams) -> str | None:
    """Why `p` fails the property's `when` conditions (None if it meets them)."""
    for key, allowed in when.items():
        if key == "has":
            for name in allowed:
                if getattr(p, name) is None:
                    return f"the model has no {name}"
            continue
        if key == "min_K":
            if p.K < allowed:
                return f"K={p.K} < {allowed}"
            continue
        if key == "groups":  # "single": one fused group (K <= L); "multi": chained groups
            n = len(p.groups())
            if ("single" if n == 1 else "multi") not in allowed:
                return (
                    f"K={p.K} in {n} chained groups of L={p.L}"
                    if n > 1
                    else f"one fused group (K={p.K} <= L={p.L})"
                )
            continue
        if key == "rounds":
            for kind in allowed:
                why = p.no_rounded(kind)
                if why:
                    return why
            continue
        value = getattr(p, key, None)
        shown = value.spec.name if isinstance(value, Format) else getattr(value, "value", value)
        if str(shown) not in [str(a) for a in allowed]:
            return f"{key} is {shown}, the property needs {' or '.join(map(str, allowed))}"
    return None


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


def _eval(expr: str, env: dict) -> int | str:
    """Evaluate `carry_bits-1`, `L*2`, `arch`: names and integer arithmetic only."""

    def ev(n: ast.AST):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise UserError(f"template name {n.id!r} is unknown; known: {', '.join(env)}")
            return env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        raise UserError(f"template expression {expr!r} is not names and integer arithmetic")

    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError:
        raise UserError(f"template expression {expr!r} does not parse") from None


def expand(template: str, env: dict) -> str:
    """Replace every `{expr}` in a template by its value."""
    return re.sub(r"\{([^{}]+)\}", lambda m: str(_eval(m.group(1), env)), template)


def _template_env(arch: str, p: ModelParams) -> dict:
    env: dict = {"arch": arch}
    env["K"] = p.K  # (also the loop below; named here for GEMM templates: {K*4})
    for f in ("a_fmt", "b_fmt", "c_fmt", "d_fmt"):
        spec = getattr(p, f).spec  # {a_mbits}, {d_precision}: the formats' significands
        env[f"{f[0]}_mbits"] = spec.mbits
        env[f"{f[0]}_precision"] = spec.precision
    for k, v in p.__dict__.items():
        if isinstance(v, bool):
            env[k] = "true" if v else "false"  # for texts: `flush_inputs={flush_inputs}`
        elif isinstance(v, int):
            env[k] = v
    return env


def _constraint(d: dict, env: dict) -> Constraint:
    kind = ConstraintKind(d["kind"])
    ops = str(d.get("operands", "abc"))
    if kind == ConstraintKind.FIX:
        bits = d["bits"]
        return Constraint(
            kind,
            ops,
            bits=int(bits, 0) if isinstance(bits, str) else bits,
            reason=d.get("reason", ""),
        )
    if kind == ConstraintKind.REPRESENTABLE:
        return Constraint(kind, ops, fmt=Format.parse(str(d["format"])), reason=d.get("reason", ""))
    lo = d.get("lo")
    hi = d.get("hi")
    return Constraint(
        kind,
        ops,
        lo=None if lo is None else int(expand(str(lo), env)),
        hi=None if hi is None else int(expand(str(hi), env)),
        reason=d.get("reason", ""),
    )


def _load_one(path: Path) -> Property:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: {e}") from None
    try:
        queries = []
        for i, q in enumerate(data["query"]):
            for c in q.get("constraint", []):
                if not c.get("reason"):
                    raise UserError(f"{path}: query[{i}] constraint {c} has no reason")
                ConstraintKind(c["kind"])
            goal = Goal(q.get("goal", "differ"))
            _check_variants(path, i, goal, q)
            expect, expect_if = _expectation(path, i, q.get("expect"))
            queries.append(
                QuerySpec(
                    id=q.get("id", str(i)),
                    goal=goal,
                    x=q["x"],
                    y=q.get("y"),
                    constraints=tuple(q.get("constraint", [])),
                    expect=expect,
                    meaning=dict(q.get("meaning", {})),
                    timeout=q.get("timeout"),
                    grow=str(q.get("grow", "")),
                    expect_if=expect_if,
                    when=dict(q.get("when", {})),
                    **_error_goal(path, i, goal, q),
                )
            )
        return Property(
            name=data["name"],
            question=data["question"].strip(),
            source=data["source"],
            when=dict(data.get("when", {})),
            prefer_groups=GroupPreference(str(data.get("prefer_groups", ""))),
            queries=tuple(queries),
            predict=tuple(data.get("predict", [])),
            path=path,
            prefer=dict(data.get("prefer", {})),
            gemm=_gemm_level(path, data),
        )
    except KeyError as e:
        raise UserError(f"{path}: missing field {e.args[0]!r}") from None
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None


def _error_goal(path: Path, i: int, goal: Goal, q: dict) -> dict:
    """`measure` and `threshold` (a number or "p/q") of a query with goal error-exceeds."""
    has = "measure" in q or "threshold" in q
    if goal != Goal.ERROR_EXCEEDS:
        if has:
            raise UserError(f"{path}: query[{i}]: measure and threshold need goal error-exceeds")
        return {}
    try:
        return {
            "measure": Measure.parse(str(q["measure"])),
            "threshold": Fraction(str(q["threshold"])),
        }
    except (KeyError, ValueError) as e:
        raise UserError(
            f"{path}: query[{i}]: goal error-exceeds needs measure and threshold ({e})"
        ) from None


def _gemm_level(path: Path, data: dict) -> GemmLevel | None:
    """`level = "gemm"` with `k` and `inputs` (None for an instruction-level property)."""
    level = data.get("level", "instruction")
    if level == "instruction":
        for key in ("k", "inputs"):
            if key in data:
                raise UserError(f'{path}: {key} applies to level = "gemm" properties')
        return None
    if level != "gemm":
        raise UserError(f'{path}: level: expected "instruction" or "gemm", got {level!r}')
    k = data.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UserError(f"{path}: k: a GEMM property needs the depth k (a positive integer)")
    inputs = data.get("inputs")
    try:
        fmt = Format.parse(str(inputs)) if inputs is not None else None
    except ValueError as e:
        raise UserError(f"{path}: inputs: {e}") from None
    for i, q in enumerate(data.get("query", [])):
        for side in ("x", "y"):
            if "/" not in str(q.get(side, "/")):
                raise UserError(
                    f"{path}: query[{i}].{side}: a GEMM property compares ARCH/SCHEDULE "
                    f"hypotheses, got {q[side]!r}"
                )
    return GemmLevel(k, fmt)


def _check_variants(path: Path, i: int, goal: Goal, q: dict) -> None:
    """The variants a goal needs: x and y, or (non-monotone) x alone and `grow`."""
    where = f"{path}: query[{i}]"
    if "x" not in q:
        raise UserError(f"{where}: goal {goal.value} needs a variant x")
    if goal.one_variant:
        if "y" in q:
            raise UserError(
                f"{where}: goal {goal.value} evaluates one variant x on two inputs; remove y"
            )
    else:
        if "y" not in q:
            raise UserError(f"{where}: goal {goal.value} compares x with y; y is missing")
        if "grow" in q:
            raise UserError(f"{where}: grow applies only to goal {Goal.NON_MONOTONE.value}")


def _expectation(path: Path, i: int, raw) -> tuple[Answer | None, tuple[tuple[Answer, dict], ...]]:
    """`expect = "sat"` or `expect = { sat = {conditions}, unsat = {conditions} }`."""
    if raw is None:
        return None, ()
    if isinstance(raw, str):
        return Answer(raw), ()
    if not isinstance(raw, dict):
        raise UserError(f"{path}: query[{i}] expect: an answer or a table of conditions")
    pairs = []
    for ans, cond in raw.items():
        if not isinstance(cond, dict):
            raise UserError(f"{path}: query[{i}] expect.{ans}: expected a table of conditions")
        pairs.append((Answer(ans), dict(cond)))
    return None, tuple(pairs)


def load_all(directory: Path | None = None) -> dict[str, Property]:
    """Every property in the built-in library, or in `directory` when given."""
    d = directory or BUILTIN_DIR
    if not d.is_dir():
        raise UserError(f"{d}: no such properties directory")
    props = {}
    for f in sorted(d.glob("*.toml")):
        p = _load_one(f)
        props[p.name] = p
    return props


def get(name: str, directory: Path | None = None) -> Property:
    props = load_all(directory)
    if name not in props:
        raise UserError(f"unknown property {name!r}; known: {', '.join(props) or 'none'}")
    return props[name]
