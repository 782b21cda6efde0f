"""Build a library profile (gemm/profiles.py) from a GPU's GEMM recordings and their fits
(DIR/gemm/<call>.npz, recordings.json, FIT.json of `tcsmt hardware fit-gemm`).

Per recorded call (one call class each), the recorded shapes are grouped by (M, N, K) in
recording order (a pair probe and a random recording of one shape are one shape) and
every `every`-th of them, from index `offset`, is held out: the profile is built from the
others only. A kept shape's recipe is its fit (FIT.json), or, where its recordings have
different fits, the first that reproduces all of them (where none fits: the closest
measured, marked by its counts); every kept recipe is replayed on its recordings for the
counts the profile states. The rule's weights are then fitted on the kept shapes
(gemm/profile_rule.py), and each held-out shape gets the recipe the rule predicts from
the kept shapes alone, replayed on its recordings: the held-out figure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..gemm.hypothesis import parse_gemm
from ..gemm.profile_rule import fit_weights, nearest
from ..gemm.profiles import SCHEMA, Rule, Shape
from .profile_replay import Recording, class_key, recordings, replay

LIBRARY = "cublas"
"""The library the torch recordings of NVIDIA GPUs exercise (cuBLAS / cuBLASLt)."""

DEFAULT = "hopper"
"""The default recipe: the architecture, as tc.emulate(ARCH) computes it."""


def _fits(gemm: Path) -> dict[str, dict[str, dict]]:
    path = gemm / "FIT.json"
    try:
        doc = json.loads(path.read_text())
        return {c["call"]: {s["shape"]: s for s in c["shapes"]} | {"": c} for c in doc["calls"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(
            f"{path}: no fits to build from ({e}); run tcsmt hardware fit-gemm"
        ) from None


def _meta(gemm: Path) -> dict:
    try:
        return json.loads((gemm / "recordings.json").read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{gemm / 'recordings.json'}: {e}") from None


def _kept_shape(rec: Recording, fits: dict, mnk, tags, instr, engine, most) -> dict:
    """A kept shape's entry: the recipe reproducing most of its recordings."""
    texts: list[str] = []
    for t in tags:
        f = fits.get(t, {})
        text = f.get("fit") or f.get("closest")
        if text and text not in texts:
            texts.append(text)
    if not texts:
        raise UserError(f"{rec.call.name} {tags[0]}: FIT.json has no fit for it")
    best: tuple[int, int, str] | None = None
    for text in texts:
        runs = [replay(rec, t, parse_gemm(text, instr), most, engine) for t in tags]
        el, rep = sum(r.elements for r in runs), sum(r.reproduced for r in runs)
        if best is None or rep > best[1]:
            best = (el, rep, text)
        if rep == el:
            break
    el, rep, text = best  # type: ignore[misc]
    m, n, k = mnk
    return {
        "m": m,
        "n": n,
        "k": k,
        "recipe": text,
        "recordings": tags,
        "elements": el,
        "reproduced": rep,
    }


def class_head(name: str, key: Any, instr: str | None, recording: str) -> dict[str, Any]:
    """The opening fields of a profile's call class: its name, the call key's parts
    (function, formats, flags, layout, epilogue), the instruction and the recording."""
    return {
        "name": name,
        "function": key.function.value,
        "a": key.a,
        "b": key.b,
        "out": key.out,
        "flags": key.flag_dict(),
        "layout": f"{key.layout[0].value},{key.layout[1].value}",
        "epilogue": key.epilogue.value,
        "instr": instr,
        "recording": recording,
    }


def profile_head(schema: int, gpu: str, version: str, env: dict) -> dict[str, Any]:
    """The opening fields of a profile: format, name, GPU, device, the library's versions
    (from a recording's environment: device, cublas, cuda, torch), arch and default."""
    return {
        "format": schema,
        "name": f"{gpu}-{LIBRARY}-{version}",
        "gpu": gpu,
        "device": str(env.get("device")),
        "library": {
            "name": LIBRARY,
            "version": version,
            "cublas_build": str(env.get("cublas")),
            "cuda": str(env.get("cuda")),
            "torch": str(env.get("torch")),
        },
        "arch": DEFAULT,
        "default": DEFAULT,
    }


