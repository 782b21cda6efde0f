"""Reports of query answers: text a person reads at a glance, and the same as JSON."""

from __future__ import annotations

import shlex
from fractions import Fraction

from ..formats import format_hex, value_of
from ..spec.presets import parse_variant
from .answers import (
    answer_json,
    answer_lines,
    decimal,
    describe,
    verdict_words,
)
from .query import Goal, Query
from .solve import Outcome


def exact_result(q: Query, inputs: dict[str, int]) -> Fraction | None:
    """c + sum a_k b_k in rational arithmetic (None if an input is not finite)."""
    p = q.p
    vals = {o.name: value_of(inputs[o.name], o.fmt) for o in q.operands}
    if any(isinstance(v, float) for v in vals.values()):
        return None
    return vals["c"] + sum(vals[f"a{i}"] * vals[f"b{i}"] for i in range(p.K))


def reproduce_commands(q: Query, inputs: dict[str, int]) -> list[str]:
    """`tcsmt simulate` lines that print the outputs for the inputs: one line with both
    variants, or (non-monotone) one line per input set, u then u_2."""
    p = q.p
    out = []
    for u in q.input_sets(inputs)[: 2 if q.goal.one_variant else 1]:
        v = q.vector_fields(u)
        parts = ["tcsmt", "simulate"]
        for x in q.variants:
            parts += ["--arch", x]
        parts += ["--instr", q.instruction]
        parts += ["--a", ",".join(format_hex(x, p.a_fmt) for x in v["a"])]
        parts += ["--b", ",".join(format_hex(x, p.b_fmt) for x in v["b"])]
        parts += ["--c", format_hex(v["c"], p.c_fmt)]
        for s in ("sa", "sb"):
            if v[s] is not None:
                parts += [f"--{s}", ",".join(format_hex(x, p.scale_fmt) for x in v[s])]
        if v["metadata"] is not None:
            parts += ["--meta", ",".join(map(str, v["metadata"]))]
        out.append(shlex.join(parts))
    return out


def reproduce_command(q: Query, inputs: dict[str, int]) -> str:
    """One shell line that prints the outputs for the inputs (`&&` between the two
    evaluations of a non-monotone witness)."""
    return " && ".join(reproduce_commands(q, inputs))


def instruction_run(q: Query) -> str:
    """The instruction X runs, as reports name it: the catalogue name, with the changes of
    a variant that gives it other formats or another K (Variant.run_name)."""
    return parse_variant(q.variants[0]).run_name(q.instruction)


def question(q: Query) -> str:
    if q.goal == Goal.NON_MONOTONE:
        grown = _words([g for g in "abc" if g in q.grows])
        fixed = _words([g for g in "abc" if g not in q.grows])
        rest = f", with {fixed} unchanged," if fixed else ""
        return f"can raising {grown}{rest} lower the result of {q.variants[0]}?"
    x, y = q.variants
    if q.goal == Goal.COMPARE_ERRORS:
        return f"is {x} ever more accurate than {y}?"
    if q.goal == Goal.EQUIVALENT:
        return f"are {x} and {y} equal on every input?"
    return f"do {x} and {y} ever differ?"


def _words(items: list[str]) -> str:
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 2 else items)


