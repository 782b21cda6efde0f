"""Independent work spread over a Dask cluster: validation chunks, solver queries.

`connect` gives a `distributed.Client`: an embedded `LocalCluster` of `workers`
processes (default: the machine's core count, one thread each) or, with an address (or
`$TCSMT_SCHEDULER`), an existing cluster's scheduler. `run_tasks` submits one task per
input and yields results as they finish (`as_completed`), in whatever order they come.

Failure rules, the same for every command built on it:

- a task that raises is yielded as a `TaskFailure` naming its input; the others go on;
- a worker that dies (killed, out of memory) has its tasks rescheduled by Dask on the
  other workers; a task that kills workers more than `allowed-failures` times (Dask's
  setting, default 3) comes back as a `TaskFailure` (`KilledWorker`), never lost;
- Ctrl-C (KeyboardInterrupt) cancels every pending task before it propagates, so the
  caller can report what has already finished and exit.

Processes: the embedded cluster's workers ignore SIGINT (`worker_setup`, a Dask
preload), so a terminal's Ctrl-C (sent to the whole foreground process group) reaches only the
command, which then closes the cluster in order (no worker tracebacks); a worker shut
down mid-task takes its solver processes with it (tensorcore_smt.solvers.runner). Dask's
dashboard is off unless asked for (`dashboard=True`, `--dashboard`), and Dask's own
warnings and logs (a busy port, a slow shutdown) never reach the command's stderr.

A progress bar (rich, on stderr) is drawn only when asked for, and the commands ask
only when stderr is a terminal and --json is off.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

SCHEDULER_ENV = "TCSMT_SCHEDULER"
"""Environment variable naming a Dask scheduler address (as --scheduler does)."""

CONNECT_TIMEOUT_S = 10.0

WORKER_SETUP = "tensorcore_smt.validation.worker_setup"
"""Dask preload module of the embedded cluster's workers (they ignore SIGINT)."""

DASHBOARD_ADDRESS = ":8787"
"""Where the dashboard is served when asked for (Dask's default port, else a free one)."""


@dataclass
class TaskFailure:
    """A task that did not produce a result: its position, a description of its input
    and the error (one line)."""

    index: int
    input: str
    error: str


def default_workers() -> int:
    """Worker processes of the embedded cluster when --workers is not given."""
    return os.cpu_count() or 1


