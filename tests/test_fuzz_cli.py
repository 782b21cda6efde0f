"""Every command line and API call a user can get wrong ends the documented way.

Over a thousand command lines and API calls - malformed values, out-of-range options,
bad and missing files, interrupted runs - each must exit 0-4 or 130 (errors.ExitCode),
print one line on stderr for bad input (exit 2) and `tcsmt: interrupted` last for an
interrupt (130), never a traceback; API calls return or raise UserError. The command
lines are built from the click tree itself, so a command added later is fuzzed too:
with a known valid base line, every option is mutated in turn; without one, only the
mutations click rejects while parsing (so nothing long runs).

The commands that solve or run a cluster are run in process with the work replaced by
a Ctrl-C (KeyboardInterrupt at the moment solving, the cluster or the search would
start): a valid line there must exit 130. A few real processes check what only real
processes show: Ctrl-C and SIGTERM while solvers run, a query's time budget, a hanging
oracle, `find --all` on a Dask cluster interrupted, a closed pipe - and that no process
of any of them is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode, UserError

ROOT = Path(__file__).resolve().parent.parent
CODES = {int(c) for c in ExitCode}

# --- the in-process fuzz ---------------------------------------------------------------


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@contextlib.contextmanager
def _interrupting_cluster(*args, **kwargs):
    raise KeyboardInterrupt
    yield  # pragma: no cover


@pytest.fixture
def no_work(monkeypatch):
    """Solver runs (with or without confirmation), the concrete witness search, Dask
    clusters and the identify search become an immediate Ctrl-C."""
    import tensorcore_smt.cli.find as cli_find
    import tensorcore_smt.identify.loop as loop
    import tensorcore_smt.smt.solve as smt_solve
    import tensorcore_smt.validation.distributed as distributed

    monkeypatch.setattr(smt_solve, "portfolio", _interrupt)
    monkeypatch.setattr(smt_solve, "confirmed_portfolio", _interrupt)
    monkeypatch.setattr(smt_solve, "search", _interrupt)
    monkeypatch.setattr(distributed, "connect", _interrupting_cluster)
    monkeypatch.setattr(cli_find, "connect", _interrupting_cluster, raising=False)
    monkeypatch.setattr(loop, "search", _interrupt)


def _files(d: Path) -> dict[str, Path]:
    """Good and bad input files: rows with d (fit), rows without (validate --vectors,
    simulate --vectors), a vector file, and broken ones."""
    p = tc.resolve("volta")
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 16, (4, p.K), dtype=np.uint64) & 0x7BFF
    b = rng.integers(0, 1 << 16, (4, p.K), dtype=np.uint64) & 0x7BFF
    c = np.zeros(4, dtype=np.uint64)
    dd = tc.simulate("volta", None, a, b, c)
    rows = [
        {"a": [f"{int(x):#06x}" for x in ra], "b": [f"{int(x):#06x}" for x in rb], "c": "0x0"}
        for ra, rb in zip(a, b)
    ]
    out = {
        "rows": d / "rows.jsonl",
        "fitrows": d / "fit.jsonl",
        "empty": d / "empty.jsonl",
        "binary": d / "binary.jsonl",
        "badhex": d / "badhex.jsonl",
        "notjson": d / "notjson.json",
        "shortrow": d / "short.jsonl",
        "dir": d / "adir",
    }
    out["rows"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    out["fitrows"].write_text(
        "".join(json.dumps(dict(r, d=f"{int(x):#010x}")) + "\n" for r, x in zip(rows, dd))
    )
    out["empty"].write_text("")
    out["binary"].write_bytes(bytes(range(256)) * 4)
    out["badhex"].write_text('{"a": ["0xZZZZ", 0, 0, 0], "b": [0, 0, 0, 0], "c": "0x0"}\n')
    out["notjson"].write_text('{"arch": "volta", "vectors": [1, 2')
    out["shortrow"].write_text('{"a": ["0x3c00"], "b": ["0x3c00"], "c": "0x0"}\n')
    out["dir"].mkdir()
    vec = d / "v.json"
    r = CliRunner().invoke(
        main, ["vectors", "new", "--arch", "volta", "--rows", str(out["rows"]), "--out", str(vec)]
    )
    assert r.exit_code == 0, r.output
    out["vectors"] = vec
    return out


def _bases(f: dict[str, Path]) -> dict[str, list[str]]:
    """A valid command line for each known command (path in the click tree -> args)."""
    s = str
    return {
        "simulate": ["--arch", "volta", "--a", "0x3c00,0,0,0", "--b", "0x3c00,0,0,0", "--c", "0"],
        "diff": ["volta", "volta[carry_bits=2]", "--timeout", "5"],
        "prove": ["volta", "volta[carry_bits=2]", "--timeout", "5"],
        "export": ["volta", "volta[carry_bits=2]", "--out", "q.smt2"],
        "find": ["--property", "carry-bits", "--arch", "volta"],
        "validate": ["--arch", "volta", "--oracle", "variant:volta", "--rows", "10"],
        "identify": ["--arch", "volta", "--oracle", "variant:volta[F=22]", "--budget", "20"],
        "fit": [s(f["fitrows"]), "--arch", "volta"],
        "list archs": [],
        "list properties": [],
        "list params": [],
        "vectors show": [s(f["vectors"])],
        "vectors csv": [s(f["vectors"])],
        "vectors predict": [s(f["vectors"]), "--out", "p.json"],
        "vectors new": ["--arch", "volta", "--rows", s(f["rows"]), "--out", "n.json"],
        "vectors merge": [s(f["vectors"]), s(f["vectors"]), "--out", "m.json"],
        "probe": [s(f["vectors"]), "--out", "probe.cu"],
    }


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # loads each (the root group loads on demand)
        cmd = group.get_command(ctx, name)
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            out[path] = cmd
            out.update(_commands(cmd, path + " "))
        else:
            out[path] = cmd
    return out


NUMBERS = ["-1", "0", "abc", "1.5", "99999999999999999999999", "", "nan", "inf", "1e400", "-0"]
STRINGS = [
    "",
    "banana",
    "volta[",
    "volta[F=2,F=3]",
    "volta[F=999]",
    "volta]",
    "\x7f",
    "-",
    "💥",
    "a" * 300,
]


def _values(param: click.Parameter, f: dict[str, Path], known: bool) -> list[str]:
    """Bad (and borderline) values for one option or argument."""
    t = param.type
    parse_only = not known
    if isinstance(t, click.Choice):
        return ["bogus", ""]
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)) or t.name in (
        "int",
        "float",
        "integer",
    ):
        return ["abc", "1.5.5", ""] if parse_only else NUMBERS
    if isinstance(t, click.IntRange | click.FloatRange):
        return ["abc"] if parse_only else NUMBERS
    if parse_only:
        return []
    if isinstance(t, click.Path):
        return [
            str(f["binary"] / "x.json"),  # under a file: no directory can be made there
            str(f["dir"]),
            str(f["binary"]),
            str(f["empty"]),
            str(f["badhex"]),
            str(f["notjson"]),
            str(f["shortrow"]),
        ]
    return STRINGS


def _cases(f: dict[str, Path], bases: dict[str, list[str]] | None = None) -> list[list[str]]:
    """Command lines: every command's help and unknown options, then every option of each
    base line mutated in turn (`bases` given: only those lines, keyed as in `_bases`,
    with an optional ' #tag' suffix so that one command can have several)."""
    only = bases is not None
    bases = _bases(f) if bases is None else bases
    cases: list[list[str]] = (
        [] if only else [[], ["--help"], ["--version"], ["nosuch"], ["--nosuch"]]
    )
    cmds = _commands(main)
    items = [(k, cmds[k.split(" #")[0]]) for k in bases] if only else list(cmds.items())
    for key, cmd in items:
        path = key.split(" #")[0]
        if only:
            words = path.split()
            base = bases[key]
            cases.append(words + base)
            for param in cmd.params:
                if param.name == "help" or getattr(param, "is_flag", False):
                    continue
                for v in _values(param, f, True):
                    cases.append(words + _mutated(base, param, v))
            continue
        words = path.split()
        cases.append(words + ["--help"])
        cases.append(words + ["--no-such-option"])
        if isinstance(cmd, click.Group):
            cases.append(words)
            continue
        known = path in bases
        base = bases.get(path, [])
        if known:
            cases.append(words + base)
            cases.append(words + base + ["extra-argument"])
        for param in cmd.params:
            if param.name == "help":
                continue
            for v in _values(param, f, known):
                if isinstance(param, click.Argument):
                    if not known:
                        continue
                    args = list(base)
                    pos = [i for i, a in enumerate(args) if not a.startswith("-")]
                    # replace the first positional word (the argument's place in the line)
                    if pos:
                        args[pos[0]] = v
                    cases.append(words + args)
                    continue
                if getattr(param, "is_flag", False):
                    continue
                opt = max(param.opts, key=len)
                args = [a for a in base]
                if opt in args:  # replace the base's own value
                    i = args.index(opt)
                    args[i + 1] = v
                else:
                    args += [opt, v]
                cases.append(words + args)
    return cases


def _mutated(base: list[str], param: click.Parameter, v: str) -> list[str]:
    """`base` with `param` set to `v` (an argument: its first positional word)."""
    args = list(base)
    if isinstance(param, click.Argument):
        pos = [i for i, a in enumerate(args) if not a.startswith("-")]
        if pos:
            args[pos[0]] = v
        return args
    opt = max(param.opts, key=len)
    if opt in args:
        args[args.index(opt) + 1] = v
    else:
        args += [opt, v]
    return args


def _check(args: list[str], r) -> str | None:
    """What is wrong with one run (None: it ended the documented way)."""
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return f"raised {type(r.exception).__name__}: {r.exception}"
    if r.exit_code not in CODES:
        return f"exit {r.exit_code}"
    if "Traceback" in r.output:
        return "traceback"
    err = [x for x in r.stderr.splitlines() if x.strip()]
    if r.exit_code == ExitCode.USAGE:
        if len(err) != 1 or not err[0].startswith("tcsmt: error: "):
            return f"exit 2 with stderr {err[:4]!r}"
    if r.exit_code == ExitCode.INTERRUPTED:
        if not err or not err[-1].startswith("tcsmt: interrupted"):
            return f"exit 130 with stderr {err[-3:]!r}"
    return None


def _children() -> set[int]:
    """PIDs of this process's child processes (Linux /proc)."""
    me = str(os.getpid())
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                out.add(int(pid))
    return out


