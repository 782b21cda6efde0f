"""Misbehaving solver back ends for the isolation tests (loaded as a solver plugin via
$TCSMT_SOLVER_PLUGINS): one aborts, one hangs, one exhausts memory, one lies."""

from __future__ import annotations

import os
import time

from tensorcore_smt.solvers.backends import Backend
from tensorcore_smt.solvers.result import Answer


def _crash(text, names, timeout, seed):
    os.abort()


def _hang(text, names, timeout, seed):
    while True:  # ignores its own time limit, like a stuck native solver
        time.sleep(1)


def _oom(text, names, timeout, seed):
    hog = []
    while True:
        hog.append(bytearray(64 << 20))


def _liar(text, names, timeout, seed):
    # sat with all-zero inputs: both variants give the same bits there.
    return Answer.SAT, {n: 0 for n in names}, ""


def _unsat(text, names, timeout, seed):
    return Answer.UNSAT, {}, ""


def _late_unsat(text, names, timeout, seed):
    time.sleep(LATE_S)  # a slower solver that agrees
    return Answer.UNSAT, {}, ""


LATE_S = 3.0

BACKENDS = {
    name: Backend(name, "fake_solvers", "fake-solvers", lambda: "0-test", fn)
    for name, fn in (
        ("crash", _crash),
        ("hang", _hang),
        ("oom", _oom),
        ("liar", _liar),
        ("unsat", _unsat),
        ("late", _late_unsat),
    )
}
