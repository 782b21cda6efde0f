"""Ctrl-C during a compiled GEMM: the worker threads stop after their current tile and
are joined before the interrupt goes on, so `tcsmt gemm` exits 130 with one line (no
traceback, no crash of a kernel writing into freed arrays) and `tc.matmul` leaves no
thread running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.engine.tiles import THREAD_NAME
from tensorcore_smt.gemm import compiled as engine_gemm

ROOT = Path(__file__).resolve().parents[1]

# Runs `tcsmt gemm` with a marker line appended to a file each time the compiled runner
# starts its tiles, so the test can interrupt a GEMM that is computing.
WRAPPER = """
import sys
from tensorcore_smt.gemm import compiled as gemm
marker, args = sys.argv[1], sys.argv[2:]
run = gemm.run_tiles
def marked(*a, **k):
    with open(marker, "a") as f:
        f.write("tiles\\n")
    return run(*a, **k)
gemm.run_tiles = marked
from tensorcore_smt.cli import main
sys.argv = ["tcsmt", *args]
main()
"""


def default_sigint() -> None:
    """In the child before exec: SIGINT to its default action, so that the child's Python
    installs its KeyboardInterrupt handler whatever the test process inherited (a test
    runner's worker may run with SIGINT ignored, and exec keeps an ignored signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_cli(tmp_path: Path, args: list[str], starts: int, delay: float):
    """Run the CLI, send SIGINT `delay` s after the runner's `starts`-th tile start;
    (exit status, stdout, stderr)."""
    marker = tmp_path / f"started-{delay}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TCSMT_THREADS": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, str(marker), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and len(marker.read_text().split()) >= starts):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the GEMM never started"
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, "the GEMM ended before the interrupt; make it larger"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0])
def test_ctrl_c_during_compiled_gemm_exits_130_with_one_line(tmp_path, delay):
    args = ["gemm", "--arch", "hopper", "--random", "1500,1500,2048", "--engine", "compiled"]
    rc, out, err = _interrupt_cli(tmp_path, args, 1, delay)
    assert rc == 130, (rc, err)
    assert err.strip() == "tcsmt: interrupted", err
    assert out == ""


def test_ctrl_c_keeps_the_hypotheses_that_finished(tmp_path):
    """Interrupted during the second hypothesis: the first is reported, --out written."""
    d = tmp_path / "d.npy"
    args = [
        "gemm", "--arch", "hopper", "--random", "1024,1024,1024", "--engine", "compiled",
        "--no-errors", "--compare", "hopper/serial[order=descending]", "--out", str(d),
    ]  # fmt: skip
    rc, out, err = _interrupt_cli(tmp_path, args, 2, 0.2)
    assert rc == 130, (rc, err)
    assert err.strip() == "tcsmt: interrupted: 1 of 2 hypotheses finished, reported above"
    assert "hypothesis   hopper/serial\n" in out and "descending" not in out
    assert np.load(d).shape == (1024, 1024)


def test_keyboard_interrupt_in_matmul_leaves_no_worker_running(monkeypatch):
    """A KeyboardInterrupt raised in tc.matmul while the tiles run: once it reaches the
    caller no worker thread is alive and the process stops using the CPU."""
    monkeypatch.setenv("TCSMT_THREADS", "2")
    # Python's own handler, whatever the test process was started with (restored after)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_matmul(monkeypatch)
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupt_matmul(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1024, 2048)).astype(np.float16)
    B = rng.standard_normal((2048, 1024)).astype(np.float16)
    tc.matmul("hopper", A[:64], B[:, :64], engine="compiled")  # the kernel, made beforehand
    started = threading.Event()
    run = engine_gemm.run_tiles

    def marked(*a, **k):
        started.set()
        return run(*a, **k)

    monkeypatch.setattr(engine_gemm, "run_tiles", marked)
    main = threading.main_thread().ident

    def interrupt() -> None:
        started.wait(60)
        time.sleep(0.3)
        signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tc.matmul("hopper", A, B, engine="compiled")
    stopped = time.monotonic() - t0
    sender.join()
    assert [t.name for t in threading.enumerate() if t.name.startswith(THREAD_NAME)] == []
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.1  # nothing computes any more
    assert stopped < 30
