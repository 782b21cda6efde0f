"""Coverage as a property: every preset x instruction kind x command, one small question.

The cells are generated from the instruction catalogue (archs/*.toml through
spec.catalogue): every preset's instructions are sorted into kinds (float, integer,
sparse, block-scaled) by their model parameters, one representative of each kind is
picked, and every command and API entry is asked one small representative question about
it. A cell passes when it gets either a correct answer (checked against an independent
reference where one is cheap: exact rational or integer sums on inputs whose sum the
output format holds, chained `tc.mma` steps for a GEMM, a diff witness re-run on both
models, a bound's witness re-measured with exact rationals) or a one-line refusal with
exit 2 (UserError through the API) before any work. An instruction added to the tables
is covered the day it lands.

Run as a script it runs every cell (or those matching --only) and writes a table:

    .venv/bin/python tests/coverage_cells.py --jobs 3 --out /tmp/cells.tsv
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import tensorcore_smt as tc  # noqa: E402
from tensorcore_smt.cli import main  # noqa: E402
from tensorcore_smt.formats import (  # noqa: E402
    Format,
    format_hex,
    int_bits,
    int_value,
    round_fraction,
    value_of,
)
from tensorcore_smt.model import sparse  # noqa: E402
from tensorcore_smt.model.params import (  # noqa: E402
    Algorithm,
    BitOp,
    ModelParams,
    Sparsity,
    unread,
)
from tensorcore_smt.spec.catalogue import PRESETS, Instruction, Preset  # noqa: E402

SOLVER = "z3"
"""One solver, so that solver cells do not start a portfolio on a shared machine."""
BUDGET = "5"
"""Seconds a solver cell may take (--timeout)."""
REFUSE_WITHIN_S = 10.0
"""A refusal later than this (wall seconds) came after work began: the cell fails."""


class InstrKind(Enum):
    """What sort of instruction a cell asks about, read off its model parameters."""

    FLOAT = "float"
    INTEGER = "integer"
    SPARSE = "sparse"
    BLOCK_SCALED = "block-scaled"


class Command(Enum):
    """The commands and API entries every kind of instruction must be first-class in."""

    SIMULATE = "simulate"
    VALIDATE = "validate"
    DIFF = "diff"
    PROVE = "prove"
    FIND = "find"
    BOUND = "bound"
    EXACT = "exact"
    GEMM = "gemm"
    MATMUL = "matmul"
    EMULATE = "emulate"
    REVEAL = "reveal"
    PROBE = "probe"


class Status(Enum):
    """How a cell ended."""

    ANSWERED = "answered"
    REFUSED = "refused"
    FAILED = "failed"


def kind_of(p: ModelParams) -> InstrKind:
    """The kind of an instruction: block-scaled and sparse first (an instruction can be
    sparse and integer; it is asked about as sparse), then integer, else float."""
    if p.scale_fmt is not None:
        return InstrKind.BLOCK_SCALED
    if p.sparse != Sparsity.NONE:
        return InstrKind.SPARSE
    if p.algorithm == Algorithm.INTEGER:
        return InstrKind.INTEGER
    return InstrKind.FLOAT


def representatives(preset: Preset) -> dict[InstrKind, Instruction]:
    """One instruction of each kind the preset has: the default instruction for its
    kind, else the one with equal A and B formats and the fewest products (the cheapest
    question), ties in catalogue order."""
    out: dict[InstrKind, Instruction] = {}
    order = list(preset.instructions.values())
    for kind in InstrKind:
        members = [i for i in order if kind_of(i.params) == kind]
        if not members:
            continue
        default = preset.instructions[preset.default_instr]
        if default in members:
            out[kind] = default
            continue
        out[kind] = min(members, key=lambda i: (i.params.a_fmt != i.params.b_fmt, i.params.K))
    return out


NOT_EXPRESSIBLE: dict[tuple[Command, InstrKind], str] = {
    (Command.EMULATE, InstrKind.SPARSE): "torch has no call that names a sparse mma form",
    (Command.EMULATE, InstrKind.BLOCK_SCALED): "torch.matmul takes no block scale factors",
    (Command.REVEAL, InstrKind.SPARSE): "reveal names input formats, never an mma.sp form",
    (Command.REVEAL, InstrKind.BLOCK_SCALED): "reveal names input formats, no block scales",
}
"""(command, kind) pairs no argument of the command can ask for, with the reason; the
summary counts them apart."""


@dataclass(frozen=True)
class Cell:
    """One question: `command` about the `kind` representative `instr` of `preset`."""

    preset: str
    kind: InstrKind
    instr: str
    command: Command

    @property
    def id(self) -> str:
        return f"{self.preset}/{self.kind.value}/{self.command.value}"


@dataclass(frozen=True)
class Outcome:
    """How a cell ended, with one line saying what was seen."""

    status: Status
    detail: str
    seconds: float = 0.0


def cells() -> list[Cell]:
    """Every cell, in catalogue order (presets, kinds, commands): deterministic."""
    out = []
    for name, preset in PRESETS.items():
        for kind, inst in representatives(preset).items():
            for command in Command:
                if (command, kind) not in NOT_EXPRESSIBLE:
                    out.append(Cell(name, kind, inst.name, command))
    return out


def not_expressible() -> list[tuple[str, InstrKind, Command, str]]:
    """The (preset, kind, command) triples left out, each with its reason."""
    return [
        (name, kind, command, NOT_EXPRESSIBLE[(command, kind)])
        for name, preset in PRESETS.items()
        for kind in representatives(preset)
        for command in Command
        if (command, kind) in NOT_EXPRESSIBLE
    ]


# --- inputs and independent references ---------------------------------------------------


class CellFailure(Exception):
    """A cell's answer is wrong or its refusal is not one clean line."""


