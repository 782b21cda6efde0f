"""The encoding study's own solver driver, for options the back ends do not set: `drive`
runs one solver in a fresh child, the entry point's `--driver` mode (`driver_main`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tensorcore_smt.smt.query import Query, recheck
from tensorcore_smt.solvers import Answer

from .cells import Run, run_text

GRACE_S = 5.0  # seconds past its limit before a study child is killed
ENTRY = Path(__file__).resolve().parent.parent / "bench_solvers.py"
"""The script a study child runs, as `bench_solvers.py --driver ...`."""


def drive(q: Query, text: str, solver: str, opts: dict, timeout: float, seed: int) -> Run:
    """Run `solver` with `opts` on `text` in a fresh child; wall time of the child."""
    names = [o.name for o in q.operands] + list(q.output_names)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        path = Path(tmp) / "query.smt2"
        path.write_text(text)
        cmd = [sys.executable, str(ENTRY), "--driver", solver, str(path), json.dumps(opts)]
        cmd += [repr(timeout), str(seed), ",".join(names)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout + GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Run(Answer.UNKNOWN, time.monotonic() - t0, f"timeout after {timeout:g} s")
        seconds = time.monotonic() - t0
    try:
        data = json.loads(stdout.decode().strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = stderr.decode(errors="replace").strip().splitlines()
        return Run(Answer.UNKNOWN, seconds, err[-1][:200] if err else f"exit {proc.returncode}")
    run = Run(Answer(data["answer"]), seconds, data.get("reason", ""), None, data.get("solver_s"))
    if run.answer == Answer.SAT:
        run.reproduces = recheck(q, {k: int(v) for k, v in data["model"].items()}).reproduces
    print(f"  {q.name} {solver} {opts} seed {seed}: {run_text(run, timeout)}", file=sys.stderr)
    return run


def driver_main(argv: list[str]) -> int:
    solver, path, opts_json, timeout_s, seed_s, names_s = argv
    opts, timeout, seed = json.loads(opts_json), float(timeout_s), int(seed_s)
    names = [n for n in names_s.split(",") if n]
    text = Path(path).read_text()
    out: dict = {"answer": "unknown", "model": {}, "reason": ""}
    try:
        from tensorcore_smt.solvers.backends import BACKENDS

        outcome = BACKENDS[solver].solve(text, names, timeout, seed, extra_options=opts)
        answer, model, reason, solver_s = outcome
        out.update(answer=answer, model={k: str(v) for k, v in model.items()}, solver_s=solver_s)
        if reason:
            out["reason"] = reason
    except Exception as e:  # noqa: BLE001 - reported to the parent as the reason
        out["reason"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
    print(json.dumps(out))
    return 0
