"""Learning the order a library sums in: pair probes (probes.py), the tree rebuilt from
them (tree.py), the libraries asked (oracles.py), the GEMM hypothesis named (hypothesis.py),
the fp32 tree sum that checks it (evaluate.py), and `reveal` joining them (core.py)."""

from .core import RevealResult, reveal

__all__ = ["RevealResult", "reveal"]
