"""`identify`: learn a unit's parameters by asking an oracle the questions that split the
surviving hypotheses (version-space learning with the solvers as the question setter).

1. A few pool rows covering every kind go to the oracle (one call).
2. A search (`search.search`) finds the hypotheses that reproduce every answer and their
   one-parameter neighbours that do too; these are grouped into classes by their
   predictions on the whole pool.
3. Several classes: the pool rows that split them best go to the oracle (one call).
4. One class with several members: for each member, the solvers are asked for an input
   on which it and the class's first member differ (`diff`); a witness (re-checked on
   the concrete model) goes to the oracle, an unsat confirmed by a second solver merges
   the two (the instruction cannot tell them apart), unknown is noted.
5. Before stopping with survivors, a confirmation round: one fresh row of every kind
   (from the larger pool, none asked before) goes to the oracle. The search only meets the
   hypotheses its climbs reach, so a class can reproduce every answer while the unit
   is a model far away in the space; fresh rows refute such a class, and the loop goes
   on (climbing from every family's seed again). A class that passes is confirmed.
6. Before stopping, the pairs a solver left unknown are asked once more with
   RETRY_FACTOR times the time limit of one question.
7. Stop when one class is left, confirmed, and every member is proved equal or
   undecided, when no hypothesis reproduces the answers, or when the budget of oracle
   vectors is spent. The stop line counts the survivors (`standing`): members proved
   equal to their class's first (a solver's unsat, possibly through other members, or the
   same model by construction), equal by a stated argument (`Space.stated_argument`,
   used once its extreme rows agree on the model; no solver confirmed it), undecided (a
   solver said unknown), never asked; "one class left" is said only when every member
   is proved or argued equal, and the result is *established* only then, the stop line
   saying how many rest on an argument.

Each step keeps its evidence: the vectors sent, the oracle's answers, and every
surviving hypothesis they refuted with the vector and both outputs. An oracle that fails
ends the loop with its error; what was learnt until then is kept in the result.
(About 560 lines: the steps above share the Identifier's state; the search, the pool, the
oracles and the report live in their own modules.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..smt.gemm_solve import answer_query
from ..smt.solve import Limits, Outcome, Verdict
from ..solvers.result import Answer
from ..validation.rows import KINDS
from .evaluate import Evaluator, Evidence
from .oracle import Oracle, OracleError
from .pool import TARGETED, Rows, first_rows, make_pool
from .search import RESTART_SECONDS, classes, search, splitting_rows, survives
from .space import Hypothesis, Space

FIRST_ROWS = 12
"""Vectors of the opening round (pool rows of every kind)."""
BATCH = 8
"""Most vectors per later oracle call."""
MAX_QUESTIONS = 16
"""Most solver questions between one class's first member and the others."""
DEEP_POOL = 32768
"""Rows of the second, larger pool searched before the solvers are asked."""
DEEP_FIRST = 2048
"""Rows of the larger pool searched first (then four times as many, until all)."""
RETRY_FACTOR = 4.0
"""Time limit of the second question on a pair a solver left unknown, in multiples of
the first's."""
CONFIRM_ROWS = len(TARGETED) + len(KINDS)
"""Fresh rows of the confirmation round before the loop stops with survivors: one of
every kind of the pool."""


@dataclass
class Kill:
    """A surviving hypothesis refuted by one answered vector."""

    hypothesis: str
    vector: int  # position in Result.vectors
    predicted: int
    oracle: int


@dataclass
class Step:
    """One oracle call (or the recorded rows of a file): why, what was sent, who died."""

    kind: str  # recorded | random | split | constructed | solver | confirm
    vectors: list[int]
    why: str
    killed: list[Kill] = field(default_factory=list)
    survivors: int = 0
    classes: int = 0
    seconds: float = 0.0


@dataclass
class Proof:
    """A solver's answer to `diff A B` for two survivors the pool could not split."""

    a: Hypothesis
    b: Hypothesis
    verdict: Verdict
    solvers: list[str]
    seconds: float
    by_construction: bool = False
    note: str = ""
    vector: int | None = None  # the witness, once answered


@dataclass
class Vector:
    """An answered vector: inputs, the oracle's d, where the row came from."""

    a: list[int]
    b: list[int]
    c: int
    d: int
    kind: str
    row: int  # index in the row table


