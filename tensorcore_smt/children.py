"""Child processes that never outlive the command that started them.

Every program tcsmt runs (solver workers, `cmd:` and `cuda` oracles) is started here
or with `preexec`: it leads a process group of its own, so that ending it ends what it
started too (a shell's children, a runner's helpers), and on Linux it gets SIGKILL
when the thread that started it ends (prctl PR_SET_PDEATHSIG), so a parent that is
killed outright (a Dask worker shut down mid-task, `kill -9`) takes it along. A
terminal's Ctrl-C then reaches only tcsmt, which ends its children before it reports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal a child gets when the thread that started it ends."""


def _libc_prctl():
    """libc's prctl on Linux (None elsewhere), looked up once in the parent: between
    fork and exec the child must not import or load anything."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def preexec(memory_bytes: int | None = None) -> Callable[[], None] | None:
    """The function a child runs before exec: an address-space cap (`memory_bytes`),
    and death with its parent. None where neither applies (not POSIX)."""
    if os.name != "posix":
        return None
    parent = os.getpid()
    prctl = _PRCTL

    def setup() -> None:
        if memory_bytes is not None:
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
            except (ImportError, ValueError, OSError):
                pass
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the line above
                os._exit(1)

    return setup


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (the child and all it started); reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    else:  # the leader has exited; what it started may still hold the group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def run(argv: list[str], text_in: str, timeout: float) -> subprocess.CompletedProcess:
    """Run `argv` with `text_in` on stdin, capturing stdout and stderr (text), at most
    `timeout` seconds: subprocess.TimeoutExpired after that. On a timeout, an interrupt
    or any error the whole process group is killed first (subprocess.run kills only the
    leader, and a grandchild holding the pipes would then hang it)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=preexec(),
    )
    try:
        out, err = proc.communicate(text_in, timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise
    kill_group(proc)  # anything it left running in the background
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
