"""tensorcore-smt: a parametric formal model of GPU matrix-unit arithmetic, executable
bit-exactly and usable by SMT solvers to find inputs that tell hypotheses apart."""

from .api import mma, resolve, simulate, simulate_one, simulate_params
from .formats import Format, Rounding
from .presets import PRESETS, parse_variant

__version__ = "0.1.0"

__all__ = [
    "Format",
    "PRESETS",
    "Rounding",
    "__version__",
    "mma",
    "parse_variant",
    "resolve",
    "simulate",
    "simulate_one",
    "simulate_params",
]
