"""Build a library profile (format 2, gemm/library_profile.py) of one GPU from its library
recordings (results/hardware/<gpu>/library, the fit calls of library_fit.py only) and the
decision tables of schedules/library.

The profile holds, self-contained: the rules of every table that apply on the GPU (a
table's rules without `gpu`, and those naming it), the TF32 operand rounding the GPU's
TF32 probe shows (extras/tf32_probe_n64_*.npy, gemm/tf32_probe.py), and per recorded call
class every recorded (M, N, K) with the recipe the profile decides for it without the
recordings (a table rule, else the default: gemm/profile_call.py, the decision every user
call takes), replayed on every fit recording of that shape (RecordedCall.model). Where
that recipe misses an element, the default is tried too (the rule's recipe when the
decision was the default is the same); the first recipe that reproduces every recording
of the shape is kept, else the decided one with its counts, a shape "recorded, not
reproduced" that later calls decide by the rules again.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..gemm.library_profile import class_key, for_gpu, table_doc
from ..gemm.library_rules import Table, tables
from ..gemm.profile_call import decide, library_default
from ..gemm.profiles import LIBRARY_SCHEMA, Profile, parse_profile
from .library_fit import FIT_SEEDS, HELDOUT_SEEDS, fit_calls, recording, recording_dir
from .library_read import RecordedCall
from .profile_build import class_head, profile_head


def cublas_version(build: Any) -> str:
    """cuBLAS's version `MAJOR.MINOR` from its build number (130100 -> 13.1)."""
    try:
        v = int(build)
    except (TypeError, ValueError):
        raise UserError(f"cuBLAS version {build!r} in the manifest is not a number") from None
    return f"{v // 10000}.{(v % 10000) // 100}"


def tf32_round(gpu: str) -> tuple[str | None, str]:
    """(operand_round, why) from the GPU's recorded TF32 probe (None when not recorded or
    when it does not single out one rounding)."""
    from ..gemm.schedule import OperandRound
    from ..gemm.tf32_probe import decide as probe_decide

    extras = recording_dir(gpu, 0).parent / "extras"
    a, b = extras / "tf32_probe_n64_a.npy", extras / "tf32_probe_n64_b.npy"
    if not (a.is_file() and b.is_file()):
        return None, "no TF32 probe recorded"
    verdict = probe_decide((np.load(a).view(np.uint32), np.load(b).view(np.uint32)))
    modes = [m for m in verdict["agrees_with"] if m in {o.value for o in OperandRound}]
    why = f"TF32 probe ({extras.name}/tf32_probe_n64_*.npy) agrees with {verdict['agrees_with']}"
    return (modes[0] if len(modes) == 1 else None), why


def _skeleton(gpu: str, among: tuple[Table, ...], round_: str | None) -> dict[str, Any]:
    mf = recording(gpu, FIT_SEEDS[0]).manifest
    env = mf.get("environment", {})
    version = cublas_version(env.get("cublas"))
    return {
        **profile_head(LIBRARY_SCHEMA, gpu, version, env),
        "tf32_round": round_,
        "tables": [table_doc(t) for t in among],
        "classes": [],
    }


def _replay(calls: list[RecordedCall], recipe: str, instr: str | None) -> tuple[int, int]:
    """(elements, elements reproduced) of `recipe` over the calls' kept elements."""
    el = rep = 0
    for c in calls:
        assert c.d is not None
        got = c.model(recipe, instr)
        el += c.d.size
        rep += int(np.count_nonzero(got == c.d))
    return el, rep


