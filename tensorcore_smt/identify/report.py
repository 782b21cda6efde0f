"""What `identify` and `fit` tell a person and a script: the JSON document and the text
report made from a `loop.Result`.

JSON (``--json``): ``survivors`` (every hypothesis that reproduces every answered vector,
with its class), ``best`` (when none does: the closest, with their match counts),
``oracle_vectors``, ``oracle_calls``, ``steps`` (each oracle call: why, the vectors sent
with the oracle's d, and every hypothesis it refuted with both outputs), ``proofs`` (the
solver questions between survivors), ``next_probe`` and ``seconds``.

The text report puts the identified parameters beside the preset's, says which vector
decided each parameter the preset was measured against, which parameters the answers
cannot reveal and why (a solver proof, or a structural reason such as one group holding
every product), and lists every kill with the vector and both outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..api import simulate_params
from ..formats import format_hex
from ..model.params import ModelParams
from ..smt.solve import Verdict
from .loop import (
    PROVED,
    Kill,
    Proof,
    Result,
    Vector,
    argued_only,
    hypothesis_row_counts,
    member_status,
    standing,
    structural_reason,
)
from .pool import make_pool
from .space import Hypothesis, Space, value_text


def varied_names(space: Space, family: str | None = None) -> list[str]:
    """The parameters the space varies or fixes (in `family` only, when given),
    `algorithm` first."""
    names: list[str] = ["algorithm"]
    for f in space.families:
        if family is not None and f.name != family:
            continue
        for k, _ in f.fixed:
            if k not in names:
                names.append(k)
        for k, _ in space.dims(f.name):
            if k not in names:
                names.append(k)
    return names


def params_json(space: Space, h: Hypothesis) -> dict[str, str]:
    """The values in hypothesis `h` of the parameters its family varies (as variant
    expressions write them)."""
    p = space.params(h)
    return {k: value_text(getattr(p, k)) for k in varied_names(space, h.family)}


def is_preset(space: Space, h: Hypothesis) -> bool:
    """Whether `h` is the preset instruction's own model."""
    return space.params(h) == space.base


def hypothesis_json(res: Result, h: Hypothesis, cls: int | None = None) -> dict[str, Any]:
    sp = res.space
    out: dict[str, Any] = {
        "variant": sp.expr(h),
        "params": params_json(sp, h),
        "matches": hypothesis_row_counts(res, h),
        "is_preset": is_preset(sp, h),
    }
    if cls is not None:
        out["class"] = cls
    return out


def vector_json(res: Result, v: Vector) -> dict[str, Any]:
    p = res.space.base
    return {
        "a": [format_hex(x, p.a_fmt) for x in v.a],
        "b": [format_hex(x, p.b_fmt) for x in v.b],
        "c": format_hex(v.c, p.c_fmt),
        "d": format_hex(v.d, p.d_fmt),
        "kind": v.kind,
    }


def kill_json(res: Result, k: Kill) -> dict[str, Any]:
    fmt = res.space.base.d_fmt
    return {
        "hypothesis": k.hypothesis,
        "vector": k.vector,
        "predicted": format_hex(k.predicted, fmt),
        "oracle": format_hex(k.oracle, fmt),
    }


def proof_json(res: Result, pr: Proof) -> dict[str, Any]:
    arch = res.space.variant or res.space.arch
    return {
        "a": pr.a.expr(arch),
        "b": pr.b.expr(arch),
        "verdict": pr.verdict.value,
        "solvers": pr.solvers,
        "by_construction": pr.by_construction,
        "seconds": round(pr.seconds, 3),
        "note": pr.note,
        "vector": pr.vector,
    }


def to_json(res: Result) -> dict[str, Any]:
    """The `--json` document of `identify` (and, with `rows` added, of `fit`)."""
    sp = res.space
    status = member_status(res)
    survivors = [
        dict(hypothesis_json(res, h, i), standing=status.get(h, "first of its class"))
        for i, c in enumerate(res.classes)
        for h in c
    ]
    steps = []
    for st in res.steps:
        steps.append(
            {
                "kind": st.kind,
                "why": st.why,
                "vectors": [dict(vector_json(res, res.vectors[i]), index=i) for i in st.vectors],
                "killed": [kill_json(res, k) for k in st.killed],
                "survivors": st.survivors,
                "seconds": round(st.seconds, 3),
            }
        )
    return {
        "arch": sp.arch,
        "instr": sp.instr,
        "space": sp.name,
        "families_left_out": [{"family": f, "why": why} for f, why in sp.left_out],
        "oracle": res.oracle,
        "survivors": survivors,
        "classes": len(res.classes),
        "standing": res.standing or (standing(res) if res.classes else None),
        "best": [dict(hypothesis_json(res, h), matches=m) for h, m in res.best],
        "oracle_vectors": res.oracle_vectors,
        "oracle_calls": res.oracle_calls,
        "steps": steps,
        "proofs": [proof_json(res, pr) for pr in res.proofs],
        "next_probe": res.next_probe,
        "stopped": res.stopped,
        "interrupted": res.interrupted,
        "error": res.error,
        "seconds": round(res.seconds, 3),
    }