@dataclass
class Result:
    """Everything `identify` (or `fit`) learnt: the report is made from it."""

    space: Space
    oracle: str
    vectors: list[Vector] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    classes: list[list[Hypothesis]] = field(default_factory=list)
    best: list[tuple[Hypothesis, int]] = field(default_factory=list)
    proofs: list[Proof] = field(default_factory=list)
    next_probe: dict | None = None
    stopped: str = ""
    error: str | None = None
    interrupted: bool = False  # Ctrl-C: the evidence so far is the result
    notes: list[str] = field(default_factory=list)
    rows_read: int = 0  # fit: rows in the file (repeated rows are answered vectors once)
    seconds: float = 0.0
    oracle_vectors: int = 0
    oracle_calls: int = 0
    evaluations: int = 0
    rows: Rows | None = None
    evaluator: Evaluator | None = None
    evidence: Evidence | None = None
    standing: dict | None = None  # see `standing`: the survivors counted by proof

    @property
    def survivors(self) -> list[Hypothesis]:
        return [h for c in self.classes for h in c]

    def proof_between(self, a: Hypothesis, b: Hypothesis) -> Proof | None:
        for p in self.proofs:
            if {p.a, p.b} == {a, b}:
                return p
        return None


Progress = Callable[[str], None]


class Identifier:
    """The state of one identification: rows, predictions, answers, steps."""

    def __init__(
        self,
        space: Space,
        oracle: Oracle,
        budget: int = 200,
        limits: Limits | None = None,
        pool_size: int = 1536,
        max_questions: int = MAX_QUESTIONS,
        seed: int = 0,
        progress: Progress | None = None,
        search_seconds: float = RESTART_SECONDS,
    ) -> None:
        self.space = space
        self.search_seconds = search_seconds
        self.oracle = oracle
        self.budget = budget
        self.limits = limits or Limits(timeout=60.0)
        self.seed = seed
        self.max_questions = max_questions
        self.progress = progress
        self.t0 = time.monotonic()
        self.rows = make_pool(space.base, pool_size, seed)
        self.ev = Evaluator(space, self.rows)
        self.evidence = Evidence(space.base.d_fmt)
        self.alive: list[Hypothesis] = [space.preset()]
        self.res = Result(space, oracle.spec, rows=self.rows, evaluator=self.ev)
        self.res.evidence = self.evidence
        self.deep: Rows | None = None
        self.deep_ev: Evaluator | None = None
        self.deep_order = np.zeros(0, dtype=np.int64)
        self.no_solver = ""
        self.confirmed: frozenset[Hypothesis] | None = None
        self.confirm_rounds = 0
        self.retried: set[frozenset[Hypothesis]] = set()
        self.seeds_due = True  # climb from every family's seed in the next search

    # --- the oracle ----------------------------------------------------------------

    def _record(
        self,
        idx: list[int],
        d: list[int],
        kind: str,
        why: str,
        t0: float,
        labels: list[str] | None = None,
    ) -> None:
        """Add answers, note which live hypotheses they refute, append the step.
        `labels`: where each answer comes from (a file's own line or vector number),
        for the notes; the row table's index otherwise."""
        start = len(self.res.vectors)
        fresh: list[tuple[int, int]] = []
        seen = dict(zip(self.evidence.index, self.evidence.d))
        names = labels or [f"row {i}" for i in idx]
        first: dict[int, str] = {}
        for i, x, name in zip(idx, d, names):
            if i in seen:
                if seen[i] != x:
                    earlier = first.get(i, "an earlier answer")
                    self.res.notes.append(
                        f"{name} repeats the inputs of {earlier} with a different d "
                        f"({x:#x}, not {seen[i]:#x}); the first answer is kept"
                    )
                continue
            seen[i] = x
            first[i] = name
            fresh.append((i, x))
        for i, x in fresh:
            self.res.vectors.append(
                Vector(
                    [int(v) for v in self.rows.a[i]],
                    [int(v) for v in self.rows.b[i]],
                    int(self.rows.c[i]),
                    int(x),
                    self.rows.kinds[i],
                    i,
                )
            )
        self.evidence.add([i for i, _ in fresh], [x for _, x in fresh])
        step = Step(kind, list(range(start, len(self.res.vectors))), why)
        for h in self.alive:
            pred = self.ev.predict(h)
            if pred is None:
                continue
            for pos in step.vectors:
                v = self.res.vectors[pos]
                if int(pred[v.row]) != v.d:
                    step.killed.append(Kill(self.space.expr(h), pos, int(pred[v.row]), v.d))
                    break
        self.alive = [h for h in self.alive if survives(self.ev, self.evidence, h)]
        step.survivors = len(self.alive)
        step.seconds = time.monotonic() - t0
        self.res.steps.append(step)

    def ask(self, idx: list[int], kind: str, why: str) -> bool:
        """Send rows to the oracle (within the budget); False when nothing could be sent."""
        room = self.budget - self.oracle.vectors
        idx = [i for i in dict.fromkeys(idx) if i not in self.evidence.index][: max(room, 0)]
        if not idx:
            return False
        t0 = time.monotonic()
        d = self.oracle.ask(self.rows.a[idx], self.rows.b[idx], self.rows.c[idx])
        self._record(idx, [int(x) for x in d], kind, why, t0)
        self._progress()
        return True

    def _progress(self, note: str = "") -> None:
        if self.progress:
            n_cls = len(self.res.classes)
            self.progress(
                f"{len(self.alive)} hypotheses left"
                + (f" ({n_cls} classes)" if n_cls else "")
                + f", {self.oracle.vectors} vectors spent, "
                f"{time.monotonic() - self.t0:.1f} s" + (f"; {note}" if note else "")
            )

    # --- the loop ------------------------------------------------------------------

    def start(self) -> None:
        """Recorded rows (file oracles), then the opening round."""
        rec = self.oracle.recorded()
        if rec:
            t0 = time.monotonic()
            idx = self.rows.add(
                [r[0] for r in rec], [r[1] for r in rec], [r[2] for r in rec], "recorded"
            )
            labels = getattr(self.oracle, "labels", None) or None
            self._record(idx, [r[3] for r in rec], "recorded", "rows given", t0, labels)
        if self.oracle.can_ask:
            pool = [i for i, k in enumerate(self.rows.kinds) if k != "recorded"]
            sub = Rows(self.rows.a[pool], self.rows.b[pool], self.rows.c[pool])
            sub.kinds = [self.rows.kinds[i] for i in pool]
            picks = [pool[i] for i in first_rows(sub, FIRST_ROWS, self.seed)]
            self.ask(picks, "random", "opening round: pool rows of every kind")

    def run(self) -> Result:
        """The loop of the module docstring; never raises for an oracle's failure."""
        try:
            self.start()
            self._loop()
        except OracleError as e:
            self.res.error = str(e)
            self.res.stopped = "the oracle failed"
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM): what was learnt so far is the result; the classes are
            # those of the last completed search.
            self.res.interrupted = True
            self.res.stopped = "interrupted: the evidence so far"
        self._finish()
        return self.res

    def _loop(self) -> None:
        while True:
            found = search(
                self.space,
                self.ev,
                self.evidence,
                self.alive,
                all_seeds=self.seeds_due or self.space.reclimb_seeds,
                restart_seconds=self.search_seconds,
            )
            self.seeds_due = False
            if not found.survivors:
                self.res.classes = []
                self.res.best = [
                    (h, self.evidence.score(self.ev.predict(h))[0]) for h in found.best
                ]
                self.alive = []
                self.res.stopped = "no hypothesis of the space reproduces every answer"
                return
            self.alive = list(found.survivors)
            cls = self._merge(classes(self.ev, found.survivors))
            self.res.classes = cls
            self._progress()
            if self.oracle.vectors >= self.budget and self.oracle.can_ask:
                self.res.stopped = f"budget of {self.budget} oracle vectors spent"
                return
            if len(cls) > 1:
                if not self.oracle.can_ask:
                    self.res.stopped = "recorded rows only: these classes remain"
                    return
                reps = [c[0] for c in cls]
                rows = splitting_rows(self.ev, reps, set(self.evidence.index), BATCH)
                if self.ask(rows, "split", f"pool rows splitting {len(cls)} classes"):
                    continue
            if self._prove(cls[0]):
                continue
            if self._confirm(cls):
                self.seeds_due = True  # fresh rows refuted a class: every seed again
                continue
            self.res.stopped = (
                "one class left" if len(cls) == 1 else "no row or solver splits the classes"
            )
            if self.confirmed == frozenset(self.alive):
                self.res.stopped += f", confirmed on {CONFIRM_ROWS} fresh rows"
            return

    def _merge(self, cls: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """Classes that an earlier solver proof showed equal are one class."""
        out: list[list[Hypothesis]] = []
        for c in cls:
            for o in out:
                p = self.res.proof_between(o[0], c[0])
                if p and p.verdict.unsat:
                    o.extend(c)
                    break
            else:
                out.append(list(c))
        return out

    def _deep_pool(self) -> Rows:
        """The larger pool (made once, on its own seed). Its evaluator sees the pool's
        rows in a fixed shuffled order, a prefix at a time (`_deep_grow`)."""
        if self.deep is None:
            self.deep = make_pool(self.space.base, DEEP_POOL, self.seed + 1000)
            order = np.random.default_rng(self.seed + 1001).permutation(len(self.deep))
            self.deep_order = order
            self.deep_ev = Evaluator(self.space, self._deep_prefix(0))
        return self.deep

    def _deep_prefix(self, n: int) -> Rows:
        """The first n rows of the larger pool in its shuffled order."""
        assert self.deep is not None
        o = self.deep_order[:n]
        return Rows(self.deep.a[o], self.deep.b[o], self.deep.c[o], [self.deep.kinds[i] for i in o])

    def _deep_grow(self, n: int) -> None:
        """Let the larger pool's evaluator see the first n rows (of the shuffled order);
        predictions already made on a shorter prefix are kept and extended."""
        assert self.deep_ev is not None
        if len(self.deep_ev.rows) < n:
            self.deep_ev.rows = self._deep_prefix(n)

    def _take_deep(self, picks: list[int]) -> list[int]:
        """Rows of the larger pool added to the row table; their indices there."""
        d = self._deep_pool()
        return [
            self.rows.add(d.a[i : i + 1], d.b[i : i + 1], d.c[i : i + 1], d.kinds[i])[0]
            for i in picks
        ]

    def _deep_split(self, members: list[Hypothesis]) -> list[int]:
        """Rows of a larger pool on which members of one class differ; they are added to
        the row table and their indices returned. Members a solver or a structural
        reason proved equal to the class's first stay out (no row splits them), so do
        members whose question goes to the instruction until a solver leaves it undecided
        (`_deep_due`), and the
        pool is searched a growing prefix at a time (DEEP_FIRST rows, then four times
        as many), so members that differ often cost a few thousand rows, not all."""
        rep = members[0]
        members = [rep] + [h for h in members[1:] if self._deep_due(rep, h)]
        if len(members) < 2:
            return []
        deep = self._deep_pool()
        n = min(DEEP_FIRST, len(deep))
        while True:
            self._deep_grow(n)
            live = [h for h in members if self.deep_ev.predict(h) is not None]
            picks = splitting_rows(self.deep_ev, live, set(), BATCH)
            if picks or n >= len(deep):
                return self._take_deep([int(self.deep_order[i]) for i in picks])
            n = min(4 * n, len(deep))

    def _deep_due(self, rep: Hypothesis, h: Hypothesis) -> bool:
        """Whether the larger pool is searched for rows splitting `h` from `rep`: not once
        they are proved equal, and for a pair asked on the instruction
        (`Space.instruction_only`: rows of K products cost far more than the
        instruction's question) only after a solver left that question undecided."""
        p = self.res.proof_between(rep, h)
        if p is not None:
            return not p.verdict.unsat
        return not self.space.instruction_only(rep, h)

    def _structured_split(self, members: list[Hypothesis], seed: int = 0) -> list[int]:
        """Rows built from the members' structure (`Space.structured_rows`: for GEMM
        schedules, partial sums that associate differently) that split them; they are
        added to the row table and their indices returned (none where the space builds
        no such rows or none splits the members)."""
        if len(members) < 2:
            return []
        built = self.space.structured_rows(members, self.seed + seed)
        if built is None:
            return []
        ev = Evaluator(self.space, built)
        live = [h for h in members if ev.predict(h) is not None]
        picks = splitting_rows(ev, live, set(), BATCH)
        return [
            self.rows.add(
                built.a[i : i + 1], built.b[i : i + 1], built.c[i : i + 1], built.kinds[i]
            )[0]
            for i in picks
        ]

    def _confirm(self, cls: list[list[Hypothesis]]) -> bool:
        """The confirmation round (step 5 of the module docstring): fresh rows of every
        kind from the larger pool go to the oracle, once for each set of survivors. True
        when the rows refuted some survivor (the loop goes on)."""
        alive = frozenset(h for c in cls for h in c)
        if not self.oracle.can_ask or not alive or alive == self.confirmed:
            return False
        self.confirmed = alive
        self.confirm_rounds += 1
        deep = self._deep_pool()
        picks = first_rows(deep, len(deep), self.seed + 7 + self.confirm_rounds)
        asked = {self.rows.key(i) for i in self.evidence.index}
        fresh: list[int] = []
        for i in picks:  # the first CONFIRM_ROWS never asked (keys made only as needed)
            if len(fresh) == CONFIRM_ROWS:
                break
            if deep.key(i) not in asked:
                fresh.append(i)
        before = len(self.res.steps)
        if not self.ask(
            self._take_deep(fresh),
            "confirm",
            f"confirmation: {CONFIRM_ROWS} fresh rows, one of every kind, before stopping",
        ):
            return False
        return len(self.res.steps) > before and bool(self.res.steps[-1].killed)

    def _prove(self, members: list[Hypothesis]) -> bool:
        """Constructed rows (`Space.structured_rows`) or rows of the larger pool that
        split the class, else solver questions between
        the class's first member and the others; what splits them goes to the oracle.
        True when some vector was sent (the loop goes on). An oracle that can answer
        nothing new (recorded rows) asks no solver here: `next_probe` does, once."""
        if not self.oracle.can_ask:
            return False
        # constructed rows first: a thousand rows aimed at the members' differences cost
        # less to run than the larger pool (GEMM rows of K products each)
        rows = self._structured_split(members)
        if rows and self.ask(
            rows, "constructed", f"constructed rows splitting {len(members)} survivors"
        ):
            return True
        rows = self._deep_split(members)
        if rows and self.ask(
            rows, "split", f"rows of a larger pool splitting {len(members)} survivors"
        ):
            return True
        if self.no_solver:
            return False
        rep = members[0]
        witness_rows: list[int] = []
        pending: list[Proof] = []
        asked = sum(1 for o in members[1:] if self.res.proof_between(rep, o))
        others = sorted(members[1:], key=lambda h: len(self.space.differences(rep, h)))
        single = {  # (parameter, value) of members one parameter away from rep
            (d[0][0], d[0][2])
            for d in (self.space.differences(rep, h) for h in members[1:])
            if len(d) == 1
        }
        for o in others:
            if self.res.proof_between(rep, o):
                continue
            diff = self.space.differences(rep, o)
            if len(diff) > 1 and all((k, v) in single for k, _, v in diff):
                continue  # each of its changes is asked on its own (see `composite`)
            if asked >= self.max_questions:
                self.res.notes.append(
                    f"{len(members) - 1 - asked} members of the class were not compared with "
                    f"{self._short(rep)} by a solver (at most {self.max_questions} questions a class)"
                )
                break
            asked += 1
            self._progress(f"asking the solvers: {self._short(rep)} vs {self._short(o)}")
            try:
                proof, row = self._diff(rep, o)
            except ValueError as e:  # no solver installed, or none of those named
                self.no_solver = str(e)
                self.res.notes.append(f"survivors not compared by a solver: {e}")
                break
            self.res.proofs.append(proof)
            if row is not None:
                witness_rows.append(row)
                pending.append(proof)
            if len(witness_rows) >= BATCH:
                break
        if not witness_rows and not self.no_solver:
            self._retry(rep, members, witness_rows, pending)
        if not witness_rows:  # pairs left undecided on the instruction: the larger pool
            rows = self._deep_split(members)
            return bool(rows) and self.ask(
                rows, "split", f"rows of a larger pool splitting {len(members)} survivors"
            )
        start = len(self.res.vectors)
        sent = self.ask(witness_rows, "solver", "solver witnesses between survivors")
        for p in pending:
            for pos in range(start, len(self.res.vectors)):
                pred_a = self.ev.predict(p.a)[self.res.vectors[pos].row]
                pred_b = self.ev.predict(p.b)[self.res.vectors[pos].row]
                if pred_a != pred_b:
                    p.vector = pos
                    break
        return sent

    def _retry(
        self, rep: Hypothesis, members: list[Hypothesis], rows: list[int], pending: list[Proof]
    ) -> None:
        """Ask once more, with RETRY_FACTOR times the time limit, each pair of the class a
        solver left unknown (each pair once); the new answer replaces the old."""
        limits = replace(self.limits, timeout=self.limits.timeout * RETRY_FACTOR)
        for o in members[1:]:
            old = self.res.proof_between(rep, o)
            key = frozenset((rep, o))
            if old is None or old.verdict != Verdict.UNKNOWN or key in self.retried:
                continue
            self.retried.add(key)
            self._progress(
                f"asking again ({limits.timeout:g} s): {self._short(rep)} vs {self._short(o)}"
            )
            proof, row = self._diff(rep, o, limits)
            proof.note = (proof.note + "; " if proof.note else "") + (
                f"asked again with {limits.timeout:g} s after unknown in {old.seconds:.1f} s"
            )
            self.res.proofs[self.res.proofs.index(old)] = proof
            if row is not None:
                rows.append(row)
                pending.append(proof)
            if len(rows) >= BATCH:
                break

    def _short(self, h: Hypothesis) -> str:
        return self.space.expr(h)

    def _diff(
        self, a: Hypothesis, b: Hypothesis, limits: Limits | None = None
    ) -> tuple[Proof, int | None]:
        """`diff a b` on the instruction: a proof, or a witness row (added to the rows).
        Two hypotheses a structural reason makes equal (`structural_reason`: one model
        written two ways, L >= K) are equal by construction, no solver asked."""
        why = structural_reason(self.space, a, b)
        if why:
            return Proof(a, b, Verdict.UNSAT, [], 0.0, True, why), None
        t0 = time.monotonic()
        arg = self.space.stated_argument(a, b)
        contradicted = ""
        if arg is not None:  # a stated argument, used once its extreme rows agree
            bad = arg.check()
            if bad is None:
                secs = time.monotonic() - t0
                return Proof(a, b, Verdict.UNSAT_BY_ARGUMENT, [ARGUMENT], secs, note=arg.note), None
            contradicted = f"the argument ({arg.name}) was not used: {bad}"
        built = self._structured_split([a, b], seed=1 + len(self.res.proofs))
        if built:  # a constructed row the model itself splits them on: no solver needed
            note = "a constructed row (partial sums associated differently) separates them"
            return Proof(a, b, Verdict.WITNESS, [], time.monotonic() - t0, note=note), built[0]
        o: Outcome | None = None
        lifted = None
        small = self.space.reduced_query(a, b)
        if small is not None:  # GEMM pairs that differ only inside the instruction
            o = answer_query(small, limits or self.limits)
            if o.verdict == Verdict.WITNESS and o.witness is not None:
                lifted = self.space.lift_witness(a, b, o.witness.inputs)
                if lifted is None:  # its c is no acc a chain starts from: c = +0
                    oz = answer_query(self.space.reduced_query(a, b, True), limits or self.limits)
                    if oz.verdict == Verdict.WITNESS and oz.witness is not None:
                        lifted = self.space.lift_witness(a, b, oz.witness.inputs)
                        o = oz if lifted is not None else o
            if o.verdict.unsat or lifted is not None:
                why = "asked on the instruction: the GEMM element composes it alike"
                o.note = why + (f"; {o.note}" if o.note else "")
            elif o.verdict == Verdict.UNKNOWN:  # the GEMM question holds this one and more
                why = "unknown on the instruction; the larger GEMM question not asked"
                o.note = why + (f"; {o.note}" if o.note else "")
            else:
                o = None  # a witness that no k-block carries: the whole question, then
        if o is None:
            o = answer_query(self.space.query(a, b), limits or self.limits)
        solvers = []
        if o.argued:
            # unsat by a stated argument: the argument, then the solvers that confirmed it
            solvers.append(ARGUMENT)
            if o.result is not None and o.result.answer == Answer.UNSAT:
                solvers.append(o.result.solver)
        elif o.result is not None:
            solvers.append(o.result.solver)
        solvers += [r.solver for r in o.confirmations if r.answer == Answer.UNSAT]
        note = "; ".join(x for x in (contradicted, o.note) if x)
        proof = Proof(a, b, o.verdict, solvers, o.seconds, o.by_construction, note)
        if o.verdict == Verdict.UNSAT and not o.by_construction and len(solvers) < 2:
            proof.note = (
                proof.note + "; " if proof.note else ""
            ) + "not confirmed by a second solver"
        if lifted is not None:
            row = self.rows.add([lifted[0]], [lifted[1]], [lifted[2]], "solver")[0]
            return proof, row
        if o.verdict != Verdict.WITNESS or o.witness is None:
            return proof, None
        w = o.witness.inputs
        K = self.space.base.K
        row = self.rows.add(
            [[w[f"a{i}"] for i in range(K)]], [[w[f"b{i}"] for i in range(K)]], [w["c"]], "solver"
        )[0]
        return proof, row

    def _finish(self) -> None:
        r = self.res
        r.seconds = time.monotonic() - self.t0
        r.oracle_vectors = self.oracle.vectors
        r.oracle_calls = self.oracle.calls
        r.evaluations = self.ev.calls
        spent = self.oracle.can_ask and self.oracle.vectors >= self.budget
        if (
            r.error is None
            and not r.interrupted
            and (len(r.classes) > 1 or (r.classes and (not self.oracle.can_ask or spent)))
        ):
            r.next_probe = next_probe(self, r.classes)
        if r.classes:
            r.standing = standing(r)
            if r.stopped.startswith("one class left") and not r.standing["established"]:
                r.stopped = "not established" + r.stopped[len("one class left") :]
            r.stopped += "; " + standing_text(r)


PROVED, UNDECIDED, NEVER_ASKED = "proved equal", "undecided", "never asked"
ARGUED = "equal by a stated argument"
"""A member joined to its class's first only through stated arguments that no solver
confirmed (each checked on its extreme rows on the model), not proved by a solver."""
ARGUMENT = "argument"
"""The name a stated argument answers under in `Proof.solvers`."""


def argued_only(p: Proof) -> bool:
    """Whether `p` says equal by a stated argument that no solver confirmed."""
    return p.verdict.unsat and not p.by_construction and set(p.solvers) <= {ARGUMENT}


def structural_reason(space: Space, a: Hypothesis, b: Hypothesis) -> str:
    """A reason two hypotheses cannot differ that needs no solver, or ''."""
    if space.same_model(a, b):
        return "the same model written two ways"
    diff = space.differences(a, b)
    K = space.base.K
    if [d[0] for d in diff] == ["L"] and all(x is not None and x >= K for x in diff[0][1:]):
        return f"L >= K = {K} either way: one group holds every product"
    return ""


def member_status(res: Result) -> dict[Hypothesis, str]:
    """For every survivor but the first of its class: PROVED (connected to the first by
    unsat answers of solvers and models equal by construction), ARGUED (connected only
    when stated arguments no solver confirmed count too), UNDECIDED (neither, and a
    solver question about it was unknown or left open) or NEVER_ASKED."""
    asked: set[Hypothesis] = set()
    links: list[tuple[Hypothesis, Hypothesis, bool]] = []  # (a, b, by argument only)
    members = set(res.survivors)
    for p in res.proofs:
        if p.a in members and p.b in members:
            if p.verdict.unsat:
                links.append((p.a, p.b, argued_only(p)))
            else:
                asked.update((p.a, p.b))
    for c in res.classes:
        for h in c[1:]:
            if structural_reason(res.space, c[0], h):
                links.append((c[0], h, False))
    strict = _components(res.survivors, [(a, b) for a, b, arg in links if not arg])
    loose = _components(res.survivors, [(a, b) for a, b, _ in links])
    out: dict[Hypothesis, str] = {}
    for c in res.classes:
        for h in c[1:]:
            if strict(h) == strict(c[0]):
                out[h] = PROVED
            elif loose(h) == loose(c[0]):
                out[h] = ARGUED
            else:
                out[h] = UNDECIDED if h in asked else NEVER_ASKED
    return out


def _components(
    nodes: list[Hypothesis], edges: list[tuple[Hypothesis, Hypothesis]]
) -> Callable[[Hypothesis], Hypothesis]:
    """The connected components of `edges` over `nodes`: a function to each node's root."""
    parent = {h: h for h in nodes}

    def find(h: Hypothesis) -> Hypothesis:
        while parent[h] != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    for a, b in edges:
        parent[find(a)] = find(b)
    return find


def standing(res: Result) -> dict:
    """The survivors counted: classes, members, and the members other than each class's
    first that are proved equal to it, undecided, never asked. `established`: one class
    whose every member is proved equal to its first (no parameter left open)."""
    st = member_status(res)
    kinds = (PROVED, ARGUED, UNDECIDED, NEVER_ASKED)
    n = {k: sum(1 for v in st.values() if v == k) for k in kinds}
    return {
        "classes": len(res.classes),
        "members": len(res.survivors),
        "proved_equal": n[PROVED],
        "argued_equal": n[ARGUED],
        "undecided": n[UNDECIDED],
        "never_asked": n[NEVER_ASKED],
        "established": len(res.classes) == 1 and n[PROVED] + n[ARGUED] == len(st),
    }


def standing_text(res: Result) -> str:
    """The survivors counted for the stop line (see `standing`)."""
    s = res.standing or standing(res)
    arch = res.space.variant or res.space.arch
    n, m = s["classes"], s["members"]
    argued = s.get("argued_equal", 0)
    by_arg = (
        f" ({argued} by a stated argument checked on its extreme rows, not by a solver)"
        if argued
        else ""
    )
    if s["established"]:
        if m == 1:
            return f"its one member {res.classes[0][0].expr(arch)}"
        if argued:
            return f"all {m} members equal to {res.classes[0][0].expr(arch)}{by_arg}"
        return f"all {m} members proved equal to {res.classes[0][0].expr(arch)}"
    head = (
        f"1 class of {m} member{'' if m == 1 else 's'}"
        if n == 1
        else f"{n} classes (told apart by pool rows) of {m} members"
    )
    first = "its first" if n == 1 else "their class's first"
    argued_part = f", {argued} equal by a stated argument" if argued else ""
    return (
        f"{head}: {s['proved_equal']} proved equal to {first}{argued_part}, "
        f"{s['undecided']} undecided (a solver said unknown), {s['never_asked']} never asked"
    )


def next_probe(ident: Identifier, cls: list[list[Hypothesis]]) -> dict | None:
    """The input to run next: a pool row that splits the classes, else a solver witness
    between two members of the class that the rows leave together."""
    from ..formats import format_hex

    p = ident.space.base
    arch = ident.space.variant or ident.space.arch
    reps = [c[0] for c in cls]
    rows = splitting_rows(ident.ev, reps, set(ident.evidence.index), 1)
    source = "pool"
    if not rows:
        members = [h for c in cls for h in c]
        rows = ident._deep_split(members)[:1]
        reps = members
    if not rows and not ident.no_solver:
        members = cls[0] if cls else []
        for o in members[1:]:
            proof = ident.res.proof_between(members[0], o)
            if proof is None:
                try:
                    proof, row = ident._diff(members[0], o)
                except ValueError as e:  # no solver installed
                    ident.res.notes.append(f"no next probe from a solver: {e}")
                    break
                ident.res.proofs.append(proof)
                if row is not None:
                    rows = [row]
                    reps = [members[0], o]
                    source = "solver"
                    break
    if not rows:
        return None
    i = rows[0]
    preds = {h.expr(arch): format_hex(int(ident.ev.predict(h)[i]), p.d_fmt) for h in reps}
    return {
        "a": [format_hex(int(x), p.a_fmt) for x in ident.rows.a[i]],
        "b": [format_hex(int(x), p.b_fmt) for x in ident.rows.b[i]],
        "c": format_hex(int(ident.rows.c[i]), p.c_fmt),
        "source": source,
        "kind": ident.rows.kinds[i],
        "predicted": preds,
        "distinct": len(set(preds.values())),
    }


def identify(
    space: Space,
    oracle: Oracle,
    budget: int = 200,
    limits: Limits | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> Result:
    """Identify the oracle's unit within `space` (see the module docstring)."""
    return Identifier(space, oracle, budget, limits, seed=seed, progress=progress).run()


def hypothesis_row_counts(res: Result, h: Hypothesis) -> int:
    """How many answered vectors `h` reproduces."""
    pred = res.evaluator.predict(h)
    if pred is None:
        return 0
    idx, d = res.evidence.arrays()
    return int(np.sum(pred[idx] == d))
