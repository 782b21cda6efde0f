"""Learning a unit's parameters from its outputs: hypothesis spaces, `fit`, `identify`.

space.py (spaces as data), pool.py (candidate rows), evaluate.py (hypotheses on rows,
the oracle's answers), search.py (survivors, one parameter at a time), oracle.py (who
answers), loop.py (`identify`), fit.py (`fit`), report.py (what a person reads, JSON).
"""
