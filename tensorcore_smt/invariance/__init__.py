"""Batch invariance: the M at which the bits of an output row change with the batch size
(a library picks its kernel, hence its summation order, by shape), and whether one call
gives the same bits under two profiles. Modules: sources (the recipe of a call at each M:
a GEMM hypothesis, ranges of them, or a library profile), witness (inputs on which two
recipes give row 0 different bits, re-run through tc.matmul), scan (the report), live (a
torch oracle asked directly); the command is cli/invariance.py."""
