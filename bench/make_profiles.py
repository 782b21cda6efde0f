"""results/profiles.md (`make profiles`): the library profiles of the H200 and the H100
(profiles/<gpu>-cublas-13.1.json): what each covers, its figures on the calls held out
from building it (per class and per decision source), and batch invariance against the
recordings' batch part (row 0 of A[:M] @ B, M = 1..4096) on each GPU and between them.

Held-out figures are read from results/hardware/<gpu>/library/profile-heldout.json
(`tcsmt profile check PROFILE --heldout --json`, written by `make profiles` before this
script), or computed here when that file is missing or older than the profile.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from tensorcore_smt.gemm.profiles import Profile, load_profile
from tensorcore_smt.hardware.library_fit import HELDOUT_SEEDS, recording, recording_dir
from tensorcore_smt.hardware.library_invariance import across, series

ROOT = Path(__file__).resolve().parents[1]
GPUS = ("h200", "h100")
VERSION = "13.1"
EARLIER = ROOT / "results" / "profiles-h100-cublas-13.0.md"


def heldout_file(gpu: str) -> Path:
    return recording_dir(gpu, 0).parent / "profile-heldout.json"


def heldout(p: Profile, parts: tuple[str, ...]) -> dict:
    """The held-out check of `p` on the held-out calls of `parts` (none: every part): the
    stored JSON when it is newer than the profile and of the same parts."""
    f = heldout_file(p.gpu)
    if f.is_file() and p.path is not None and f.stat().st_mtime >= p.path.stat().st_mtime:
        doc = json.loads(f.read_text())
        if doc.get("parts") == list(parts):
            return doc
    from tensorcore_smt.hardware.library_fit import heldout_calls
    from tensorcore_smt.hardware.library_profile_check import check_library, totals

    t0 = time.monotonic()
    res = check_library(p, heldout_calls(p.gpu), parts=parts)
    doc = {
        "profile": p.name,
        "parts": list(parts),
        "seconds": round(time.monotonic() - t0),
        "total": totals(res),
        "classes": [r.as_dict() for r in res],
    }
    f.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.2f} %" if b else "-"


def coverage(p: Profile) -> list[str]:
    shapes = [s for c in p.classes for s in c.shapes]
    ok = [s for s in shapes if s.exact]
    origins = Counter((s.origin.split(" rule")[0], s.exact) for s in shapes)
    by = ", ".join(
        f"{o} {origins[(o, True)]}/{origins[(o, True)] + origins[(o, False)]}"
        for o in sorted({o for o, _ in origins})
    )
    tables = ", ".join(f"`{t.name}` ({len(t.rules)})" for t in p.tables) or "none"
    return [
        f"- device {p.device}; " + ", ".join(f"{k} {v}" for k, v in p.library.items()),
        f"- tables copied in (their rules that apply on the {p.gpu.upper()}): {tables}; default "
        f"`{p.default}`; TF32 operand rounding `{p.tf32_round}`",
        f"- {len(p.classes)} call classes, {len(shapes)} recorded shapes; {len(ok)} reproduced "
        f"on every fit recording by their recipe (source `recorded` for later calls), by "
        f"where the recipe came from: {by}",
    ]


def heldout_tables(doc: dict) -> list[str]:
    t = doc["total"]
    which = ", ".join(doc["parts"]) if doc.get("parts") else "every part"
    lines = [f"Held-out calls of: {which} ({doc.get('seconds', '?')} s on this CPU).", ""]
    srcs = ", ".join(
        f"{s} {v['calls_reproduced']} of {v['calls']}" for s, v in t["by_source"].items()
    )
    lines += [
        f"**Held out: {t['calls_reproduced']} of {t['calls']} calls "
        f"({_pct(t['calls_reproduced'], t['calls'])}) reproduced bit for bit**, "
        f"{t['elements_reproduced']} of {t['elements']} elements; by decision source: {srcs}.",
        "",
        "| class | calls | reproduced | % | recorded | rule | default |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in doc["classes"]:
        bs = c["by_source"]
        cells = [
            f"{bs[s]['calls_reproduced']}/{bs[s]['calls']}" if s in bs else "-"
            for s in ("recorded", "rule", "default")
        ]
        lines.append(
            f"| `{c['class']}` | {c['calls']} | {c['calls_reproduced']} | "
            f"{_pct(c['calls_reproduced'], c['calls'])} | " + " | ".join(cells) + " |"
        )
    return lines


def _m(x: int | None) -> str:
    return "never" if x is None else str(x)


def invariance(profiles: dict[str, Profile]) -> list[str]:
    lines = [
        "## Batch invariance against the recordings",
        "",
        f"Row 0 of `A[:M] @ B` for the M of the batch part (every M to 64, then 2^j - 1, 2^j, "
        f"2^j + 1 to 4096: 99 values) at each recorded (class, N, K), input seed of recording "
        f"seed {HELDOUT_SEEDS[0]} (held out: its inputs; the (N, K, M) shapes themselves are also "
        "in the fit seeds, so these figures test the recipes on new data at known shapes, "
        "not the rule between shapes). *Recorded*: the least M whose recorded row 0 "
        "differs from M = 1's; *recipe* and *row 0*: the same under the profile (its "
        "decided recipe, and its bits); *bits*: cases whose row 0 the profile reproduces "
        "bit for bit; *answer*: cases where the profile's 'row 0 equals M = 1's' is the "
        "recordings'.",
        "",
    ]
    got = {}
    for gpu, p in profiles.items():
        calls = recording(gpu, HELDOUT_SEEDS[0]).part("batch")
        t0 = time.monotonic()
        got[gpu] = series(p, calls)
        n = sum(len(s.ms) for s in got[gpu])
        bits = sum(s.bits_right for s in got[gpu])
        ans = sum(s.answers_right for s in got[gpu])
        lines += [
            f"### {p.name}: row 0 reproduced in {bits} of {n} (dtype, N, K, M) cases; "
            f"'changes from M = 1' answered right in {ans} of {n}",
            "",
            "| class | N | K | recorded | recipe | row 0 | bits | answer |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in got[gpu]:
            lines.append(
                f"| `{s.cls}` | {s.n} | {s.k} | {_m(s.recorded_change)} | "
                f"{_m(s.recipe_change)} | {_m(s.predicted_change)} | {s.bits_right}/"
                f"{len(s.ms)} | {s.answers_right}/{len(s.ms)} |"
            )
        lines += ["", f"({time.monotonic() - t0:.0f} s)", ""]
    if len(got) == 2:
        (ga, a), (gb, b) = got.items()
        pairs = across(a, b)
        n = sum(len(x.ms) for x in pairs)
        ok = sum(x.answers_right for x in pairs)
        lines += [
            f"### {ga.upper()} against {gb.upper()}: 'same bits on both GPUs' answered right "
            f"in {ok} of {n} cases",
            "",
            "| class | N | K | M where the recordings differ | answer |",
            "|---|---:|---:|---|---:|",
        ]
        for x in pairs:
            d = ", ".join(map(str, x.differ)) or "none"
            lines.append(f"| `{x.cls}` | {x.n} | {x.k} | {d} | {x.answers_right}/{len(x.ms)} |")
        lines.append("")
    return lines


HEAD = """# Library profiles: coverage, held-out figures, batch invariance

