"""The floating-point formats under the path the specification layer gives them: the
module is tensorcore_smt/formats.py, below both the model and this package (the
architecture catalogue builds model parameters, and the model reads formats)."""

from ..formats import *  # noqa: F403
from ..formats import __all__  # noqa: F401
