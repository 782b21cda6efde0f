"""The campaign's identify step: `tcsmt identify --oracle cuda` on each probed
instruction, called in process (the same Identifier, oracle and JSON report as the
command), with each report under out/identify/."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import ExitCode, UserError
from .gpu import safe_name


def identify_one(arch: str, instr: str, budget: int, timeout: float, oracle: str = "cuda"):
    """identify on one instruction with the default space: (exit code as the command
    would give it, its JSON report or None when it could not start, one-line error)."""
    from ..identify.loop import Identifier
    from ..identify.oracle import make_oracle
    from ..identify.report import to_json
    from ..identify.space import resolve_space
    from ..smt.solve import Limits

    try:
        space = resolve_space(arch, instr, None)
        orc = make_oracle(oracle, space.base, space.arch, space.instr)
        res = Identifier(space, orc, budget, Limits(timeout=timeout), seed=0).run()
    except UserError as e:
        return ExitCode.USAGE, None, str(e)
    if res.interrupted:
        raise KeyboardInterrupt
    code = ExitCode.USAGE if res.error else ExitCode.OK if res.classes else ExitCode.REFUTED
    return code, to_json(res), res.error


def run_identify(
    arch: str,
    instrs: tuple[str, ...],
    out: Path,
    budget: int,
    jobs: int = 1,
    timeout: float = 20.0,
    oracle: str = "cuda",
) -> list[dict]:
    """identify with `oracle` on each instruction (`jobs` at once, in threads of this
    process); reports under out/identify/ (<instr>.json and the summary identify.json)."""
    idir = out / "identify"
    idir.mkdir(parents=True, exist_ok=True)

    def one(name: str) -> dict:
        t0 = time.monotonic()
        code, doc, error = identify_one(arch, name, budget, timeout, oracle)
        if doc is not None:
            (idir / f"{safe_name(name)}.json").write_text(json.dumps(doc, indent=2) + "\n")
        row = {"instruction": name, "exit": int(code), "seconds": round(time.monotonic() - t0)}
        if doc is not None:
            row["survivors"] = [s.get("variant") for s in doc.get("survivors", [])]
            row["oracle_vectors"] = doc.get("oracle_vectors")
        if error:
            row["error"] = error
        print(f"identify {name:36s} {row}", flush=True)
        return row

    rows: list[dict] = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for row in pool.map(one, instrs):
            rows.append(row)
            (idir / "identify.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


__all__ = ["identify_one", "run_identify"]
