"""A library's recipe per call, as data: the decision tables of schedules/library/*.toml,
which say for a torch call class and a shape which GEMM hypothesis cuBLAS's kernel
computes, and the evaluator that reads them.

A table file::

    classes = ["matmul.fp16.*", "linear.bf16.rr0"]   # call classes (glob on the name)
    instr = ""                 # "" the library default, "full-fp32", or an instruction
    source = "..."             # where the rules come from (recordings, documentation)

    [[rule]]                   # rules in order; the first that matches decides
    gpu = ["h200"]             # optional: only on these GPUs
    when = { k_max = 64 }      # optional: bounds on the shape (below)
    recipe = "hopper/serial"   # a GEMM hypothesis; {EXPR} parts are computed (below)
    why = "..."                # optional: what the rule stands for

An epilogue table (``kind = "epilogue"``, ``base = "linear"``) covers calls whose
arithmetic is a base op's plus an epilogue (F.linear with a bias over F.linear, addmm
over matmul): its rules give ``fields`` (`c_join=output,epilogue=mul-add`) instead of a
recipe, added to the schedule the other tables decide for the base op's class. An
epilogue rule may also ask for the kind of base kernel, ``base_split = "contiguous"``
(`BaseSplit`): the base recipe names split_k (the split-K kernel family, whose partials a
separate reduction combines, even with split_k=1) with contiguous k-ranges; "interleaved"
alike; "none": the base recipe names no split_k. ``base_fields = "split_tile=1"``: the
base recipe names each of these schedule fields with that value (a kernel family the
split layout alone does not tell apart: the small-M kernel's two halves of K are
contiguous ranges one k wide).

Bounds: ``m_min m_max n_min n_max k_min k_max mn_min mn_max`` (mn = M*N) and
``align_min align_max`` (align = gcd(N, K, 8): the largest power of two at most 8
dividing N and K, the elements by which the rows of torch.matmul's and F.linear's
operands and output are aligned, which bounds the vector loads of the kernels cuBLAS can
take) and ``tiles_min tiles_max`` (tiles = cdiv(M, 128) * cdiv(N, 128): the output
tiles of 128 x 128, what a kernel's waves over the SMs count), each inclusive, and ``k_mod = [q, r]`` (K mod q == r), ``n_mod``, ``m_mod`` alike;
``misaligned = ["n", "k"]``: at least one of those dimensions is not a multiple of 8 (an
fp16/bf16 operand's rows not 16-byte aligned: cuBLAS takes other kernels). EXPR is an
arithmetic expression of m, n, k with integers, + - * // %, min, max, cdiv (ceiling
division), log2 (floor) and clamp(x, lo, hi): `hopper/serial[split_k={min(4, cdiv(k, 1024))}]`.
"""

from __future__ import annotations

import ast
import fnmatch
import math
import operator
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..spec.datadirs import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BOUNDS = (
    "m_min", "m_max", "n_min", "n_max", "k_min", "k_max", "mn_min", "mn_max",
    "align_min", "align_max", "tiles_min", "tiles_max", "mnk_min", "mnk_max",
)  # fmt: skip
TILE_BOUND = 128
"""The output tile edge (elements) the `tiles` bound counts in."""
ALIGN_BOUND = 8
"""The largest alignment (elements) the `align` bound tells apart."""
ALIGN_DIMS: dict[str, tuple[str, str]] = {"matmul-at": ("m", "n")}
"""The dimensions whose gcd with ALIGN_BOUND is a call's `align`, by torch op (the
class name's first part), where they are not ("n", "k"): with A column-major, A's rows
hold M elements (lda = M) and K aligns nothing."""


def align_of(op: str, m: int, n: int, k: int) -> int:
    """The `align` bound's value for a call of torch op `op` (ALIGN_DIMS)."""
    dims = {"m": m, "n": n, "k": k}
    a, b = ALIGN_DIMS.get(op, ("n", "k"))
    return math.gcd(dims[a], dims[b], ALIGN_BOUND)


MODS = ("m_mod", "n_mod", "k_mod")
MISALIGNED = "misaligned"
ALIGN = 8
"""Elements of a 16-byte row of 2-byte operands: the alignment `misaligned` tests."""

