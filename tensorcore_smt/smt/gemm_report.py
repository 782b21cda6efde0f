"""Reports of GEMM query answers: the question, the solvers' answers, the witness (the
nonzero positions of a row of A and a column of B, c) and both hypotheses' outputs,
as text and as JSON. The solver lines, verdict words and decimal renderings are those of
`smt.report`."""

from __future__ import annotations

from ..formats import format_hex
from .answers import answer_json, answer_lines, decimal, describe, verdict_words
from .gemm_query import GemmQuery
from .query import Goal
from .solve import Outcome


def question(q: GemmQuery) -> str:
    x, y = q.variants
    if q.goal == Goal.EQUIVALENT:
        return f"are {x} and {y} equal on every output element of a K={q.K} GEMM?"
    return f"do {x} and {y} ever differ on an output element of a K={q.K} GEMM?"


def nonzero_positions(q: GemmQuery, inputs: dict[str, int]) -> list[int]:
    """The k where a_k or b_k is not +0 (the rest of the witness is +0)."""
    return [k for k in range(q.K) if inputs[f"a{k}"] or inputs[f"b{k}"]]


def _head(q: GemmQuery) -> list[str]:
    f = q.formats
    lines = [
        f"question:    {question(q)}",
        f"instruction: {q.instruction} ({f['a'].spec.name} x {f['b'].spec.name}, k-block "
        f"{q.p.K}), K={q.K}, c {f['c'].spec.name} -> d "
        + " / ".join(dict.fromkeys(fd.spec.name for fd in q.d_formats)),
        f"hypotheses:  X = {q.variants[0]}",
        f"             Y = {q.variants[1]}",
    ]
    if q.constraints:
        shown = " ".join(c.describe() for c in q.constraints)
        lines.append("constraints: " + (shown if len(shown) < 200 else shown[:197] + "..."))
    return lines


def to_text(o: Outcome, files: list[str]) -> str:
    """The report a person reads."""
    q: GemmQuery = o.query
    f = q.formats
    lines = _head(q)
    lines += answer_lines(o)
    if o.witness:
        w = o.witness
        ks = nonzero_positions(q, w.inputs)
        rest = "; every other a_k, b_k is +0" if len(ks) < q.K else ""
        lines.append(
            f"witness:     (row of A, column of B; {len(ks)} of {q.K} positions set{rest})"
        )
        for k in ks:
            lines.append(
                f"  k={k:<5d} a = {describe(w.inputs[f'a{k}'], f['a'])}   "
                f"b = {describe(w.inputs[f'b{k}'], f['b'])}"
            )
        lines.append(f"  c       = {describe(w.inputs['c'], f['c'])}")
        for tag, v, d, fd in zip("XY", q.variants, w.outputs, q.d_formats):
            lines.append(f"  {tag}: d = {describe(d, fd)}   [{v}]")
        if w.reproduces:
            lines.append(
                "  re-checked on the concrete model and on the emulator (matmul): the "
                "outputs differ as the solver said"
            )
        else:
            lines.append(
                "  NOT reproduced on the concrete model or the emulator: this is a bug in "
                "tcsmt, please report it"
            )
    lines.append(f"verdict:     {verdict_words(o)} ({o.seconds:.2f} s)")
    for path in files:
        lines.append(f"wrote:       {path}")
    return "\n".join(lines)


def to_json(o: Outcome, files: list[str]) -> dict:
    """Everything the text report says, for scripts."""
    q: GemmQuery = o.query
    f = q.formats
    out: dict = {
        "level": "gemm",
        "question": question(q),
        "goal": q.goal.value,
        "instruction": q.instruction,
        "K": q.K,
        "formats": {k: v.spec.name for k, v in f.items()},
        "hypotheses": list(q.variants),
        "constraints": [c.describe() for c in q.constraints],
        **answer_json(o, files),
    }
    if o.witness:
        w = o.witness
        out["witness"] = {
            "a": [format_hex(w.inputs[f"a{k}"], f["a"]) for k in range(q.K)],
            "b": [format_hex(w.inputs[f"b{k}"], f["b"]) for k in range(q.K)],
            "c": format_hex(w.inputs["c"], f["c"]),
            "nonzero_k": nonzero_positions(q, w.inputs),
            "outputs": {
                v: {"hex": format_hex(d, fd), "value": decimal(d, fd)}
                for v, d, fd in zip(q.variants, w.outputs, q.d_formats)
            },
            "emulated": (
                {v: format_hex(d, fd) for v, d, fd in zip(q.variants, w.emulated, q.d_formats)}
                if w.emulated is not None
                else None
            ),
            "rechecked_on_concrete_model": True,
            "rechecked_on_emulator": w.emulated is not None,
            "reproduces": w.reproduces,
        }
    return out
