"""The row table's keys (identify/pool.py): two rows share a key exactly when their a, b
and c are equal, and `add` returns the existing index of a row already present."""

from __future__ import annotations

import numpy as np

from tensorcore_smt.identify.pool import Rows


def test_keys_tell_rows_apart_exactly_and_add_deduplicates():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, size=(6, 5)).astype(np.uint64)
    b = rng.integers(0, 256, size=(6, 5)).astype(np.uint64)
    c = rng.integers(0, 2**32, size=6).astype(np.uint64)
    a[3], b[3], c[3] = a[1], b[1], c[1]  # row 3 repeats row 1
    b[4], c[4] = b[2], c[2]  # row 4 differs from row 2 in a only
    a[4] = a[2]
    a[4, 0] ^= np.uint64(1)
    rows = Rows(a, b, c, ["x"] * 6)
    keys = rows.keys()
    assert keys == [rows.key(i) for i in range(6)]
    for i in range(6):
        for j in range(6):
            same = bool((a[i] == a[j]).all() and (b[i] == b[j]).all() and c[i] == c[j])
            assert (keys[i] == keys[j]) == same
    # a row already there keeps its index; a new one is appended once
    got = rows.add(
        np.vstack([a[2], a[2] ^ np.uint64(2)]), np.vstack([b[2], b[2]]), [c[2], c[2]], "y"
    )
    assert got == [2, 6] and len(rows) == 7 and rows.kinds[6] == "y"
    assert rows.add(a[2] ^ np.uint64(2), b[2], c[2], "z") == [6]


def test_refutations_read_off_the_answered_rows_match_the_whole_pool():
    """The report's refutation of each neighbour (identify/report.py) is read off its
    predictions on the answered rows; the same vector and outputs as on the pool."""
    from tensorcore_smt.identify.loop import Identifier
    from tensorcore_smt.identify.oracle import make_oracle
    from tensorcore_smt.identify.report import refutation
    from tensorcore_smt.identify.space import resolve_space
    from tensorcore_smt.smt.solve import Limits

    space = resolve_space("volta", None, None)
    oracle = make_oracle("variant:volta[F=22]", space.base, space.arch, space.instr)
    res = Identifier(space, oracle, 200, Limits(timeout=2.0), max_questions=2).run()
    rep = res.classes[0][0]
    checked = 0
    for h in space.neighbours(rep):
        got = refutation(res, h)
        pred = res.evaluator.predict(h)
        if pred is None:
            continue
        want = next(
            (
                (pos, int(pred[v.row]), v.d)
                for pos, v in enumerate(res.vectors)
                if pred[v.row] != v.d
            ),
            None,
        )
        assert got == want, space.expr(h)
        checked += want is not None
    assert checked > 5
