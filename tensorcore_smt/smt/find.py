"""Answer a property on an architecture: every query of it, verified, with a summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..solvers.result import Answer
from ..solvers.runner import Progress
from .gemm_solve import answer_query
from .library import Property, QuerySpec
from .report import to_json as outcome_json
from .solve import Limits, Outcome, Verdict


@dataclass
class QueryAnswer:
    """One query of a property and its outcome."""

    spec: QuerySpec
    outcome: Outcome

    @property
    def answer(self) -> str:
        v = self.outcome.verdict
        return "sat" if v == Verdict.WITNESS else "unsat" if v.unsat else v.value

    @property
    def as_expected(self) -> bool | None:
        """Whether the answer is the one the property expects (None: no expectation or
        no definite answer)."""
        v = self.outcome.verdict
        if self.spec.expect is None or not (v == Verdict.WITNESS or v.unsat):
            return None
        return (Answer.SAT if v == Verdict.WITNESS else Answer.UNSAT) == self.spec.expect

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


def _limits_for(spec: QuerySpec, limits: Limits) -> Limits:
    """The limits of one query: the property's own timeout when it is shorter."""
    if spec.timeout and spec.timeout < limits.timeout:
        return replace(limits, timeout=spec.timeout)
    return limits


def find(
    prop: Property,
    arch: str,
    instr: str | None,
    limits: Limits,
    progress: Progress | None = None,
    meta: Sequence[int] | None = None,
) -> list[QueryAnswer]:
    """Run every query of `prop` on `arch`; each answer re-checked or confirmed (`meta`:
    a sparse instruction's metadata)."""
    return list(find_iter(prop, arch, instr, limits, progress, meta))


# --- sweeps: one task per query, on a Dask cluster ------------------------------------


@dataclass(frozen=True)
class QueryTask:
    """One query of a sweep, named so that a worker can rebuild it: the property (by
    name, from the built-in library or `properties_dir`), the architecture, the
    instruction (None: the property's choice) and the query's id."""

    prop: str
    arch: str
    instr: str | None
    query_id: str
    limits: Limits
    properties_dir: str | None = None

    def describe(self) -> str:
        return f"{self.prop}/{self.query_id} on {self.arch}"


def query_tasks(
    prop: Property,
    arch: str,
    instr: str | None,
    limits: Limits,
    properties_dir: Path | None = None,
) -> list[QueryTask]:
    """The tasks of every query `prop` asks on `arch` (its `bind`, in order)."""
    pdir = str(properties_dir) if properties_dir else None
    return [
        QueryTask(prop.name, arch, instr, spec.id, limits, pdir)
        for spec, _ in prop.bind(arch, instr)
    ]


def run_query_task(task: QueryTask) -> QueryAnswer:
    """Answer one query of a sweep (the body of a Dask task): the solver portfolio,
    the witness re-check and the unsat confirmation, exactly as `find` does."""
    from .library import get

    pdir = Path(task.properties_dir) if task.properties_dir else None
    prop = get(task.prop, pdir)
    for spec, q in prop.bind(task.arch, task.instr):
        if spec.id == task.query_id:
            return QueryAnswer(spec, answer_query(q, _limits_for(spec, task.limits)))
    raise ValueError(f"{task.describe()}: no such query")


def sweep(
    client,
    tasks: list[QueryTask],
    progress: bool = False,
):
    """Run `tasks` on the Dask client; yield (task, QueryAnswer or TaskFailure) as each
    finishes (tensorcore_smt.validation.distributed.run_tasks: failures reported, Ctrl-C cancels)."""
    from ..validation.distributed import run_tasks

    for i, r in run_tasks(
        client,
        run_query_task,
        tasks,
        describe=lambda t: t.describe(),
        label="queries",
        progress=progress,
    ):
        yield tasks[i], r


def vectors_of(prop: Property, arch: str, answers: list[QueryAnswer]):
    """A test-vector file with every verified witness, predicted by every variant.

    A non-monotone witness becomes two ordinary vectors, u and then u_2, whose notes tie
    them together: the hardware follows the witness when it returns both predictions."""
    from ..validation import vectors

    witnesses = [a for a in answers if a.outcome.verdict == Verdict.WITNESS]
    if not witnesses:
        return None
    q0 = witnesses[0].outcome.query
    if getattr(q0, "level", None) == "gemm":
        return gemm_vectors_of(prop, arch, witnesses)
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
            vecs.append(vectors.Vector(**q.vector_fields(u), predicted={}, note=note))
    vf = vectors.VectorFile(
        arch=arch, instruction=q0.instruction, variants=names, vectors=vecs, property=prop.name
    )
    return vectors.predict(vf)


def gemm_vectors_of(prop: Property, arch: str, witnesses: list[QueryAnswer]):
    """A GEMM vector file with every verified witness of a GEMM property, predicted by
    every hypothesis its queries compare."""
    from ..validation import gemm_vectors as gv

    q0 = witnesses[0].outcome.query
    names: list[str] = []
    for a in witnesses:
        for v in a.outcome.query.variants:
            if v not in names:
                names.append(v)
    vecs = []
    for a in witnesses:
        w, q = a.outcome.witness, a.outcome.query
        vecs.append(
            gv.GemmVector(
                a=[w.inputs[f"a{k}"] for k in range(q.K)],
                b=[w.inputs[f"b{k}"] for k in range(q.K)],
                c=w.inputs["c"],
                predicted={},
                note=f"{prop.name}/{a.spec.id}: {q.variants[0]} vs {q.variants[1]}",
            )
        )
    gf = gv.GemmVectorFile(arch, q0.instruction, q0.K, names, vecs, property=prop.name)
    return gv.predict(gf)


def save_vectors(prop: Property, arch: str, answers: list[QueryAnswer], path: Path) -> Path | None:
    from ..validation import gemm_vectors, vectors

    vf = vectors_of(prop, arch, answers)
    if vf is None:
        return None
    if isinstance(vf, gemm_vectors.GemmVectorFile):
        gemm_vectors.save(vf, path)
    else:
        vectors.save(vf, path)
    return path


def find_iter(
    prop: Property,
    arch: str,
    instr: str | None,
    limits: Limits,
    progress: Progress | None = None,
    meta: Sequence[int] | None = None,
):
    """`find`, one answer at a time (a caller interrupted between queries keeps those
    already answered)."""
    for spec, q in prop.bind(arch, instr, meta):
        yield QueryAnswer(spec, answer_query(q, _limits_for(spec, limits), progress))