def _run_lines(tmp_path: Path, cases: list[list[str]], no_warnings: bool) -> None:
    """Run every command line in a scratch folder and require the documented ending of
    each (`no_warnings`: a warning on the output fails the line too); the fuzz must reach
    every kind of ending (success, bad input, interrupted work) and leave no child."""
    runner = CliRunner()
    before = _children()
    bad: list[str] = []
    codes: dict[int, int] = {}
    work = tmp_path / "work"
    work.mkdir()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        for args in cases:
            r = runner.invoke(main, args)
            codes[r.exit_code] = codes.get(r.exit_code, 0) + 1
            why = _check(args, r)
            if why is None and no_warnings and "Warning" in r.output:
                why = "a warning on the output"
            if why:
                bad.append(f"tcsmt {' '.join(args)!r}: {why}")
    finally:
        os.chdir(cwd)
    assert not bad, f"{len(bad)} of {len(cases)} command lines:\n" + "\n".join(bad[:40])
    assert codes.get(0) and codes.get(2) and codes.get(130), codes
    assert _children() <= before


def test_command_lines_end_the_documented_way(tmp_path, no_work):
    cases = _cases(_files(tmp_path))
    assert len(cases) >= 800, len(cases)
    _run_lines(tmp_path, cases, no_warnings=False)