# --- the text report -----------------------------------------------------------------


def refutation(res: Result, h: Hypothesis) -> tuple[int, int, int] | None:
    """(vector, h's prediction, oracle's d) of the first answered vector `h`
    mispredicts; None when it reproduces every one. Read off its predictions on the
    answered rows (what the search ran it on), not on the whole pool."""
    ev = res.evidence
    if ev is None or any(v.row not in ev.index for v in res.vectors):
        pred = res.evaluator.predict(h)
        at = None
    else:
        pred = res.evaluator.answered(h, ev)
        at = {r: i for i, r in enumerate(ev.index)}
    if pred is None:
        return None
    for pos, v in enumerate(res.vectors):
        got = int(pred[v.row if at is None else at[v.row]])
        if got != v.d:
            return pos, got, v.d
    return None


def decisions(res: Result, rep: Hypothesis) -> list[tuple[str, Any, list[tuple[str, str]]]]:
    """Per parameter of `rep`'s family: its value and, for each other value of the space,
    the vector that refuted it (or why nothing did)."""
    sp = res.space
    fam = sp.family(rep.family)
    cur = {k: v for k, v in rep.overrides if k not in dict(fam.fixed)}
    fmt = sp.base.d_fmt
    survivors = set(res.survivors)
    out = []
    for name, values in sp.dims(rep.family):
        mine = rep.value(name, sp.base)
        notes: list[tuple[str, str]] = []
        for v in values:
            if v == mine:
                continue
            h = sp.make(rep.family, {**cur, name: v})
            if h == rep:
                notes.append((value_text(v), "cannot act here (the same model)"))
                continue
            r = refutation(res, h)
            if r is None and res.evaluator.predict(h) is None:
                fail = res.evaluator.failed.get(h, "")
                notes.append((value_text(v), f"not a model here: {fail.partition(': ')[2]}"))
                continue
            if r is None:
                why = (
                    f"survives: {equality_note(res, rep, h)}"
                    if h in survivors
                    else "not refuted by the answers"
                )
                notes.append((value_text(v), why))
            else:
                pos, got, want = r
                notes.append(
                    (
                        value_text(v),
                        f"refuted by v{pos} (predicts {format_hex(got, fmt)}, "
                        f"oracle {format_hex(want, fmt)})",
                    )
                )
        out.append((name, mine, notes))
    return out


def equality_note(res: Result, rep: Hypothesis, h: Hypothesis) -> str:
    """Why `h` stays in `rep`'s class: a proof, a structural reason, or an open question."""
    pr = res.proof_between(rep, h)
    why = structural_reason(res.space, rep, h)
    if pr is None and not why and member_status(res).get(h) == PROVED:
        return "proved equal through the proofs between other members of the class"
    if pr is None:
        diff = res.space.differences(rep, h)
        if len(diff) > 1 and not why:
            parts = ", ".join(f"{k}={value_text(v)}" for k, _, v in diff)
            return (
                f"combines changes ({parts}) that each stay in the class on their own; "
                "not compared as a whole by a solver"
            )
        return why or "no answered vector tells them apart; not compared by a solver"
    if pr.by_construction:
        return why or "equal by construction: both build the same term"
    if argued_only(pr):
        head = (
            ""
            if pr.note.startswith("equal by a stated argument")
            else ("equal by a stated argument, no solver confirmed it: ")
        )
        return head + pr.note + (f"; {why}" if why else "")
    if pr.verdict.unsat:
        who = " and ".join(pr.solvers) or "a solver"
        extra = f"; {pr.note}" if pr.note else ""
        return f"proved equal on every input ({who}, {pr.seconds:.1f} s{extra})" + (
            f"; {why}" if why else ""
        )
    if pr.verdict == Verdict.UNKNOWN:
        return (
            why
            or f"undecided: no solver answered within the time limit ({pr.seconds:.1f} s); "
            "no pool row splits them"
        )
    return f"{pr.verdict.value}: {pr.note}"


