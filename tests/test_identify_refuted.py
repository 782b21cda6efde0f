"""Hypotheses refuted by answers already predicted are never run again: `known_refuted`
reads only predictions made before, and the search skips them where they cannot win."""

from __future__ import annotations

from tensorcore_smt.identify.evaluate import Evaluator, Evidence
from tensorcore_smt.identify.pool import make_pool
from tensorcore_smt.identify.search import search, survives
from tensorcore_smt.identify.space import resolve_space


def _setup():
    space = resolve_space("volta", None, None)
    rows = make_pool(space.base, 64, 0)
    ev = Evaluator(space, rows)
    truth = space.preset()
    fam = space.families[0].name
    other = next(
        h
        for name, vals in space.dims(fam)
        for v in vals
        if (h := space.make(fam, {name: v})) != truth and (ev.predict(h) != ev.predict(truth)).any()
    )
    evidence = Evidence(space.base.d_fmt)
    want = ev.predict(truth)
    evidence.add(list(range(64)), [int(x) for x in want])
    return space, rows, ev, truth, other, evidence


def test_known_refuted_reads_only_predictions_already_made():
    space, rows, ev, truth, other, evidence = _setup()
    assert ev.known_refuted(other, evidence) and not ev.known_refuted(truth, evidence)
    fresh = Evaluator(space, rows)  # nothing predicted yet: not known, and no model run
    assert not fresh.known_refuted(other, evidence) and fresh.calls == 0
    calls = ev.calls
    assert not survives(ev, evidence, other) and ev.calls == calls


def test_search_after_a_new_row_runs_no_refuted_hypothesis_again():
    space, rows, ev, truth, other, evidence = _setup()
    found = search(space, ev, evidence, [truth])
    refuted = [h for h in ev.cache if ev.known_refuted(h, evidence)]
    assert other in refuted and truth in found.survivors
    # a new answered row (as a witness adds one): the refuted are not run on it
    more = make_pool(space.base, 8, 5)
    i = rows.add(more.a[:1], more.b[:1], more.c[:1], "solver")[0]
    evidence.add([i], [int(space.run(truth, more.a[:1], more.b[:1], more.c[:1])[0])])
    again = search(space, ev, evidence, list(found.survivors))
    assert all(len(ev.cache[h]) == i for h in refuted)  # not extended to row i
    # and the survivors are those of a search that runs every hypothesis afresh
    fresh = search(space, Evaluator(space, rows), evidence, list(found.survivors))
    assert set(again.survivors) == set(fresh.survivors) and truth in again.survivors
