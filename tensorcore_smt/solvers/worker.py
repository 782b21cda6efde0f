"""Child process that runs one solver on one query file and prints one JSON line.

    python -m tensorcore_smt.solvers.worker SOLVER QUERY.smt2 TIMEOUT SEED NAME,NAME,...

Run by tensorcore_smt.solvers.runner, which sets the memory cap and kills it at the
wall-clock limit; anything that goes wrong in here is reported, not raised.
"""

from __future__ import annotations

import json
import sys
import time


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
        answer, model, reason = backend.solve(
            text, [n for n in names.split(",") if n], float(timeout), int(seed)
        )
        out.update(answer=answer, model={k: str(v) for k, v in model.items()}, reason=reason)
    except MemoryError:
        out.update(answer="unknown", reason="out of memory")
    except Exception as e:  # noqa: BLE001 - every failure becomes an `unknown` with its reason
        msg = str(e).strip().splitlines()
        kind = "out of memory" if "bad_alloc" in str(e) or "memory" in str(e).lower() else "error"
        out.update(answer="unknown", reason=f"{kind}: {type(e).__name__}: {msg[0] if msg else ''}")
    out["seconds"] = time.monotonic() - t0
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
