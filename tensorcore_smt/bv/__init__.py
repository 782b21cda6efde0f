"""Bit-vector arithmetic interface and its interpreters (concrete, vector, symbolic)."""

from .concrete import CONCRETE, ConcreteBackend
from .core import BV, Backend, Bool, all_of, any_of
from .symbolic import SymbolicBackend, Term
from .vector import VECTOR, VectorBackend

__all__ = [
    "BV",
    "Backend",
    "Bool",
    "CONCRETE",
    "ConcreteBackend",
    "SymbolicBackend",
    "Term",
    "VECTOR",
    "VectorBackend",
    "all_of",
    "any_of",
]