Written by `make profiles` (bench/make_profiles.py); profiles are described in
[docs/profiles.md](../docs/profiles.md). A library profile decides each call's recipe from
its class and shape alone: a recorded shape of its class whose recipe reproduced every fit
recording of it (source `recorded`), else the first rule of the decision tables copied in
from schedules/library (source `rule`), else the default (source `default`). Profiles are
built from the **fit** calls of the library recordings (seeds 0 and 1 without their
holdout parts); every figure below is on the calls **held out** from it (seeds 2, 3 and 4
and the holdout parts, hardware/library_fit.py; seeds 3 and 4 were recorded after every
other step here was written), unless it says otherwise.

## How to rerun each step

1. Record (on the GPU, minutes): `bench/gpu_record.sh` writes
   `results/hardware/<gpu>/library/seed{0,...,4}` (plan `extended`, torch 2.11.0+cu130,
   cuBLAS 13.1.0) and the extras (TF32 probe, cuBLASLt heuristic sweeps, packed by
   hardware/sweep_store.py).
2. Learn the tables (any CPU, about 40 minutes here): `make tables` (hardware/half_tree,
   library_tree, tf32_tree, epilogue_tree, sweep_bands, half_aligned) writes the learnt
   `schedules/library/*.toml` from the sweeps and the fit calls' heuristic fields.
3. Build (any CPU): `tcsmt profile build --from-library h200 --part grid --part llm --part
   unaligned --part ops --part batch` (and `h100`; `make profiles` runs both) writes
   `profiles/<gpu>-cublas-13.1.json` from those parts' fit calls (the random part's shapes
   do not recur) and the tables.
4. Check (any CPU): `tcsmt profile check h200 --heldout` (exit 0 only when every held-out
   call is reproduced); `--recordings results/hardware/h200/library/seed2` replays one
   recording folder.
5. Batch invariance: `tcsmt invariance --profile h200 --dtype bf16 --n 4096 --k 11008
   --m 1..4096`, `--against h100`; against the recordings: this file's last sections.
"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="make_profiles")
    ap.add_argument("--write", metavar="DIR", help="write DIR/profiles.md (else print)")
    ap.add_argument(
        "--part",
        dest="parts",
        action="append",
        default=[],
        help="check only the held-out calls of these recording parts (default: every part)",
    )
    args = ap.parse_args(argv)
    lines = [HEAD]
    profiles = {g: load_profile(f"{g}-cublas-{VERSION}") for g in GPUS}
    for p in profiles.values():
        lines += [f"## {p.name}", "", *coverage(p), ""]
        built = p.path.read_text() if p.path else ""
        doc = json.loads(built) if built else {}
        for k, v in doc.get("built_from", {}).items():
            lines.append(f"- built from ({k}): {v}")
        lines += ["", *heldout_tables(heldout(p, tuple(args.parts))), ""]
    lines += invariance(profiles)
    if EARLIER.is_file():
        lines += ["## Earlier profile", "", EARLIER.read_text().split("\n", 1)[1].strip(), ""]
    text = "\n".join(lines).rstrip() + "\n"
    if args.write:
        Path(args.write, "profiles.md").write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
