"""The specification layer: floating-point formats (the lowest piece, used by the model),
the architecture catalogue (instructions and the model parameters of each) and the parser
of variant expressions such as `volta[carry_bits=2]`."""
