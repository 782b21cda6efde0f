"""The command line and the API at their edges: inputs that used to crash, hang, or be
accepted silently end the documented way (one line, exit 2; interrupted: exit 130; the
budget honoured; a failed write not reported as success).

Behaviour of the command line is tested on real processes where only a process shows
it (an interrupt during start-up, a closed standard output, a budget in seconds), in
process (CliRunner) otherwise.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from tensorcore_smt.certify.bound import dyadic_between
from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode, UserError

ROOT = Path(__file__).resolve().parent.parent
TCSMT = Path(sys.executable).parent / "tcsmt"
"""The installed command-line script (the virtual environment's bin/tcsmt)."""

ONE = ["--a", "0x3c00,0,0,0", "--b", "0x3c00,0,0,0", "--c", "0"]
"""volta's one row 1 * 1 + 0: the exact sum 1.0 (fp32 0x3f800000) on every unit."""


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_line(r) -> str:
    """The single stderr line of a refused command line (exit 2)."""
    assert r.exit_code == ExitCode.USAGE, (r.exit_code, r.output)
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("tcsmt: error: "), err
    assert "Traceback" not in r.output
    return err[0]


def process(args: list[str], **kw) -> subprocess.CompletedProcess:
    """`tcsmt ARGS` as a real process (the installed script)."""
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [str(TCSMT), *args], stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120, **kw
    )


# --- the schedule parser's message (issue 43, defect 2) ---------------------------------


@pytest.mark.parametrize("blocks", ["1", "16"])
def test_one_kblock_is_refused_in_one_line(blocks):
    r = run("gemm", "--arch", f"hopper/serial[kblocks={blocks}]", "--random", "4,4,16")
    line = one_line(r)
    assert f"kblocks={blocks} " in line and "at least 2" in line


# --- bound: the budget (defect 5) -------------------------------------------------------


def test_dyadic_between_an_interval_narrower_than_a_double():
    """The next threshold of a bisection lies strictly inside (lo, hi) however narrow:
    the geometric mean in floating point fell outside it and the search never ended."""
    lo = Fraction(16777215, 553648127)
    for width in (Fraction(1, 10**300), Fraction(1, 2**80), Fraction(1, 10**20)):
        hi = lo * (1 + width)
        t = dyadic_between(lo, hi)
        assert lo < t < hi
        assert t.denominator & (t.denominator - 1) == 0  # dyadic


@pytest.mark.slow
def test_bound_with_a_tiny_resolution_keeps_its_budget():
    budget = 6
    t0 = time.monotonic()
    p = process(["bound", "hopper", "--resolution", "1e-300", "--timeout", str(budget)])
    elapsed = time.monotonic() - t0
    assert p.returncode == ExitCode.INCOMPLETE, p.stderr
    assert "Traceback" not in p.stderr
    assert elapsed < budget + 25, elapsed  # start-up and the report, not minutes


# --- simulate --out (defect 6) ----------------------------------------------------------


def test_simulate_one_row_writes_out(tmp_path):
    out = tmp_path / "s52.jsonl"
    r = run("simulate", "--arch", "volta", "--arch", "volta[F=22]", *ONE, "--out", str(out))
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["arch"] for x in rows] == ["volta", "volta[F=22]"]
    assert all(x["d"] == "0x3f800000" and x["c"] == "0x00000000" for x in rows)
    # the file is a rows file: simulate --vectors reads it back to the same d
    again = run("simulate", "--arch", "volta", "--vectors", str(out))
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.splitlines()[0])["d"] == "0x3f800000"


def test_simulate_one_row_out_in_a_missing_folder(tmp_path):
    line = one_line(run("simulate", "--arch", "volta", *ONE, "--out", str(tmp_path / "no/x")))
    assert "does not exist" in line


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_simulate_failed_write_exits_2(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"a": ONE[1].split(","), "b": ONE[3].split(","), "c": "0"}) + "\n")
    for args in (["--vectors", str(rows)], ONE):
        r = run("simulate", "--arch", "volta", *args, "--out", "/dev/full")
        assert r.exit_code == ExitCode.USAGE, r.output
        assert "could not write the rows to /dev/full" in r.stderr
        assert "0x3f800000" in r.stdout  # the result, printed instead


# --- the entry point: Ctrl-C during start-up, a closed stdout (defect 8) ----------------


def _interrupt_during_start(cmd: list[str]) -> tuple[int, str]:
    """Start `cmd`, send SIGINT once numpy's core is loaded (the package is importing:
    the command's own handlers are not in place yet), and return (exit code, stderr)."""
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    maps = Path(f"/proc/{p.pid}/maps")
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 30 and p.poll() is None:
            try:
                if "_multiarray_umath" in maps.read_text():
                    break
            except OSError:
                pass
            time.sleep(0.002)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    return p.returncode, err.decode()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