def to_json(o: Outcome, files: list[str]) -> dict:
    """Everything the text report says, for scripts."""
    q = o.query
    if getattr(q, "level", None) == "gemm":
        from .gemm_report import to_json as gemm_json

        return gemm_json(o, files)
    p = q.p
    out: dict = {
        "question": question(q),
        "goal": q.goal.value,
        "instruction": q.instruction,
        "formats": {
            "a": p.a_fmt.spec.name,
            "b": p.b_fmt.spec.name,
            "c": p.c_fmt.spec.name,
            "d": p.d_fmt.spec.name,
        },
        "variants": list(q.variants),
        "constraints": [c.describe() for c in q.constraints],
        **({"meta": list(q.meta)} if q.meta is not None else {}),
        **({"relation": q.relation, "grows": q.grows} if q.goal.one_variant else {}),
        **answer_json(o, files),
    }
    if o.witness:
        w = o.witness
        out["witness"] = {
            "inputs": {
                op.name: {
                    "hex": format_hex(w.inputs[op.name], op.fmt),
                    "value": decimal(w.inputs[op.name], op.fmt),
                }
                for op in q.operands
            },
            "outputs": {
                v: {"hex": format_hex(d, p.d_fmt), "value": decimal(d, p.d_fmt)}
                for v, d in zip(q.output_labels, w.outputs)
            },
            "rechecked_on_concrete_model": True,
            "reproduces": w.reproduces,
            "reproduce": reproduce_command(q, w.inputs),
        }
        if q.goal == Goal.COMPARE_ERRORS:
            out["witness"]["errors"] = _errors(o)
        if q.goal.one_variant:
            out["witness"]["input_sets"] = {
                name: {
                    "a": [format_hex(s[f"a{i}"], p.a_fmt) for i in range(p.K)],
                    "b": [format_hex(s[f"b{i}"], p.b_fmt) for i in range(p.K)],
                    "c": format_hex(s["c"], p.c_fmt),
                    "d": format_hex(d, p.d_fmt),
                }
                for name, s, d in zip(("u", "u_2"), q.input_sets(w.inputs), w.outputs)
            }
    return out


def _errors(o: Outcome) -> dict[str, str]:
    q, w = o.query, o.witness
    ref = exact_result(q, w.inputs)
    if ref is None:
        return {}
    out = {"exact": f"{float(ref)!r}"}
    for v, d in zip(q.variants, w.outputs):
        out[v] = f"{float(abs(value_of(d, q.p.d_fmt) - ref))!r}"
    return out


def to_text(o: Outcome, files: list[str]) -> str:
    """The report a person reads: question, answer, witness, files, reproduce line."""
    q = o.query
    if getattr(q, "level", None) == "gemm":
        from .gemm_report import to_text as gemm_text

        return gemm_text(o, files)
    p = q.p
    lines = [
        f"question:    {question(q)}",
        f"instruction: {instruction_run(q)} ({p.a_fmt.spec.name} x {p.b_fmt.spec.name} + "
        f"{p.c_fmt.spec.name} -> {p.d_fmt.spec.name}, K={p.K})",
    ]
    if q.goal.one_variant:
        lines += [f"variant:     X = {q.variants[0]}", f"relation:    {q.relation}"]
    else:
        lines += [f"variants:    X = {q.variants[0]}", f"             Y = {q.variants[1]}"]
    if q.constraints:
        lines.append("constraints: " + " ".join(c.describe() for c in q.constraints))
    lines += answer_lines(o)
    if o.witness:
        w = o.witness
        lines.append("witness:")
        for op in q.operands:
            lines.append(f"  {op.name:4s} = {describe(w.inputs[op.name], op.fmt)}")
        if q.goal.one_variant:
            for tag, d in zip(("X(u)  ", "X(u_2)"), w.outputs):
                lines.append(f"  {tag}: d = {describe(d, p.d_fmt)}   [{q.variants[0]}]")
        else:
            for tag, v, d in zip("XY", q.variants, w.outputs):
                lines.append(f"  {tag}: d = {describe(d, p.d_fmt)}   [{v}]")
        if q.goal == Goal.COMPARE_ERRORS:
            errs = _errors(o)
            if errs:
                lines.append(f"  exact c + sum a*b = {errs['exact']}")
                for tag, v in zip("XY", q.variants):
                    lines.append(f"  |{tag} - exact| = {errs[v]}")
        if w.reproduces:
            lines.append(
                "  re-checked on the concrete model: the goal holds, outputs as the solver said"
            )
        else:
            lines.append(
                "  NOT reproduced on the concrete model: this is a bug in tcsmt, please report it"
            )
        for i, cmd in enumerate(reproduce_commands(q, w.inputs)):
            lines.append(f"{'reproduce:' if i == 0 else '':13s}{cmd}")
    lines.append(f"verdict:     {verdict_words(o)} ({o.seconds:.2f} s)")
    for f in files:
        lines.append(f"wrote:       {f}")
    return "\n".join(lines)
