"""SMT solvers behind one interface: each solve runs in a child process with limits."""

from .result import Answer, SolveResult
from .runner import SolveJob, available, portfolio, solve

__all__ = ["Answer", "SolveJob", "SolveResult", "available", "portfolio", "solve"]