def build_library_profile(
    gpu: str,
    among: Iterable[Table] | None = None,
    calls: Iterable[RecordedCall] | None = None,
    classes: str = "*",
    progress: Callable[[str], None] | None = None,
    parts: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The profile document of `gpu` (see the module docstring); `among`: the tables
    (default schedules/library), `calls`: the recorded calls to build from (default every
    fit call of the GPU: library_fit.fit_calls), `classes`: only class names matching
    this glob, `parts`: only calls of these recording parts (none: every part)."""
    pool = tuple(for_gpu(t, gpu) for t in (tables() if among is None else among))
    round_, round_why = tf32_round(gpu)
    doc = _skeleton(gpu, pool, round_)
    bare = parse_profile(doc, f"{doc['name']} (building)")
    groups: dict[str, dict[tuple[int, int, int], list[RecordedCall]]] = {}
    for c in fit_calls(gpu) if calls is None else calls:
        if c.holdout or c.d is None:
            raise UserError(
                f"{c.part} input-seed {c.seed}: held out or refused; build from fit calls"
            )
        if fnmatch.fnmatchcase(c.cls.name, classes) and (not parts or c.part in parts):
            groups.setdefault(c.cls.name, {}).setdefault((c.m, c.n, c.k), []).append(c)
    if not groups:
        raise UserError(f"{gpu}: no fit call of a class matching {classes!r}")
    say = progress or (lambda _s: None)
    for name in sorted(groups):
        key = class_key(name)
        shapes = []
        for (m, n, k), recs in groups[name].items():
            shapes.append(_shape(bare, key, name, m, n, k, recs))
            s = shapes[-1]
            say(f"{name:22s} {m}x{n}x{k}: {s['origin']} {s['reproduced']}/{s['elements']}")
        doc["classes"].append(
            {
                **class_head(name, key, None, "library"),
                "shapes": shapes,
                "held_out": [],
            }
        )
    doc["built_from"] = {
        "recordings": f"results/hardware/{gpu}/library",
        "calls": "fit calls: seeds "
        + ", ".join(map(str, FIT_SEEDS))
        + " without their holdout parts (tensorcore_smt/hardware/library_fit.py)"
        + (f"; parts {', '.join(parts)} only" if parts else "; every part")
        + (f"; classes {classes}" if classes != "*" else ""),
        "held_out": f"seeds {', '.join(map(str, HELDOUT_SEEDS))} and the holdout parts: "
        "tcsmt profile check "
        f"{doc['name']} --heldout",
        "tables": "schedules/library/*.toml: " + (", ".join(t.name for t in pool) or "none"),
        "tf32_round": round_why,
    }
    doc["notes"] = NOTES
    parse_profile(doc, doc["name"])  # what is written must load
    return doc


NOTES = [
    "Decision per call: a recorded shape of its class whose recipe reproduced every fit "
    "recording of it (source recorded); else the first table rule that decides the class "
    "and shape (source rule, naming table and rule); else the default (source default).",
    "addmm was recorded with alpha = 0.7, beta = 1.3 and a matrix C; addmm calls with "
    "other scalars or a bias take the same class's rules.",
]


def _shape(
    bare: Profile, key, name: str, m: int, n: int, k: int, recs: list[RecordedCall]
) -> dict[str, Any]:
    """One recorded shape: the first candidate reproducing all its recordings."""
    dec = decide(bare, key, m, n, k)
    origin = dec.reason.split(":")[0] if dec.source.value == "rule" else "default"
    cands = [(dec.recipe, dec.instr, origin)]
    if dec.source.value == "rule":
        cands.append((*library_default(bare, key), "default"))
    best = None
    for recipe, instr, orig in cands:
        el, rep = _replay(recs, recipe, instr)
        if best is None or rep > best[1]:
            best = (el, rep, recipe, instr, orig)
        if rep == el:
            break
    el, rep, recipe, instr, orig = best  # type: ignore[misc]
    tags = sorted({c.part for c in recs})
    out: dict[str, Any] = {"m": m, "n": n, "k": k, "recipe": recipe}
    if instr is not None:
        out["instr"] = instr
    out |= {
        "origin": orig,
        "recordings": tags,
        "calls": len(recs),
        "elements": el,
        "reproduced": rep,
    }
    return out


def write_profile(doc: dict, out: Path) -> None:
    """The profile as JSON, one shape a line (readable in a diff, small on disk)."""
    import json

    head = {k: v for k, v in doc.items() if k != "classes"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f" {json.dumps(k)}: {json.dumps(v)},")
    lines.append(' "classes": [')
    for i, c in enumerate(doc["classes"]):
        meta = {k: v for k, v in c.items() if k not in ("shapes", "held_out")}
        lines.append("  " + json.dumps(meta)[:-1] + ', "held_out": [], "shapes": [')
        rows = [f"   {json.dumps(s, separators=(',', ':'))}" for s in c["shapes"]]
        lines.append(",\n".join(rows))
        lines.append("  ]}" + ("," if i < len(doc["classes"]) - 1 else ""))
    lines += [" ]", "}"]
    Path(out).write_text("\n".join(lines) + "\n")


__all__ = ["build_library_profile", "cublas_version", "tf32_round", "write_profile"]