@pytest.mark.parametrize("how", ["script", "module"])
def test_interrupt_during_start_up_is_one_line(how):
    cmd = [str(TCSMT)] if how == "script" else [sys.executable, "-m", "tensorcore_smt"]
    rc, err = _interrupt_during_start([*cmd, "list", "archs"])
    assert rc == ExitCode.INTERRUPTED, (rc, err)
    assert err == "tcsmt: interrupted\n"


def test_an_importing_program_keeps_its_keyboard_interrupt():
    from tensorcore_smt.startup import is_command_line

    assert is_command_line(["/venv/bin/tcsmt", "list"], [])
    assert is_command_line(["-m"], ["python", "-m", "tensorcore_smt", "list"])
    assert not is_command_line(["-c"], ["python", "-c", "import tensorcore_smt"])
    assert not is_command_line(["script.py"], ["python", "script.py"])
    assert not is_command_line(["-m"], ["python", "-m", "pytest", "tensorcore_smt"])


@pytest.mark.parametrize(
    "args", [["list", "archs"], ["--help"], ["simulate", "--arch", "volta", *ONE]]
)
def test_closed_stdout_is_one_line(args):
    p = process(args, stdout=subprocess.DEVNULL, preexec_fn=_close_stdout)
    assert p.returncode == ExitCode.USAGE, p.stderr
    assert p.stderr == "tcsmt: error: standard output is closed\n"


def _close_stdout() -> None:
    import os

    os.close(1)


# --- contradictory options; expected warnings (defect 14) -------------------------------


@pytest.mark.parametrize(
    "args,opt",
    [
        (["bound", "volta", "--k", "16"], "--k"),
        (["bound", "volta", "--rows", "16"], "--rows"),
        (["reveal", "--oracle", "numpy:matmul", "--k", "4", "--no-check", "--check-outputs", "5"],
         "--check-outputs"),
    ],
)  # fmt: skip
def test_an_option_that_means_nothing_here_is_refused(args, opt):
    assert opt in one_line(run(*args))


