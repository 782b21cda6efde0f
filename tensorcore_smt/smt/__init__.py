"""The SMT layer: queries as data, the property library, answering a query with the
solvers (witness re-check, unsat confirmation), property runs and their reports."""
