"""results/invariance.md (`make invariance`): batch invariance of torch calls as each
library profile answers it: for (dtype, N, K) sets of the LLM shapes, the M values at which
row 0 of A[:M] @ B changes its recipe, each change with a witness input re-run through
tc.matmul under both recipes (tcsmt invariance --profile), and where a profile's recipe
came from (recorded shape, rule, default). A profile answers only as well as its
recordings: rows whose recipes come from the rule or the default say so."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from tensorcore_smt.gemm.profiles import find_profile
from tensorcore_smt.hardware.library_calls import CallClass, Op, Precision
from tensorcore_smt.invariance.scan import scan
from tensorcore_smt.invariance.sources import ProfileSource

PROFILES = ("h100-cublas-13.0",)
SETS = [
    # precision, N, K
    (Precision.BF16, 4096, 11008),
    (Precision.BF16, 4096, 4096),
    (Precision.FP16, 4096, 4096),
    (Precision.FP16, 14336, 4096),
]
MS = sorted(
    set(range(1, 17))
    | {m + d for m in (32, 64, 128, 256, 512, 1024, 2048) for d in (-1, 0, 1)}
    | {4095, 4096}
)
"""M values asked: every M to 16, then each power of two and its neighbours."""


def _ms(ms: list[int]) -> str:
    return f"{ms[0]}" if ms[0] == ms[-1] else f"{ms[0]}..{ms[-1]}"


def table(profile: str) -> list[str]:
    lines = [
        f"## {profile}",
        "",
        "| call | N | K | M asked | row 0's recipe by M | changes (witness) | verdict | s |",
        "|---|---:|---:|---|---|---|---|---:|",
    ]
    for prec, n, k in SETS:
        cls = CallClass(Op.MATMUL, prec, True)
        t0 = time.monotonic()
        src = ProfileSource(profile, cls, n, k)
        rep = scan(src, cls, n, k, MS)
        segs = "; ".join(
            f"M {s.lo}..{s.hi}: `{s.as_dict()['recipe']}` ({s.as_dict().get('how', '')})"
            for s in rep.segments
        )
        changes = (
            ", ".join(
                f"{c.m_before}->{c.m} ({'re-run' if c.witness else c.step.value})"
                for c in rep.changes
            )
            or "none"
        )
        lines.append(
            f"| {cls.name} | {n} | {k} | {len(MS)} in 1..4096 | {segs} | {changes} | "
            f"{rep.verdict.value} | {time.monotonic() - t0:.0f} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", type=Path, help="folder to write invariance.md into")
    args = ap.parse_args()
    out = [
        "# Batch invariance of torch calls, by library profile",
        "",
        "Written by `make invariance` (bench/make_invariance.py). For each (dtype, N, K), "
        "row 0 of `A[:M] @ B` (torch.matmul, torch's default reduced-precision flag) at "
        f"{len(MS)} values of M from 1 to 4096; each change of recipe between two asked M "
        "comes with a witness input (the cancellation probe, else seeded inputs) whose "
        "row 0 has other bits under the two recipes, re-run through tc.matmul. Where a "
        "recipe is the profile's rule or default (no recording of that shape), the answer "
        "is the profile's prediction, not a measurement; `tcsmt invariance --profile P "
        "--dtype D --n N --k K --m 1..4096` asks any other set.",
        "",
        f"Machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the start.",
        "",
    ]
    for name in PROFILES:
        if find_profile(name) is None:
            print(f"no profile {name}", file=sys.stderr)
            return 2
        out += table(name) + [""]
    text = "\n".join(out)
    if args.write:
        (args.write / "invariance.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