@dataclass(frozen=True)
class Row:
    """One dot product whose exact result the output format holds: bit patterns of a
    (n_a entries), b (K), c, the metadata of a sparse form, and the exact d."""

    a: list[int]
    b: list[int]
    c: int
    meta: list[int] | None
    d: int


def _small(fmt: Format, rng: np.random.Generator, choices: tuple[int, ...]) -> int:
    """The pattern of a small value of `fmt` drawn from `choices` (halved where a
    format's range needs it): integer formats clip to their range."""
    s = fmt.spec
    v = int(rng.choice(choices))
    if s.is_integer:
        lo, hi = s.int_range
        return int_bits(min(max(v, lo), hi), fmt)
    return round_fraction(Fraction(v), fmt)


def _value(bits: int, fmt: Format) -> Fraction:
    return Fraction(int_value(bits, fmt)) if fmt.spec.is_integer else Fraction(value_of(bits, fmt))


def _product(a: int, b: int, p: ModelParams) -> Fraction:
    if p.bit_op == BitOp.AND:
        return Fraction(a & b)
    if p.bit_op == BitOp.XOR:
        return Fraction(a ^ b)
    return _value(a, p.a_fmt) * _value(b, p.b_fmt)


def meta_of(p: ModelParams) -> list[int] | None:
    """The metadata of the first selection pattern in every group (None: dense)."""
    if p.sparse == Sparsity.NONE:
        return None
    return sparse.meta_indices(sparse.patterns(p)[0], p)


