"""tensorcore-smt: a parametric formal model of GPU matrix-unit arithmetic, executable
bit-exactly and usable by SMT solvers to find inputs that tell hypotheses apart.

The names below load their modules on first use (PEP 562), so that importing the
package, and the `tcsmt` command line with it, does not build the instruction catalogue
or load the engines until a command needs them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import startup  # noqa: F401  (first: a Ctrl-C while the rest loads ends in one line)

# isort: split
from .errors import UserError
from .version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from .api import mma, resolve, simulate, simulate_one, simulate_params, simulate_stream
    from .certify.bound import bound
    from .formats import Format, Rounding
    from .gemm.emulate import matmul
    from .gemm.torchmode import emulate
    from .order import reveal
    from .spec.presets import PRESETS, parse_variant

_LAZY = {
    "mma": ".api",
    "resolve": ".api",
    "simulate": ".api",
    "simulate_one": ".api",
    "simulate_params": ".api",
    "simulate_stream": ".api",
    "bound": ".certify.bound",
    "Format": ".formats",
    "Rounding": ".formats",
    "matmul": ".gemm.emulate",
    "emulate": ".gemm.torchmode",
    "reveal": ".order",
    "PRESETS": ".spec.presets",
    "parse_variant": ".spec.presets",
}
"""Public name -> the module that defines it (loaded when the name is first read)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:  # a subpackage or module read as an attribute (`tc.api`)
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
