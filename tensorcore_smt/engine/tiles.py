"""Work split into bounded tiles on worker threads that stop when the caller is interrupted.

Machine code called through ctypes cannot be interrupted: a Ctrl-C reaches Python only
when the call returns, and a thread still inside a kernel when its caller unwinds writes
into arrays that are being freed. So long work is cut into tiles of bounded time; the
workers take tiles one at a time and check a stop flag between them; the calling thread
waits for them, and on any exception (KeyboardInterrupt included) sets the flag, joins
every worker (each finishes at most its current tile), then re-raises. No worker outlives
the call.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

THREAD_NAME = "tcsmt-tile"
"""Name prefix of the worker threads (tests look for leftovers by it)."""


def run_tiles(n: int, tile: int, work: Callable[[int, int], None], n_threads: int) -> None:
    """work(lo, hi) for the tiles [lo, hi) of [0, n), `tile` items each (the last may be
    shorter), on `n_threads` threads (1: the calling thread alone). Returns when every
    tile is done; an exception in a worker or in the caller (Ctrl-C) stops the others
    after their current tile and is raised here once they have all ended."""
    tile = max(1, tile)
    n_tiles = -(-n // tile)
    if n_threads <= 1 or n_tiles <= 1:
        for lo in range(0, n, tile):
            work(lo, min(n, lo + tile))
        return
    counter = itertools.count()  # next() is atomic under the GIL
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while not stop.is_set():
                i = next(counter)
                if i >= n_tiles:
                    return
                work(i * tile, min(n, (i + 1) * tile))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            errors.append(e)
            stop.set()

    workers = [
        threading.Thread(target=worker, name=f"{THREAD_NAME}-{i}")
        for i in range(min(n_threads, n_tiles))
    ]
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    except BaseException:
        stop.set()
        _join_all(workers)
        raise
    if errors:
        raise errors[0]


def _join_all(workers: list[threading.Thread]) -> None:
    """Join every started worker, even through further interrupts (a second Ctrl-C
    while they finish their tiles must not leave one running)."""
    pending = [t for t in workers if t.ident is not None]
    while pending:
        try:
            pending[0].join()
            pending.pop(0)
        except KeyboardInterrupt:
            continue
