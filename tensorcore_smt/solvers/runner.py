"""Run solvers in child processes with a wall-clock limit and a memory cap; portfolio.

A solver that hangs is killed at its limit, one that runs out of memory or crashes
ends its own process: each becomes an `unknown` answer with the reason, and the
calling process never waits longer than the limit nor loses what it already has.

The limit is the budget of the whole portfolio (`SolveJob.timeout`, or a `deadline`
shared by several portfolios): a solver started late, when a job slot frees, gets only
what is left of it, as its own time limit; one still running GRACE_S past the deadline
is killed.

No solver outlives the process that started it (tensorcore_smt.children): each child
leads its own process group and dies with its parent; the runner kills the group of
every child still running when it returns, raises or is interrupted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..children import kill_group, preexec
from ..errors import UserError
from .backends import Theory, all_backends, installed_version, theories_of
from .result import Answer, SolveResult

GRACE_S = 2.0
"""Seconds past the budget a child gets to report (its Python start-up, a solver that
stops at its own limit and prints) before it is killed."""

SOLVER_SHARE = 0.95
"""A solver's own time limit is this share of the budget left when it starts, so that it
can stop and say `timeout` itself before the runner kills it at the deadline."""


POLL_S = 0.02

Progress = Callable[[float, list[str]], None]
"""Called while solvers run with (elapsed seconds, names of the solvers still running)."""


@dataclass(frozen=True)
class SolveJob:
    """One satisfiability question: SMT-LIB2 text (no check-sat), the constants whose
    values a model should report, and the limits of each solver run."""

    text: str
    names: tuple[str, ...]
    timeout: float = 300.0
    memory_mb: int = 8192
    seed: int = 0


def available() -> dict[str, str]:
    """Installed solvers in preference order, with their installed versions."""
    out = {}
    for name, b in all_backends().items():
        v = installed_version(b)
        if v is not None:
            out[name] = v
    return out


def default_solvers() -> list[str]:
    return list(available())


def check_solver_names(names: list[str]) -> None:
    """Raise ValueError naming an unknown or uninstalled solver."""
    known = all_backends()
    inst = available()
    for n in names:
        if n not in known:
            raise ValueError(f"unknown solver {n!r}; known: {', '.join(known)}, portfolio")
        if n not in inst:
            how = known[n].install or known[n].distribution
            raise ValueError(f"solver {n!r} is not installed (pip install {how})")


def readers(text: str, solvers: list[str]) -> list[str]:
    """The solvers of `solvers` that have every theory the SMT-LIB script `text` uses
    (Yices and Boolector, through pySMT, have no floating-point theory). A portfolio
    leaves the others out; when none is left, a UserError names the solvers asked and
    those that read the query."""
    known = all_backends()
    usable = [s for s in solvers if s not in known or known[s].reads(text)]
    if solvers and not usable:
        need = " and ".join(t.value for t in sorted(theories_of(text), key=list(Theory).index))
        able = [n for n, b in known.items() if b.reads(text)]
        raise UserError(
            f"--solver {', '.join(solvers)}: this query uses {need} and {', '.join(solvers)} "
            f"reads bit-vectors only (pySMT has no floating-point theory); use "
            f"{', '.join(able) or 'a solver with it'}"
        )
    return usable


def _is_time_limit(reason: str) -> bool:
    """Whether a back end's `unknown` reason says its time limit ran out (z3: timeout or
    canceled, cvc5: timeout, bitwuzla: time limit reached); an error whose text merely
    contains "time" (a RuntimeError) is not one."""
    low = reason.lower()
    if low.startswith(("error", "out of memory")):
        return False
    return bool(re.search(r"\btime ?out\b|\btime limit\b|\bcancel", low))


class _Child:
    """One running worker process."""

    def __init__(
        self, solver: str, job: SolveJob, path: Path, workdir: Path, deadline: float
    ) -> None:
        self.solver = solver
        self.job = job
        self.start = time.monotonic()
        self.deadline = deadline
        self.timeout = max(0.05, (deadline - self.start) * SOLVER_SHARE)
        self.err_path = workdir / f"{solver}.stderr"

        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tensorcore_smt.solvers.worker",
                    solver,
                    str(path),
                    repr(self.timeout),
                    str(job.seed),
                    ",".join(job.names),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                preexec_fn=preexec(job.memory_mb * 1024 * 1024),
                start_new_session=True,
            )

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def overdue(self) -> bool:
        return time.monotonic() > self.deadline + GRACE_S

    def kill(self) -> None:
        kill_group(self.proc)

    def result(self, killed_for_time: bool = False) -> SolveResult:
        """Collect the finished child's answer (call after it ended or was killed)."""
        seconds = self.elapsed
        if killed_for_time:
            return SolveResult(
                self.solver,
                Answer.UNKNOWN,
                seconds,
                reason=f"timeout after {self.job.timeout:g} s (the query's budget)",
            )
        out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
        rc = self.proc.returncode
        line = out.strip().splitlines()[-1] if out.strip() else ""
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            data = None
        if rc != 0 or not isinstance(data, dict):
            return SolveResult(self.solver, Answer.UNKNOWN, seconds, reason=self._crash_reason(rc))
        answer = Answer(data.get("answer", "unknown"))
        model = {k: int(v) for k, v in data.get("model", {}).items()}
        reason = data.get("reason", "")
        if answer == Answer.UNKNOWN and _is_time_limit(reason):
            reason = (
                f"timeout after {self.job.timeout:g} s (the query's budget; the solver "
                f"stopped at its own limit of {self.timeout:.3g} s)"
            )
        solver_s = data.get("solver_s")
        return SolveResult(
            self.solver,
            answer,
            seconds,
            data.get("version", ""),
            model,
            reason,
            None if solver_s is None else float(solver_s),
        )

    def _crash_reason(self, rc: int | None) -> str:
        try:
            tail = [x for x in self.err_path.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            tail = []
        last = tail[-1].strip()[:200] if tail else ""
        if rc is not None and rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            what = f"crashed ({sig})"
        else:
            what = f"exited with status {rc} and no answer"
        if "bad_alloc" in last or "MemoryError" in last or "out of memory" in last.lower():
            what = f"out of memory (cap {self.job.memory_mb} MiB)"
        return f"{what}{': ' + last if last else ''}"


def solve(job: SolveJob, solver: str, progress: Progress | None = None) -> SolveResult:
    """Run one solver on `job` in a child process and wait for its answer."""
    return portfolio(job, [solver], jobs=1, progress=progress)[0]


def portfolio(
    job: SolveJob,
    solvers: list[str],
    jobs: int | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> tuple[SolveResult, list[SolveResult]]:
    """Run `solvers` (at most `jobs` at a time) within the wall-clock budget (until
    `deadline`, a time.monotonic() value; default: `job.timeout` seconds from now) and
    return the first definite answer (or an unknown summarising all) with every run's
    result, the stopped ones and those the budget left no time for included."""
    winner, runs, _ = _race(job, solvers, [], jobs, progress, deadline)
    return winner, runs


def confirmed_portfolio(
    job: SolveJob,
    solvers: list[str],
    others: list[str],
    jobs: int | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
    min_left: float = 0.0,
) -> tuple[SolveResult, list[SolveResult], list[SolveResult]]:
    """`portfolio`, and when its first definite answer is unsat, a second definite answer
    from another solver: the solvers of the portfolio still running go on (the time they
    have spent is not thrown away) beside `others` (solvers not in the portfolio), queued
    as job slots free, all within the same deadline; a confirmation starts only when at
    least `min_left` seconds of the budget are left. Returns (the first answer, the runs
    up to it, the confirmation's runs: the second definite answer first, if any)."""
    return _race(job, solvers, others, jobs, progress, deadline, confirm=True, min_left=min_left)


def _race(
    job: SolveJob,
    solvers: list[str],
    others: list[str],
    jobs: int | None,
    progress: Progress | None,
    deadline: float | None,
    confirm: bool = False,
    min_left: float = 0.0,
) -> tuple[SolveResult, list[SolveResult], list[SolveResult]]:
    if not solvers:
        raise ValueError("no SMT solver is installed (pip install bitwuzla z3-solver cvc5)")
    solvers = readers(job.text, solvers)
    known = all_backends()
    others = [s for s in others if s not in known or known[s].reads(job.text)]
    jobs = max(1, jobs or os.cpu_count() or 1)
    queue = list(solvers)
    running: list[_Child] = []
    results: list[SolveResult] = []  # runs up to the first definite answer
    second: list[SolveResult] = []  # the confirmation's runs
    t0 = time.monotonic()
    if deadline is None:
        deadline = t0 + job.timeout
    winner: SolveResult | None = None
    confirmer: SolveResult | None = None

    def done() -> bool:
        if winner is None:
            return False
        if not confirm or winner.answer != Answer.UNSAT or confirmer is not None:
            return True
        return not (queue or running)

    with tempfile.TemporaryDirectory(prefix="tcsmt-") as tmp:
        path = Path(tmp) / "query.smt2"
        path.write_text(job.text)
        try:
            while (queue or running) and not done():
                while queue and len(running) < jobs:
                    if time.monotonic() >= deadline:
                        (second if winner else results).extend(_not_started(s, job) for s in queue)
                        queue.clear()
                        break
                    running.append(_Child(queue.pop(0), job, path, Path(tmp), deadline))
                time.sleep(POLL_S)
                for child in list(running):
                    if child.proc.poll() is not None:
                        r = child.result()
                    elif child.overdue():
                        child.kill()
                        r = child.result(killed_for_time=True)
                    else:
                        continue
                    running.remove(child)
                    if winner is None:
                        results.append(r)
                        if r.answer.definite:
                            winner = r
                            if confirm and r.answer == Answer.UNSAT:
                                # the confirmation: the others, if the budget allows
                                if deadline - time.monotonic() < min_left and not running:
                                    queue.clear()
                                else:
                                    queue += [x for x in others if x not in queue]
                            if done():
                                break
                    else:
                        second.append(r)
                        if r.answer.definite:
                            confirmer = r
                            break
                if progress and running:
                    progress(time.monotonic() - t0, [c.solver for c in running])
        finally:
            for child in running:
                child.kill()
                if winner is None:
                    why = "interrupted"
                elif confirmer is not None:
                    why = f"stopped: {confirmer.solver} answered first"
                else:
                    why = f"stopped: {winner.solver} answered first"
                (second if confirmer else results).append(
                    SolveResult(child.solver, Answer.UNKNOWN, child.elapsed, reason=why)
                )
    if winner is None and len(results) == 1 and len(solvers) == 1:
        winner = results[0]
    if winner is None:
        reasons = "; ".join(f"{r.solver}: {r.reason}" for r in results)
        winner = SolveResult(
            "portfolio" if len(solvers) > 1 else solvers[0],
            Answer.UNKNOWN,
            time.monotonic() - t0,
            reason=reasons,
        )
    if confirmer is not None:  # the confirming answer first
        second.remove(confirmer)
        second.insert(0, confirmer)
    return winner, results, second


def _not_started(solver: str, job: SolveJob) -> SolveResult:
    """A solver of the portfolio that the budget left no time to start."""
    return SolveResult(
        solver,
        Answer.UNKNOWN,
        0.0,
        reason=f"not started: the query's budget of {job.timeout:g} s ran out",
    )
