"""Solver times on the project's key queries beside Valpey et al.'s (2025) Table 4, and an encoding study.

Run with `python bench/bench_solvers.py` (or `make bench-solvers`). It prints:

**Table 4 reproduction.** Every row of Valpey et al.'s (2025) Table 4 (Z3 4.8.9 and cvc5 1.0.2 on a
32-core AMD EPYC 7502P, 6 h timeout) as a query of this project that asks the paper's
question, on Volta (`volta` preset, `m8n8k4` with fp16 inputs) unless the row names
another architecture:

| Table 4 row | paper's property | our query |
| --- | --- | --- |
| Exact Multiplication | §4.1, Listing 1.1: an fp16 product fp16 cannot hold | `precision-product` / `exact-vs-fp16` |
| Exact Addition in FP16 | §4.1, Property 1: fp32 vs fp16 accumulation of a*b + c*d | `precision-accumulation` / `fp32-vs-fp16-accumulation` (fp16 output) |
| Rounding of Final Result | §4.2, Property 2: RNE vs RZ of one product to fp16, the rest 0 | `rounding-final` / `rne-vs-rz` with c = 0 |
| Rounding of Accumulator | §4.2, Table 3: truncation vs RZ of a*1 + c, c of the other sign | `rounding-accumulator` / `effective-subtraction` |
| Accumulation Order | §4.3, Property 3: two RZ orders of three products | `ordering` / `sequential-orders` |
| Normalization | §4.3, Property 4: unnormalized vs IEEE sum of two products and c > 0 | `normalization` / `no-normalize-vs-ieee` |
| 3 Carry Bits | §4.3: Volta's 5-term sum needs 3 carry bits | (a) `volta` vs `volta[carry_bits=2]` |
| 4 Carry Bits (Ampere) | §4.3: Ampere's 9-term sum needs 4 (the paper: no answer in 6 h) | (b) `ampere` vs `ampere[carry_bits=3]` |

The property queries come from the property library (properties/*.toml);
the bench adds only c = 0 to `rne-vs-rz`, as Property 2 sets every other value to 0.
For each row and installed solver it reports the solver's own query time `solver_s`
(handing the SMT-LIB text to the solver's parser until `check-sat` answers: parse +
check, measured in the solver's child process; what the paper's table reports) and the
wall time of the whole run (a fresh child process: Python start-up, solver import and
model read-back included), each as best and median of --repeat runs. Beside them: the
paper's figures, the ratio paper-best / ours-best (`solver_s` of our fastest solver),
and PASS when ours-best <= paper-best / 10, else MISS. Every sat answer is re-run on
the concrete interpreter (`tensorcore_smt.smt.query.recheck`): a witness that does not
reproduce makes the row MISS.

A calibration table follows: the paper's own formulas, written in SMT-LIB's
floating-point theory from §4 (Listing 1.1, Properties 1-3; the rows whose formulas use
the paper's own bit-vector accumulator have none), timed the same way on this machine.

**Further carry-bit queries** (proofs that one more carry bit changes nothing, and
Hopper's 17-term unit): wall time against the project's goals.

A solver that times out on a carry-bit query is not run on the later ones with more
terms (larger instances of the same question); --keep-going runs it anyway.

`--table4` runs the Table 4 rows and the calibration only; `--write DIR` also writes
DIR/table4.md (the table for a reader) and DIR/table4.json (every figure).

`python bench/bench_solvers.py --study` measures what each encoding choice buys instead
(docs/encoding.md writes the results up): fixed inputs as constants or as equations,
sign symmetry, exponent windows, the carry register, DAG sharing, and solver options.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from solverbench.driver import driver_main
from solverbench.machine import machine, print_machine, solver_versions
from solverbench.options import study_options, study_small
from solverbench.output import print_results, write_table4
from solverbench.queries import BAR, BY_NAME, QUERIES
from solverbench.run import bench, calibrate, floor
from solverbench.studies import study_carry, study_dag, study_fixed, study_sign, study_window

from tensorcore_smt.solvers import available

STUDIES = {
    "fixed": study_fixed,
    "sign": study_sign,
    "window": study_window,
    "carry": study_carry,
    "dag": study_dag,
    "options": study_options,
    "small": study_small,
}
ROMAN = {
    "i": "fixed",
    "ii": "sign",
    "iii": "window",
    "iv": "carry",
    "v": "dag",
    "vi": "options",
    "vii": "small",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--driver"]:
        return driver_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--solvers", help="comma-separated (default: every installed solver)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per solver run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per query and solver")
    ap.add_argument(
        "--slow",
        type=float,
        default=5.0,
        help="a solver whose first run on a query takes longer (wall seconds) runs it once",
    )
    ap.add_argument(
        "--only", action="append", help=f"query names, comma-separated ({', '.join(BY_NAME)})"
    )
    ap.add_argument(
        "--table4",
        action="store_true",
        help="only Valpey et al.'s (2025) Table 4 rows and the calibration",
    )
    ap.add_argument(
        "--write", type=Path, metavar="DIR", help="write DIR/table4.md and DIR/table4.json"
    )
    ap.add_argument(
        "--no-calibration", action="store_true", help="skip timing the paper's own formulas"
    )
    ap.add_argument("--keep-going", action="store_true", help="no skipping after a timeout")
    ap.add_argument("--json", type=Path, help="write the raw results to this file")
    ap.add_argument(
        "--study",
        nargs="?",
        const="all",
        help=f"run the encoding study instead: all, or some of {', '.join(STUDIES)} (or i..vii)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds per option in the study")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.only:
        args.only = {n.strip() for x in args.only for n in x.split(",") if n.strip()}
        unknown = args.only - set(BY_NAME)
        if unknown:
            ap.error(f"--only: no query {', '.join(sorted(unknown))}; known: {', '.join(BY_NAME)}")
    picked_q = [
        q
        for q in QUERIES
        if (not args.only or q.name in args.only) and (not args.table4 or q.table4)
    ]
    if args.write and not any(q.table4 for q in picked_q):
        ap.error("--write: no Table 4 row among the queries picked")
    inst = available()
    solvers = [s.strip() for s in args.solvers.split(",")] if args.solvers else list(inst)
    missing = [s for s in solvers if s not in inst]
    if missing:
        ap.error(f"not installed: {', '.join(missing)} (installed: {', '.join(inst)})")
    picked: list[str] = []
    if args.study:
        names = list(STUDIES) if args.study == "all" else args.study.split(",")
        for x in names:
            key = ROMAN.get(x.strip().lower(), x.strip().lower())
            if key not in STUDIES:
                ap.error(f"--study: no study {x!r}; known: {', '.join(STUDIES)} (or i..vii)")
            picked.append(key)
    info = machine()
    versions = solver_versions(solvers)
    print_machine(info, versions)
    t0 = time.monotonic()
    result: dict = {"machine": info, "solvers": versions, "timeout_s": args.timeout}
    if picked:
        print(f"encoding study: {', '.join(picked)}; timeout {args.timeout:g} s per run")
        for key in picked:
            result.update(STUDIES[key](args, solvers))
    else:
        print(
            f"timeout {args.timeout:g} s per run, {args.repeat} run(s) per query and solver "
            f"(1 when the first takes over {args.slow:g} s)"
        )
        result.update(repeat=args.repeat, slow_s=args.slow, bar=BAR)
        result["rows"] = bench(args, solvers, picked_q)
        if not args.no_calibration:
            names = [q.name for q in picked_q if q.table4]
            result["calibration"] = calibrate(args, solvers, names)
            if any(BY_NAME[n].table4 for n in names):
                result["floor"] = floor(args, solvers)
    elapsed = time.monotonic() - t0
    result["elapsed_s"] = elapsed
    result["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    if not picked:
        print_results(result, solvers, args.timeout)
    print(f"\ntotal {elapsed:.0f} s; load average at end {result['load_average_end'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"raw results: {args.json}")
    if args.write and not picked:
        for path in write_table4(result, solvers, args.write):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
