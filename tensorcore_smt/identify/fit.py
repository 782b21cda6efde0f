"""`fit`: the hypotheses of a space that reproduce recorded rows (a, b, c, d).

The rows (JSONL with ``d``, or a vector file whose vectors carry the observed d) are the
evidence of a `file:` oracle; the search of `identify` runs on them without asking
anything new, and the next probe to run is chosen from a larger pool or by the solvers.
"""

from __future__ import annotations

from pathlib import Path

from ..smt.solve import Limits
from .loop import Identifier, Progress, Result
from .oracle import FileOracle, read_rows_labelled
from .search import RESTART_SECONDS
from .space import Space


def fit(
    space: Space,
    rows: str | Path,
    limits: Limits | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    search_seconds: float = RESTART_SECONDS,
) -> Result:
    """Fit `space` to the rows of the file `rows` (UserError, one line, if it is bad)."""
    path = Path(rows)
    recorded, labels = read_rows_labelled(path, space.base)
    oracle = FileOracle(f"file:{path}", space.base, rows=recorded, labels=labels)
    res = Identifier(
        space, oracle, 0, limits, seed=seed, progress=progress, search_seconds=search_seconds
    ).run()
    res.rows_read = len(recorded)
    return res