# --- the API ---------------------------------------------------------------------------


def _api_calls():
    """(description, thunk) for API calls with malformed arguments."""
    import ml_dtypes

    rng = random.Random(5)
    K = 4
    good = np.zeros((2, K), dtype=np.uint16)
    c32 = np.zeros(2, dtype=np.uint32)
    arrays = [
        np.zeros((2, K), np.float16),
        np.ones((2, K), ml_dtypes.bfloat16),
        np.full((2, K), 2.0, np.float32),
        np.full((2, K), 1e-9, np.float32),
        np.full((2, K), np.inf, np.float64),
        np.full((2, K), np.nan, np.float32),
        np.zeros((2, K), bool),
        np.zeros((2, K), np.complex64),
        np.zeros((2, K), object),
        np.array([["a"] * K] * 2),
        np.full((2, K), -1, np.int64),
        np.full((2, K), 1 << 40, np.uint64),
        np.zeros((3, K), np.uint16),
        np.zeros((2, K + 1), np.uint16),
        np.zeros((2,), np.uint16),
        np.zeros((0, K), np.uint16),
        np.ones((2, K), ml_dtypes.float8_e4m3fn),
        [[0.5] * K] * 2,
        [[1] * K] * 2,
        None,
        "0x3c00",
    ]
    archs = ["volta", "banana", "volta[F=2,F=3]", "volta[", "", None, 3, "hopper", "volta[F=22]"]
    instrs = [None, "m8n8k4.f32.f16.f16.f32", "nosuch", "", 5]
    calls = []
    for arch in archs:
        for instr in instrs:
            calls.append(
                (f"resolve({arch!r}, {instr!r})", lambda a=arch, i=instr: tc.resolve(a, i))
            )
    for x in arrays:
        for which in range(3):
            args = [good, good, c32]
            if which == 2 and isinstance(x, np.ndarray) and x.ndim == 2:
                args[2] = x[:, 0]
            else:
                args[which] = x
            calls.append(
                (
                    f"simulate arg {which} {getattr(x, 'dtype', x)!r}",
                    lambda a=args: tc.simulate("volta", None, *a),
                )
            )
            m = [
                np.zeros((8, K), np.float16),
                np.zeros((K, 8), np.float16),
                np.zeros((8, 8), np.float32),
            ]
            m[which] = x
            calls.append(
                (
                    f"mma arg {which} {getattr(x, 'dtype', x)!r}",
                    lambda a=m: tc.mma("volta", None, *a),
                )
            )
    for _ in range(200):
        n = rng.randint(0, 6)
        args = [
            rng.choice(
                [[0] * K, [0] * 3, [0x3C00] * K, [1 << 20] * K, [-1] * K, 0, "x", None, [0.5] * K]
            )
            for _ in range(n)
        ]
        head = rng.choice(["volta", tc.resolve("volta"), "banana", None])
        calls.append(
            (f"simulate_one({head!r}, {args!r})", lambda h=head, a=args: tc.simulate_one(h, *a))
        )
    for dev in ["banana", "cuda:x", "", "gpu", "cpu:0"]:
        calls.append(
            (
                f"simulate device {dev!r}",
                lambda d=dev: tc.simulate("volta", None, good, good, c32, device=d),
            )
        )
    return calls


