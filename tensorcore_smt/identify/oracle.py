"""Oracles: whatever answers input vectors with the unit's d bits.

An oracle spec is `KIND:ARGUMENT` (or a bare `KIND`), looked up in `ORACLES`:

- ``variant:EXPR``: a hidden model (any variant expression), run on the vector interpreter;
- ``file:ROWS``: recorded answers only (JSONL rows with ``d``, or a vector file); it can
  answer no new question, so `identify` with it is `fit` plus the next probe to run;
- ``cmd:PROGRAM``: any program (split like a shell command line) that reads vector
  JSONL on stdin (``{"a": [hex...], "b": [hex...], "c": "0x.."}``, one row a line) and
  prints one d per line (hex, ``0x`` optional), in order;
- ``cuda``: builds a runner for the instruction with nvcc and runs it on the local GPU
  (`tensorcore_smt.probe.runner.build_runner`), then behaves as ``cmd:``;
- ``cpu:avx512bf16``: the local CPU's x86 VDPBF16PS, one row a lane, through an LLVM
  kernel llvmlite compiles in process (`tensorcore_smt.identify.cpu`).

Each call sends a batch of vectors (a process per call for ``cmd:`` and ``cuda``).
Anything wrong with an oracle's answer (a crash, a wrong number of lines, a pattern that
is not hex or does not fit d's format) raises `OracleError`, one line.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import children
from ..api import simulate_params
from ..errors import UserError
from ..formats import format_hex, parse_hex
from ..model.params import ModelParams
from ..spec.presets import parse_variant
from ..validation.oracle_base import Oracle, OracleError

CMD_TIMEOUT = 60.0
"""Seconds a `cmd:` or `cuda` oracle may take to answer one batch by default
(--oracle-timeout): a batch is at most a few hundred vectors, which a GPU runner answers
in well under a second and a software model in seconds; a program still silent after a
minute is taken to hang, and it is killed with everything it started."""


@dataclass
class VariantOracle(Oracle):
    """A hidden model: the vector interpreter on a variant expression."""

    hidden: ModelParams | None = None

    def _answer(self, a, b, c) -> np.ndarray:
        return simulate_params(self.hidden, a, b, c)


@dataclass
class CmdOracle(Oracle):
    """A program that reads vector JSONL on stdin and prints one d per line."""

    argv: list[str] = field(default_factory=list)
    timeout: float = CMD_TIMEOUT

    def _answer(self, a, b, c) -> np.ndarray:
        p = self.p
        lines = [
            json.dumps(
                {
                    "a": [format_hex(int(x), p.a_fmt) for x in ra],
                    "b": [format_hex(int(x), p.b_fmt) for x in rb],
                    "c": format_hex(int(rc), p.c_fmt),
                }
            )
            for ra, rb, rc in zip(a, b, c)
        ]
        name = self.argv[0] if self.argv else "?"
        try:
            r = children.run(self.argv, "\n".join(lines) + "\n", self.timeout)
        except FileNotFoundError:
            raise OracleError(f"oracle {self.spec}: cannot run {name!r}: no such program") from None
        except PermissionError:
            raise OracleError(f"oracle {self.spec}: cannot run {name!r}: not executable") from None
        except OSError as e:
            raise OracleError(f"oracle {self.spec}: cannot run {name!r}: {e.strerror}") from None
        except subprocess.TimeoutExpired:
            raise OracleError(
                f"oracle {self.spec}: no answer within {self.timeout:g} s for {len(c)} vectors "
                "(killed; --oracle-timeout sets the limit)"
            ) from None
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise OracleError(
                f"oracle {self.spec}: exited with status {r.returncode} on {len(c)} vectors: {last}"
            )
        out = [s.strip() for s in r.stdout.splitlines() if s.strip()]
        if len(out) != len(c):
            raise OracleError(
                f"oracle {self.spec}: printed {len(out)} lines for {len(c)} vectors "
                "(expected one d per line)"
            )
        d = []
        for i, s in enumerate(out):
            try:
                d.append(parse_hex(s, p.d_fmt, f"line {i + 1}"))
            except ValueError as e:
                raise OracleError(f"oracle {self.spec}: {e}") from None
        return np.asarray(d, dtype=np.uint64)


@dataclass
class FileOracle(Oracle):
    """Recorded answers only: asks nothing new."""

    rows: list[tuple[list[int], list[int], int, int]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # each row's place in its file
    can_ask: bool = False

    def _answer(self, a, b, c) -> np.ndarray:
        raise OracleError(f"oracle {self.spec}: recorded answers only; it cannot run new vectors")

    def recorded(self) -> list[tuple[list[int], list[int], int, int]]:
        return self.rows


def read_rows(path: Path, p: ModelParams) -> list[tuple[list[int], list[int], int, int]]:
    """Recorded rows (a, b, c, d) from JSONL rows with `d` (what `simulate --vectors`
    writes), or from a vector file (JSON or CSV) whose vectors carry exactly one
    prediction each (the observed d). UserError naming the line or field if bad."""
    return read_rows_labelled(path, p)[0]


def read_rows_labelled(
    path: Path, p: ModelParams
) -> tuple[list[tuple[list[int], list[int], int, int]], list[str]]:
    """`read_rows`, and where each row is in the file: `PATH:LINE` for JSONL and CSV,
    `PATH vectors[i]` for a JSON vector file (messages name the file's own rows)."""
    from ..validation.vectors import read_rows as read_input_rows

    got = read_input_rows(path, p, outputs=True)
    return [(r.a, r.b, r.c, r.d[0]) for r in got.rows], [r.where for r in got.rows]


def _variant(spec: str, arg: str, p: ModelParams, arch: str, instr: str) -> Oracle:
    if not arg:
        raise UserError(f"oracle {spec!r}: expected variant:EXPR, e.g. variant:hopper[F=24]")
    v = parse_variant(arg)
    hidden = v.params(instr)
    if (hidden.K, hidden.a_fmt, hidden.b_fmt, hidden.c_fmt, hidden.d_fmt) != (
        p.K,
        p.a_fmt,
        p.b_fmt,
        p.c_fmt,
        p.d_fmt,
    ):
        raise UserError(f"oracle {spec!r}: the variant takes other operands than {instr}")
    return VariantOracle(spec, p, hidden=hidden)


def _file(spec: str, arg: str, p: ModelParams, arch: str, instr: str) -> Oracle:
    if not arg:
        raise UserError(f"oracle {spec!r}: expected file:ROWS")
    rows, labels = read_rows_labelled(Path(arg), p)
    return FileOracle(spec, p, rows=rows, labels=labels)


def _cmd(
    spec: str, arg: str, p: ModelParams, arch: str, instr: str, timeout: float = CMD_TIMEOUT
) -> Oracle:
    try:
        argv = shlex.split(arg)
    except ValueError as e:
        raise UserError(f"oracle {spec!r}: cannot split the command line ({e})") from None
    if not argv:
        raise UserError(f"oracle {spec!r}: expected cmd:PROGRAM [ARGS]")
    return CmdOracle(spec, p, argv=argv, timeout=timeout)


def _cuda(
    spec: str, arg: str, p: ModelParams, arch: str, instr: str, timeout: float = CMD_TIMEOUT
) -> Oracle:
    from ..probe.runner import build_runner  # nvcc and a GPU are needed only here

    # Runners are cached by source hash, so one folder serves every run.
    work = Path(arg) if arg else Path(tempfile.gettempdir()) / "tcsmt-runners"
    argv = build_runner(arch, instr, work)
    return CmdOracle(spec, p, argv=list(argv), timeout=timeout)


def _cpu(spec: str, arg: str, p: ModelParams, arch: str, instr: str) -> Oracle:
    from .cpu import make_cpu_oracle  # llvmlite's JIT is loaded only here

    return make_cpu_oracle(spec, arg, p, arch, instr)


ORACLES: dict[str, tuple[Callable[..., Oracle], str]] = {
    "variant": (_variant, "variant:EXPR    a hidden model (any variant expression)"),
    "file": (_file, "file:ROWS       recorded (a, b, c, d) rows only: fit and the next probe"),
    "cmd": (_cmd, "cmd:PROGRAM     reads vector JSONL on stdin, prints one d per line"),
    "cuda": (_cuda, "cuda[:DIR]      build the instruction with nvcc, run it on the local GPU"),
    "cpu": (_cpu, "cpu:avx512bf16  the local CPU's VDPBF16PS (--arch x86-avx512bf16)"),
}


TIMED = ("cmd", "cuda")
"""Oracles that run a program, and so take a time limit per batch."""


def make_oracle(
    spec: str, p: ModelParams, arch: str, instr: str, timeout: float = CMD_TIMEOUT
) -> Oracle:
    """The oracle a spec names, for the instruction `instr` of `arch` (model `p`);
    `timeout`: seconds a program oracle (cmd:, cuda) may take per batch."""
    kind, _, arg = spec.partition(":")
    entry = ORACLES.get(kind.strip())
    if entry is None:
        raise UserError(
            f"unknown oracle {spec!r}; expected one of: "
            + ", ".join(v[1].split()[0] for v in ORACLES.values())
        )
    if kind.strip() in TIMED:
        return entry[0](spec, arg.strip(), p, arch, instr, timeout)
    return entry[0](spec, arg.strip(), p, arch, instr)
