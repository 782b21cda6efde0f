"""tensorcore-smt: a parametric formal model of GPU matrix-unit arithmetic, executable
bit-exactly and usable by SMT solvers to find inputs that tell hypotheses apart."""

from . import startup  # noqa: F401  (first: a Ctrl-C while the rest loads ends in one line)

# isort: split
from .api import mma, resolve, simulate, simulate_one, simulate_params, simulate_stream
from .certify.bound import bound
from .errors import UserError
from .formats import Format, Rounding
from .gemm.emulate import matmul
from .gemm.torchmode import emulate
from .order import reveal
from .spec.presets import PRESETS, parse_variant
from .version import __version__

__all__ = [
    "Format",
    "PRESETS",
    "Rounding",
    "UserError",
    "bound",
    "__version__",
    "emulate",
    "matmul",
    "mma",
    "parse_variant",
    "resolve",
    "reveal",
    "simulate",
    "simulate_one",
    "simulate_params",
    "simulate_stream",
]
