"""The specification layer: floating-point formats (the lowest piece, used by the model),
the architecture catalogue built from the tables in archs/ (catalogue: instructions and
the model parameters of each), the parser of variant expressions such as
`volta[carry_bits=2]` and the named hypotheses (variants), and presets, the names the rest
of the code imports."""