def build_profile(
    folder: Path,
    every: int = 3,
    offset: int = 2,
    engine: str | None = "compiled",
    most: int | None = None,
    progress: Callable[[str], None] | None = None,
    calls: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The profile document built from FOLDER/gemm (see the module docstring); `most`:
    replay at most this many rows and columns of each kept D (None: all); `calls`: only
    these recorded calls (none: every call)."""
    if every < 2 or not 0 <= offset < every:
        raise UserError(
            f"hold out every {every} from {offset}: need every >= 2, 0 <= offset < every"
        )
    folder = Path(folder)
    gemm = folder / "gemm"
    if not gemm.is_dir():
        raise UserError(f"{folder}: no gemm/ folder of GEMM recordings")
    meta, fits = _meta(gemm), _fits(gemm)
    say = progress or (lambda _s: None)
    classes: list[dict] = []
    recs: dict[str, Recording] = {}
    held_tags: dict[str, list[tuple[tuple[int, int, int], list[str]]]] = {}
    for rec in recordings(gemm):
        if rec.call.name not in fits or (calls and rec.call.name not in calls):
            continue
        recs[rec.call.name] = rec
        f = fits[rec.call.name]
        instr = f[""]["instr"]
        key = class_key(rec.call)
        shapes, held = [], []
        for i, (mnk, tags) in enumerate(rec.by_shape().items()):
            if i % every == offset:
                held.append((mnk, tags))
                continue
            shapes.append(_kept_shape(rec, f, mnk, tags, instr, engine, most))
            say(
                f"{rec.call.name:18s} kept {mnk}: {shapes[-1]['recipe']} "
                f"{shapes[-1]['reproduced']}/{shapes[-1]['elements']}"
            )
        held_tags[rec.call.name] = held
        classes.append(
            {
                **class_head(rec.call.name, key, instr, rec.call.name),
                "shapes": shapes,
                "held_out": [],
            }
        )
    if not classes:
        raise UserError(f"{gemm}: no recorded call has a fit in FIT.json")
    as_shapes = {c["name"]: [_shape(s) for s in c["shapes"]] for c in classes}
    fitted = fit_weights([(c["a"], as_shapes[c["name"]]) for c in classes])
    rule = fitted.rule
    for c in classes:
        rec = recs[c["name"]]
        for mnk, tags in held_tags[c["name"]]:
            near = nearest(rule, c["a"], as_shapes[c["name"]], *mnk)
            recipe = near.recipe if near else DEFAULT
            runs = [replay(rec, t, parse_gemm(recipe, c["instr"]), most, engine) for t in tags]
            entry = {
                "m": mnk[0],
                "n": mnk[1],
                "k": mnk[2],
                "recipe": recipe,
                "from": list(near.mnk) if near else None,
                "recordings": tags,
                "elements": sum(r.elements for r in runs),
                "reproduced": sum(r.reproduced for r in runs),
            }
            c["held_out"].append(entry)
            say(f"{c['name']:18s} held {mnk}: {recipe} {entry['reproduced']}/{entry['elements']}")
    gpu = folder.name.lower()
    version = str(meta.get("cuda") or "0")
    return {
        **profile_head(SCHEMA, gpu, version, meta),
        "built_from": {
            "recordings": str(gemm),
            "fits": str(gemm / "FIT.json"),
            "held_out": f"every {every}th distinct (M, N, K) of each call, in recording order, "
            f"from index {offset}",
            "replayed": "every kept element"
            if most is None
            else f"at most {most}x{most} kept elements of each shape",
        },
        "rule": _rule_doc(rule),
        "notes": NOTES,
        "classes": classes,
    }


NOTES = [
    "tf32: the recorded operands were fp32 values already rounded to TF32 (round to "
    "nearest even on 10 fraction bits); what cuBLAS does to other fp32 operands is not "
    "in these recordings.",
    "Every recorded call is torch.matmul / torch.mm / torch._scaled_mm on row-major A "
    "(B row-major, _scaled_mm: column-major) with no bias, alpha or beta, M, N and K "
    "multiples of 16 from 16 to 4096: other functions, layouts, epilogues and unaligned "
    "shapes fall to the default.",
]


def _shape(s: dict) -> Shape:
    return Shape(
        s["m"], s["n"], s["k"], s["recipe"], tuple(s["recordings"]), s["elements"], s["reproduced"]
    )


def _rule_doc(rule: Rule) -> dict:
    return {
        "kind": "nearest-log2",
        "weights": {"k": rule.k, "mn": rule.mn, "aspect": rule.aspect},
        "align_bytes": rule.align_bytes,
        "text": rule.text,
    }


def write_profile(doc: dict, out: Path) -> None:
    """The profile as JSON (shapes one a line, readable in a diff)."""
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")


__all__ = ["build_profile", "write_profile"]
