"""Dask preload of every worker process of the embedded cluster (`distributed.connect`):
the worker ignores SIGINT, so that a terminal's Ctrl-C (sent to the whole foreground
process group) reaches only the command, which then shuts the cluster down in order
instead of every worker printing its own KeyboardInterrupt traceback."""

from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:
    """Called by Dask in the worker process as it starts (its event loop runs in the
    main thread there; elsewhere nothing is changed)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
