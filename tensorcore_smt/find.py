"""Answer a property on an architecture: every query of it, verified, with a summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .library import Property, QuerySpec
from .report import to_json as outcome_json
from .solve import Limits, Outcome, Verdict, answer
from .solvers.runner import Progress


@dataclass
class QueryAnswer:
    """One query of a property and its outcome."""

    spec: QuerySpec
    outcome: Outcome

    @property
    def answer(self) -> str:
        v = self.outcome.verdict
        return {Verdict.WITNESS: "sat", Verdict.UNSAT: "unsat"}.get(v, v.value)

    @property
    def as_expected(self) -> bool | None:
        """Whether the answer is the one the property expects (None: no expectation or
        no definite answer)."""
        if self.spec.expect is None or self.answer not in ("sat", "unsat"):
            return None
        return self.answer == self.spec.expect.value

    @property
    def conclusion(self) -> str:
        text = self.spec.meaning.get(self.answer, "")
        return text

    def to_json(self) -> dict:
        out = outcome_json(self.outcome, [])
        out.update(
            id=self.spec.id,
            answer=self.answer,
            expect=self.spec.expect.value if self.spec.expect else None,
            as_expected=self.as_expected,
            conclusion=self.conclusion,
        )
        return out


def find(
    prop: Property,
    arch: str,
    instr: str | None,
    limits: Limits,
    progress: Progress | None = None,
) -> list[QueryAnswer]:
    """Run every query of `prop` on `arch`; each answer re-checked or confirmed."""
    out = []
    for spec, q in prop.bind(arch, instr):
        lim = limits
        if spec.timeout and spec.timeout < limits.timeout:
            lim = Limits(
                limits.solver,
                spec.timeout,
                limits.jobs,
                limits.memory_mb,
                limits.confirm,
                limits.seed,
            )
        out.append(QueryAnswer(spec, answer(q, lim, progress)))
    return out


def vectors_of(prop: Property, arch: str, answers: list[QueryAnswer]):
    """A test-vector file with every verified witness, predicted by every variant.

    A non-monotone witness becomes two ordinary vectors, u and then u_2, whose notes tie
    them together: the hardware follows the witness when it returns both predictions."""
    from . import vectors

    witnesses = [a for a in answers if a.outcome.verdict == Verdict.WITNESS]
    if not witnesses:
        return None
    q0 = witnesses[0].outcome.query
    names: list[str] = []
    for a in answers:
        for v in a.outcome.query.variants:
            if v not in names:
                names.append(v)
    for v in prop.predicted_variants(arch, q0.instruction):
        if v not in names:
            names.append(v)
    vecs = []
    for a in witnesses:
        w, q = a.outcome.witness, a.outcome.query
        tag = f"{prop.name}/{a.spec.id}"
        if q.goal.one_variant:
            x = q.variants[0]
            notes = [
                f"{tag}: u, paired with the next vector u_2 >= u ({q.relation}); "
                f"{x} predicts d(u) > d(u_2)",
                f"{tag}: u_2, paired with the previous vector u; {x} predicts d(u_2) < d(u)",
            ]
        else:
            notes = [f"{tag}: {q.variants[0]} vs {q.variants[1]}"]
        for u, note in zip(q.input_sets(w.inputs), notes):
            vecs.append(
                vectors.Vector(
                    a=[u[f"a{i}"] for i in range(q.p.K)],
                    b=[u[f"b{i}"] for i in range(q.p.K)],
                    c=u["c"],
                    predicted={},
                    note=note,
                )
            )
    vf = vectors.VectorFile(
        arch=arch, instruction=q0.instruction, variants=names, vectors=vecs, property=prop.name
    )
    return vectors.predict(vf)


def save_vectors(prop: Property, arch: str, answers: list[QueryAnswer], path: Path) -> Path | None:
    from . import vectors

    vf = vectors_of(prop, arch, answers)
    if vf is None:
        return None
    vectors.save(vf, path)
    return path