def test_api_calls_return_or_raise_user_error():
    bad = []
    calls = _api_calls()
    assert len(calls) >= 300
    for what, thunk in calls:
        try:
            thunk()
        except UserError as e:
            msg = str(e)
            if "\n" in msg or not msg:
                bad.append(f"{what}: message {msg!r}")
        except Exception as e:  # noqa: BLE001 - the failure this test looks for
            bad.append(f"{what}: {type(e).__name__}: {e}")
    assert not bad, f"{len(bad)} of {len(calls)} calls:\n" + "\n".join(bad[:40])


def test_api_dtype_rules():
    """The documented dtype rule (api module docstring), with exact bits."""
    import ml_dtypes

    p = tc.resolve("volta")
    A = np.full((8, p.K), 2.0, np.float32)
    B = np.ones((p.K, 8), np.float16)
    C = np.zeros((8, 8), np.float32)
    d = tc.mma("volta", None, A, B, C)
    assert d.dtype == np.float32 and np.all(d == 2.0 * p.K)  # 2.0 converted exactly
    with pytest.raises(UserError, match="expected float16"):
        tc.mma("volta", None, A.astype(ml_dtypes.bfloat16), B, C)
    with pytest.raises(UserError, match="not exactly a fp16 number; expected float16"):
        tc.mma("volta", None, np.full((8, p.K), 1e-9, np.float32), B, C)
    bits = np.zeros((1, p.K), np.uint16)
    out = tc.simulate("volta", None, bits, bits, np.array([0x3F800000], np.uint32))
    assert out.dtype == np.uint32 and int(out[0]) == 0x3F800000
    assert tc.simulate_one("volta", None, [0] * p.K, [0] * p.K, 0x3F800000) == 0x3F800000
    assert tc.simulate_one(p, [0] * p.K, [0] * p.K, 0x3F800000) == 0x3F800000


# --- real processes: interrupts, budgets, orphans --------------------------------------

TAG = "TCSMT_FUZZ_TAG"


