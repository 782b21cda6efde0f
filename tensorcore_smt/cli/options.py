"""Options and helpers shared by the commands that ask solvers (diff, prove, export,
find): the input constraints, the solver limits, the progress spinner."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from ..errors import UserError
from ..smt.query import (
    Constraint,
    ConstraintKind,
    Goal,
    Query,
    make_query,
    parse_fix,
    parse_representable,
    parse_window,
    smtlib,
)
from ..smt.solve import PORTFOLIO, Limits
from ..solvers.backends import SOLVER_HELP
from .base import check_out


@dataclass(frozen=True)
class OptionRange:
    """The values a numeric option may take: lo..hi (lo excluded when `open_lo`)."""

    lo: float
    hi: float
    open_lo: bool
    unit: str

    def describe(self) -> str:
        low = f"> {_num(self.lo)}" if self.open_lo else f">= {_num(self.lo)}"
        return f"{low} and <= {_num(self.hi)} {self.unit}".rstrip()

    def contains(self, v: float) -> bool:
        above = v > self.lo if self.open_lo else v >= self.lo
        return math.isfinite(v) and above and v <= self.hi


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def machine_memory_mib() -> int:
    """Physical memory of this machine in MiB (1 TiB when it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20
    except (ValueError, OSError, AttributeError):
        return 1 << 20


def machine_cores() -> int:
    return os.cpu_count() or 1


MIN_SOLVER_MEMORY_MIB = 512
"""The least --memory a solver process starts in: the cap is on its address space
(RLIMIT_AS), and Python with a solver's shared library maps about 200 MiB before it
reads the query (measured: a z3 worker fails to load under 192 MiB); 512 leaves room
for a query."""

MAX_WORKERS_PER_CORE = 4
"""Embedded Dask workers per core at most: more only queue for the cores (each is a
process of ~100 MiB); a bigger cluster is an existing scheduler (--scheduler)."""

ROW_BYTES = 4096
"""Working memory of one row in a chunk of the vector interpreter, rounded up (K = 32:
~100 columns of 8 bytes live at once, times the temporaries of one step)."""

MAX_TASKS = 100_000
"""Most tasks (chunks) one validate run submits (--rows / --chunk): Dask takes seconds
per 100,000 futures to submit and as long to cancel them on Ctrl-C."""

OPTION_RANGES: dict[str, OptionRange] = {
    "timeout": OptionRange(0, 1e7, True, "seconds"),
    "oracle_timeout": OptionRange(0, 1e7, True, "seconds"),
    "jobs": OptionRange(1, 1024, False, "solver processes"),
    "memory": OptionRange(MIN_SOLVER_MEMORY_MIB, machine_memory_mib(), False, "MiB"),
    "terms": OptionRange(0, 1 << 16, False, "products"),
    "slices": OptionRange(1, 24, False, "bits"),
    "search_seconds": OptionRange(0, 1e7, False, "seconds"),
    "seed": OptionRange(0, (1 << 32) - 1, False, ""),
    "workers": OptionRange(1, MAX_WORKERS_PER_CORE * machine_cores(), False, "worker processes"),
    "rows": OptionRange(1, 1e12, False, "rows"),
    "chunk": OptionRange(
        1, min(1 << 24, (machine_memory_mib() << 20) // ROW_BYTES), False, "rows per task"
    ),
    "keep": OptionRange(0, 10_000_000, False, "rows"),
}
"""Allowed range of every numeric option, checked when the command line is read:
the memory of a solver at most this machine's, embedded workers at most
MAX_WORKERS_PER_CORE per core, a chunk's rows within the machine's memory."""


class Ranged(click.ParamType):
    """An int or float option checked against its OPTION_RANGES entry."""

    def __init__(self, key: str, kind: type) -> None:
        self.key = key
        self.kind = kind
        self.name = kind.__name__

    def convert(self, value, param, ctx):
        rng = OPTION_RANGES[self.key]
        if isinstance(value, self.kind) and not isinstance(value, bool):
            v = value
        else:
            try:
                v = self.kind(str(value).strip())
            except (ValueError, OverflowError):
                self.fail(f"{value!r} is not a number; allowed: {rng.describe()}", param, ctx)
        if not rng.contains(v):
            self.fail(f"{value} is out of range; allowed: {rng.describe()}", param, ctx)
        return v


def query_options(f: Callable) -> Callable:
    """Arguments and options shared by every command that builds a query from two variants."""
    f = constraint_options(f)
    f = click.argument("variant_y")(f)
    return click.argument("variant_x")(f)


def constraint_options(f: Callable) -> Callable:
    """--instr and the input constraints."""
    opts = [
        click.option("--instr", default=None, help="Instruction (default: X's preset default)."),
        click.option("--positive", is_flag=True, help="Every input has its sign bit clear."),
        click.option(
            "--terms",
            type=Ranged("terms", int),
            default=None,
            help="Only the first N products are free; a_k = b_k = 0 for k >= N.",
        ),
        click.option("--finite", is_flag=True, help="No input is Inf or NaN."),
        click.option(
            "--normal-only", is_flag=True, help="Every input is zero or a normal finite number."
        ),
        click.option("--nonzero", is_flag=True, help="No input is zero."),
        click.option(
            "--exponent-window",
            "windows",
            multiple=True,
            metavar="[OPS=]LO:HI",
            help="Nonzero inputs (of operands OPS, e.g. ab) have 2^LO <= |x| < 2^(HI+1).",
        ),
        click.option(
            "--representable",
            multiple=True,
            metavar="[OPS=]FMT",
            help="Inputs (of operands OPS) are zero or normal numbers of FMT (ab=fp16).",
        ),
        click.option(
            "--fix", "fixes", multiple=True, metavar="NAME=HEX", help="Fix one input (a0=0x3c00)."
        ),
        META_OPTION,
    ]
    for o in reversed(opts):
        f = o(f)
    return f


META_OPTION = click.option(
    "--meta",
    "meta_text",
    default=None,
    metavar="I,J,...",
    help="Sparse (mma.sp) instructions: the metadata, the position (0..3; tf32 0..1) in "
    "its group of each kept entry of A, or one group's pattern that every group keeps "
    "(default: the first pattern). The inputs are then A's uncompressed row a0..a{K-1}, "
    "+0 where the metadata keeps nothing.",
)


def parse_meta(text: str | None) -> list[int] | None:
    """--meta: comma-separated small integers (checked against the instruction later)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")] if text.strip() else []
    try:
        return [int(t, 0) for t in items]
    except ValueError:
        raise UserError(f"--meta: {text!r} is not a comma-separated list of integers") from None


def given(name: str) -> bool:
    """Whether the running command's option `name` (its parameter name) was given on the
    command line or in the environment, not left at its default."""
    from click.core import ParameterSource

    src = click.get_current_context().get_parameter_source(name)
    return src in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def only_with(flag: str, on: bool, options: dict[str, str]) -> None:
    """UserError when an option of `options` (parameter name -> option) that means
    something only with `flag` is given while `flag` is off (`on` False)."""
    if on:
        return
    for name, opt in options.items():
        if given(name):
            raise UserError(f"{opt} applies only with {flag}")


def solver_options_common(f: Callable) -> Callable:
    """Solver choice, limits, --json and --out: shared by diff, prove and find."""
    opts = _SOLVER_OPTS[:-1]
    for o in reversed(opts):
        f = o(f)
    return f


def solver_options(f: Callable) -> Callable:
    for o in reversed(_SOLVER_OPTS):
        f = o(f)
    return f


def _solver_opts() -> list:
    return [
        click.option(
            "--solver",
            default=PORTFOLIO,
            show_default=True,
            help=SOLVER_HELP,
        ),
        click.option(
            "--timeout",
            type=Ranged("timeout", float),
            default=300.0,
            show_default=True,
            help="Wall-clock budget of one query in seconds: every solver of the "
            "portfolio (and the confirmation of an unsat answer) runs within it.",
        ),
        click.option(
            "--jobs",
            type=Ranged("jobs", int),
            default=None,
            help="Solvers run at once (default: cores).",
        ),
        click.option(
            "--memory",
            type=Ranged("memory", int),
            default=8192,
            show_default=True,
            help="MiB per solver process.",
        ),
        click.option(
            "--seed",
            type=Ranged("seed", int),
            default=0,
            show_default=True,
            help="Solver random seed.",
        ),
        click.option(
            "--confirm/--no-confirm", default=True, help="Confirm unsat with a second solver."
        ),
        click.option("--json", "as_json", is_flag=True, help="Machine-readable report."),
        click.option(
            "--out",
            type=click.Path(dir_okay=False),
            default=None,
            help="Write a witness as a test-vector file (JSON, or CSV by extension).",
        ),
        click.option(
            "--export",
            "export_path",
            is_flag=False,
            flag_value="",
            default=None,
            type=str,
            help="Also write the query as SMT-LIB2 (default path: queries/NAME.smt2).",
        ),
    ]


_SOLVER_OPTS = _solver_opts()


def constraints_from(opts: dict) -> list[Constraint]:
    """The input constraints the options in `opts` (as click parsed them) describe, all
    but --fix (which names an input of the query)."""
    cons: list[Constraint] = []
    for key, kind in (
        ("positive", ConstraintKind.POSITIVE),
        ("finite", ConstraintKind.FINITE),
        ("normal_only", ConstraintKind.NORMAL_ONLY),
        ("nonzero", ConstraintKind.NONZERO),
    ):
        if opts[key]:
            cons.append(Constraint(kind))
    cons += [parse_window(w) for w in opts["windows"]]
    cons += [parse_representable(r) for r in opts["representable"]]
    terms = opts["terms"]
    if terms is not None:
        if terms < 0:
            raise UserError(f"--terms: {terms} is negative")
        cons.append(Constraint(ConstraintKind.TERMS, "ab", lo=terms))
    return cons


def build_query(variant_x: str, variant_y: str, goal: Goal, opts: dict) -> Query:
    """The query the constraint options in `opts` (as click parsed them) describe."""
    cons = constraints_from(opts)
    instr = opts["instr"]
    meta = parse_meta(opts.get("meta_text"))
    q = make_query(variant_x, variant_y, instr, goal, tuple(cons), meta=meta)
    if opts["fixes"]:
        fixed = tuple(parse_fix(f, q.operands) for f in opts["fixes"])
        q = make_query(variant_x, variant_y, instr, goal, tuple(cons) + fixed, meta=meta)
    return q


def check_vector_out(q: Query, out: str | Path | None) -> None:
    """Refuse, before any work, a CSV --out for witnesses that only JSON can hold (a
    block-scaled unit's scale factors, a sparse unit's metadata)."""
    from ..validation.vectors import is_csv, json_only

    if out and is_csv(out):
        why = json_only(q.p.scale_fmt is not None, getattr(q, "meta", None) is not None)
        if why:
            raise UserError(f"--out {out}: {why}")


QUERIES_DIR = Path("queries")
"""Where a query goes when --export (or export's --out) names no file."""


def export_query(q, path: str | None, option: str = "--export") -> Path:
    """Write a query (instruction or GEMM) as SMT-LIB2 with check-sat and get-value and
    return the path: `path` when given (its folder must exist, as for every output
    file), else QUERIES_DIR/NAME.smt2 (the folder made when missing)."""
    if path:
        dst = check_out(path, option)
    else:
        dst = QUERIES_DIR / f"{q.slug}.smt2"
        dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(smtlib(q, for_export=True))
    return dst


def limits_from(opts: dict) -> Limits:
    """Solver limits from the parsed solver options."""
    return Limits(
        opts["solver"], opts["timeout"], opts["jobs"], opts["memory"], opts["confirm"], opts["seed"]
    )


class Spinner:
    """`solving: bitwuzla, z3 ... 3.2 s` on a terminal's stderr after the first second."""

    FRAMES = "|/-\\"

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False
        self.n = 0
        self.last = 0.0

    def __call__(self, elapsed: float, running: list[str]) -> None:
        if not self.enabled or elapsed < 1.0 or time.monotonic() - self.last < 0.1:
            return
        self.last = time.monotonic()
        self.n += 1
        frame = self.FRAMES[self.n % len(self.FRAMES)]
        sys.stderr.write(f"\r{frame} solving with {', '.join(running)} ... {elapsed:5.1f} s ")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 72 + "\r")
            sys.stderr.flush()
            self.shown = False


def oracle_timeout_option(f: Callable) -> Callable:
    """--oracle-timeout: how long a `cmd:` or `cuda` oracle may take to answer one batch."""
    from ..identify.oracle import CMD_TIMEOUT

    return click.option(
        "--oracle-timeout",
        type=Ranged("oracle_timeout", float),
        default=CMD_TIMEOUT,
        show_default=True,
        help="Seconds a cmd: or cuda oracle may take to answer one batch of vectors; "
        "then it is killed and the command reports what it has.",
    )(f)


def cluster_options(f: Callable) -> Callable:
    """--workers, --scheduler and --dashboard: where the tasks of a command run
    (tensorcore_smt.validation.distributed)."""
    opts = [
        click.option(
            "--workers",
            type=Ranged("workers", int),
            default=None,
            help="Worker processes of the embedded Dask cluster (default: the core count).",
        ),
        click.option(
            "--scheduler",
            default=None,
            metavar="ADDRESS",
            help="An existing Dask scheduler (e.g. tcp://host:8786; default: $TCSMT_SCHEDULER).",
        ),
        click.option(
            "--dashboard",
            is_flag=True,
            help="Serve Dask's dashboard of the embedded cluster (port 8787, else a free "
            "one; needs bokeh). Off by default.",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


class EngineType(click.ParamType):
    """--engine: a name of engine.Engine, checked when the command line is read."""

    name = "engine"

    def convert(self, value, param, ctx):
        from ..engine import parse_engine

        try:
            return parse_engine(value)
        except UserError as e:
            self.fail(str(e).removeprefix("engine: "), param, ctx)


def engine_option(f: Callable) -> Callable:
    """--engine numpy|compiled|torch (default: chosen per batch, engine/choice.py)."""
    from ..engine import ENGINES

    return click.option(
        "--engine",
        type=EngineType(),
        default=None,
        help=f"Interpreter: {' | '.join(ENGINES)} (default: compiled for large batches or "
        "kernels already compiled, numpy otherwise; torch runs on --device, default cpu).",
    )(f)
