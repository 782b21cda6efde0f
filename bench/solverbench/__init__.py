"""The parts of bench/bench_solvers.py, one subject a module.

- `queries`: the benchmark queries (`BenchQuery`, `QUERIES`) and Valpey et al.'s (2025) Table 4 figures
- `formulas`: SMT-LIB text timed beside them (the paper's own formulas, the floor)
- `machine`: the machine, the model's source revision and the solvers' versions
- `cells`: one solver's runs on one query (`Run`, `Cell`) and their text and JSON forms
- `run`: the Table 4 benchmark runner (queries, calibration, floor)
- `output`: its tables, as plain text and markdown, and `write_table4`
- `driver`: the encoding study's own solver driver (a fresh child per run)
- `study_tools`: helpers the encoding studies share
- `studies`: the encoding studies (i)-(v)
- `options`: the solver-option studies (vi) and (vii)
"""
