"""Work split into bounded tiles on worker threads that stop when the caller is interrupted.

Machine code called through ctypes cannot be interrupted: a Ctrl-C reaches Python only
when the call returns, and a thread still inside a kernel when its caller unwinds writes
into arrays that are being freed. So long work is cut into tiles of bounded time; the
workers take tiles one at a time and check a stop flag between them; the calling thread
waits for them, and on any exception (KeyboardInterrupt included) sets the flag, waits
for every worker (each finishes at most its current tile), then re-raises. No worker
outlives the call.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from ..bv.chunks import spans

THREAD_NAME = "tcsmt-tile"
"""Name prefix of the worker threads (tests look for leftovers by it)."""
POLL = 0.1
"""Seconds between the calling thread's checks for a signal while the workers run."""


def run_tiles(n: int, tile: int, work: Callable[[int, int], None], n_threads: int) -> None:
    """work(lo, hi) for the tiles [lo, hi) of [0, n), `tile` items each (the last may be
    shorter), on `n_threads` threads (1: the calling thread alone). Returns when every
    tile is done; an exception in a worker or in the caller (Ctrl-C) stops the others
    after their current tile and is raised here once they have all ended."""
    tile = max(1, tile)
    n_tiles = -(-n // tile)
    if n_threads <= 1 or n_tiles <= 1:
        for lo, hi in spans(n, tile):
            work(lo, hi)
        return
    counter = itertools.count()  # next() is atomic under the GIL
    stop = threading.Event()
    errors: list[BaseException] = []
    n_workers = min(n_threads, n_tiles)
    done = [threading.Event() for _ in range(n_workers)]

    def worker(i: int) -> None:
        try:
            while not stop.is_set():
                j = next(counter)
                if j >= n_tiles:
                    return
                work(j * tile, min(n, (j + 1) * tile))  # tile j of spans(n, tile)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            errors.append(e)
            stop.set()
        finally:
            done[i].set()

    workers = [
        threading.Thread(target=worker, args=(i,), name=f"{THREAD_NAME}-{i}")
        for i in range(n_workers)
    ]
    try:
        for t in workers:
            t.start()
        _wait(done, workers)
    except BaseException:
        stop.set()
        _wait_through_interrupts(done, workers)
        raise
    if errors:
        raise errors[0]


def _wait(done: list[threading.Event], workers: list[threading.Thread]) -> None:
    """Wait until every started worker has left its loop, then join it. The wait is on
    events, in steps of POLL seconds (a signal is seen at once), not on Thread.join:
    CPython 3.11's join, when interrupted, can mark a thread that still runs as stopped."""
    for ev, t in zip(done, workers):
        if t.ident is None:  # never started
            continue
        while not ev.wait(POLL):
            pass
        t.join()


def _wait_through_interrupts(done: list[threading.Event], workers: list[threading.Thread]):
    """`_wait`, again after every further interrupt (a second Ctrl-C while the workers
    finish their tiles must not leave one running)."""
    while True:
        try:
            _wait(done, workers)
            return
        except KeyboardInterrupt:
            continue