def _tagged(tag: str) -> list[tuple[int, str]]:
    """Processes whose environment carries `tag` (every descendant of a run inherits it)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            if f"{TAG}={tag}".encode() in env.split(b"\0"):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                out.append((int(pid), cmd.decode(errors="replace")[:80]))
        except OSError:
            continue
    return out


def default_sigint() -> None:
    """In the child before exec: SIGINT to its default action (a test runner's worker may
    run with it ignored, and exec keeps an ignored signal), so Ctrl-C reaches tcsmt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Run:
    """`tcsmt ARGS` as a real process in its own session, tagged through its environment."""

    def __init__(self, args: list[str], stdout=subprocess.PIPE) -> None:
        self.tag = uuid.uuid4().hex
        env = dict(os.environ, PYTHONPATH=str(ROOT), **{TAG: self.tag})
        self.p = subprocess.Popen(
            [sys.executable, "-c", "from tensorcore_smt.cli import main; main()", *args],
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=ROOT,
            preexec_fn=default_sigint,
        )

    def wait_for(self, word: str, limit: float = 40.0) -> bool:
        """Whether a process of this run whose command line holds `word` appears within
        `limit` s. When none does, the run and its descendants are killed at once (a
        failed start never leaves a process behind) and its stderr goes to the test log."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit and self.p.poll() is None:
            if any(word in c for _, c in _tagged(self.tag)):
                return True
            time.sleep(0.05)
        print(f"no {word!r} after {time.monotonic() - t0:.1f} s; processes: {_tagged(self.tag)}")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.p.pid, signal.SIGKILL)
        _, err = self.p.communicate(timeout=10)
        print("stderr:", err.decode(errors="replace")[-2000:])
        self.left()
        return False

    def finish(self, limit: float = 60.0) -> tuple[int, str, str]:
        try:
            out, err = self.p.communicate(timeout=limit)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.p.pid, signal.SIGKILL)
        return self.p.returncode, (out or b"").decode(), err.decode()

    def left(self, grace: float = 3.0) -> list[tuple[int, str]]:
        t0 = time.monotonic()
        while time.monotonic() - t0 < grace:
            left = _tagged(self.tag)
            if not left:
                return []
            time.sleep(0.1)
        for pid, _ in left:  # the test's own processes: never left to run on
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return left


HARD = [
    *("find", "--property", "markidis-vs-ootomo", "--arch", "volta"),
    *("--search", "0", "--timeout", "120"),
]
"""A query no installed solver answers within seconds on this machine (the concrete
search, which answers it at once, left out)."""


@pytest.mark.parametrize("sig,group", [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_interrupt_while_solving_leaves_no_solver(sig, group):
    run = Run(HARD)
    assert run.wait_for("tensorcore_smt.solvers.worker"), "no solver started"
    (os.killpg if group else os.kill)(run.p.pid, sig)
    rc, _, err = run.finish()
    assert rc == ExitCode.INTERRUPTED, err
    assert err.strip().splitlines()[-1].startswith("tcsmt: interrupted") and "Traceback" not in err
    assert run.left() == []


def test_killed_outright_takes_its_solvers_along():
    run = Run(HARD)
    assert run.wait_for("tensorcore_smt.solvers.worker"), "no solver started"
    os.kill(run.p.pid, signal.SIGKILL)
    run.finish()
    assert run.left() == []


def test_the_timeout_is_the_budget_of_the_whole_query():
    budget = 1.0
    t0 = time.monotonic()
    run = Run(HARD[:-1] + [str(budget), "--jobs", "1", "--json"])
    rc, out, err = run.finish()
    elapsed = time.monotonic() - t0
    assert rc == ExitCode.INCOMPLETE, err
    queries = json.loads(out)["queries"]
    assert {q["answer"] for q in queries} == {"unknown"}
    # every solver of a query, one at a time, within the one budget (+ the start-up)
    assert elapsed < budget * len(queries) + 10, elapsed
    assert run.left() == []


def test_a_hanging_oracle_is_killed_with_its_children(tmp_path):
    prog = tmp_path / "hang.sh"
    prog.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    prog.chmod(0o755)
    run = Run(["identify", "--arch", "volta", "--oracle", f"cmd:{prog}", "--oracle-timeout", "1"])
    rc, out, err = run.finish()
    assert rc == ExitCode.USAGE, err
    assert err.strip() == (
        f"tcsmt: error: oracle cmd:{prog}: no answer within 1 s for 12 vectors "
        "(killed; --oracle-timeout sets the limit)"
    )
    assert run.left() == []


@pytest.mark.slow
def test_find_all_on_dask_interrupted_leaves_nothing():
    run = Run(["find", "--all", "--arch", "volta", "--workers", "1", "--json"])
    assert run.wait_for("tensorcore_smt.solvers.worker", limit=60), "no solver started"
    os.killpg(run.p.pid, signal.SIGINT)
    rc, out, err = run.finish()
    assert rc == ExitCode.INTERRUPTED, err
    assert json.loads(out)["interrupted"] is True
    assert err.strip() == "tcsmt: interrupted: the queries that finished are reported above"
    assert run.left() == []


def test_a_closed_pipe_ends_quietly():
    run = Run(["list", "archs"])
    assert run.p.stdout is not None
    run.p.stdout.close()  # the reader is gone before the first line is written
    run.p.stdout = None
    rc, _, err = run.finish()
    assert rc in (ExitCode.OK, -signal.SIGPIPE) and err == "", (rc, err)


TCSMT = Path(sys.executable).parent / "tcsmt"
"""The installed command-line script: an interrupt during start-up is its own (the
package's import installs the one-line ending only for the command line)."""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
@pytest.mark.parametrize("delay", [0.0, 0.2, 0.5, 1.0])
def test_an_interrupt_during_start_up_ends_in_one_line(delay):
    """Ctrl-C `delay` s after numpy's core is loaded (the package still importing, or
    the command starting): exit 130 with `tcsmt: interrupted`, or the command's own
    ending when it finished first; never a traceback, nothing left running."""
    tag = uuid.uuid4().hex
    p = subprocess.Popen(
        [str(TCSMT), "list", "archs"],
        env=dict(os.environ, **{TAG: tag}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=ROOT,
        preexec_fn=default_sigint,
    )
    maps = Path(f"/proc/{p.pid}/maps")
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 30 and p.poll() is None:
            with contextlib.suppress(OSError):
                if "_multiarray_umath" in maps.read_text():
                    break
            time.sleep(0.002)
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    text = err.decode()
    assert "Traceback" not in text, text
    if p.returncode != ExitCode.OK:  # interrupted before the list was printed
        assert p.returncode == ExitCode.INTERRUPTED, (p.returncode, text)
        assert text.strip().splitlines()[-1].startswith("tcsmt: interrupted"), text
    left = [pid for pid, _ in _tagged(tag)]
    assert left == [], left


def _issue_lines(tmp: Path) -> list[list[str]]:
    """Lines that once crashed, hung or were accepted silently (each must now end in
    one line or the right answer)."""
    rows = tmp / "one.jsonl"
    rows.write_text('{"a": ["0x3c00", 0, 0, 0], "b": ["0x3c00", 0, 0, 0], "c": "0x0"}\n')
    one = ["--a", "0x3c00,0,0,0", "--b", "0x3c00,0,0,0", "--c", "0"]
    sim = ["simulate", "--arch", "volta"]
    return [
        ["gemm", "--arch", "hopper/serial[kblocks=1]", "--random", "4,4,16"],
        ["gemm", "--arch", "hopper/serial[kblocks=16]", "--random", "4,4,16"],
        ["gemm", "--arch", "hopper", "--random", "1048576,1048576,1"],
        ["gemm", "--arch", "ampere", "--a", "/dev/zero", "--b", "/dev/zero"],
        ["bound", "volta", "--k", "16"],
        ["bound", "volta", "--rows", "16"],
        ["bound", "volta", "--resolution", "1e-300", "--timeout", "abc"],
        ["diff", "volta", "volta[carry_bits=2]", "--timeout", "5"],  # solving: Ctrl-C
        ["reveal", "--oracle", "numpy:matmul", "--k", "4", "--no-check", "--check-outputs", "5"],
        [*sim, *one, "--out", "s52.jsonl"],
        [*sim, *one, "--out", "nodir/s52.jsonl"],
        [*sim, *one, "--out", "/dev/full"],
        [*sim, "--vectors", str(rows), "--out", "/dev/full"],
        [*sim, "--vectors", "/dev/zero"],
        [*sim, *one, "--meta", "0,1"],
        ["vectors", "show", "/dev/zero"],
    ]


def test_issue_lines_end_the_documented_way(tmp_path, no_work):
    _run_lines(tmp_path, _issue_lines(tmp_path), no_warnings=True)


# --- the GEMM level ----------------------------------------------------------------------


def _gemm_files(d: Path) -> dict[str, Path]:
    """Good and bad GEMM inputs: .npy matrices, broken ones, GEMM vector files."""
    out = {k: d / f"{k}.npy" for k in ("a", "b", "empty", "m0", "bigendian", "pattern")}
    np.save(out["a"], np.ones((4, 32), np.float16))
    np.save(out["b"], np.ones((32, 4), np.float16))
    out["empty"].write_bytes(b"")
    np.save(out["m0"], np.ones((0, 32), np.float16))
    np.save(out["bigendian"], np.ones((4, 32), ">f2"))
    np.save(out["pattern"], np.full((4, 32), 0x3C00, np.uint16))
    out["npz"] = d / "ab.npz"
    np.savez(out["npz"], a=np.ones((4, 32)))
    from tensorcore_smt.validation import gemm_vectors as gvs

    gv = d / "g.json"
    hyps = ["ampere/serial", "ampere/serial[order=descending]"]
    one = gvs.GemmVector(a=[0x3C00] * 32, b=[0x3C00] * 32, c=0, predicted={})
    gf = gvs.GemmVectorFile("ampere", "m16n8k16.f32.f16.f16.f32", 32, hyps, [one])
    gv.write_text(gvs.dumps(gvs.predict(gf)))
    out["gemm_vectors"] = gv
    doc = json.loads(gv.read_text())
    doc["vectors"] = []
    out["gemm_none"] = d / "g0.json"
    out["gemm_none"].write_text(json.dumps(doc))
    return out


def _gemm_bases(g: dict[str, Path]) -> dict[str, list[str]]:
    """Valid GEMM-level command lines ('PATH #tag' keys: several per command)."""
    s = str
    return {
        "gemm": ["--arch", "ampere", "--random", "4,4,32", "--engine", "numpy",
                 "--compare", "ampere/serial[split_k=2,split_tile=16]"],
        "gemm #files": ["--arch", "ampere", "--a", s(g["a"]), "--b", s(g["b"]),
                        "--out", "d.npy", "--engine", "numpy"],
        "diff #gemm": ["hopper/serial", "volta/serial", "--k", "16", "--timeout", "5"],
        "prove #gemm": ["ampere/serial", "ampere/serial[promote=32]", "--k", "32"],
        "export #gemm": ["ampere/serial", "ampere/serial[promote=32]", "--k", "32", "--out", "q.smt2"],
        "identify #gemm": ["--gemm", "--arch", "ampere", "--k", "16", "--oracle",
                           "variant:ampere/serial", "--budget", "5"],
        "probe #gemm": [s(g["gemm_vectors"]), "--out", "probe.py"],
    }  # fmt: skip


def _gemm_extra(g: dict[str, Path]) -> list[list[str]]:
    """The bad GEMM inputs the option mutations do not reach: files and values."""
    s = str
    gemm = ["gemm", "--arch", "ampere", "--engine", "numpy"]
    ab = ["--a", s(g["a"]), "--b", s(g["b"])]
    rnd = ["--random", "4,4,32"]
    return [
        *(gemm + ["--a", s(g[k]), "--b", s(g["b"])] for k in ("empty", "npz", "m0", "bigendian")),
        gemm + ["--a", s(g["pattern"]), "--b", s(g["b"])],
        gemm + ["--a", s(g["pattern"]), "--b", s(g["b"]), "--dtype", "fp16"],
        gemm + ab + ["--dtype", "e4m3"],
        gemm + rnd + ["--out", "/dev/full"],
        gemm + rnd + ["--out", ""],
        gemm + rnd + ["--instr", ""],
        gemm + rnd + ["--plot", "x.unknownformat"],
        gemm + rnd + ["--plot", ""],
        gemm + rnd + ["--k-sweep", "--compare", "ampere/serial[split_k=2,split_tile=16]"],
        gemm + rnd + ["--compare", "ampere/serial[promote=16,promote=32]"],
        gemm + ["--random", "0,4,32"],
        ["diff", "hopper/serial", "volta/serial", "--k", "16", "--export", "nodir/q.smt2"],
        ["diff", "hopper/serial", "volta/serial", "--k", "16", "--dtype", "e4m3"],
        ["diff", "volta", "volta[carry_bits=2]", "--dtype", "fp16"],
        ["identify", "--gemm", "--arch", "ampere/serial[split_k=4]", "--k", "32",
         "--oracle", "variant:ampere/serial"],
        ["identify", "--arch", "volta", "--dtype", "fp16", "--oracle", "variant:volta"],
        ["probe", s(g["gemm_none"])],
        ["probe", s(g["gemm_vectors"]), "--out", "/dev/full"],
        ["vectors", "show", s(g["gemm_vectors"])],
    ]  # fmt: skip


def _run_gemm_cases(tmp_path: Path, mutate: bool) -> None:
    """Run the GEMM command lines (`mutate`: every option of each base line mutated)."""
    f = _files(tmp_path)
    g = _gemm_files(tmp_path)
    bases = _gemm_bases(g)
    if mutate:
        cases = _cases(f, bases) + _gemm_extra(g)
        assert len(cases) >= 800, len(cases)
    else:
        cases = [k.split(" #")[0].split() + v for k, v in bases.items()] + _gemm_extra(g)
    _run_lines(tmp_path, cases, no_warnings=True)


def test_gemm_command_lines_end_the_documented_way(tmp_path, no_work):
    """gemm, GEMM hypotheses in diff/prove/export/identify and probes of GEMM vectors:
    valid lines and the bad files and values of each kind."""
    _run_gemm_cases(tmp_path, mutate=False)


@pytest.mark.slow
def test_gemm_command_lines_mutated_end_the_documented_way(tmp_path, no_work):
    """As above, with every option of each valid GEMM line mutated in turn."""
    _run_gemm_cases(tmp_path, mutate=True)


def _gemm_api_calls() -> list[tuple[str, object]]:
    """(description, thunk) for tc.matmul and tc.emulate calls with bad arguments."""
    A, B = np.ones((4, 32), np.float16), np.ones((32, 4), np.float16)
    calls: list[tuple[str, object]] = []
    for hyp in [
        "",
        "ampere/",
        "/serial",
        "ampere/nosuch",
        "ampere/serial[promote=16,promote=32]",
        "ampere/serial[split_k=0]",
        "ampere[F=999]/serial",
        None,
        3,
    ]:
        calls.append((f"matmul({hyp!r})", lambda h=hyp: tc.matmul(h, A, B)))
    for kw in [
        {"alpha": np.float32(0.5)},
        {"alpha": np.int64(2)},
        {"alpha": float("nan")},
        {"alpha": "x"},
        {"beta": np.float64(1e39)},
        {"instr": ""},
        {"instr": "nosuch"},
        {"engine": "bogus"},
        {"out_dtype": "bogus"},
    ]:
        calls.append(
            (
                f"matmul(**{kw!r})",
                lambda k=kw: tc.matmul("ampere", A, B, **{"engine": "numpy", **k}),
            )
        )
    for a, b in [(A[:0], B), (A, B[:3]), (A.astype(">f2"), B), (np.ones((4, 32), object), B)]:
        calls.append((f"matmul({a.dtype}{a.shape})", lambda x=a, y=b: tc.matmul("ampere", x, y)))
    for hyp in ["", "nosuch", "ampere/nosuch", 3]:
        calls.append((f"emulate({hyp!r})", lambda h=hyp: tc.emulate(h).__enter__()))
    return calls  # fmt: skip


def test_gemm_api_calls_return_or_raise_user_error():
    bad = []
    for what, thunk in _gemm_api_calls():
        try:
            thunk()
        except UserError as e:
            if "\n" in str(e) or not str(e):
                bad.append(f"{what}: message {str(e)!r}")
        except Exception as e:  # noqa: BLE001 - the failure this test looks for
            bad.append(f"{what}: {type(e).__name__}: {e}")
    assert not bad, "\n".join(bad)


# --- wrong types through every API entry -------------------------------------------------


def _wrong_type_calls() -> list[tuple[str, str, object]]:
    """(function, argument, thunk): each public API function called with one argument of
    a wrong type (or a number out of range); the rest valid."""
    A16, B16 = np.ones((4, 16), np.float16), np.ones((16, 4), np.float16)
    bits = np.zeros((2, 4), np.uint16)
    c32 = np.zeros(2, np.uint32)
    table: dict[str, tuple[object, dict, dict[str, list]]] = {
        "bound": (
            tc.bound,
            {"hypothesis": "volta", "timeout": 1.0},
            {
                "hypothesis": [3, None, ["volta"]],
                "against": [3, ["volta"]],
                "instr": [42, ["m8n8k4.f32.f16.f16.f32"]],
                "measure": [3, None],
                "constraints": ["positive", ["positive"], 3],
                "resolution": ["abc", float("nan"), float("inf"), None],
                "timeout": [-1, float("nan"), 0, "10", None],
                "meta": ["0,1", 3],
            },
        ),
        "reveal": (
            tc.reveal,
            {"oracle": "numpy:matmul", "k": 4},
            {
                "oracle": [3, None],
                "k": ["4", 1.5, None],
                "dtype": [3, None],
                "shape": ["3,3", (3,), (3, "3"), 3],
                "seed": ["x", 1.5],
                "check": ["no", None],
                "check_outputs": ["5", 1.5],
            },
        ),
        "matmul": (
            tc.matmul,
            {"arch": "ampere", "A": A16, "B": B16},
            {
                "arch": [3, None],
                "instr": [42],
                "schedule": [3],
                "run_info": ["x", 3],
                "flags": ["x"],
                "device": [3],
                "engine": [3],
                "out_dtype": [3],
                "scale_a": ["x"],
                "alpha": ["x"],
            },
        ),
        "mma": (
            tc.mma,
            {"arch": "volta", "instr": None, "A": A16[:, :4], "B": B16[:4], "C": None},
            {"arch": [3, None], "instr": [3]},
        ),
        "resolve": (tc.resolve, {"arch": "volta"}, {"arch": [3, None], "instr": [3]}),
        "simulate": (
            tc.simulate,
            {"arch": "volta", "instr": None, "a_bits": bits, "b_bits": bits, "c_bits": c32},
            {"arch": [3], "instr": [3], "device": [3]},
        ),
        "simulate_stream": (
            lambda **kw: list(tc.simulate_stream(**kw)),
            {"arch": "volta", "instr": None, "batches": [(bits, bits, c32)]},
            {"arch": [3], "batches": [3, [3], [(bits,)]]},
        ),
        "parse_variant": (tc.parse_variant, {"text": "volta"}, {"text": [3, None]}),
    }
    calls = []
    for name, (fn, good, bad) in table.items():
        for arg, values in bad.items():
            for v in values:
                calls.append((name, arg, lambda f=fn, k=dict(good, **{arg: v}): f(**k)))
    return calls


def test_wrong_types_through_every_api_entry():
    """Every public API function: a wrong-type argument is a UserError on one line that
    names the argument, before any work (bound's budget is never spent on it)."""
    bad = []
    calls = _wrong_type_calls()
    assert {n for n, _, _ in calls} >= {"bound", "reveal", "matmul"}
    for name, arg, thunk in calls:
        t0 = time.monotonic()
        try:
            thunk()
            bad.append(f"{name}({arg}=...): returned")
        except UserError as e:
            msg = str(e)
            named = arg in msg or (arg in ("text", "arch") and "variant" in msg)
            if "\n" in msg or not named:
                bad.append(f"{name}({arg}=...): message {msg!r}")
        except Exception as e:  # noqa: BLE001 - the failure this test looks for
            bad.append(f"{name}({arg}=...): {type(e).__name__}: {e}")
        if time.monotonic() - t0 > 5:
            bad.append(f"{name}({arg}=...): took {time.monotonic() - t0:.1f} s")
    assert not bad, f"{len(bad)} of {len(calls)} calls:\n" + "\n".join(bad)
