"""Child process that runs one solver on one query file and prints one JSON line.

    python -m tensorcore_smt.solvers.worker SOLVER QUERY.smt2 TIMEOUT SEED NAME,NAME,...

Run by tensorcore_smt.solvers.runner, which sets the memory cap, ties the worker's life
to its own (tensorcore_smt.children) and kills it at the wall-clock limit; anything that
goes wrong in here is reported, not raised. A runner that has gone away (its end of the
pipe closed) gets no answer and no traceback: the worker just ends.

The JSON line holds the answer, the model, the reason of an `unknown`, `seconds` (this
process's time from its start of work to the answer: solver import, version, reading
the file, solving) and `solver_s`: the solver's own query time, from handing the
SMT-LIB text to its parser until `check-sat` answers (parse + check; the time Valpey et al. 2025
Table 4 reports). A back end that measures it returns it as a fourth element of its
outcome; for one that does not, `solver_s` is the time of its whole `solve` call.
"""

from __future__ import annotations

import json
import os
import sys
import time

from .result import Answer


def main(argv: list[str]) -> int:
    solver, path, timeout, seed, names = argv
    t0 = time.monotonic()
    out: dict = {"solver": solver}
    try:
        from .backends import all_backends

        backend = all_backends()[solver]
        out["version"] = backend.version()
        with open(path) as f:
            text = f.read()
        t1 = time.perf_counter()
        outcome = backend.solve(text, [n for n in names.split(",") if n], float(timeout), int(seed))
        call_s = time.perf_counter() - t1
        answer, model, reason = outcome[:3]
        solver_s = outcome[3] if len(outcome) > 3 and outcome[3] is not None else call_s
        out.update(
            answer=Answer(answer).value,  # an Answer, or a plugin's "sat"/"unsat"/"unknown"
            model={k: str(v) for k, v in model.items()},
            reason=reason,
            solver_s=solver_s,
        )
    except MemoryError:
        out.update(answer=Answer.UNKNOWN.value, reason="out of memory")
    except Exception as e:  # noqa: BLE001 - every failure becomes an `unknown` with its reason
        msg = str(e).strip().splitlines()
        kind = "out of memory" if "bad_alloc" in str(e) or "memory" in str(e).lower() else "error"
        out.update(
            answer=Answer.UNKNOWN.value,
            reason=f"{kind}: {type(e).__name__}: {msg[0] if msg else ''}",
        )
    out["seconds"] = time.monotonic() - t0
    try:
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the runner is gone: nobody to answer
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