def expand(a: list[int], p: ModelParams, meta: list[int] | None) -> list[int]:
    """A's uncompressed row: the kept entries at their positions, +0 elsewhere."""
    if meta is None:
        return list(a)
    full = [0] * p.K
    for i, (x, m) in enumerate(zip(a, meta)):
        full[(i // p.sparse_keep) * p.sparse_group + m] = x
    return full


def exact_row(p: ModelParams, seed: int = 0) -> Row:
    """A row of small values whose exact c + sum a_k b_k is nonzero and held by d's
    format, and that d (drawn again with the next seed until it is)."""
    rng = np.random.default_rng(seed)
    meta = meta_of(p)
    for _ in range(200):
        a = [_small(p.a_fmt, rng, (-2, -1, 0, 1, 2)) for _ in range(p.n_a)]
        b = [_small(p.b_fmt, rng, (-2, -1, 0, 1, 2)) for _ in range(p.K)]
        c = _small(p.c_fmt, rng, (-3, -1, 1, 2, 5))
        full = expand(a, p, meta)
        exact = _value(c, p.c_fmt) + sum(_product(x, y, p) for x, y in zip(full, b))
        if exact == 0:
            continue
        if p.d_fmt.spec.is_integer:
            lo, hi = p.d_fmt.spec.int_range
            if lo <= exact <= hi:
                return Row(a, b, c, meta, int_bits(int(exact), p.d_fmt))
            continue
        d = round_fraction(exact, p.d_fmt)
        if value_of(d, p.d_fmt) == exact:
            return Row(a, b, c, meta, d)
    raise CellFailure(f"no exactly representable row for {p.a_fmt.name} -> {p.d_fmt.name}")


def _hexes(bits: list[int], fmt: Format) -> str:
    return ",".join(format_hex(x, fmt) for x in bits)


# --- running one cell ---------------------------------------------------------------------


ANSWER_CODES: dict[Command, frozenset[int]] = {
    Command.SIMULATE: frozenset({0}),
    Command.VALIDATE: frozenset({0}),
    Command.DIFF: frozenset({0, 3}),  # a witness (the variants differ), or undecided
    Command.PROVE: frozenset({0, 3}),  # X against itself: proved, or undecided
    Command.FIND: frozenset({0, 1, 3}),  # as expected, differing (reported), undecided
    Command.BOUND: frozenset({0, 3}),  # closed, or open when the budget ended
    Command.EXACT: frozenset({0, 3}),
    Command.GEMM: frozenset({0}),
    Command.REVEAL: frozenset({0, 1}),  # trees learnt, or the outputs are no tree
    Command.PROBE: frozenset({0}),
}
"""The exit codes each command documents for an answer to the question its cell asks."""


@dataclass
class Invocation:
    """One command line's end: exit code, stdout, stderr, and an escaped exception."""

    args: list[str]
    code: int
    out: str
    err: str
    exc: BaseException | None


def invoke(args: list[str]) -> Invocation:
    """Run `tcsmt ARGS` in this process."""
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    exc = (
        r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    )
    return Invocation(args, r.exit_code, r.stdout, r.stderr, exc)


def invoke_process(args: list[str]) -> Invocation:
    """Run `tcsmt ARGS` as its own process (what a user's shell sees)."""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "tensorcore_smt", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    return Invocation(args, r.returncode, r.stdout, r.stderr, None)


Invoker = Callable[[list[str]], Invocation]


class Refused(Exception):
    """The command refused the question in one clean line (exit 2 / UserError)."""


def check_refusal(inv: Invocation) -> None:
    """Raise Refused for a clean one-line exit-2 refusal, CellFailure for anything else
    that is not an answer code; return for an exit code the caller judges."""
    if inv.exc is not None:
        tb = "".join(traceback.format_exception_only(type(inv.exc), inv.exc)).strip()
        raise CellFailure(f"exception: {tb.splitlines()[-1][:200]}")
    lines = [ln for ln in inv.err.splitlines() if ln.strip()]
    if "Traceback" in inv.err or any("internal error" in ln for ln in lines):
        raise CellFailure(f"exit {inv.code}, traceback/internal error: {lines[-1][:200]}")
    if inv.code == 2:
        if inv.out.strip():
            raise CellFailure(f"exit 2 after a report began: {inv.out.strip()[:120]} | {lines}")
        if len(lines) != 1:
            raise CellFailure(f"exit 2 with {len(lines)} stderr lines: {' | '.join(lines)[:200]}")
        raise Refused(lines[0])


def expect(inv: Invocation, command: Command) -> None:
    """The invocation answered with one of the command's answer codes (else Refused or
    CellFailure)."""
    check_refusal(inv)
    if inv.code not in ANSWER_CODES[command]:
        last = ([ln for ln in inv.err.splitlines() if ln.strip()] or [inv.out.strip()[-150:]])[-1]
        raise CellFailure(f"exit {inv.code}: {last[:200]}")


def undecided(inv: Invocation) -> str:
    """An exit 3 that says so in words (else CellFailure)."""
    text = (inv.out + inv.err).lower()
    words = ("unknown", "undecided", "open", "timeout", "budget", "time limit")
    if not any(w in text for w in words):
        raise CellFailure(f"exit 3 without saying why: {inv.out.strip()[-150:]}")
    try:
        rep = json.loads(inv.out)
        said = f"verdict {rep.get('verdict')}, {rep.get('solver', {}).get('answer', '')}"
    except (ValueError, AttributeError):
        tail = [ln for ln in (inv.out + inv.err).splitlines() if ln.strip()]
        said = tail[-1].strip()[:120] if tail else ""
    return f"exit 3: {said}"


def _base(cell: Cell) -> list[str]:
    return ["--instr", cell.instr]


def _params(cell: Cell) -> ModelParams:
    return tc.resolve(cell.preset, cell.instr)


def run_simulate(cell: Cell, tmp: Path, call: Invoker) -> str:
    p = _params(cell)
    row = exact_row(p)
    args = ["simulate", "--arch", cell.preset, *_base(cell), "--json"]
    args += ["--a", _hexes(row.a, p.a_fmt), "--b", _hexes(row.b, p.b_fmt)]
    args += ["--c", format_hex(row.c, p.c_fmt)]
    if row.meta is not None:
        args += ["--meta", ",".join(map(str, row.meta))]
    inv = call(args)
    expect(inv, cell.command)
    got = int(json.loads(inv.out)["d"], 16)
    if got != row.d:
        raise CellFailure(f"d = {got:#x}, exact {row.d:#x}")
    return f"d = {got:#x} exact"


def _rows_file(p: ModelParams, tmp: Path, n: int = 3) -> tuple[Path, list[Row]]:
    rows = [exact_row(p, seed) for seed in range(n)]
    path = tmp / "rows.jsonl"
    with path.open("w") as f:
        for r in rows:
            rec = {
                "a": [format_hex(x, p.a_fmt) for x in r.a],
                "b": [format_hex(x, p.b_fmt) for x in r.b],
                "c": format_hex(r.c, p.c_fmt),
                "d": format_hex(r.d, p.d_fmt),
            }
            if r.meta is not None:
                rec["metadata"] = r.meta
            f.write(json.dumps(rec) + "\n")
    return path, rows


def run_validate(cell: Cell, tmp: Path, call: Invoker) -> str:
    """The model against recorded rows whose d is the exact sum: no mismatch."""
    p = _params(cell)
    path, rows = _rows_file(p, tmp)
    args = ["validate", "--arch", cell.preset, *_base(cell), "--oracle", f"file:{path}"]
    args += ["--workers", "1", "--out", str(tmp / "mismatches.json")]
    inv = call(args)
    expect(inv, cell.command)
    if f"rows:        {len(rows)} checked" not in inv.out or "mismatches:  0" not in inv.out:
        raise CellFailure(f"unexpected report: {' | '.join(inv.out.splitlines()[:4])}")
    return f"{len(rows)} exact rows, 0 mismatches"


FLIPS: tuple[tuple[str, Callable[[ModelParams], str]], ...] = (
    ("int_clamp", lambda p: "wrap" if p.int_clamp.value == "satfinite" else "satfinite"),
    ("rounding", lambda p: "rz" if p.rounding.value != "rz" else "rne"),
    ("flush_inputs", lambda p: "false" if p.flush_inputs else "true"),
    ("F", lambda p: str(max(1, p.F - 4))),
)
"""One-parameter changes a diff cell may ask about, in order of preference."""


def flipped(p: ModelParams) -> str:
    """The first change of FLIPS that the unit's family reads (model.params.unread)."""
    for name, other in FLIPS:
        if unread(p, name) is None:
            return f"{name}={other(p)}"
    raise CellFailure(f"no parameter of FLIPS acts on {p.algorithm.value}")


def _simulate_one(variant: str, instr: str, a, b, c, meta) -> int:
    return tc.simulate_one(variant, instr, a, b, c, meta=meta)


def run_diff(cell: Cell, tmp: Path, call: Invoker) -> str:
    """X against X with one parameter flipped; a witness is re-run on both models."""
    p = _params(cell)
    y = f"{cell.preset}[{flipped(p)}]"
    args = ["diff", cell.preset, y, *_base(cell), "--solver", SOLVER, "--timeout", BUDGET]
    args += ["--json"]
    inv = call(args)
    expect(inv, cell.command)
    if inv.code == 3:
        return undecided(inv)
    w = json.loads(inv.out)["witness"]
    names = sorted(w["inputs"])
    meta = w.get("meta")
    a_keys = [k for k in names if k[0] == "a" and k[1:].isdigit()]
    a = [int(w["inputs"][f"a{i}"]["hex"], 16) for i in range(len(a_keys))]
    b = [int(w["inputs"][f"b{i}"]["hex"], 16) for i in range(p.K)]
    c = int(w["inputs"]["c"]["hex"], 16)
    if p.sparse != Sparsity.NONE:
        meta = meta if meta is not None else meta_of(p)
        a = [a[j] for j in _kept(p, meta)]
    dx = _simulate_one(cell.preset, cell.instr, a, b, c, meta)
    dy = _simulate_one(y, cell.instr, a, b, c, meta)
    outs = {k: int(v["hex"], 16) for k, v in w["outputs"].items()}
    if dx == dy or outs.get(cell.preset) != dx or outs.get(y) != dy:
        raise CellFailure(f"witness does not reproduce: {dx:#x} {dy:#x} vs reported {outs}")
    return f"witness re-run: {dx:#x} != {dy:#x}"


def _kept(p: ModelParams, meta: list[int]) -> list[int]:
    """Positions in A's uncompressed row of the entries `meta` keeps."""
    return [(i // p.sparse_keep) * p.sparse_group + m for i, m in enumerate(meta)]


def run_prove(cell: Cell, tmp: Path, call: Invoker) -> str:
    args = ["prove", cell.preset, cell.preset, *_base(cell), "--solver", SOLVER]
    args += ["--timeout", BUDGET]
    inv = call(args)
    expect(inv, cell.command)
    return "proved equal" if inv.code == 0 else undecided(inv)


def property_for(inst: Instruction) -> str:
    """The first property (by name) of the library that asks something of `inst`;
    where none does, the first property, whose refusal the cell then expects."""
    from tensorcore_smt.smt.library import load_all

    props = load_all(None)
    for name in sorted(props):
        prop = props[name]
        if prop.gemm is None and prop.not_applicable_to(inst) is None:
            return name
    return sorted(props)[0]


def run_find(cell: Cell, tmp: Path, call: Invoker) -> str:
    inst = PRESETS[cell.preset].instructions[cell.instr]
    prop = property_for(inst)
    args = ["find", "--property", prop, "--arch", cell.preset, *_base(cell)]
    args += ["--solver", SOLVER, "--timeout", BUDGET, "--search", "0"]
    meta = meta_of(inst.params)
    if meta is not None:
        args += ["--meta", ",".join(map(str, meta))]
    inv = call(args)
    expect(inv, cell.command)
    return f"{prop}: exit {inv.code}"


def run_bound(cell: Cell, tmp: Path, call: Invoker) -> str:
    """A one-term bound; L <= U and L re-measured from the witness with rationals."""
    p = _params(cell)
    args = ["bound", cell.preset, *_base(cell), "--where", "terms:1", "--solver", SOLVER]
    args += ["--timeout", BUDGET, "--json"]
    inv = call(args)
    expect(inv, cell.command)
    rep = json.loads(inv.out)
    lower = Fraction(rep["lower"])
    upper = Fraction(rep["upper"]) if rep.get("upper") not in (None, "inf") else None
    if upper is not None and lower > upper:
        raise CellFailure(f"L = {lower} > U = {upper}")
    if p.algorithm == Algorithm.INTEGER and (lower != 0 or upper != 0):
        raise CellFailure(f"[{lower}, {upper}] for integer sums without overflow (exact: 0)")
    w = rep.get("witness")
    if w and p.sparse == Sparsity.NONE and p.scale_fmt is None:
        a = [int(x, 16) for x in w["a"]]
        b = [int(x, 16) for x in w["b"]]
        c = int(w["c"], 16)
        d = _simulate_one(cell.preset, cell.instr, a, b, c, None)
        prods = [_product(x, y, p) for x, y in zip(a, b)]
        r = _value(c, p.c_fmt) + sum(prods)
        norm = abs(_value(c, p.c_fmt)) + sum(abs(x) for x in prods)
        err = abs(_value(d, p.d_fmt) - r) / norm if norm else Fraction(0)
        if rep["measure"] == "normwise" and err != lower:
            raise CellFailure(f"witness measures {err}, L = {lower}")
    return f"L = {float(lower):.3g}, U = {float(upper) if upper is not None else 'none'} ({rep['status']})"


def run_exact(cell: Cell, tmp: Path, call: Invoker) -> str:
    p = _params(cell)
    args = ["exact", cell.preset, *_base(cell), "--timeout", BUDGET, "--solver", SOLVER]
    if p.algorithm != Algorithm.INTEGER:  # slices the inputs hold, K of about 10^3
        bits = min(7, p.a_fmt.spec.precision, p.b_fmt.spec.precision)
        args += ["--slices", str(bits)]
    else:
        args += ["--json"]
    inv = call(args)
    expect(inv, cell.command)
    if p.algorithm != Algorithm.INTEGER or inv.code != 0:
        return f"exit {inv.code}"
    got = json.loads(inv.out)["overflow_free_K"]
    want = overflow_free_K(p)
    if got != want:
        raise CellFailure(f"overflow-free K = {got}; every term pair says {want}")
    return f"overflow-free to K = {got} (brute force over the terms)"


def overflow_free_K(p: ModelParams) -> int:
    """The largest K at which no chain of K terms from C = 0 leaves d's range, from every
    pair of input values (brute force: at most 2^8 x 2^8 of them)."""
    terms = [
        _product(x, y, p)
        for x in range(1 << p.a_fmt.spec.storage)
        for y in range(1 << p.b_fmt.spec.storage)
    ]
    lo, hi = p.d_fmt.spec.int_range
    k_hi = hi // max(terms) if max(terms) > 0 else None
    k_lo = lo // min(terms) if min(terms) < 0 else None
    return min(k for k in (k_hi, k_lo) if k is not None)


def chains(p: ModelParams) -> bool:
    """Whether a GEMM of `p` is checked against chained tc.mma steps (each step's d is
    the next one's c) rather than the exact product of small values."""
    return p.c_fmt == p.d_fmt and p.sparse == Sparsity.NONE and p.bit_op == BitOp.MUL


def _wide(fmt: Format, rng: np.random.Generator) -> int:
    """A random pattern over the format's ordinary range: a normal draw rounded to a
    float format, any value of an integer one."""
    s = fmt.spec
    if s.is_integer:
        lo, hi = s.int_range
        return int_bits(int(rng.integers(lo, hi + 1)), fmt)
    return round_fraction(Fraction(float(rng.standard_normal())), fmt)


def _matrices(p: ModelParams, m: int, n: int, steps: int, seed: int = 1):
    """Random A (m x K*steps) and B patterns: over the formats' range where the GEMM is
    checked against chained steps, else of small values with sparse A kept to the first
    selection pattern (the exact product is then an integer matrix)."""
    rng = np.random.default_rng(seed)
    k = p.K * steps
    if chains(p):
        a = np.array([[_wide(p.a_fmt, rng) for _ in range(k)] for _ in range(m)])
        b = np.array([[_wide(p.b_fmt, rng) for _ in range(n)] for _ in range(k)])
        return a, b
    a = np.array([[_small(p.a_fmt, rng, (-2, -1, 0, 1, 2)) for _ in range(k)] for _ in range(m)])
    b = np.array([[_small(p.b_fmt, rng, (-2, -1, 0, 1, 2)) for _ in range(n)] for _ in range(k)])
    meta = meta_of(p)
    if meta is not None:
        keep = np.zeros(k, bool)
        for s in range(steps):
            keep[[s * p.K + j for j in _kept(p, meta)]] = True
        a[:, ~keep] = 0
    return a, b


def _as_values(bits: np.ndarray, fmt: Format) -> np.ndarray:
    return np.vectorize(lambda x: float(_value(int(x), fmt)), otypes=[float])(bits)


def _udtype(fmt: Format):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[max(8, fmt.spec.storage)]


def chained_reference(cell: Cell, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """D of a serial GEMM as chained tc.mma steps (C = +0, then each D fed back), or the
    exact product where the steps cannot chain (c and d formats differ, sparse forms):
    the values are small integers, so the exact product is what a unit returns."""
    p = _params(cell)
    if not chains(p):
        if p.bit_op != BitOp.MUL:
            raise CellFailure("no reference for single-bit GEMMs")
        return _as_values(a, p.a_fmt) @ _as_values(b, p.b_fmt)
    m, n = a.shape[0], b.shape[1]
    d = np.zeros((m, n), _udtype(p.c_fmt))
    for s in range(a.shape[1] // p.K):
        blk = slice(s * p.K, (s + 1) * p.K)
        a_blk = a[:, blk].astype(_udtype(p.a_fmt))
        b_blk = b[blk, :].astype(_udtype(p.b_fmt))
        d = tc.api.as_bits(tc.mma(cell.preset, cell.instr, a_blk, b_blk, d), p.d_fmt, "D")
    return _as_values(d, p.d_fmt)


def run_gemm(cell: Cell, tmp: Path, call: Invoker) -> str:
    p = _params(cell)
    a, b = _matrices(p, 4, 4, 2)
    np.save(tmp / "A.npy", a.astype(_udtype(p.a_fmt)))
    np.save(tmp / "B.npy", b.astype(_udtype(p.b_fmt)))
    args = ["gemm", "--arch", cell.preset, *_base(cell), "--a", str(tmp / "A.npy")]
    args += ["--b", str(tmp / "B.npy"), "--dtype", p.a_fmt.name.lower(), "--no-errors"]
    ref = chained_reference(cell, a, b)
    for engine in ("numpy", "compiled"):
        inv = call([*args, "--engine", engine, "--out", str(tmp / f"D-{engine}.npy")])
        expect(inv, cell.command)
        got = np.load(tmp / f"D-{engine}.npy").astype(float)
        if not np.array_equal(got, ref, equal_nan=True):
            raise CellFailure(
                f"--engine {engine}: D differs from the chained tc.mma reference in "
                f"{np.sum(got != ref)} of {got.size}"
            )
    return "D = chained tc.mma on both engines" if chains(p) else "D = exact, both engines"


def run_matmul(cell: Cell, tmp: Path, call: Invoker) -> str:
    p = _params(cell)
    a, b = _matrices(p, 4, 4, 2)
    d = tc.matmul(
        cell.preset, a.astype(_udtype(p.a_fmt)), b.astype(_udtype(p.b_fmt)), instr=cell.instr
    )
    got = np.asarray(d).astype(float)
    if got.dtype.kind == "u" or np.asarray(d).dtype.kind == "u":
        got = _as_values(np.asarray(d), p.d_fmt)
    ref = chained_reference(cell, a, b)
    if not np.array_equal(got, ref, equal_nan=True):
        raise CellFailure(f"D differs from the chained tc.mma reference in {np.sum(got != ref)}")
    return "D = chained tc.mma" if chains(p) else "D = exact product"


TORCH_DTYPES: dict[str, str] = {
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "tf32": "float32",
    "fp64": "float64",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "s8": "int8",
    "u8": "uint8",
}
"""The torch dtype whose tensors ask tc.emulate for an instruction of each input format."""


def run_emulate(cell: Cell, tmp: Path, call: Invoker) -> str:
    """torch.matmul under tc.emulate(preset) on small integer values of the kind's input
    dtype: the exact product (every partial sum is held by every format asked)."""
    import torch

    p = _params(cell)
    name = TORCH_DTYPES.get(p.a_fmt.name.lower())
    if name is None:
        raise CellFailure(f"no torch dtype for {p.a_fmt.name} (extend TORCH_DTYPES)")
    dtype = getattr(torch, name)
    rng = np.random.default_rng(2)
    k = 2 * p.K
    lo = 0 if name.startswith("uint") else -2
    a = rng.integers(lo, 3, (4, k))
    b = rng.integers(lo, 3, (k, 4))
    ta = torch.tensor(a, dtype=torch.float32).to(dtype)
    tb = torch.tensor(b, dtype=torch.float32).to(dtype)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with tc.emulate(cell.preset):
            d = torch.matmul(ta, tb)
    native = [str(w.message) for w in seen if "natively" in str(w.message)]
    got = d.to(torch.float64).numpy()
    ref = (a @ b).astype(float)
    if not np.array_equal(got, ref):
        raise CellFailure(f"emulated matmul differs from the exact product in {np.sum(got != ref)}")
    return f"exact product on {name}" + (f" (ran natively: {native[0]})" if native else "")


REVEAL_DTYPES = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "tf32": "fp32"}
"""The --dtype reveal asks for an instruction of each input format; others are asked by
their own name (and refused where reveal takes none)."""


def run_reveal(cell: Cell, tmp: Path, call: Invoker) -> str:
    p = _params(cell)
    dtype = REVEAL_DTYPES.get(p.a_fmt.name.lower(), p.a_fmt.name.lower())
    args = ["reveal", "--oracle", f"model:{cell.preset}", "--k", "16", "--dtype", dtype]
    args += ["--shape", "2,2", "--check-outputs", "64", "--json"]
    inv = call(args)
    expect(inv, cell.command)
    if inv.code == 1:
        said = [ln for ln in inv.err.splitlines() if ln.strip()]
        return "exit 1, no tree: " + (said[-1][:150] if said else "")
    rep = json.loads(inv.out)
    named = rep.get("hypothesis") or ""
    if named.split("/")[0] != cell.preset:  # the model's own order must come back
        raise CellFailure(f"model:{cell.preset} read back as {named or 'no hypothesis'}")
    return f"read back as {named} ({rep.get('tree_text')})"


def run_probe(cell: Cell, tmp: Path, call: Invoker) -> str:
    """A vector file of exact rows (its prediction must be the exact d), then the GPU
    program that runs it."""
    p = _params(cell)
    path, rows = _rows_file(p, tmp)
    vec = tmp / "vectors.json"
    inv = call(
        ["vectors", "new", "--arch", cell.preset, *_base(cell), "--rows", str(path)]
        + ["--out", str(vec)]
    )
    expect(inv, cell.command)
    predicted = [
        int(next(iter(v["predicted"].values())), 16) for v in json.loads(vec.read_text())["vectors"]
    ]
    if predicted != [r.d for r in rows]:
        raise CellFailure(f"predictions {predicted} differ from the exact d")
    src = tmp / "probe.src"
    inv = call(["probe", str(vec), "--out", str(src)])
    expect(inv, cell.command)
    if not src.exists() or src.stat().st_size == 0:
        raise CellFailure("probe wrote no program")
    return f"{len(rows)} exact predictions, program written"


RUNNERS: dict[Command, Callable[[Cell, Path, Invoker], str]] = {
    Command.SIMULATE: run_simulate,
    Command.VALIDATE: run_validate,
    Command.DIFF: run_diff,
    Command.PROVE: run_prove,
    Command.FIND: run_find,
    Command.BOUND: run_bound,
    Command.EXACT: run_exact,
    Command.GEMM: run_gemm,
    Command.MATMUL: run_matmul,
    Command.EMULATE: run_emulate,
    Command.REVEAL: run_reveal,
    Command.PROBE: run_probe,
}


def run_cell(cell: Cell, call: Invoker = invoke) -> Outcome:
    """Ask the cell's question (command lines through `call`: in this process by
    default); classify how it ended."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        try:
            detail = RUNNERS[cell.command](cell, Path(d), call)
            status = Status.ANSWERED
        except Refused as e:
            status, detail = Status.REFUSED, str(e)
        except tc.UserError as e:
            lines = str(e).strip().splitlines()
            if len(lines) == 1:
                status, detail = Status.REFUSED, lines[0]
            else:
                status, detail = Status.FAILED, f"UserError of {len(lines)} lines: {lines[0]}"
        except CellFailure as e:
            status, detail = Status.FAILED, str(e)
        except Exception as e:  # an API call leaked another exception: a finding
            status, detail = Status.FAILED, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    seconds = time.monotonic() - t0
    if status == Status.REFUSED and seconds > REFUSE_WITHIN_S:
        status, detail = Status.FAILED, f"refused after {seconds:.1f} s of work: {detail}"
    return Outcome(status, " ".join(detail.split())[:300], seconds)


def summary(results: list[tuple[Cell, Outcome]]) -> str:
    """Per command: cells answered, refused, failed; and the total."""
    lines = [f"{'command':10} {'answered':>8} {'refused':>8} {'failed':>7}"]
    tot = {s: 0 for s in Status}
    for command in Command:
        mine = [o for c, o in results if c.command == command]
        if not mine:
            continue
        n = {s: sum(o.status == s for o in mine) for s in Status}
        for s in Status:
            tot[s] += n[s]
        lines.append(
            f"{command.value:10} {n[Status.ANSWERED]:8} {n[Status.REFUSED]:8} {n[Status.FAILED]:7}"
        )
    lines.append(
        f"{'all':10} {tot[Status.ANSWERED]:8} {tot[Status.REFUSED]:8} {tot[Status.FAILED]:7}"
    )
    return "\n".join(lines)


def main_script(argv: list[str] | None = None) -> int:
    """Run every cell (or those whose id contains one of --only) and write the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the table here (TSV)")
    ap.add_argument("--only", action="append", default=[], help="cell id substring")
    ap.add_argument("--jobs", type=int, default=1, help="cells run at once (processes)")
    args = ap.parse_args(argv)
    todo = [c for c in cells() if not args.only or any(s in c.id for s in args.only)]
    results = []
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        for cell, o in zip(todo, pool.map(run_cell, todo)):
            results.append((cell, o))
            print(f"{cell.id:40} {o.status.value:8} {o.seconds:6.1f}s {cell.instr}: {o.detail}")
            sys.stdout.flush()
    if args.out:
        with args.out.open("w") as f:
            f.write("cell\tinstr\tstatus\tseconds\tdetail\n")
            for c, o in results:
                f.write(f"{c.id}\t{c.instr}\t{o.status.value}\t{o.seconds:.1f}\t{o.detail}\n")
    print(summary(results))
    print(f"not expressible: {len(not_expressible())} (command, kind) cells")
    return 0


if __name__ == "__main__":
    sys.exit(main_script())