_FUNCS = {
    "min": min,
    "max": max,
    "cdiv": lambda a, b: -(-a // b),
    "log2": lambda a: int(a).bit_length() - 1,
    "clamp": lambda x, lo, hi: max(lo, min(hi, x)),
}
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def evaluate(expr: str, env: dict[str, int]) -> int:
    """The integer value of `expr` (module docstring) for m, n, k in `env`."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return int(_FUNCS[node.func.id](*(ev(a) for a in node.args)))
        raise UserError(f"recipe expression {expr!r}: {ast.dump(node)[:60]} is not allowed")

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise UserError(f"recipe expression {expr!r}: not an expression") from None
    return ev(tree)


def recipe_fields(recipe: str) -> dict[str, str]:
    """The schedule fields a GEMM hypothesis text `arch/sched[f=v,...]` names, as text."""
    sched = recipe.split("/", 1)[1] if "/" in recipe else ""
    fields = sched.split("[", 1)[1].rstrip("]") if "[" in sched else ""
    return dict(f.split("=", 1) for f in fields.split(",") if "=" in f)


class BaseSplit(str, Enum):
    """Which base kernel an epilogue rule applies to (the base recipe's split-K family)."""

    NONE = "none"  # no split_k named: one kernel sums each output (chain, promotion)
    CONTIGUOUS = "contiguous"  # split_k named, contiguous k-ranges
    INTERLEAVED = "interleaved"  # split_k named, interleaved k-tiles

    @staticmethod
    def of(recipe: str) -> BaseSplit:
        """The split family of a GEMM hypothesis text `arch/sched[fields]`."""
        pairs = recipe_fields(recipe)
        if "split_k" not in pairs:
            return BaseSplit.NONE
        if pairs.get("split", "contiguous") == "interleaved":
            return BaseSplit.INTERLEAVED
        return BaseSplit.CONTIGUOUS


def shape_values(m: int, n: int, k: int, align: int | None = None) -> dict[str, int]:
    """What a rule's bounds test at shape (m, n, k) (BOUNDS); `align` the call's alignment
    (align_of; None: gcd(n, k, 8))."""
    if align is None:
        align = math.gcd(n, k, ALIGN_BOUND)
    tiles = -(-m // TILE_BOUND) * -(-n // TILE_BOUND)
    return {
        "m": m, "n": n, "k": k, "mn": m * n, "align": align, "tiles": tiles, "mnk": m * n * k,
    }  # fmt: skip


def majority(given: list) -> int:
    """The index of the first of `given` (trees' answers, lowest tree first) among those
    given most often: how a vote table picks its recipe."""
    count = Counter(given)
    most = max(count.values())
    return next(i for i, g in enumerate(given) if count[g] == most)


@dataclass(frozen=True)
class Rule:
    """One row of a table: where it applies and the recipe there (in an epilogue table:
    the schedule fields it adds)."""

    recipe: str
    when: dict = field(default_factory=dict)
    gpu: tuple[str, ...] | None = None
    why: str = ""
    base_split: BaseSplit | None = None  # epilogue rules: only over this base kernel
    base_fields: str = ""  # epilogue rules: only where the base recipe names these fields
    tree: int = 0  # in a vote table: the tree (0, 1, ...) whose leaf this rule is

    def matches(
        self,
        m: int,
        n: int,
        k: int,
        gpu: str | None,
        base: str | None = None,
        align: int | None = None,
    ) -> bool:
        """Whether the rule decides shape (m, n, k) on `gpu` (over base recipe `base`, an
        epilogue rule); `align`: the call's alignment (align_of; None: gcd(n, k, 8))."""
        return self.holds(shape_values(m, n, k, align), gpu, base)

    def holds(self, vals: dict[str, int], gpu: str | None, base: str | None = None) -> bool:
        """matches() on a shape's bound values `vals` (shape_values: computed once for
        the many rules of a vote table)."""
        if self.gpu is not None and gpu not in self.gpu:
            return False
        if self.base_split is not None and (base is None or BaseSplit.of(base) != self.base_split):
            return False
        if self.base_fields:
            named = recipe_fields(base or "")
            if any(named.get(f) != v for f, v in recipe_fields(f"/[{self.base_fields}]").items()):
                return False
        for name, bound in self.when.items():
            if name == MISALIGNED:
                if all(vals[d] % ALIGN == 0 for d in bound):
                    return False
                continue
            if name in MODS:
                q, r = bound
                if vals[name[0]] % q != r:
                    return False
                continue
            key, side = name.rsplit("_", 1)
            v = vals[key]
            if (side == "min" and v < bound) or (side == "max" and v > bound):
                return False
        return True

    def text(self, m: int, n: int, k: int) -> str:
        env = {"m": m, "n": n, "k": k}
        return re.sub(r"\{([^{}]+)\}", lambda mo: str(evaluate(mo.group(1), env)), self.recipe)


@dataclass(frozen=True)
class Table:
    """One file of schedules/library: the classes it covers and its rules."""

    name: str
    classes: tuple[str, ...]
    instr: str
    rules: tuple[Rule, ...]
    source: str = ""
    base: str | None = None  # epilogue tables: the op whose recipe they extend
    vote: int = 0  # trees of a vote table (0: an ordinary table, its first match decides)

    def covers(self, class_name: str) -> bool:
        return any(fnmatch.fnmatchcase(class_name, pat) for pat in self.classes)

    def decide(
        self,
        m: int,
        n: int,
        k: int,
        gpu: str | None,
        base: str | None = None,
        align: int | None = None,
    ) -> tuple[str, Rule] | None:
        """(recipe text, the rule) of the first rule matching the shape (and, for an
        epilogue table, the base recipe `base`; `align` as Rule.matches), or None. In a
        vote table each tree's first matching rule gives a recipe and the recipe most
        trees give wins (ties: the lowest tree's, tree 0 being the one learnt from every
        shape), with the first rule that gives it."""
        if self.vote:
            return self._vote(m, n, k, gpu, base, align)
        vals = shape_values(m, n, k, align)
        for r in self.rules:
            if r.holds(vals, gpu, base):
                return r.text(m, n, k), r
        return None

    def _vote(
        self, m: int, n: int, k: int, gpu: str | None, base: str | None, align: int | None
    ) -> tuple[str, Rule] | None:
        first: dict[int, tuple[str, Rule]] = {}
        vals = shape_values(m, n, k, align)
        for r in self.rules:
            if r.tree not in first and r.holds(vals, gpu, base):
                first[r.tree] = (r.text(m, n, k), r)
        if not first:
            return None
        trees = sorted(first)
        return first[trees[majority([first[t][0] for t in trees])]]


def _rule(doc: dict, where: str, epilogue: bool) -> Rule:
    key = "fields" if epilogue else "recipe"
    allowed = {key, "when", "gpu", "why", "tree"} | (
        {"base_split", "base_fields"} if epilogue else set()
    )
    unknown = set(doc) - allowed
    if unknown or key not in doc:
        raise UserError(f"{where}: a rule has {', '.join(sorted(allowed))} (got {sorted(doc)})")
    base_split = None
    if "base_split" in doc:
        try:
            base_split = BaseSplit(doc["base_split"])
        except ValueError:
            known = ", ".join(b.value for b in BaseSplit)
            raise UserError(
                f"{where}: base_split = {doc['base_split']!r}; allowed: {known}"
            ) from None
    when = dict(doc.get("when", {}))
    bad = set(when) - set(BOUNDS) - set(MODS) - {MISALIGNED}
    if bad:
        known = (*BOUNDS, *MODS, MISALIGNED)
        raise UserError(f"{where}: unknown bound(s) {sorted(bad)}; known: {known}")
    dims = when.get(MISALIGNED, ["m"])
    if not isinstance(dims, list) or not dims or not set(dims) <= {"m", "n", "k"}:
        raise UserError(f'{where}: misaligned names dimensions among "m", "n", "k" (got {dims!r})')
    base_fields = doc.get("base_fields", "")
    if not isinstance(base_fields, str) or any(
        "=" not in f for f in base_fields.split(",") if base_fields
    ):
        raise UserError(
            f'{where}: base_fields = {base_fields!r}; expected "field=value,..." '
            '(e.g. "split_tile=1")'
        )
    gpu = doc.get("gpu")
    tree = doc.get("tree", 0)
    if not isinstance(tree, int) or isinstance(tree, bool) or tree < 0:
        raise UserError(f"{where}: tree = {tree!r}; expected a tree index 0, 1, ...")
    return Rule(
        doc[key],
        when,
        tuple(gpu) if gpu is not None else None,
        doc.get("why", ""),
        base_split,
        base_fields,
        tree,
    )


def _vote(doc: dict, where: str, rules: tuple[Rule, ...]) -> int:
    """A table's `vote` (its number of trees; 0: none), checked against its rules."""
    vote = doc.get("vote", 0)
    if not isinstance(vote, int) or isinstance(vote, bool) or vote < 0:
        raise UserError(f"{where}: vote = {vote!r}; expected the number of trees")
    beyond = [r.tree for r in rules if r.tree >= max(vote, 1)]
    if beyond:
        raise UserError(f"{where}: a rule names tree {beyond[0]} of a table of {vote} trees")
    return vote


def read_table(path: Path) -> Table:
    """One table file (UserError, one line, on a malformed file)."""
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: {e}") from None
    epilogue = doc.get("kind") == "epilogue"
    if epilogue and not doc.get("base"):
        raise UserError(f'{path}: an epilogue table names its base op (base = "linear")')
    rules = tuple(
        _rule(r, f"{path.name} rule {i}", epilogue) for i, r in enumerate(doc.get("rule", []))
    )
    return Table(
        path.stem,
        tuple(doc.get("classes", [])),
        doc.get("instr", ""),
        rules,
        doc.get("source", ""),
        doc.get("base") if epilogue else None,
        _vote(doc, str(path), rules),
    )


def with_fields(recipe: str, extra: str) -> str:
    """`recipe` with schedule fields `extra` added, a field the recipe names already
    taking the new value in its place: hopper/serial[split_k=2] + c_join=output ->
    hopper/serial[split_k=2,c_join=output]; + split_k=4 -> hopper/serial[split_k=4]."""
    if not extra:
        return recipe
    if "/" not in recipe:
        recipe += "/serial"
    arch, sched = recipe.split("/", 1)
    if not sched.endswith("]"):
        return f"{arch}/{sched}[{extra}]"
    name, body = sched[:-1].split("[", 1)
    items = [f for f in body.split(",") if f]
    for f in extra.split(","):
        key = f.split("=", 1)[0] + "="
        at = [i for i, g in enumerate(items) if g.startswith(key)]
        if at:
            items[at[0]] = f
        else:
            items.append(f)
    return f"{arch}/{name}[{','.join(items)}]"


@cache
def tables(folder: str | None = None) -> tuple[Table, ...]:
    """Every table of schedules/library (or `folder`), in file-name order."""
    d = Path(folder) if folder else data_dir("schedules") / "library"
    if not d.is_dir():
        return ()
    return tuple(read_table(p) for p in sorted(d.glob("*.toml")))


def decide(
    class_name: str, m: int, n: int, k: int, gpu: str | None, among: Iterable[Table] | None = None
) -> tuple[str, str, Table, Rule] | None:
    """(recipe, instr, table, rule) for a call: the first table covering the class whose
    rules decide the shape (an epilogue table: its fields added to the recipe of the
    base op's class); None when no table does."""
    pool = tuple(tables() if among is None else among)
    align = align_of(class_name.split(".")[0], m, n, k)
    for t in pool:
        if not t.covers(class_name):
            continue
        if t.base is None:
            got = t.decide(m, n, k, gpu, None, align)
            if got is not None:
                return got[0], t.instr, t, got[1]
            continue
        base_name = ".".join([t.base, *class_name.split(".")[1:]])
        core = decide(base_name, m, n, k, gpu, [u for u in pool if u.base is None])
        if core is None:
            continue
        got = t.decide(m, n, k, gpu, core[0], align)
        if got is not None:
            return with_fields(core[0], got[0]), core[1], t, got[1]
    return None


def table_doc(t: Table) -> dict[str, Any]:
    """A table as profile data (its rules as read, recipe expressions unevaluated)."""
    key = "fields" if t.base is not None else "recipe"
    rules = []
    for r in t.rules:
        d: dict[str, Any] = {key: r.recipe}
        if r.when:
            d["when"] = {
                k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in r.when.items()
            }
        if r.gpu is not None:
            d["gpu"] = list(r.gpu)
        if r.why:
            d["why"] = r.why
        if r.base_split is not None:
            d["base_split"] = r.base_split.value
        if r.base_fields:
            d["base_fields"] = r.base_fields
        if r.tree:
            d["tree"] = r.tree
        rules.append(d)
    doc: dict[str, Any] = {
        "name": t.name,
        "classes": list(t.classes),
        "instr": t.instr,
        "source": t.source,
        "rules": rules,
    }
    if t.base is not None:
        doc["kind"] = "epilogue"
        doc["base"] = t.base
    if t.vote:
        doc["vote"] = t.vote
    return doc


def table_from_doc(doc: Any, where: str) -> Table:
    """A table from profile data (UserError naming `where` when malformed)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise UserError(f"{where}: expected a table object with a name")
    epilogue = doc.get("kind") == "epilogue"
    if epilogue and not isinstance(doc.get("base"), str):
        raise UserError(f"{where}: an epilogue table names its base op")
    rules = doc.get("rules", [])
    classes = doc.get("classes", [])
    if not isinstance(rules, list) or not isinstance(classes, list):
        raise UserError(f"{where}: classes and rules are lists")
    parsed = tuple(_rule(r, f"{where} rule {i}", epilogue) for i, r in enumerate(rules))
    return Table(
        doc["name"],
        tuple(str(c) for c in classes),
        str(doc.get("instr", "")),
        parsed,
        str(doc.get("source", "")),
        doc.get("base") if epilogue else None,
        _vote(doc, where, parsed),
    )


__all__ = [
    "BaseSplit",
    "Rule",
    "recipe_fields",
    "Table",
    "decide",
    "evaluate",
    "majority",
    "read_table",
    "shape_values",
    "tables",
    "with_fields",
]