def scheduler_address(scheduler: str | None) -> str | None:
    """The scheduler to use: --scheduler, else $TCSMT_SCHEDULER, else None (embedded)."""
    addr = scheduler or os.environ.get(SCHEDULER_ENV, "").strip()
    return addr or None


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while child processes are started (they inherit it: Python keeps an
    inherited SIG_IGN), restored after. Only the main thread may change it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def _quiet() -> Iterator[None]:
    """Dask's warnings (a dashboard port in use, ...) kept off the command's stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextmanager
def connect(
    workers: int | None = None, scheduler: str | None = None, dashboard: bool = False
) -> Iterator[Any]:
    """A Dask client for the duration of the block: an existing scheduler when one is
    named (here or in $TCSMT_SCHEDULER), else an embedded LocalCluster of `workers`
    single-threaded processes, shut down on exit. UserError if neither can be had.
    `dashboard`: serve Dask's dashboard (embedded cluster; off by default)."""
    from distributed import Client

    if workers is not None and workers < 1:
        raise UserError(f"--workers: expected at least 1, got {workers}")
    addr = scheduler_address(scheduler)
    if addr is not None:
        if workers is not None:
            raise UserError("give either --workers (an embedded cluster) or --scheduler")
        try:
            client = Client(addr, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as e:
            raise UserError(f"cannot reach the Dask scheduler at {addr}: {e}") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or default_workers()
    try:
        cluster, client = _embedded(n, dashboard)
    except (OSError, RuntimeError, TimeoutError) as e:
        if _interrupted(e):
            raise KeyboardInterrupt from None
        raise UserError(
            f"cannot start the embedded Dask cluster of {n} workers: {_one_line(e)}"
        ) from None
    try:
        yield client
    finally:
        with _quiet(), _sigint_ignored(), _stderr_to_devnull():  # a 2nd Ctrl-C: ignored
            client.close()
            cluster.close()


@contextmanager
def _stderr_to_devnull() -> Iterator[None]:
    """File descriptor 2 on /dev/null for the block: the processes started meanwhile
    (the cluster's workers) keep it, so their warnings and tracebacks never reach the
    command's stderr. Nothing changes where stderr is no file descriptor."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _embedded(n: int, dashboard: bool) -> tuple[Any, Any]:
    """A LocalCluster of `n` single-threaded worker processes and its client (both
    closed again if the start fails or is interrupted)."""
    from distributed import Client, LocalCluster

    cluster = client = None
    try:
        with _quiet(), _stderr_to_devnull():
            # ":0": the scheduler's HTTP endpoint on a free port (None still takes 8787
            # and warns when it is busy); the dashboard itself only when asked for.
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=DASHBOARD_ADDRESS if dashboard else ":0",
                scheduler_kwargs={} if dashboard else {"dashboard": False},
                silence_logs=logging.CRITICAL,
                preload=[WORKER_SETUP],
            )
            client = Client(cluster)
    except BaseException:
        _abandon(cluster, client)
        raise
    return cluster, client


def _abandon(cluster: Any, client: Any) -> None:
    """Close what a failed or interrupted start left, including a cluster whose
    constructor did not return (Dask would close it at exit, with tracebacks)."""
    from distributed.deploy.spec import SpecCluster

    with _quiet(), _sigint_ignored(), _stderr_to_devnull():
        for thing in (client, cluster, *list(SpecCluster._instances)):
            if thing is None:
                continue
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - half-started: whatever it says, it is gone
                pass
            SpecCluster._instances.discard(thing)


def _interrupted(e: BaseException) -> bool:
    """Whether an error of a cluster's start came from a Ctrl-C in its middle."""
    import asyncio

    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, (KeyboardInterrupt, asyncio.CancelledError)):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def run_tasks(
    client: Any,
    fn: Callable[[Any], Any],
    inputs: Sequence[Any],
    *,
    describe: Callable[[Any], str] = repr,
    label: str = "tasks",
    weights: Sequence[float] | None = None,
    progress: bool = False,
) -> Iterator[tuple[int, Any]]:
    """Run `fn(x)` for every x of `inputs` as one Dask task each; yield (index, result)
    as tasks finish, a `TaskFailure` in place of the result of a task that failed.

    `weights` (e.g. rows per chunk) drive the progress bar, drawn on stderr when
    `progress` is true. On KeyboardInterrupt (or when the caller stops iterating) every
    unfinished task is cancelled."""
    from distributed import as_completed

    with _SafeInterrupts() as intr:
        futures: list[Any] = []
        for lo in range(0, len(inputs), SUBMIT_BATCH):
            intr.check()
            futures += client.map(fn, list(inputs[lo : lo + SUBMIT_BATCH]), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        w = list(weights) if weights is not None else [1.0] * len(futures)
        bar = _Bar(label, sum(w)) if progress else None
        done = as_completed(futures)
        try:
            while not done.is_empty():
                intr.check()
                batch = done.next_batch(block=False)
                if not batch:
                    time.sleep(POLL_S)
                    continue
                for fut in batch:
                    i = index[fut.key]
                    try:
                        result = fut.result()
                    except Exception as e:  # the task's own error, or KilledWorker
                        result = TaskFailure(i, describe(inputs[i]), _one_line(e))
                    fut.release()
                    if bar is not None:
                        bar.advance(w[i])
                    yield i, result
                    intr.check()
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                client.cancel(pending)
            if bar is not None:
                bar.close()


SUBMIT_BATCH = 1000
"""Tasks submitted at once (client.map) between two looks for a Ctrl-C."""

POLL_S = 0.05
"""Seconds between two looks for finished tasks (and for a Ctrl-C)."""


class _SafeInterrupts:
    """Ctrl-C (SIGINT) noted while tasks run and raised as KeyboardInterrupt only at the
    points that `check` marks: raised anywhere, it can land inside Dask's own code (a
    garbage-collection callback, the submission of a batch) and leave the client unable
    to cancel or shut down. Only the main thread may change the handler; elsewhere
    nothing changes."""

    def __init__(self) -> None:
        self.hit = False
        self.old: Any = None

    def __enter__(self) -> _SafeInterrupts:
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if current is signal.default_int_handler:
                self.old = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum, frame) -> None:
        self.hit = True

    def check(self) -> None:
        if self.hit:
            self.hit = False
            raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
            self.old = None


class _Bar:
    """A rich progress bar on stderr (transient: it disappears when done)."""

    def __init__(self, label: str, total: float) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(label, total=total)

    def advance(self, n: float) -> None:
        self.progress.advance(self.task, n)

    def close(self) -> None:
        self.progress.stop()


__all__ = [
    "SCHEDULER_ENV",
    "TaskFailure",
    "connect",
    "default_workers",
    "run_tasks",
    "scheduler_address",
]
