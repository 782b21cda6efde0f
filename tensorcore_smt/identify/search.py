"""Finding the hypotheses that survive the evidence, one parameter at a time.

The space is never enumerated. A *climb* starts from a hypothesis and repeatedly moves to
the neighbour (one parameter changed, or another family's seed) that reproduces more
answered rows, or as many rows with outputs closer to the oracle's; so parameters are
decided one after another, each by the rows that depend on it. Climbs start from the
previous survivors and, when those have all been refuted, from every family's seed;
when no climb reaches a survivor, from perturbed ends (kicks), then from random points.
The *neighbourhood* of the hypotheses a climb reaches is then run on every answered row:
the survivors among them are the alternatives that the evidence has not yet ruled out,
grouped into classes that predict the same bits on every row of the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .evaluate import Evaluator, Evidence
from .space import Hypothesis, Space

MAX_STEPS = 60
KICKS = 40
"""Restarts of the iterated local search when no climb reaches a survivor."""
KICK_SECONDS = 20.0
"""Time the restarts may take in one search."""
RESTART_SECONDS = 60.0
"""Time the climbs from random points of the space may take when the kicks found nothing."""


def score(ev: Evaluator, evidence: Evidence, h: Hypothesis) -> tuple:
    """The climb's objective: rows matched, closeness of the misses, then fewer
    parameters changed from the preset."""
    m, dist = evidence.score_answered(ev.answered(h, evidence))
    return (m, dist, -len(h.overrides))


def climb(
    space: Space,
    ev: Evaluator,
    evidence: Evidence,
    start: Hypothesis,
    seen: list[Hypothesis] | None = None,
) -> Hypothesis:
    """Best-improvement local search from `start` (ends where no neighbour is better).
    Every hypothesis met on the way that reproduces every answer is appended to `seen`:
    the climb prefers fewer changed parameters, so a survivor it passes by is kept."""
    cur, cur_s = start, score(ev, evidence, start)
    full = len(evidence)

    def note(h: Hypothesis, s: tuple) -> None:
        if seen is not None and s[0] == full and h not in seen:
            seen.append(h)

    note(cur, cur_s)
    for _ in range(MAX_STEPS):
        if cur_s[0] == full and cur_s[2] == 0:
            break
        best, best_s = None, cur_s
        at_survivor = cur_s[0] == full
        for n in space.neighbours(cur):
            if at_survivor and ev.known_refuted(n, evidence):
                continue  # it matches fewer rows than `cur`: never better, never noted
            s = score(ev, evidence, n)
            note(n, s)
            if s > best_s:
                best, best_s = n, s
        if best is None:
            break
        cur, cur_s = best, best_s
    return cur


def survives(ev: Evaluator, evidence: Evidence, h: Hypothesis) -> bool:
    """Whether `h` predicts every answered row. It is run on the answered rows first
    (most hypotheses asked are refuted there, a run on a few rows instead of the pool),
    and on the whole pool only when it reproduces them."""
    if ev.known_refuted(h, evidence):  # no model run for a hypothesis refuted before
        return False
    if h not in ev.cache:
        got = ev.answered(h, evidence)
        if got is None or evidence.score_answered(got)[0] < len(evidence):
            return False
    pred = ev.predict(h)
    return pred is not None and evidence.first_miss(pred) is None


@dataclass
class Found:
    """The survivors a search found, and the best hypotheses when none survives."""

    survivors: list[Hypothesis]
    best: list[Hypothesis]


def search(
    space: Space,
    ev: Evaluator,
    evidence: Evidence,
    starts: list[Hypothesis],
    all_seeds: bool = False,
    restart_seconds: float = RESTART_SECONDS,
) -> Found:
    """Climb from `starts` (and every family's seed when `all_seeds` or when no start
    leads to a survivor); return the survivors in the neighbourhood of the climbs' ends."""
    ends: list[Hypothesis] = []
    met: list[Hypothesis] = []

    def run(froms: list[Hypothesis]) -> None:
        for s in froms:
            e = climb(space, ev, evidence, s, met)
            if e not in ends:
                ends.append(e)

    run(list(dict.fromkeys(starts)))
    if all_seeds or not any(survives(ev, evidence, e) for e in ends):
        run([space.seed(f.name) for f in space.families if space.seed(f.name) not in starts])
    alive = [e for e in ends if survives(ev, evidence, e)]
    if not alive:
        kicks(space, ev, evidence, ends, met)
        alive = [e for e in ends if survives(ev, evidence, e)]
    if not alive and not met:
        restarts(space, ev, evidence, ends, met, restart_seconds)
        alive = [e for e in ends if survives(ev, evidence, e)]
    # A survivor met on the way joins only when it predicts other bits on the rows than
    # every end (a class the ends miss); members of their classes are their neighbours.
    sigs = {ev.predict(e).tobytes() for e in alive}
    for h in met:
        sig = ev.predict(h).tobytes()
        if sig not in sigs:
            sigs.add(sig)
            alive.append(h)
    if not alive:
        ranked = sorted(ends, key=lambda h: score(ev, evidence, h), reverse=True)
        return Found([], ranked)
    found: list[Hypothesis] = list(alive)
    for e in alive:
        for n in space.neighbours(e):
            if n not in found and survives(ev, evidence, n):
                found.append(n)
    found.sort(key=lambda h: score(ev, evidence, h), reverse=True)
    return Found(found, [])