def to_text(res: Result) -> str:
    """The report a person reads (see the module docstring)."""
    sp = res.space
    arch = sp.variant or sp.arch
    fmt = sp.base.d_fmt
    what = (
        f"fit {res.oracle.removeprefix('file:')} ({res.rows_read} rows)"
        if res.rows_read
        else f"identify (oracle {res.oracle})"
    )
    lines = [
        f"{what}: {arch} {sp.instr}, space {sp.name}",
        f"{res.stopped}: "
        + (
            f"{len(res.vectors)} distinct rows"
            if res.rows_read
            else f"{res.oracle_vectors} oracle vectors in {res.oracle_calls} calls"
        )
        + f", {res.seconds:.1f} s",
    ]
    for fam, why in sp.left_out:
        lines.append(f"left out:   family {fam}, which cannot run on this instruction: {why}")
    if res.error:
        lines.append(f"error: {res.error} (the steps before it are kept below)")
    lines += [f"note: {n}" for n in res.notes]
    if res.classes:
        rep = res.classes[0][0]
        n = len(res.survivors)
        lines += [
            "",
            f"{n} hypothes{'is' if n == 1 else 'es'} reproduce every answer, "
            f"in {len(res.classes)} class{'' if len(res.classes) == 1 else 'es'}:",
        ]
        for i, c in enumerate(res.classes):
            for j, h in enumerate(c):
                tag = " (the preset)" if is_preset(sp, h) else ""
                if j == 0:
                    lines.append(f"  class {i + 1}: {h.expr(arch)}{tag}")
                else:
                    lines.append(f"           {h.expr(arch)}{tag}: {equality_note(res, c[0], h)}")
        lines += ["", f"parameters of {rep.expr(arch)} beside the preset's:"]
        pb = sp.params(rep)
        for name in varied_names(sp, rep.family):
            mine, base = value_text(getattr(pb, name)), value_text(getattr(sp.base, name))
            others = sorted({value_text(getattr(sp.params(h), name)) for h in res.survivors})
            alt = f"   (the answers allow: {', '.join(others)})" if len(others) > 1 else ""
            mark = "" if mine == base else "   <- differs from the preset"
            lines.append(f"  {name:18s} {mine:14s} preset {base}{mark}{alt}")
        lines += ["", "what decided each parameter (the other values of the space):"]
        for name, mine, notes in decisions(res, rep):
            lines.append(f"  {name} = {value_text(mine)}")
            for v, why in notes:
                lines.append(f"      {name}={v}: {why}")
        for f in sp.families:
            if f.name == rep.family:
                continue
            r = refutation(res, sp.seed(f.name))
            why = (
                "not refuted"
                if r is None
                else f"refuted by v{r[0]} (predicts {format_hex(r[1], fmt)}, "
                f"oracle {format_hex(r[2], fmt)})"
            )
            lines.append(f"  family {f.name} (its preset-like seed): {why}")
    if res.best:
        lines += ["", "no hypothesis reproduces every answer; the closest:"]
        for h, m in res.best:
            lines.append(f"  {h.expr(arch)}: {m} of {len(res.vectors)} vectors")
    if res.next_probe:
        np_ = res.next_probe
        lines += [
            "",
            f"next probe ({np_['source']}): a={','.join(np_['a'])} b={','.join(np_['b'])} "
            f"c={np_['c']}",
        ]
        for k, v in np_["predicted"].items():
            lines.append(f"  {k} predicts {v}")
    lines += ["", "steps (every kill with its vector and both outputs):"]
    for i, st in enumerate(res.steps):
        lines.append(
            f"  {i + 1}. {st.kind}: {st.why}; {len(st.vectors)} vectors, "
            f"{len(st.killed)} killed, {st.survivors} left ({st.seconds:.2f} s)"
        )
        for pos in st.vectors:
            v = res.vectors[pos]
            p = sp.base
            lines.append(
                f"     v{pos} [{v.kind}] a={','.join(format_hex(x, p.a_fmt) for x in v.a)} "
                f"b={','.join(format_hex(x, p.b_fmt) for x in v.b)} c={format_hex(v.c, p.c_fmt)}"
                f" -> d={format_hex(v.d, fmt)}"
            )
        for k in st.killed:
            lines.append(
                f"     killed {k.hypothesis}: v{k.vector} predicts "
                f"{format_hex(k.predicted, fmt)}, the oracle gave {format_hex(k.oracle, fmt)}"
            )
    return "\n".join(lines)


def recovered(res: Result, hidden: ModelParams, rows: int = 65536, seed: int = 99) -> bool:
    """Whether `identify` recovered a known hidden model: one class is left and every
    member of it is the hidden model itself or predicts the hidden model's bits on every
    row of a fresh pool (a model the space writes another way)."""
    if len(res.classes) != 1:
        return False
    sp = res.space
    others = [p for p in map(sp.params, res.classes[0]) if p != hidden]
    if not others:
        return True
    pool = make_pool(sp.base, rows, seed)
    want = simulate_params(hidden, pool.a, pool.b, pool.c)
    return all(np.array_equal(want, simulate_params(p, pool.a, pool.b, pool.c)) for p in others)
