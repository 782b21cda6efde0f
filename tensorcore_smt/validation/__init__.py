"""The validation layer: random rows, test-vector files, validation of a model against an
oracle in seeded chunks (on Dask), and the MMA-Sim bridge."""