def kicks(
    space: Space,
    ev: Evaluator,
    evidence: Evidence,
    ends: list[Hypothesis],
    met: list[Hypothesis],
    seed: int = 0,
) -> list[Hypothesis]:
    """Iterated local search for when every climb stopped short of a survivor: from the
    best ends, change two or three parameters at random and climb again (several
    parameters that only act together are found this way). Appends the new ends to
    `ends`; returns the survivors met (none when KICKS restarts or KICK_SECONDS pass)."""
    rng = np.random.default_rng(seed + len(evidence))
    t0 = time.monotonic()
    for i in range(KICKS):
        if time.monotonic() - t0 > KICK_SECONDS:
            break
        ranked = sorted(ends, key=lambda h: score(ev, evidence, h), reverse=True)
        h = ranked[int(rng.integers(min(3, len(ranked))))]
        for _ in range(2 + i % 2):
            moves = space.neighbours(h)
            h = moves[int(rng.integers(len(moves)))]
        e = climb(space, ev, evidence, h, met)
        if e not in ends:
            ends.append(e)
        if met:
            return list(met)
    return []


def restarts(
    space: Space,
    ev: Evaluator,
    evidence: Evidence,
    ends: list[Hypothesis],
    met: list[Hypothesis],
    seconds: float = RESTART_SECONDS,
    seed: int = 0,
) -> None:
    """Climbs from points drawn at random from the space (every family in turn), until
    one meets a survivor or `seconds` pass: for a unit many parameters away from
    the preset whose parameters only reproduce the answers together (Hopper with L = 2,
    round-down alignment and c added after the groups: no single change from the preset
    gains a row). Appends the new ends to `ends`."""
    rng = np.random.default_rng(seed + 7919 * len(evidence))
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds and not met:
        fam = space.families[i % len(space.families)].name
        e = climb(space, ev, evidence, space.sample(rng, fam), met)
        if e not in ends:
            ends.append(e)
        i += 1


def classes(ev: Evaluator, hyps: list[Hypothesis]) -> list[list[Hypothesis]]:
    """`hyps` grouped by their predictions on every known row (order kept)."""
    groups: dict[bytes, list[Hypothesis]] = {}
    for h in hyps:
        groups.setdefault(ev.predict(h).tobytes(), []).append(h)
    return list(groups.values())


def splitting_rows(
    ev: Evaluator, reps: list[Hypothesis], exclude: set[int], limit: int
) -> list[int]:
    """Up to `limit` rows that split the representatives `reps` as finely as possible:
    greedily, each row separating the most pairs that the rows before it left together."""
    if len(reps) < 2:
        return []
    P = np.stack([ev.predict(h) for h in reps])  # (hypotheses, rows)
    block = np.zeros(len(reps), dtype=np.int64)
    chosen: list[int] = []
    usable = np.ones(P.shape[1], dtype=bool)
    usable[list(exclude)] = False
    for _ in range(limit):
        same = block[:, None] == block[None, :]
        iu = np.triu_indices(len(reps), 1)
        pairs = same[iu]
        if not pairs.any():
            break
        ia, ib = iu[0][pairs], iu[1][pairs]
        split = (P[ia] != P[ib]).sum(axis=0)  # pairs each row separates
        split[~usable] = -1
        best = int(np.argmax(split))
        if split[best] <= 0:
            break
        chosen.append(best)
        usable[best] = False
        _, block = np.unique(
            np.stack([block, P[:, best].astype(np.int64)]), axis=1, return_inverse=True
        )
        block = block.reshape(-1)
    return chosen
