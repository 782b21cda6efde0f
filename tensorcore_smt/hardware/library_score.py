"""Score the decision tables of schedules/library on a GPU's library recordings: for each
call, the recipe the tables decide (gemm/library_rules.py) run on the kept elements
against the recorded bits; calls and elements reproduced per class, on the fit calls or
the held-out ones (library_fit.py's split).

`python -m tensorcore_smt.hardware.library_score --gpu h200 [--heldout] [--table NAME]
[--class GLOB] [--gemv] [--misses N]` (--gemv: only the calls with M = 1 or N = 1).
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections import Counter
from dataclasses import replace

from ..gemm.library_rules import Table, decide, tables
from .library_fit import fit_calls, heldout_calls, mismatches


def tree_0(t: Table) -> Table:
    """A vote table as its tree 0 alone (an ordinary table: what bagging changed)."""
    if not t.vote:
        return t
    return replace(t, vote=0, rules=tuple(r for r in t.rules if r.tree == 0))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="library_score")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--heldout", action="store_true")
    ap.add_argument("--table", action="append", help="only these tables (file stems)")
    ap.add_argument("--tables", help="the tables' folder (default: schedules/library)")
    ap.add_argument("--tree0", action="store_true", help="vote tables by their tree 0 alone")
    ap.add_argument("--class", dest="glob", default="*", help="only classes matching")
    ap.add_argument("--misses", type=int, default=20, help="print this many misses")
    ap.add_argument("--gemv", action="store_true", help="only calls with M = 1 or N = 1")
    args = ap.parse_args(argv)
    among = [t for t in tables(args.tables) if args.table is None or t.name in args.table]
    if args.tree0:
        among = [tree_0(t) for t in among]
    calls = heldout_calls(args.gpu) if args.heldout else fit_calls(args.gpu)
    tot, ok, undecided = Counter(), Counter(), Counter()
    el_tot = el_ok = 0
    misses = []
    for c in calls:
        name = c.cls.name
        if not fnmatch.fnmatchcase(name, args.glob):
            continue
        if args.gemv and c.m != 1 and c.n != 1:
            continue
        if not any(t.covers(name) for t in among):
            continue
        got = decide(name, c.m, c.n, c.k, args.gpu, among)
        tot[name] += 1
        assert c.d is not None
        el_tot += c.d.size
        if got is None:
            undecided[name] += 1
            continue
        recipe, instr, _, _ = got
        bad = mismatches(c, recipe, instr or "default")
        el_ok += c.d.size - bad
        if bad == 0:
            ok[name] += 1
        elif len(misses) < args.misses:
            misses.append(
                f"  {c.part} input-seed {c.seed} {name} {c.m}x{c.n}x{c.k} {c.kind.value}: {bad}/{c.d.size}"
                f" wrong with {recipe}  lt={c.cublaslt}"
            )
    for name in sorted(tot):
        print(f"{name:24} {ok[name]:5} / {tot[name]:5}  undecided {undecided[name]}")
    n_ok, n = sum(ok.values()), sum(tot.values())
    which = "held-out" if args.heldout else "fit"
    print(f"{args.gpu} {which}: {n_ok} / {n} calls, {el_ok} / {el_tot} elements")
    print("\n".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