def test_library_probes_give_no_numpy_warnings():
    """numpy:matmul asked rows with infinities and overflowing products answers as IEEE
    754 says (inf * 0 = NaN; an overflowing product +inf) without a RuntimeWarning."""
    import warnings

    import numpy as np

    import tensorcore_smt as tc
    from tensorcore_smt.identify.gemm import LibraryOracle

    f32 = lambda xs: np.array(xs, np.float32).view(np.uint32).astype(np.uint64)  # noqa: E731
    big = np.finfo(np.float32).max
    a = np.stack([f32([np.inf, 1, 1, 1]), f32([big, big, 0, 0])])
    b = np.stack([f32([0, 1, 1, 1]), f32([2, 0, 0, 0])])
    oracle = LibraryOracle("numpy:matmul", tc.resolve("hopper", "fma.rn.f32"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = oracle.ask(a, b, np.zeros(2, np.uint64)).astype(np.uint32).view(np.float32)
    assert np.isnan(d[0]) and d[1] == np.inf


# --- texts that said something else (defect 15) -----------------------------------------


def test_big_endian_arrays_are_read_by_value(tmp_path):
    """A big-endian array holds the same numbers: the API and `gemm --a` read them (the
    sum of 32 ones, exact in every format here)."""
    import numpy as np

    import tensorcore_smt as tc

    A, B = np.ones((4, 32), ">f2"), np.ones((32, 4), np.float16)
    C = np.full((4, 4), 0.5, ">f4")
    assert np.all(tc.matmul("ampere", A, B, C) == 32.5)
    d = tc.mma(
        "volta", None, A[:, :4].repeat(2, 0), B[:4].repeat(2, 1), C.repeat(2, 0).repeat(2, 1)
    )
    assert d.dtype.isnative and np.all(d == 4.5)
    bits = np.full((1, 4), 0x3C00, ">u2")
    assert int(tc.simulate("volta", None, bits, bits, np.zeros(1, ">u4"))[0]) == 0x40800000
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    out = tmp_path / "d.npy"
    r = run("gemm", "--arch", "ampere", "--a", str(tmp_path / "a.npy"),
            "--b", str(tmp_path / "b.npy"), "--out", str(out), "--engine", "numpy")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert np.all(np.load(out) == 32.0)


def test_ml_dtypes_files_say_why_dtype_is_needed(tmp_path):
    """numpy saves an ml_dtypes array as raw bytes (`|V2`; the header names no format):
    the message says so and names the formats of that width."""
    import ml_dtypes
    import numpy as np

    np.save(tmp_path / "a.npy", np.ones((4, 32), ml_dtypes.bfloat16))
    np.save(tmp_path / "b.npy", np.ones((32, 4), ml_dtypes.bfloat16))
    ab = ["--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy")]
    line = one_line(run("gemm", "--arch", "ampere", *ab))
    assert "raw 16-bit patterns" in line and "--dtype (bf16, fp16)" in line
    r = run("gemm", "--arch", "ampere", *ab, "--dtype", "bf16", "--json", "--engine", "numpy")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("path,says", [("/dev/zero", "not a regular file"), ("/", "a directory")])
def test_a_device_is_not_a_npy_file(path, says):
    line = one_line(run("gemm", "--arch", "ampere", "--a", path, "--b", path))
    assert line == f"tcsmt: error: --a: {path}: not a .npy file ({says})"


def test_a_bad_engine_variable_is_named(monkeypatch):
    monkeypatch.setenv("TCSMT_ENGINE", "bogus")
    line = one_line(run("gemm", "--arch", "ampere", "--random", "4,4,32"))
    assert "environment variable TCSMT_ENGINE='bogus'" in line and "numpy or compiled" in line


def test_simulate_reads_meta_as_diff_does():
    """One group's pattern stands for every group (model/sparse.metadata_for), in simulate
    as in diff: the same d as the metadata written out in full."""
    instr = "mma.sp.m16n8k16.f32.f16.f16.f32"
    a = ",".join(f"{0x3C00 + i:#06x}" for i in range(8))
    b = ",".join(f"{0x3C00 + 3 * i:#06x}" for i in range(16))
    base = ["simulate", "--arch", "ampere", "--instr", instr, "--a", a, "--b", b, "--c", "0"]
    short = run(*base, "--meta", "0,1", "--json")
    full = run(*base, "--meta", "0,1,0,1,0,1,0,1", "--json")
    assert short.exit_code == 0 and full.exit_code == 0, short.output
    assert json.loads(short.stdout)["d"] == json.loads(full.stdout)["d"]
    assert json.loads(short.stdout)["meta"] == [0, 1] * 4
    assert "--meta" in one_line(run(*base, "--meta", "0,1,2"))


# --- sizes refused before they are allocated (defect 16) --------------------------------


def _gib(line: str, after: str) -> float:
    """The size in GiB that follows `after` in a refusal ('needs about 40.3 GiB')."""
    import re

    m = re.search(re.escape(after) + r" ([0-9.]+) (TiB|GiB|MiB)", line)
    assert m, line
    return float(m.group(1)) * {"TiB": 1024, "GiB": 1, "MiB": 1 / 1024}[m.group(2)]


def test_the_machines_memory_is_read():
    import os

    from tensorcore_smt import memory

    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert memory.total_bytes() == pytest.approx(total, rel=0.01)
    assert 0 < memory.available_bytes() <= memory.total_bytes()


@pytest.mark.parametrize("shape", ["1048576,1048576,1", "524288,1048576,2"])
def test_random_larger_than_any_machine_is_refused(shape):
    """An output of 2^40 or 2^39 elements (1 TiB at the narrowest): refused at once."""
    line = one_line(run("gemm", "--arch", "hopper", "--random", shape))
    assert line.startswith(f"tcsmt: error: --random {shape} needs about ")
    assert _gib(line, "needs about") >= 1024 and "this machine has" in line


def test_random_needs_what_its_matrices_take(monkeypatch):
    """A 65536 x 65536 D with its fp64 reference (32 GiB) on an 8 GiB machine: refused
    with the size and the memory, before anything is allocated."""
    from tensorcore_smt import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 8 << 30)
    monkeypatch.setattr(memory, "total_bytes", lambda: 16 << 30)
    line = one_line(run("gemm", "--arch", "hopper", "--random", "65536,65536,256"))
    # at least D's fp64 reference (32 GiB) and A and B in fp16 (64 MiB)
    assert _gib(line, "needs about") >= 32 and "8.0 GiB available of 16.0 GiB" in line
    assert "--no-errors" in line


@pytest.mark.parametrize("cmd", [["simulate", "--arch", "volta"], ["vectors", "show"]])
def test_an_endless_device_is_not_read_to_the_end(cmd):
    args = [*cmd, "--vectors", "/dev/zero"] if cmd[0] == "simulate" else [*cmd, "/dev/zero"]
    line = one_line(run(*args))
    assert line == "tcsmt: error: /dev/zero: not a text file (it holds NUL bytes)"


def test_an_endless_text_stream_stops_at_the_memory(tmp_path, monkeypatch):
    """A pipe of valid rows that never ends is read only up to the available memory."""
    import os
    import threading

    from tensorcore_smt import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 4 << 20)
    fifo = tmp_path / "rows"
    os.mkfifo(fifo)
    row = json.dumps({"a": ONE[1].split(","), "b": ONE[3].split(","), "c": "0"}) + "\n"
    stop = threading.Event()

    def writer() -> None:
        try:
            with open(fifo, "w") as f:
                while not stop.is_set():
                    f.write(row * 1000)
        except BrokenPipeError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        with pytest.raises(UserError, match="read and not ended; this machine has 4.0 MiB"):
            memory.read_text(fifo, "--vectors")
    finally:
        stop.set()
        t.join(5)
